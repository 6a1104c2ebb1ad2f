// The package's calls in C++: xent.cross_entropy, softmax and log_softmax as
// autograd functions that check the arguments, build the descriptor,
// allocate the outputs and call libxent with no Python in between, so that
// a call costs what its library call does plus a few microseconds (issue 59).
//
// A call this path does not take returns None, and the Python path
// (_autograd.py) runs it instead: options it leaves to Python (per-token
// outputs, gradients for soft labels, the vocabulary-parallel loss), GPU
// tensors under a PyTorch too old to name its stream, and every argument
// that is wrong, whose error Python raises. Both paths make the same libxent
// calls, on the same handles.
//
// libxent itself is not linked: init() takes its functions' addresses from
// the copy the package loaded through ctypes, so one library serves both.

#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/extension.h>
#include <torch/version.h>

#include <c10/core/impl/VirtualGuardImpl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "xent.h"

namespace py = pybind11;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// c10::Stream::native_handle() (PyTorch 2.2): the cudaStream_t / hipStream_t
// of PyTorch's current stream without CUDA's or HIP's headers.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#define XENT_NATIVE_STREAMS 1
#else
#define XENT_NATIVE_STREAMS 0
#endif

namespace {

// libxent's functions, from the library the package loaded.
struct Library {
  decltype(&xent_create_on_device) create_on_device = nullptr;
  decltype(&xent_ce_desc_init_nd) ce_desc_init_nd = nullptr;
  decltype(&xent_ce_workspace_size) ce_workspace_size = nullptr;
  decltype(&xent_ce_run) ce_run = nullptr;
  decltype(&xent_ce_scale_grad) ce_scale_grad = nullptr;
  decltype(&xent_softmax_desc_init_nd) softmax_desc_init_nd = nullptr;
  decltype(&xent_softmax_forward) softmax_forward = nullptr;
  decltype(&xent_softmax_backward) softmax_backward = nullptr;
  decltype(&xent_linear_ce_desc_init) linear_ce_desc_init = nullptr;
  decltype(&xent_linear_ce_workspace_size) linear_ce_workspace_size = nullptr;
  decltype(&xent_linear_ce_run) linear_ce_run = nullptr;
  decltype(&xent_check) check = nullptr;
  decltype(&xent_last_error) last_error = nullptr;
  decltype(&xent_status_string) status_string = nullptr;
};
Library lib;
xent_backend_kind gpu_backend = XENT_BACKEND_CUDA;  // HIP on ROCm builds of PyTorch
PyObject* xent_error = nullptr;  // the package's exception classes (kept for the process's life)
PyObject* invalid_label_error = nullptr;

// Time spent inside libxent and inside the backward passes, summed while
// timing is on: the benchmark's measure of the package's own host cost
// (bench/host_overhead.py).
std::atomic<bool> timing{false};
std::atomic<int64_t> library_ns{0}, backward_ns{0};

int64_t since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

// Adds a backward pass's time to backward_ns while timing is on.
struct BackwardTimer {
  bool on = timing.load(std::memory_order_relaxed);
  std::chrono::steady_clock::time_point start = on ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point();
  ~BackwardTimer() {
    if (on) backward_ns += since(start);
  }
};

template <class Call>
xent_status timed(Call&& call) {
  if (!timing.load(std::memory_order_relaxed)) return call();
  auto start = std::chrono::steady_clock::now();
  xent_status status = call();
  library_ns += since(start);
  return status;
}

// A library call that runs kernels (the emulator's, on the CPU, for long)
// without the GIL where this thread holds it, as ctypes calls run: other
// Python threads go on meanwhile.
template <class Call>
xent_status unlocked(Call&& call) {
  if (!PyGILState_Check()) return timed(call);
  PyThreadState* state = PyEval_SaveThread();
  xent_status status = timed(call);
  PyEval_RestoreThread(state);
  return status;
}

// A failed status as the package's exception, with xent's message. Without
// the GIL (a backward pass on autograd's thread) as a C++ exception, which
// PyTorch raises as RuntimeError (XentError is one).
void check(xent_status status) {
  if (status == XENT_OK) return;
  const char* message = lib.last_error();
  std::string text = std::string("xent: ") + (message && *message ? message : lib.status_string(status));
  if (PyGILState_Check()) {
    py::handle cls = status == XENT_ERROR_INVALID_LABEL ? invalid_label_error : xent_error;
    py::object error = cls(static_cast<int>(status), text);
    PyErr_SetObject(cls.ptr(), error.ptr());
    throw py::error_already_set();
  }
  throw std::runtime_error(text);
}

// One handle per backend and device, made on first use and kept (the Python
// path asks for the same ones through handle()).
xent_handle* handle_for(xent_backend_kind backend, int device) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, xent_handle*> handles;
  std::lock_guard<std::mutex> lock(mutex);
  xent_handle*& h = handles[{static_cast<int>(backend), device}];
  if (h == nullptr) {
    xent_handle* made = nullptr;
    check(lib.create_on_device(&made, backend, device));
    h = made;
  }
  return h;
}

