// xent's cross entropy as XLA FFI handlers (xent_jax): the buffers XLA owns
// go to xent_ce_run as they are, the workspace comes from XLA's scratch
// allocator, and the call runs on XLA's stream (CUDA) or on the host (cpu).
// Compiled at first use against the installed jaxlib's headers
// (python/xent_jax/_build.py) and linked to the package's libxent.
//
//   xent_ce_fwd(logits, labels, weights, temperature, token_weight, offset, gathered)
//       -> (loss, lse, entropy, label_logprob, argmax)   attributes: the options
//   xent_ce_bwd(logits, labels, weights, temperature, token_weight, offset, gathered, lse, dloss, dentropy)
//       -> (grad, grad_labels)
//   xent_ce_records(logits, labels, weights, temperature, token_weight, offset)
//       -> records                        a vocabulary slice's, for the caller's all_gather
//   xent_softmax_fwd(x) -> y;  xent_softmax_bwd(y, dy) -> dx
//                                         attributes: axis, log (log-softmax)
//   xent_lce(hidden, weight, bias, labels, ce_weight, temperature, token_weight, dloss, dentropy)
//       -> (loss, grad_hidden, grad_weight, grad_bias, entropy, label_logprob, argmax)
//                                         the fused linear cross entropy
//
// An optional input (weights, a temperature or token weight per row,
// dentropy) or output (grad_labels, the per-token outputs) is a buffer of no
// elements when absent. argmax's int64s are written into a uint32 buffer of
// two words a row (JAX without x64 has no int64 arrays). The logits are [..., C, inner...] with
// the class axis at `axis` (from the front, >= 0), every other axis a row.
#include <stdint.h>
#include <string.h>

#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "xent.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// One handle per platform, made at first use (xent's calls on one handle
// may come from several threads).
xent_handle* handle_for(xent_backend_kind kind, xent_status* status) {
  static std::mutex mu;
  static xent_handle* handles[4] = {nullptr, nullptr, nullptr, nullptr};
  std::lock_guard<std::mutex> lock(mu);
  if (!handles[kind]) *status = xent_create(&handles[kind], kind);
  else *status = XENT_OK;
  return handles[kind];
}

ffi::Error xent_error(const char* what) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string(what) + ": " + xent_last_error());
}

bool dtype_of(ffi::DataType t, xent_dtype* d) {
  switch (t) {
    case ffi::DataType::F32: *d = XENT_F32; return true;
    case ffi::DataType::F16: *d = XENT_F16; return true;
    case ffi::DataType::BF16: *d = XENT_BF16; return true;
    case ffi::DataType::F64: *d = XENT_F64; return true;
    default: return false;
  }
}

const void* optional(const ffi::AnyBuffer& b) { return b.element_count() > 0 ? b.untyped_data() : nullptr; }