xent_handle* handle_for(const c10::Device& device) {
  return device.is_cpu() ? handle_for(XENT_BACKEND_CPU, -1) : handle_for(gpu_backend, device.index());
}

// Whether this path can run on the device: the CPU, or a GPU whose current
// stream it can name.
bool supported(const c10::Device& device) {
  return device.is_cpu() || (XENT_NATIVE_STREAMS && device.is_cuda() && device.has_index());
}

// PyTorch's current stream on the device (NULL on the CPU).
void* stream_of([[maybe_unused]] const c10::Device& device) {
#if XENT_NATIVE_STREAMS
  if (device.is_cuda()) {
    c10::impl::VirtualGuardImpl guard(device.type());
    return guard.getStream(device).native_handle();
  }
#endif
  return nullptr;
}

bool to_xent(at::ScalarType type, xent_dtype* out) {
  switch (type) {
    case at::kFloat: *out = XENT_F32; return true;
    case at::kHalf: *out = XENT_F16; return true;
    case at::kBFloat16: *out = XENT_BF16; return true;
    case at::kDouble: *out = XENT_F64; return true;
    default: return false;
  }
}

at::ScalarType from_xent(xent_dtype type) {
  switch (type) {
    case XENT_F16: return at::kHalf;
    case XENT_BF16: return at::kBFloat16;
    case XENT_F64: return at::kDouble;
    default: return at::kFloat;
  }
}

// Weights and lse: float64 for float64 logits, float32 otherwise.
at::ScalarType accumulation(at::ScalarType type) { return type == at::kDouble ? at::kDouble : at::kFloat; }

// The shape of per-row values: the logits' without the class axis (1).
c10::SmallVector<int64_t, 8> row_shape(const at::Tensor& x) {
  c10::SmallVector<int64_t, 8> rows;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != 1) rows.push_back(x.size(i));
  return rows;
}

// A descriptor kept in an autograd context as its bytes (it holds no pointer
// on this path: vocab_shard is NULL).
template <class Desc>
std::string as_bytes(const Desc& desc) {
  return std::string(reinterpret_cast<const char*>(&desc), sizeof desc);
}

template <class Desc>
Desc from_bytes(const c10::IValue& bytes) {
  Desc desc;
  std::memcpy(&desc, bytes.toStringRef().data(), sizeof desc);
  return desc;
}

at::Tensor empty(c10::IntArrayRef shape, const at::Tensor& like, at::ScalarType type) {
  return at::empty(shape, like.options().dtype(type), at::MemoryFormat::Contiguous);
}

void* data(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

void ce_run(const xent_ce_desc& desc, xent_op op, const xent_ce_tensors& tensors, const c10::Device& device) {
  xent_handle* h = handle_for(device);
  size_t bytes = 0;
  check(timed([&] { return lib.ce_workspace_size(h, &desc, op, &bytes); }));
  at::Tensor workspace;
  if (bytes > 0)
    workspace = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(device));
  void* stream = stream_of(device);
  check(unlocked([&] { return lib.ce_run(h, &desc, op, &tensors, data(workspace), bytes, stream); }));
  // On the CPU a bad label raises now, as in PyTorch; on a GPU, xent.check().
  if (device.is_cpu() && desc.invalid_labels == XENT_INVALID_LABELS_REPORT && desc.label_type != XENT_PROB)
    check(unlocked([&] { return lib.check(h); }));
}

// A backward xent computes once: when a graph of the gradient is asked for
// (create_graph=True), its results come back through a node that raises if
// they are differentiated again, as torch's once_differentiable does.
variable_list once_differentiable(variable_list grads, const char* what) {
  if (!at::GradMode::is_enabled()) return grads;
  variable_list defined;
  for (const auto& g : grads)
    if (g.defined()) {
      at::Tensor alias = g.detach();
      alias.set_requires_grad(true);
      defined.push_back(alias);
    }
  if (defined.empty()) return grads;
  auto error = std::make_shared<torch::autograd::DelayedError>(
      std::string("xent: ") + what + " is differentiable once: its gradient has no gradient (double backward)",
      static_cast<int>(defined.size()));
  variable_list marked = (*error)(std::move(defined));
  size_t next = 0;
  for (auto& g : grads)
    if (g.defined()) g = marked[next++];
  return grads;
}

// Cross entropy: (x, target, weight) -> (loss, lse); lse is not
// differentiable. With in_place, the forward writes the gradient of a loss
// of 1 over x, and the backward only scales it.
struct CrossEntropy : torch::autograd::Function<CrossEntropy> {
  // weight comes as an optional: autograd takes an absent one as no input,
  // where an undefined tensor it cannot.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& target,
                               const c10::optional<at::Tensor>& weights, const xent_ce_desc& desc, bool in_place) {
    const at::Tensor& weight = weights ? *weights : at::Tensor();
    auto rows = row_shape(x);
    at::Tensor loss = desc.reduction == XENT_REDUCTION_NONE ? empty(rows, x, from_xent(desc.loss_dtype))
                                                            : empty({}, x, from_xent(desc.loss_dtype));
    at::Tensor lse = empty(rows, x, accumulation(x.scalar_type()));
    xent_ce_tensors t{};
    t.logits = x.data_ptr();
    t.labels = target.data_ptr();
    t.weights = data(weight);
    t.loss = loss.data_ptr();
    t.lse = lse.data_ptr();
    if (in_place) t.grad = x.data_ptr();
    ce_run(desc, in_place ? XENT_OP_FORWARD_BACKWARD : XENT_OP_FORWARD, t, x.device());
    if (in_place)
      ctx->save_for_backward({x});
    else
      ctx->save_for_backward({x, target, weight, lse});
    ctx->saved_data["desc"] = as_bytes(desc);
    ctx->saved_data["in_place"] = in_place;
    ctx->mark_non_differentiable({lse});
    ctx->set_materialize_grads(false);
    return {loss, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardTimer timer;
    const at::Tensor& dloss = grads[0];
    auto desc = from_bytes<xent_ce_desc>(ctx->saved_data["desc"]);
    auto saved = ctx->get_saved_variables();
    variable_list out(5);
    if (ctx->saved_data["in_place"].toBool()) {
      // Scaled where it lies: a copy would take the logits' memory again,
      // which inplace_backward exists to save. A dloss of 1 (the usual
      // loss.backward()) leaves it unread, as the device decides.
      at::Tensor g = saved[0];
      if (!dloss.defined()) {
        out[0] = g.zero_();
      } else {
        at::Tensor d = dloss.to(from_xent(desc.loss_dtype)).contiguous();
        xent_handle* h = handle_for(g.device());
        void* stream = stream_of(g.device());
        check(unlocked([&] { return lib.ce_scale_grad(h, &desc, d.data_ptr(), g.data_ptr(), stream); }));
        out[0] = g;
      }
      return once_differentiable(std::move(out), "xent.cross_entropy");
    }
    if (!ctx->needs_input_grad(0)) return out;
    const at::Tensor &x = saved[0], &target = saved[1], &weight = saved[2], &lse = saved[3];
    at::ScalarType loss_type = from_xent(desc.loss_dtype);
    at::Tensor d = dloss.defined()
                       ? dloss.to(loss_type).contiguous()
                       : (desc.reduction == XENT_REDUCTION_NONE ? at::zeros(row_shape(x), x.options().dtype(loss_type))
                                                                : at::zeros({}, x.options().dtype(loss_type)));
    at::Tensor grad = empty(x.sizes(), x, x.scalar_type());
    xent_ce_tensors t{};
    t.logits = x.data_ptr();
    t.labels = target.data_ptr();
    t.weights = data(weight);
    t.lse_in = lse.data_ptr();
    t.dloss = d.data_ptr();
    t.grad = grad.data_ptr();
    ce_run(desc, XENT_OP_BACKWARD, t, x.device());
    out[0] = grad;
    return once_differentiable(std::move(out), "xent.cross_entropy");
  }
};