// The descriptor of a call: the logits' shape split at the class axis, the
// labels' kind from their dtype, and the options.
ffi::Error describe(const ffi::AnyBuffer& logits, const ffi::AnyBuffer& labels, int64_t axis, int64_t reduction,
                    int64_t ignore_index, double label_smoothing, double z_loss, double softcap, double temperature,
                    bool all_ignored_zero, bool ignore_invalid_labels, bool token_weight_count, bool acc_loss,
                    xent_ce_desc* d) {
  xent_dtype dtype;
  if (!dtype_of(logits.element_type(), &dtype))
    return ffi::Error::InvalidArgument("xent: logits must be float32, float16, bfloat16 or float64");
  xent_label_type label;
  if (labels.element_type() == ffi::DataType::S32) label = XENT_I32;
  else if (labels.element_type() == ffi::DataType::S64) label = XENT_I64;
  else if (labels.element_type() == logits.element_type()) label = XENT_PROB;
  else return ffi::Error::InvalidArgument("xent: labels must be int32, int64 or probabilities of the logits' dtype");
  const auto dims = logits.dimensions();
  int64_t shape[16];
  if (dims.size() < 1 || dims.size() > 16) return ffi::Error::InvalidArgument("xent: logits must have 1 to 16 axes");
  for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
  if (xent_ce_desc_init_nd(d, (int)dims.size(), shape, (int)axis, dtype, label, (xent_reduction)reduction) != XENT_OK)
    return xent_error("xent_ce_desc_init_nd");
  d->ignore_index = ignore_index;
  d->label_smoothing = label_smoothing;
  d->z_loss = z_loss;
  d->softcap = softcap;
  d->temperature = temperature;
  d->all_ignored_zero = all_ignored_zero;
  d->invalid_labels = ignore_invalid_labels ? XENT_INVALID_LABELS_IGNORE : XENT_INVALID_LABELS_REPORT;
  d->token_weight_mean = token_weight_count ? XENT_TOKEN_WEIGHT_MEAN_COUNT : XENT_TOKEN_WEIGHT_MEAN_WEIGHTS;
  if (acc_loss) d->loss_dtype = dtype == XENT_F64 ? XENT_F64 : XENT_F32;  // loss and dloss
  const size_t rows = (size_t)d->rows;
  if (labels.element_count() != (label == XENT_PROB ? logits.element_count() : rows))
    return ffi::Error::InvalidArgument("xent: labels do not match the logits' rows");
  return ffi::Error::Success();
}

// A vocabulary slice (offset: this slice's first class as an int64 the
// device holds, from the framework's axis_index; gathered: every rank's
// records, rank by rank), or none where offset is empty.
ffi::Error shard_of(const ffi::AnyBuffer& offset, const ffi::AnyBuffer* gathered, int64_t global_classes,
                    int64_t ranks, xent_ce_desc* d, xent_vocab_shard* vs) {
  if (offset.element_count() == 0) return ffi::Error::Success();
  if (offset.size_bytes() != 8 || ranks < 1 || ranks > INT32_MAX)
    return ffi::Error::InvalidArgument("xent: a vocabulary slice's offset is one int64 and ranks >= 1");
  memset(vs, 0, sizeof *vs);
  vs->global_classes = global_classes;
  vs->ranks = (int)ranks;
  vs->class_offset_at = (const int64_t*)offset.untyped_data();
  vs->gathered = gathered && gathered->element_count() ? gathered->untyped_data() : nullptr;
  d->vocab_shard = vs;
  return ffi::Error::Success();
}

// A cross-entropy call's inputs, the ones every op reads; the rest NULL.
xent_ce_tensors inputs(const ffi::AnyBuffer& logits, const ffi::AnyBuffer& labels, const ffi::AnyBuffer& weights,
                       const ffi::AnyBuffer& temperature, const ffi::AnyBuffer& token_weight) {
  xent_ce_tensors t;
  memset(&t, 0, sizeof t);
  t.logits = logits.untyped_data();
  t.labels = labels.untyped_data();
  t.weights = optional(weights);
  t.temperature = optional(temperature);
  t.token_weight = optional(token_weight);
  return t;
}

// Every buffer of the call the size the descriptor says (a mismatch is a
// binding's mistake, refused before anything is written).
bool sized(const ffi::AnyBuffer& b, size_t n, bool optional_input) {
  return b.element_count() == n || (optional_input && b.element_count() == 0);
}

// Scratch for a call: XLA's where it has one (the GPUs); the host's calls
// are done on return, so there a buffer of our own serves.
ffi::Error workspace(xent_backend_kind kind, ffi::ScratchAllocator& scratch, size_t bytes, void** ws,
                     std::unique_ptr<unsigned char[]>* own) {
  *ws = nullptr;
  if (bytes == 0) return ffi::Error::Success();
  auto got = scratch.Allocate(bytes, 64);
  if (got.has_value()) {
    *ws = *got;
  } else if (kind == XENT_BACKEND_CPU) {
    own->reset(new (std::nothrow) unsigned char[bytes + 64]);
    if (!*own) return ffi::Error(ffi::ErrorCode::kResourceExhausted, "xent: no memory for the workspace");
    *ws = (void*)(((uintptr_t)own->get() + 63) & ~(uintptr_t)63);
  } else {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "xent: no scratch for the workspace");
  }
  return ffi::Error::Success();
}