// softmax / log_softmax: x -> y; the forward saves y.
struct Softmax : torch::autograd::Function<Softmax> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const xent_softmax_desc& desc) {
    at::Tensor y = empty(x.sizes(), x, x.scalar_type());
    xent_handle* h = handle_for(x.device());
    void* stream = stream_of(x.device());
    check(unlocked([&] { return lib.softmax_forward(h, &desc, x.data_ptr(), y.data_ptr(), stream); }));
    ctx->save_for_backward({y});
    ctx->saved_data["desc"] = as_bytes(desc);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardTimer timer;
    at::Tensor y = ctx->get_saved_variables()[0];
    auto desc = from_bytes<xent_softmax_desc>(ctx->saved_data["desc"]);
    variable_list out(2);
    if (!grads[0].defined() || !ctx->needs_input_grad(0)) return out;
    at::Tensor dy = grads[0].to(y.scalar_type()).contiguous();
    at::Tensor dx = empty(y.sizes(), y, y.scalar_type());
    xent_handle* h = handle_for(y.device());
    void* stream = stream_of(y.device());
    check(unlocked([&] { return lib.softmax_backward(h, &desc, y.data_ptr(), dy.data_ptr(), dx.data_ptr(), stream); }));
    out[0] = dx;
    return once_differentiable(std::move(out), "xent.softmax / xent.log_softmax");
  }
};

// Whether obj is the str text.
bool is(py::handle obj, const char* text) {
  return PyUnicode_Check(obj.ptr()) && PyUnicode_CompareWithASCIIString(obj.ptr(), text) == 0;
}

// torch.Tensor and torch.nn.Parameter: a subclass of its own
// (__torch_function__) or anything else takes the Python path, whose torch
// calls it overrides.
PyTypeObject* tensor_types[2] = {nullptr, nullptr};

bool tensor(py::handle obj, at::Tensor* out) {
  PyTypeObject* type = Py_TYPE(obj.ptr());
  if (type != tensor_types[0] && type != tensor_types[1]) return false;
  *out = THPVariable_Unpack(obj.ptr());
  return out->layout() == at::kStrided;
}

// The descriptor of a cross entropy over logits of `shape` (class axis 1)
// with the options of xent.cross_entropy, or false where the Python path is
// to take the call (an option of another type or value, which it names).
bool ce_options(xent_ce_desc* desc, c10::IntArrayRef shape, xent_dtype dtype, xent_label_type label,
                py::handle ignore_index, py::handle reduction, double label_smoothing, double z_loss, double softcap,
                bool all_ignored_zero, py::handle invalid_labels, py::handle loss_dtype, double temperature) {
  int64_t ignore = XENT_NO_IGNORE_INDEX;
  if (!ignore_index.is_none()) {
    if (!PyLong_Check(ignore_index.ptr())) return false;
    int overflow = 0;
    ignore = PyLong_AsLongLongAndOverflow(ignore_index.ptr(), &overflow);
    if (overflow) return false;
  }
  xent_reduction red;
  if (is(reduction, "mean")) red = XENT_REDUCTION_MEAN;
  else if (is(reduction, "sum")) red = XENT_REDUCTION_SUM;
  else if (is(reduction, "none")) red = XENT_REDUCTION_NONE;
  else return false;
  bool ignore_invalid = is(invalid_labels, "ignore");
  if (!ignore_invalid && !is(invalid_labels, "raise")) return false;
  if (!(temperature > 0 && std::isfinite(temperature))) return false;
  xent_dtype loss_type = dtype;
  if (!loss_dtype.is_none() &&
      (!THPDtype_Check(loss_dtype.ptr()) || !to_xent(reinterpret_cast<THPDtype*>(loss_dtype.ptr())->scalar_type,
                                                     &loss_type)))
    return false;
  check(lib.ce_desc_init_nd(desc, static_cast<int>(shape.size()), shape.data(), 1, dtype, label, red));
  desc->loss_dtype = loss_type;
  desc->ignore_index = ignore;
  desc->label_smoothing = label_smoothing;
  desc->z_loss = z_loss;
  desc->softcap = softcap;
  desc->all_ignored_zero = all_ignored_zero;
  desc->invalid_labels = ignore_invalid ? XENT_INVALID_LABELS_IGNORE : XENT_INVALID_LABELS_REPORT;
  desc->temperature = temperature;
  return true;
}

// xent.cross_entropy's arguments (the Python signature's, less the
// per-token outputs) -> loss, or (loss, lse) with return_lse; None where
// the Python path is to run the call.
py::object cross_entropy(py::handle input, py::handle target_obj, py::handle weight_obj, py::handle ignore_index,
                         py::handle reduction, double label_smoothing, double z_loss, double softcap,
                         bool all_ignored_zero, py::handle invalid_labels, py::handle loss_dtype,
                         bool inplace_backward, bool return_lse, double temperature) {
  at::Tensor x, target, weight;
  xent_dtype dtype;
  if (!tensor(input, &x) || !tensor(target_obj, &target) || x.dim() < 2 || !to_xent(x.scalar_type(), &dtype) ||
      !supported(x.device()) || target.device() != x.device())
    return py::none();
  xent_label_type label;
  if (target.is_floating_point()) {
    if (target.sizes() != x.sizes() || target.requires_grad()) return py::none();
    label = XENT_PROB;
  } else {
    if (target.scalar_type() != at::kLong && target.scalar_type() != at::kInt) return py::none();
    if (target.sizes() != c10::IntArrayRef(row_shape(x))) return py::none();
    label = target.scalar_type() == at::kLong ? XENT_I64 : XENT_I32;
  }
  if (!weight_obj.is_none() &&
      (!tensor(weight_obj, &weight) || weight.dim() != 1 || weight.size(0) != x.size(1)))
    return py::none();
  if (inplace_backward && !x.is_contiguous()) return py::none();
  xent_ce_desc desc;
  if (!ce_options(&desc, x.sizes(), dtype, label, ignore_index, reduction, label_smoothing, z_loss, softcap,
                  all_ignored_zero, invalid_labels, loss_dtype, temperature))
    return py::none();
  // Taken: the inputs as the kernels read them (no copy where they already are).
  target = label == XENT_PROB ? target.to(x.scalar_type()).contiguous() : target.contiguous();
  if (weight.defined()) weight = weight.to(x.device(), accumulation(x.scalar_type())).contiguous();
  if (!inplace_backward) x = x.contiguous();
  bool in_place = inplace_backward && at::GradMode::is_enabled() && x.requires_grad();
  c10::optional<at::Tensor> weights;
  if (weight.defined()) weights = weight;
  variable_list outs = CrossEntropy::apply(x, target, weights, desc, in_place);
  if (return_lse) return py::make_tuple(outs[0], outs[1]);
  return py::cast(outs[0]);
}

// xent.softmax / xent.log_softmax (kind) along dim; None where the Python
// path is to run the call.
py::object softmax(py::handle input, int64_t dim, int kind) {
  at::Tensor x;
  xent_dtype dtype;
  if (!tensor(input, &x) || x.dim() == 0 || !to_xent(x.scalar_type(), &dtype) || !supported(x.device()) ||
      dim < -x.dim() || dim >= x.dim() || (kind != XENT_SOFTMAX && kind != XENT_LOG_SOFTMAX))
    return py::none();
  x = x.contiguous();
  xent_softmax_desc desc;
  check(lib.softmax_desc_init_nd(&desc, static_cast<int>(x.dim()), x.sizes().data(),
                                 static_cast<int>(dim < 0 ? dim + x.dim() : dim), dtype,
                                 static_cast<xent_softmax_kind>(kind)));
  return py::cast(Softmax::apply(x, desc));
}