// One xent_ce_run with its workspace.
ffi::Error run(xent_backend_kind kind, void* stream, ffi::ScratchAllocator& scratch, const xent_ce_desc& d, xent_op op,
               const xent_ce_tensors& t) {
  xent_status s;
  xent_handle* h = handle_for(kind, &s);
  if (s != XENT_OK) return xent_error("xent_create");
  size_t bytes = 0;
  if (xent_ce_workspace_size(h, &d, op, &bytes) != XENT_OK) return xent_error("xent_ce_workspace_size");
  void* ws;
  std::unique_ptr<unsigned char[]> own;
  ffi::Error e = workspace(kind, scratch, bytes, &ws, &own);
  if (e.failure()) return e;
  if (xent_ce_run(h, &d, op, &t, ws, bytes, stream) != XENT_OK) return xent_error("xent_ce_run");
  // The cpu backend's calls are done on return: a bad label is reported now.
  if (kind == XENT_BACKEND_CPU && xent_check(h) != XENT_OK) return xent_error("xent");
  return ffi::Error::Success();
}

ffi::Error forward(xent_backend_kind kind, void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer logits,
                   ffi::AnyBuffer labels, ffi::AnyBuffer weights, ffi::AnyBuffer temperature,
                   ffi::AnyBuffer token_weight, ffi::AnyBuffer offset, ffi::AnyBuffer gathered,
                   ffi::Result<ffi::AnyBuffer> loss, ffi::Result<ffi::AnyBuffer> lse,
                   ffi::Result<ffi::AnyBuffer> entropy, ffi::Result<ffi::AnyBuffer> logprob,
                   ffi::Result<ffi::AnyBuffer> argmax, int64_t axis, int64_t reduction, int64_t ignore_index,
                   double label_smoothing, double z_loss, double softcap, double tau, bool all_ignored_zero,
                   bool ignore_invalid_labels, bool token_weight_count, bool acc_loss, int64_t global_classes,
                   int64_t ranks) {
  xent_ce_desc d;
  xent_vocab_shard vs;
  ffi::Error e = describe(logits, labels, axis, reduction, ignore_index, label_smoothing, z_loss, softcap, tau,
                          all_ignored_zero, ignore_invalid_labels, token_weight_count, acc_loss, &d);
  if (e.success()) e = shard_of(offset, &gathered, global_classes, ranks, &d, &vs);
  if (e.failure()) return e;
  const size_t rows = (size_t)d.rows;
  if (!sized(*loss, reduction == XENT_REDUCTION_NONE ? rows : 1, false) || !sized(*lse, rows, false) ||
      !sized(weights, (size_t)(d.vocab_shard ? global_classes : d.classes), true) || !sized(temperature, rows, true) ||
      !sized(token_weight, rows, true) || !sized(*entropy, rows, true) || !sized(*logprob, rows, true) || !sized(*argmax, 2 * rows, true))
    return ffi::Error::InvalidArgument("xent: a buffer's size does not match the logits' rows or classes");
  xent_ce_tensors t = inputs(logits, labels, weights, temperature, token_weight);
  t.loss = loss->untyped_data();
  t.lse = lse->untyped_data();
  t.entropy = entropy->element_count() ? entropy->untyped_data() : nullptr;
  t.label_logprob = logprob->element_count() ? logprob->untyped_data() : nullptr;
  t.argmax = argmax->element_count() ? (int64_t*)argmax->untyped_data() : nullptr;
  return run(kind, stream, scratch, d, XENT_OP_FORWARD, t);
}