// The fused linear cross entropy's gradients that a call is to write.
struct Wanted {
  bool hidden, weight, bias;
};

// One xent_linear_ce_run: loss and the gradients in `want` (undefined
// otherwise), with dloss (undefined: a loss of 1).
variable_list linear_run(const xent_linear_ce_desc& desc, const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& bias, const at::Tensor& target, const at::Tensor& ce_weight,
                         const at::Tensor& dloss, Wanted want) {
  int64_t n = hidden.size(0);
  at::ScalarType loss_type = from_xent(desc.ce.loss_dtype);
  at::Tensor loss = desc.ce.reduction == XENT_REDUCTION_NONE ? empty({n}, hidden, loss_type)
                                                             : empty({}, hidden, loss_type);
  at::Tensor gh = want.hidden ? empty(hidden.sizes(), hidden, hidden.scalar_type()) : at::Tensor();
  at::Tensor gw = want.weight ? empty(weight.sizes(), weight, weight.scalar_type()) : at::Tensor();
  at::Tensor gb = want.bias && bias.defined() ? empty(bias.sizes(), bias, bias.scalar_type()) : at::Tensor();
  xent_linear_ce_tensors t{};
  t.hidden = hidden.data_ptr();
  t.weight = weight.data_ptr();
  t.bias = data(bias);
  t.labels = target.data_ptr();
  t.weights = data(ce_weight);
  t.dloss = data(dloss);
  t.loss = loss.data_ptr();
  t.grad_hidden = data(gh);
  t.grad_weight = data(gw);
  t.grad_bias = data(gb);
  xent_handle* h = handle_for(hidden.device());
  size_t bytes = 0;
  check(timed([&] { return lib.linear_ce_workspace_size(h, &desc, &bytes); }));
  // 64-byte aligned, as the GEMM libraries want their workspace.
  at::Tensor workspace = at::empty({static_cast<int64_t>(bytes + 64)},
                                   at::TensorOptions().dtype(at::kByte).device(hidden.device()));
  auto base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(workspace.data_ptr()) + 63) / 64 * 64);
  void* stream = stream_of(hidden.device());
  check(unlocked([&] { return lib.linear_ce_run(h, &desc, &t, base, bytes, stream); }));
  if (hidden.device().is_cpu() && desc.ce.invalid_labels == XENT_INVALID_LABELS_REPORT &&
      desc.ce.label_type != XENT_PROB)
    check(unlocked([&] { return lib.check(h); }));
  return {loss, gh, gw, gb};
}

// The fused linear cross entropy: (hidden, weight, bias) -> loss. For a
// 'sum' or 'mean' the forward computes every gradient with the loss (of a
// loss of 1) and the backward scales them; for 'none' each row's incoming
// gradient weighs grad_weight differently, so the backward calls again
// with it.
struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias_arg, const at::Tensor& target,
                            const c10::optional<at::Tensor>& ce_weight_arg, const xent_linear_ce_desc& desc,
                            Wanted want) {
    const at::Tensor& bias = bias_arg ? *bias_arg : at::Tensor();
    const at::Tensor& ce_weight = ce_weight_arg ? *ce_weight_arg : at::Tensor();
    bool again = desc.ce.reduction == XENT_REDUCTION_NONE;
    variable_list outs =
        linear_run(desc, hidden, weight, bias, target, ce_weight, at::Tensor(), again ? Wanted{} : want);
    if (again)
      ctx->save_for_backward({hidden, weight, bias, target, ce_weight});
    else
      ctx->save_for_backward({outs[1], outs[2], outs[3]});
    ctx->saved_data["desc"] = as_bytes(desc);
    ctx->saved_data["want"] = c10::List<bool>({want.hidden, want.weight, want.bias});
    ctx->set_materialize_grads(false);
    return outs[0];
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardTimer timer;
    const at::Tensor& dloss = grads[0];
    auto desc = from_bytes<xent_linear_ce_desc>(ctx->saved_data["desc"]);
    auto saved = ctx->get_saved_variables();
    variable_list out(7);
    if (desc.ce.reduction != XENT_REDUCTION_NONE) {
      for (int i = 0; i < 3; ++i)
        if (saved[i].defined()) out[i] = dloss.defined() ? saved[i] * dloss : at::zeros_like(saved[i]);
      return once_differentiable(std::move(out), "xent.linear_cross_entropy");
    }
    auto want = ctx->saved_data["want"].toBoolList();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &bias = saved[2], &target = saved[3],
                     &ce_weight = saved[4];
    int64_t n = hidden.size(0);
    at::ScalarType loss_type = from_xent(desc.ce.loss_dtype);
    at::Tensor d = dloss.defined() ? dloss.to(loss_type).reshape({n}).contiguous()
                                   : at::zeros({n}, hidden.options().dtype(loss_type));
    variable_list g = linear_run(desc, hidden, weight, bias, target, ce_weight, d,
                                 Wanted{want.get(0), want.get(1), want.get(2)});
    out[0] = g[1];
    out[1] = g[2];
    out[2] = g[3];
    return once_differentiable(std::move(out), "xent.linear_cross_entropy");
  }
};