ffi::Error backward(xent_backend_kind kind, void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer logits,
                    ffi::AnyBuffer labels, ffi::AnyBuffer weights, ffi::AnyBuffer temperature,
                    ffi::AnyBuffer token_weight, ffi::AnyBuffer offset, ffi::AnyBuffer gathered, ffi::AnyBuffer lse,
                    ffi::AnyBuffer dloss, ffi::AnyBuffer dentropy, ffi::Result<ffi::AnyBuffer> grad,
                    ffi::Result<ffi::AnyBuffer> grad_labels, int64_t axis, int64_t reduction, int64_t ignore_index,
                    double label_smoothing, double z_loss, double softcap, double tau, bool all_ignored_zero,
                    bool ignore_invalid_labels, bool token_weight_count, bool acc_loss, int64_t global_classes,
                    int64_t ranks) {
  xent_ce_desc d;
  xent_vocab_shard vs;
  ffi::Error e = describe(logits, labels, axis, reduction, ignore_index, label_smoothing, z_loss, softcap, tau,
                          all_ignored_zero, ignore_invalid_labels, token_weight_count, acc_loss, &d);
  if (e.success()) e = shard_of(offset, &gathered, global_classes, ranks, &d, &vs);
  if (e.failure()) return e;
  const size_t rows = (size_t)d.rows;
  if (!sized(*grad, logits.element_count(), false) || !sized(lse, rows, false) ||
      !sized(dloss, reduction == XENT_REDUCTION_NONE ? rows : 1, false) ||
      !sized(weights, (size_t)(d.vocab_shard ? global_classes : d.classes), true) ||
      !sized(temperature, rows, true) || !sized(token_weight, rows, true) || !sized(dentropy, rows, true) ||
      !(grad_labels->element_count() == 0 || grad_labels->element_count() == labels.element_count()))
    return ffi::Error::InvalidArgument("xent: a buffer's size does not match the logits' rows or classes");
  xent_ce_tensors t = inputs(logits, labels, weights, temperature, token_weight);
  t.lse_in = lse.untyped_data();
  t.dloss = dloss.untyped_data();
  t.dentropy = optional(dentropy);
  t.grad = grad->untyped_data();
  t.grad_labels = d.label_type == XENT_PROB && grad_labels->element_count() > 0 ? grad_labels->untyped_data() : nullptr;
  return run(kind, stream, scratch, d, XENT_OP_BACKWARD, t);
}

// A vocabulary slice's records for the caller's all_gather (the first half
// of the call; xent_ce_shard_records), for the forward op of the call to
// come, wide where it has per-token outputs.
ffi::Error records(xent_backend_kind kind, void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer logits,
                   ffi::AnyBuffer labels, ffi::AnyBuffer weights, ffi::AnyBuffer temperature,
                   ffi::AnyBuffer token_weight, ffi::AnyBuffer offset, ffi::Result<ffi::AnyBuffer> out, int64_t axis,
                   int64_t reduction, int64_t ignore_index, double label_smoothing, double z_loss, double softcap,
                   double tau, bool all_ignored_zero, bool ignore_invalid_labels, bool token_weight_count,
                   int64_t global_classes, int64_t ranks, bool wide) {
  xent_ce_desc d;
  xent_vocab_shard vs;
  ffi::Error e = describe(logits, labels, axis, reduction, ignore_index, label_smoothing, z_loss, softcap, tau,
                          all_ignored_zero, ignore_invalid_labels, token_weight_count, false, &d);
  if (e.success()) e = shard_of(offset, nullptr, global_classes, ranks, &d, &vs);
  if (e.failure()) return e;
  if (!d.vocab_shard) return ffi::Error::InvalidArgument("xent: records are a vocabulary slice's (offset is empty)");
  const size_t rows = (size_t)d.rows;
  xent_status s;
  xent_handle* h = handle_for(kind, &s);
  if (s != XENT_OK) return xent_error("xent_create");
  // The loss and (wide) an entropy output name the call's outputs: the
  // first half writes neither, only the records.
  const size_t ab = d.dtype == XENT_F64 ? 8 : 4;
  size_t loss_bytes = (reduction == XENT_REDUCTION_NONE ? rows : 1) * ab, bytes = 0, rec = 0;
  xent_ce_tensors t = inputs(logits, labels, weights, temperature, token_weight);
  d.loss_dtype = d.dtype == XENT_F64 ? XENT_F64 : XENT_F32;
  if (xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, &bytes) != XENT_OK) return xent_error("xent_ce_workspace_size");
  void* ws;
  std::unique_ptr<unsigned char[]> own;
  e = workspace(kind, scratch, bytes + loss_bytes + (wide ? rows * ab : 0) + 128, &ws, &own);
  if (e.failure()) return e;
  unsigned char* extra = (unsigned char*)ws + ((bytes + 63) & ~(size_t)63);
  t.loss = extra;
  if (wide) t.entropy = extra + ((loss_bytes + 63) & ~(size_t)63);
  if (xent_ce_shard_records_size(h, &d, XENT_OP_FORWARD, &t, &rec) != XENT_OK)
    return xent_error("xent_ce_shard_records_size");
  if (out->size_bytes() != rec) return ffi::Error::InvalidArgument("xent: the records' buffer has the wrong size");
  if (xent_ce_shard_records(h, &d, XENT_OP_FORWARD, &t, out->untyped_data(), ws, bytes, stream) != XENT_OK)
    return xent_error("xent_ce_shard_records");
  return ffi::Error::Success();
}