// xent.linear_cross_entropy's arguments (less the per-token outputs) ->
// loss, shaped like hidden without H for 'none'; None where the Python path
// is to run the call.
py::object linear_cross_entropy(py::handle hidden_obj, py::handle weight_obj, py::handle target_obj,
                                py::handle bias_obj, py::handle ce_weight_obj, py::handle ignore_index,
                                py::handle reduction, double label_smoothing, double z_loss, double softcap,
                                bool all_ignored_zero, py::handle invalid_labels, py::handle loss_dtype,
                                int64_t chunk_rows, double temperature, int64_t memory_mib) {
  at::Tensor hidden, weight, target, bias, ce_weight;
  xent_dtype dtype;
  if (!tensor(hidden_obj, &hidden) || !tensor(weight_obj, &weight) || !tensor(target_obj, &target) ||
      hidden.dim() < 1 || weight.dim() != 2 || !to_xent(hidden.scalar_type(), &dtype) ||
      weight.scalar_type() != hidden.scalar_type() || weight.size(1) != hidden.size(-1) ||
      !supported(hidden.device()) || weight.device() != hidden.device() || target.device() != hidden.device())
    return py::none();
  int64_t classes = weight.size(0), width = weight.size(1);
  if (width == 0) return py::none();
  if (!bias_obj.is_none() && (!tensor(bias_obj, &bias) || bias.scalar_type() != hidden.scalar_type() ||
                              bias.dim() != 1 || bias.size(0) != classes || bias.device() != hidden.device()))
    return py::none();
  c10::SmallVector<int64_t, 8> lead(hidden.sizes().begin(), hidden.sizes().end() - 1);
  xent_label_type label;
  if (target.is_floating_point()) {
    c10::SmallVector<int64_t, 8> want(lead);
    want.push_back(classes);
    if (target.sizes() != c10::IntArrayRef(want)) return py::none();
    label = XENT_PROB;
    target = target.reshape({-1, classes}).to(hidden.scalar_type()).contiguous();
  } else {
    if ((target.scalar_type() != at::kLong && target.scalar_type() != at::kInt) ||
        target.sizes() != c10::IntArrayRef(lead))
      return py::none();
    label = target.scalar_type() == at::kLong ? XENT_I64 : XENT_I32;
    target = target.reshape({-1}).contiguous();
  }
  if (!ce_weight_obj.is_none()) {
    if (!tensor(ce_weight_obj, &ce_weight) || ce_weight.dim() != 1 || ce_weight.size(0) != classes ||
        ce_weight.device() != hidden.device())
      return py::none();
    ce_weight = ce_weight.to(accumulation(hidden.scalar_type())).contiguous();
  }
  xent_ce_desc ce;
  if (!ce_options(&ce, {hidden.numel() / width, classes}, dtype, label, ignore_index, reduction, label_smoothing,
                  z_loss, softcap, all_ignored_zero, invalid_labels, loss_dtype, temperature))
    return py::none();
  at::Tensor h2 = hidden.reshape({-1, width}).contiguous();
  xent_linear_ce_desc desc;
  lib.linear_ce_desc_init(&desc, h2.size(0), width, classes, dtype, label, ce.reduction);
  desc.ce = ce;
  desc.chunk_rows = chunk_rows;
  desc.memory_mib = memory_mib;
  bool grad = at::GradMode::is_enabled();
  Wanted want{grad && hidden.requires_grad(), grad && weight.requires_grad(),
              grad && bias.defined() && bias.requires_grad()};
  c10::optional<at::Tensor> bias_arg, ce_weight_arg;
  if (bias.defined()) bias_arg = bias.contiguous();
  if (ce_weight.defined()) ce_weight_arg = ce_weight;
  at::Tensor loss = LinearCrossEntropy::apply(h2, weight.contiguous(), bias_arg, target, ce_weight_arg, desc, want);
  return py::cast(ce.reduction == XENT_REDUCTION_NONE ? loss.reshape(lead) : loss);
}