// The fused linear cross entropy: logits = hidden @ weight^T (+ bias) a
// chunk of rows at a time, never whole; every gradient whose buffer is not
// empty, of sum(dloss * loss) (dloss empty: of the loss itself) plus
// sum(dentropy * entropy) where dentropy is given; the per-token outputs
// whose buffers are not empty.
ffi::Error linear(xent_backend_kind kind, void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer hidden,
                  ffi::AnyBuffer weight, ffi::AnyBuffer bias, ffi::AnyBuffer labels, ffi::AnyBuffer ce_weight,
                  ffi::AnyBuffer temperature, ffi::AnyBuffer token_weight, ffi::AnyBuffer dloss,
                  ffi::AnyBuffer dentropy, ffi::Result<ffi::AnyBuffer> loss, ffi::Result<ffi::AnyBuffer> grad_hidden,
                  ffi::Result<ffi::AnyBuffer> grad_weight, ffi::Result<ffi::AnyBuffer> grad_bias,
                  ffi::Result<ffi::AnyBuffer> entropy, ffi::Result<ffi::AnyBuffer> logprob,
                  ffi::Result<ffi::AnyBuffer> argmax, int64_t reduction, int64_t ignore_index, double label_smoothing,
                  double z_loss, double softcap, double tau, bool all_ignored_zero, bool ignore_invalid_labels,
                  bool token_weight_count, int64_t chunk_rows, int64_t memory_mib, int64_t plan, bool acc_loss) {
  xent_dtype dtype;
  if (!dtype_of(hidden.element_type(), &dtype) || weight.element_type() != hidden.element_type())
    return ffi::Error::InvalidArgument("xent: hidden and weight must be one float type");
  const auto hd = hidden.dimensions(), wd = weight.dimensions();
  if (hd.size() < 1 || wd.size() != 2 || wd[1] != hd[hd.size() - 1])
    return ffi::Error::InvalidArgument("xent: hidden [..., H] and weight [V, H] do not match");
  const int64_t H = wd[1], V = wd[0], N = H > 0 ? (int64_t)(hidden.element_count() / (size_t)H) : 0;
  xent_label_type label;
  if (labels.element_type() == ffi::DataType::S32) label = XENT_I32;
  else if (labels.element_type() == ffi::DataType::S64) label = XENT_I64;
  else if (labels.element_type() == hidden.element_type()) label = XENT_PROB;
  else return ffi::Error::InvalidArgument("xent: labels must be int32, int64 or probabilities of hidden's dtype");
  xent_linear_ce_desc d;
  xent_linear_ce_desc_init(&d, N, H, V, dtype, label, (xent_reduction)reduction);
  d.ce.ignore_index = ignore_index;
  d.ce.label_smoothing = label_smoothing;
  d.ce.z_loss = z_loss;
  d.ce.softcap = softcap;
  d.ce.temperature = tau;
  d.ce.all_ignored_zero = all_ignored_zero;
  d.ce.invalid_labels = ignore_invalid_labels ? XENT_INVALID_LABELS_IGNORE : XENT_INVALID_LABELS_REPORT;
  d.ce.token_weight_mean = token_weight_count ? XENT_TOKEN_WEIGHT_MEAN_COUNT : XENT_TOKEN_WEIGHT_MEAN_WEIGHTS;
  if (acc_loss) d.ce.loss_dtype = dtype == XENT_F64 ? XENT_F64 : XENT_F32;  // loss and dloss
  d.chunk_rows = chunk_rows;
  d.memory_mib = memory_mib;
  d.plan = (int)plan;
  const size_t rows = (size_t)N, n_loss = reduction == XENT_REDUCTION_NONE ? rows : 1;
  if (!sized(labels, label == XENT_PROB ? rows * (size_t)V : rows, false) || !sized(bias, (size_t)V, true) ||
      !sized(ce_weight, (size_t)V, true) || !sized(temperature, rows, true) || !sized(token_weight, rows, true) ||
      !sized(dloss, n_loss, true) || !sized(*loss, n_loss, false) ||
      !sized(*grad_hidden, hidden.element_count(), true) || !sized(*grad_weight, weight.element_count(), true) ||
      !sized(*grad_bias, (size_t)V, true) || (grad_bias->element_count() && !bias.element_count()) ||
      !sized(dentropy, rows, true) || !sized(*entropy, rows, true) || !sized(*logprob, rows, true) ||
      !sized(*argmax, 2 * rows, true))
    return ffi::Error::InvalidArgument("xent: a buffer's size does not match hidden, weight or the rows");
  xent_linear_ce_tensors t;
  memset(&t, 0, sizeof t);
  t.hidden = hidden.untyped_data();
  t.weight = weight.untyped_data();
  t.bias = optional(bias);
  t.labels = labels.untyped_data();
  t.weights = optional(ce_weight);
  t.temperature = optional(temperature);
  t.token_weight = optional(token_weight);
  t.dloss = optional(dloss);
  t.loss = loss->untyped_data();
  t.grad_hidden = grad_hidden->element_count() ? grad_hidden->untyped_data() : nullptr;
  t.grad_weight = grad_weight->element_count() ? grad_weight->untyped_data() : nullptr;
  t.grad_bias = grad_bias->element_count() ? grad_bias->untyped_data() : nullptr;
  t.dentropy = optional(dentropy);
  t.entropy = entropy->element_count() ? entropy->untyped_data() : nullptr;
  t.label_logprob = logprob->element_count() ? logprob->untyped_data() : nullptr;
  t.argmax = argmax->element_count() ? (int64_t*)argmax->untyped_data() : nullptr;
  xent_status s;
  xent_handle* h = handle_for(kind, &s);
  if (s != XENT_OK) return xent_error("xent_create");
  size_t bytes = 0;
  if (xent_linear_ce_workspace_size(h, &d, &bytes) != XENT_OK) return xent_error("xent_linear_ce_workspace_size");
  void* ws;
  std::unique_ptr<unsigned char[]> own;
  ffi::Error e = workspace(kind, scratch, bytes, &ws, &own);
  if (e.failure()) return e;
  if (xent_linear_ce_run(h, &d, &t, ws, bytes, stream) != XENT_OK) return xent_error("xent_linear_ce_run");
  if (kind == XENT_BACKEND_CPU && xent_check(h) != XENT_OK) return xent_error("xent");
  return ffi::Error::Success();
}

// The softmax family along one axis: y from x, or dx from y and dy.
ffi::Error softmax(xent_backend_kind kind, void* stream, const ffi::AnyBuffer& in, const ffi::AnyBuffer* dy,
                   ffi::AnyBuffer out, int64_t axis, bool log) {
  xent_dtype dtype;
  if (!dtype_of(in.element_type(), &dtype))
    return ffi::Error::InvalidArgument("xent: softmax's input must be float32, float16, bfloat16 or float64");
  const auto dims = in.dimensions();
  int64_t shape[16];
  if (dims.size() < 1 || dims.size() > 16) return ffi::Error::InvalidArgument("xent: softmax's input has 1 to 16 axes");
  for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
  if (out.element_count() != in.element_count() || (dy && dy->element_count() != in.element_count()))
    return ffi::Error::InvalidArgument("xent: softmax's buffers differ in size");
  xent_softmax_desc d;
  if (xent_softmax_desc_init_nd(&d, (int)dims.size(), shape, (int)axis, dtype, log ? XENT_LOG_SOFTMAX : XENT_SOFTMAX) !=
      XENT_OK)
    return xent_error("xent_softmax_desc_init_nd");
  xent_status s;
  xent_handle* h = handle_for(kind, &s);
  if (s != XENT_OK) return xent_error("xent_create");
  s = dy ? xent_softmax_backward(h, &d, in.untyped_data(), dy->untyped_data(), out.untyped_data(), stream)
         : xent_softmax_forward(h, &d, in.untyped_data(), out.untyped_data(), stream);
  return s == XENT_OK ? ffi::Error::Success() : xent_error("xent_softmax");
}