template <class Fn>
void take(const py::dict& functions, const char* name, Fn* slot) {
  *slot = reinterpret_cast<Fn>(functions[name].cast<uintptr_t>());
}

// libxent's function addresses by name, the package's exception classes,
// the backend that serves PyTorch's "cuda" device, and the tensor types this
// path takes.
void init(const py::dict& functions, py::handle error, py::handle invalid_label, int backend, py::handle tensor_type,
          py::handle parameter_type) {
  tensor_types[0] = reinterpret_cast<PyTypeObject*>(tensor_type.inc_ref().ptr());
  tensor_types[1] = reinterpret_cast<PyTypeObject*>(parameter_type.inc_ref().ptr());
  take(functions, "xent_create_on_device", &lib.create_on_device);
  take(functions, "xent_ce_desc_init_nd", &lib.ce_desc_init_nd);
  take(functions, "xent_ce_workspace_size", &lib.ce_workspace_size);
  take(functions, "xent_ce_run", &lib.ce_run);
  take(functions, "xent_ce_scale_grad", &lib.ce_scale_grad);
  take(functions, "xent_softmax_desc_init_nd", &lib.softmax_desc_init_nd);
  take(functions, "xent_softmax_forward", &lib.softmax_forward);
  take(functions, "xent_softmax_backward", &lib.softmax_backward);
  take(functions, "xent_linear_ce_desc_init", &lib.linear_ce_desc_init);
  take(functions, "xent_linear_ce_workspace_size", &lib.linear_ce_workspace_size);
  take(functions, "xent_linear_ce_run", &lib.linear_ce_run);
  take(functions, "xent_check", &lib.check);
  take(functions, "xent_last_error", &lib.last_error);
  take(functions, "xent_status_string", &lib.status_string);
  xent_error = error.inc_ref().ptr();
  invalid_label_error = invalid_label.inc_ref().ptr();
  gpu_backend = static_cast<xent_backend_kind>(backend);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "xent's calls from PyTorch in C++ (see xent/_native.py)";
  m.attr("FUNCTIONS") = py::make_tuple("xent_create_on_device", "xent_ce_desc_init_nd", "xent_ce_workspace_size",
                                       "xent_ce_run", "xent_ce_scale_grad", "xent_softmax_desc_init_nd",
                                       "xent_softmax_forward", "xent_softmax_backward", "xent_linear_ce_desc_init",
                                       "xent_linear_ce_workspace_size", "xent_linear_ce_run", "xent_check",
                                       "xent_last_error", "xent_status_string");
  m.attr("GPU_STREAMS") = py::bool_(XENT_NATIVE_STREAMS);
  m.def("init", &init);
  m.def("cross_entropy", &cross_entropy);
  m.def("softmax", &softmax);
  m.def("linear_cross_entropy", &linear_cross_entropy);
  m.def("handle", [](int backend, int device) {
    return reinterpret_cast<uintptr_t>(handle_for(static_cast<xent_backend_kind>(backend), device));
  });
  m.def("set_timing", [](bool on) {
    timing = on;
    library_ns = 0;
    backward_ns = 0;
  });
  m.def("library_ns", [] { return library_ns.load(); });
  m.def("backward_ns", [] { return backward_ns.load(); });
}