// The bindings: the same arguments on every platform, the stream where it
// has one. (A binding moves only into the next, by its own calls: each
// helper takes it by reference and returns the next.) N > 0 buffers in
// (Arg) or out (Ret):
template <int N, class B>
auto buffers_in(B&& b) {
  if constexpr (N == 1) return std::move(b).template Arg<ffi::AnyBuffer>();
  else return buffers_in<N - 1>(std::move(b).template Arg<ffi::AnyBuffer>());
}
template <int N, class B>
auto buffers_out(B&& b) {
  if constexpr (N == 1) return std::move(b).template Ret<ffi::AnyBuffer>();
  else return buffers_out<N - 1>(std::move(b).template Ret<ffi::AnyBuffer>());
}

// The loss's options, in every handler's order.
template <class B>
auto loss_attrs(B&& b) {
  return std::move(b).template Attr<int64_t>("reduction")
      .template Attr<int64_t>("ignore_index")
      .template Attr<double>("label_smoothing")
      .template Attr<double>("z_loss")
      .template Attr<double>("softcap")
      .template Attr<double>("temperature")
      .template Attr<bool>("all_ignored_zero")
      .template Attr<bool>("ignore_invalid_labels")
      .template Attr<bool>("token_weight_count");
}

// The cross entropy's calls: N buffers in, M out, the class axis, the
// options (and acc_loss where Acc), the vocabulary split.
template <int N, int M, bool Acc, class B>
auto ce_args(B&& b) {
  auto options = loss_attrs(buffers_out<M>(buffers_in<N>(std::move(b).template Ctx<ffi::ScratchAllocator>()))
                                .template Attr<int64_t>("axis"));
  if constexpr (Acc)
    return std::move(options)
        .template Attr<bool>("acc_loss")
        .template Attr<int64_t>("global_classes")
        .template Attr<int64_t>("ranks");
  else
    return std::move(options).template Attr<int64_t>("global_classes").template Attr<int64_t>("ranks");
}

template <class B>
auto forward_args(B&& b) {
  return ce_args<7, 5, true>(std::move(b));
}

template <class B>
auto backward_args(B&& b) {
  return ce_args<10, 2, true>(std::move(b));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_ce_fwd_cpu,
                              [](ffi::ScratchAllocator s, auto... a) {
                                return forward(XENT_BACKEND_CPU, nullptr, std::move(s), a...);
                              },
                              forward_args(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_ce_bwd_cpu,
                              [](ffi::ScratchAllocator s, auto... a) {
                                return backward(XENT_BACKEND_CPU, nullptr, std::move(s), a...);
                              },
                              backward_args(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_softmax_fwd_cpu,
                              [](ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t axis, bool log) {
                                return softmax(XENT_BACKEND_CPU, nullptr, x, nullptr, *y, axis, log);
                              },
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("axis")
                                  .Attr<bool>("log"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_softmax_bwd_cpu,
                              [](ffi::AnyBuffer y, ffi::AnyBuffer dy, ffi::Result<ffi::AnyBuffer> dx, int64_t axis,
                                 bool log) { return softmax(XENT_BACKEND_CPU, nullptr, y, &dy, *dx, axis, log); },
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("axis")
                                  .Attr<bool>("log"));

template <class B>
auto records_args(B&& b) {
  return ce_args<6, 1, false>(std::move(b)).template Attr<bool>("wide");
}

template <class B>
auto linear_args(B&& b) {
  return loss_attrs(buffers_out<7>(buffers_in<9>(std::move(b).template Ctx<ffi::ScratchAllocator>())))
      .template Attr<int64_t>("chunk_rows")
      .template Attr<int64_t>("memory_mib")
      .template Attr<int64_t>("plan")
      .template Attr<bool>("acc_loss");
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_ce_records_cpu,
                              [](ffi::ScratchAllocator s, auto... a) {
                                return records(XENT_BACKEND_CPU, nullptr, std::move(s), a...);
                              },
                              records_args(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(xent_lce_cpu,
                              [](ffi::ScratchAllocator s, auto... a) {
                                return linear(XENT_BACKEND_CPU, nullptr, std::move(s), a...);
                              },
                              linear_args(ffi::Ffi::Bind()));
// The GPU platforms' handlers: JAX's CUDA platform runs xent's CUDA backend,
// its ROCm platform the HIP one, each on XLA's stream.
#define XENT_GPU_HANDLERS(platform, backend)                                                              \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_ce_fwd_##platform,                                                                             \
      [](void* stream, ffi::ScratchAllocator s, auto... a) { return forward(backend, stream, std::move(s), a...); }, \
      forward_args(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()));                                  \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_ce_bwd_##platform,                                                                             \
      [](void* stream, ffi::ScratchAllocator s, auto... a) { return backward(backend, stream, std::move(s), a...); }, \
      backward_args(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()));                                 \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_softmax_fwd_##platform,                                                                        \
      [](void* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t axis, bool log) {         \
        return softmax(backend, stream, x, nullptr, *y, axis, log);                                       \
      },                                                                                                  \
      ffi::Ffi::Bind()                                                                                    \
          .Ctx<ffi::PlatformStream<void*>>()                                                              \
          .Arg<ffi::AnyBuffer>()                                                                          \
          .Ret<ffi::AnyBuffer>()                                                                          \
          .Attr<int64_t>("axis")                                                                          \
          .Attr<bool>("log"));                                                                            \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_softmax_bwd_##platform,                                                                        \
      [](void* stream, ffi::AnyBuffer y, ffi::AnyBuffer dy, ffi::Result<ffi::AnyBuffer> dx, int64_t axis,  \
         bool log) { return softmax(backend, stream, y, &dy, *dx, axis, log); },                          \
      ffi::Ffi::Bind()                                                                                    \
          .Ctx<ffi::PlatformStream<void*>>()                                                              \
          .Arg<ffi::AnyBuffer>()                                                                          \
          .Arg<ffi::AnyBuffer>()                                                                          \
          .Ret<ffi::AnyBuffer>()                                                                          \
          .Attr<int64_t>("axis")                                                                          \
          .Attr<bool>("log"));                                                                            \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_ce_records_##platform,                                                                         \
      [](void* stream, ffi::ScratchAllocator s, auto... a) { return records(backend, stream, std::move(s), a...); }, \
      records_args(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()));                                  \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                          \
      xent_lce_##platform,                                                                                \
      [](void* stream, ffi::ScratchAllocator s, auto... a) { return linear(backend, stream, std::move(s), a...); }, \
      linear_args(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))

XENT_GPU_HANDLERS(gpu, XENT_BACKEND_CUDA);
XENT_GPU_HANDLERS(rocm, XENT_BACKEND_HIP);
