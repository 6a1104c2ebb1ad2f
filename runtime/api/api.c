/* The public entry points of cross entropy, softmax and the handle:
   validate every argument once (naming it on error), then run the op
   (runtime/ops) or the handle's backend. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/api/checks.h"
#include "runtime/backend/backend.h"
#include "runtime/dispatch/dispatch.h"
#include "runtime/ops/ops.h"

void xent_ce_desc_init(xent_ce_desc* d, int64_t rows, int64_t classes, xent_dtype dtype, xent_label_type label_type,
                       xent_reduction reduction) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->rows = rows;
  d->classes = classes;
  d->inner = 1;
  d->dtype = dtype;
  d->loss_dtype = dtype;
  d->grad_dtype = dtype;
  d->label_type = label_type;
  d->reduction = reduction;
  d->ignore_index = -100;
  d->label_smoothing = 0.0;
  d->z_loss = 0.0;
  d->softcap = 0.0;
  d->all_ignored_zero = 0;
  d->temperature = 1.0;
  d->token_weight_mean = XENT_TOKEN_WEIGHT_MEAN_WEIGHTS;
}

/* Splits shape[0..ndim) at the class axis: rows = the product of the other
   dims, inner = the product of those after it. */
static xent_status split_shape(const char* fn, int ndim, const int64_t* shape, int axis, int64_t* rows,
                               int64_t* classes, int64_t* inner_out) {
  if (ndim < 1) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: ndim is %d, must be >= 1", fn, ndim);
  if (!shape) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: shape is NULL", fn);
  if (axis < -ndim || axis >= ndim)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: axis %d is outside [-%d, %d)", fn, axis, ndim, ndim);
  if (axis < 0) axis += ndim;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || (i == axis && shape[i] < 1))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: shape[%d] is %lld, must be >= %d", fn, i, (long long)shape[i],
                       i == axis ? 1 : 0);
    if (i == axis) continue;
    int64_t* p = i < axis ? &outer : &inner;
    if (shape[i] > 0 && *p > INT64_MAX / shape[i])
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the shape's element count overflows 64 bits", fn);
    *p *= shape[i];
  }
  if (inner > 0 && outer > INT64_MAX / inner)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the shape's element count overflows 64 bits", fn);
  *rows = outer * inner;
  *classes = shape[axis];
  /* With no positions after the axis the stride does not matter; 1 keeps the
     contiguous kernel. */
  *inner_out = inner > 0 ? inner : 1;
  return XENT_OK;
}

xent_status xent_ce_desc_init_nd(xent_ce_desc* d, int ndim, const int64_t* shape, int axis, xent_dtype dtype,
                                 xent_label_type label_type, xent_reduction reduction) {
  xent_clear_error();
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_ce_desc_init_nd: desc is NULL");
  int64_t rows, classes, inner;
  const xent_status s = split_shape("xent_ce_desc_init_nd", ndim, shape, axis, &rows, &classes, &inner);
  if (s != XENT_OK) return s;
  xent_ce_desc_init(d, rows, classes, dtype, label_type, reduction);
  d->inner = inner;
  return XENT_OK;
}

const char* xent_backend_name(xent_backend_kind kind) {
  switch (kind) {
    case XENT_BACKEND_AUTO: return "auto";
    case XENT_BACKEND_CPU: return "cpu";
    case XENT_BACKEND_CUDA: return "cuda";
    case XENT_BACKEND_HIP: return "hip";
  }
  return "?";
}

xent_status xent_create(xent_handle** handle, xent_backend_kind kind) {
  return xent_create_on_device(handle, kind, -1);
}

/* What a new cpu handle runs (xent_cpu_emulate): its own code, or the
   rendering XENT_CPU_EMULATE names. */
static xent_status cpu_rendering(xent_backend_kind* out) {
  const char* v = getenv("XENT_CPU_EMULATE");
  *out = XENT_BACKEND_CPU;
  if (!v || !*v) return XENT_OK;
  if (strcmp(v, "cuda") == 0) *out = XENT_BACKEND_CUDA;
  else if (strcmp(v, "hip") == 0) *out = XENT_BACKEND_HIP;
  else return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create: XENT_CPU_EMULATE is '%.32s', not cuda or hip", v);
  return XENT_OK;
}

xent_status xent_create_on_device(xent_handle** handle, xent_backend_kind kind, int device) {
  xent_clear_error();
  if (!handle) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create: handle is NULL");
  *handle = NULL;
  if (kind < XENT_BACKEND_AUTO || kind > XENT_BACKEND_HIP)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create: kind %d is not a xent_backend_kind", (int)kind);
  if (device < -1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create_on_device: device %d (an ordinal, or -1)", device);
  xent_backend_kind rendering;
  if (cpu_rendering(&rendering) != XENT_OK) return XENT_ERROR_INVALID_ARGUMENT;
  xent_handle* h = calloc(1, sizeof *h);
  if (!h) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: out of memory");
  xent_status status = XENT_OK;
  h->emulated = rendering;
  if (kind == XENT_BACKEND_AUTO) {
    /* The first GPU backend that is there (linked in, or its plugin loads)
       and finds a device, else the cpu backend. */
    static xent_status (*const gpus[])(const xent_backend**) = {xent_cuda_backend, xent_hip_backend};
    h->backend = &xent_backend_cpu;
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; ++i) {
      const xent_backend* gpu = NULL;
      h->device = device; /* as asked, not as an earlier attempt left it */
      if (gpus[i](&gpu) == XENT_OK && gpu->open(h) == XENT_OK) {
        h->backend = gpu;
        break;
      }
    }
    if (h->backend == &xent_backend_cpu) status = h->backend->open(h);
    xent_clear_error();
  } else {
    h->backend = &xent_backend_cpu;
    if (kind == XENT_BACKEND_CUDA) status = xent_cuda_backend(&h->backend);
    if (kind == XENT_BACKEND_HIP) status = xent_hip_backend(&h->backend);
    h->device = device;
    if (status == XENT_OK) status = h->backend->open(h);
  }
  if (status == XENT_OK) status = h->backend->flag_alloc(h);
  if (status != XENT_OK) {
    free(h);
    return status;
  }
  *handle = h;
  return XENT_OK;
}

void xent_destroy(xent_handle* handle) {
  if (!handle) return;
  if (handle->backend->gemm_free) handle->backend->gemm_free(handle);
  handle->backend->flag_free(handle);
  free(handle);
}

/* The bad-label record, read and cleared after the device's work (stream
   XENT_WHOLE_DEVICE) or after one stream's. */
static xent_status check_record(const char* fn, xent_handle* h, void* stream) {
  xent_clear_error();
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  unsigned long long row = XENT_NO_BAD_ROW;
  const xent_status s = h->backend->flag_take(h, fn, stream, &row);
  if (s != XENT_OK) return s;
  if (row != XENT_NO_BAD_ROW)
    return xent_fail(XENT_ERROR_INVALID_LABEL,
                     "%s: row %llu has a label outside [0, classes) that is not ignore_index, or a per-row "
                     "temperature that is not finite and > 0 (the lowest such row since the last check; its loss "
                     "and gradient are NaN)", fn, row);
  return XENT_OK;
}

xent_status xent_check(xent_handle* h) { return check_record("xent_check", h, XENT_WHOLE_DEVICE); }

xent_status xent_check_stream(xent_handle* h, void* stream) {
  /* The sentinel is the backend interface's, never a caller's stream. */
  if (stream == XENT_WHOLE_DEVICE)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_check_stream: stream %p is not a stream", stream);
  return check_record("xent_check_stream", h, stream);
}

xent_backend_kind xent_handle_backend(const xent_handle* handle) {
  return handle ? handle->backend->kind : XENT_BACKEND_AUTO;
}

xent_status xent_check_byte_count(const char* fn, int64_t a, const char* a_name, int64_t b, const char* b_name) {
  if (a > 0 && b > INT64_MAX / 8 / a)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: %s * %s overflows a 64-bit byte count", fn, a_name, b_name);
  return XENT_OK;
}

/* The fields both families' descriptors share: the row layout and the
   dtype. */
xent_status xent_check_layout(const char* fn, int64_t rows, int64_t classes, int64_t inner, xent_dtype dtype) {
  if (rows < 0) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->rows is %lld, must be >= 0", fn, (long long)rows);
  if (classes < 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->classes is %lld, must be >= 1", fn, (long long)classes);
  xent_status s = xent_check_byte_count(fn, rows, "desc->rows", classes, "desc->classes");
  if (s != XENT_OK) return s;
  if (dtype < XENT_F32 || dtype > XENT_F64)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->dtype %d is not a xent_dtype", fn, (int)dtype);
  if (inner < 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->inner is %lld, must be >= 1 (1 = class axis last)", fn,
                     (long long)inner);
  if (rows % inner != 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->rows (%lld) is not a multiple of desc->inner (%lld): rows = outer * inner", fn,
                     (long long)rows, (long long)inner);
  return XENT_OK;
}

xent_status xent_check_ce_desc(const char* fn, const xent_handle* h, const xent_ce_desc* d) {
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
  xent_status s = xent_check_layout(fn, d->rows, d->classes, d->inner, d->dtype);
  if (s != XENT_OK) return s;
  if (d->label_type != XENT_I32 && d->label_type != XENT_I64 && d->label_type != XENT_PROB)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->label_type %d is not a xent_label_type", fn, (int)d->label_type);
  const int half = d->dtype == XENT_F16 || d->dtype == XENT_BF16;
  if (d->loss_dtype != d->dtype && !(half && d->loss_dtype == XENT_F32))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->loss_dtype %d must be desc->dtype%s", fn, (int)d->loss_dtype,
                     half ? " or XENT_F32" : " (f32 outputs are for f16/bf16 logits)");
  if (d->grad_dtype != d->dtype && !(half && d->grad_dtype == XENT_F32))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->grad_dtype %d must be desc->dtype%s", fn, (int)d->grad_dtype,
                     half ? " or XENT_F32" : " (f32 outputs are for f16/bf16 logits)");
  if (d->reduction < XENT_REDUCTION_NONE || d->reduction > XENT_REDUCTION_MEAN)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->reduction %d is not a xent_reduction", fn, (int)d->reduction);
  if (!(d->label_smoothing >= 0.0 && d->label_smoothing <= 1.0))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->label_smoothing is %g, must be in [0, 1]", fn, d->label_smoothing);
  if (!(d->z_loss >= 0.0 && isfinite(d->z_loss)))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->z_loss is %g, must be finite and >= 0", fn, d->z_loss);
  if (d->invalid_labels != XENT_INVALID_LABELS_REPORT && d->invalid_labels != XENT_INVALID_LABELS_IGNORE)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->invalid_labels %d is not a xent_invalid_labels", fn,
                     (int)d->invalid_labels);
  if (!(d->softcap >= 0.0 && isfinite(d->softcap)))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->softcap is %g, must be finite and >= 0 (0 = off)", fn, d->softcap);
  /* The kernels of f32/f16/bf16 logits compute in f32: a scale that rounds
     to 0 or infinity there would silently turn the option off, or make
     every loss NaN. */
  if (d->dtype != XENT_F64) {
    if (d->softcap != 0.0 && !(d->softcap >= FLT_MIN && d->softcap <= FLT_MAX))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                       "%s: desc->softcap is %g, outside f32's normal range [%g, %g] in which the kernels compute (0 = off)",
                       fn, d->softcap, (double)FLT_MIN, (double)FLT_MAX);
    if (d->z_loss != 0.0 && !(d->z_loss >= FLT_MIN && d->z_loss <= FLT_MAX))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                       "%s: desc->z_loss is %g, outside f32's normal range [%g, %g] in which the kernels compute (0 = off)",
                       fn, d->z_loss, (double)FLT_MIN, (double)FLT_MAX);
  }
  /* The kernels multiply by 1 / tau in the accumulation type: it must be a
     normal number there (f32 but for f64 logits). 0 is not "off" here, as
     it is for the soft cap: a temperature of 0 has no loss. */
  const double tau_min = d->dtype == XENT_F64 ? 1.0 / DBL_MAX : 1.0 / FLT_MAX;
  const double tau_max = d->dtype == XENT_F64 ? 1.0 / DBL_MIN : 1.0 / FLT_MIN;
  if (!(d->temperature >= tau_min && d->temperature <= tau_max))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->temperature is %g, must be > 0 and finite, within [%g, %g] for these logits (1 = off; "
                     "xent_ce_desc_init sets it)",
                     fn, d->temperature, tau_min, tau_max);
  if (d->token_weight_mean != XENT_TOKEN_WEIGHT_MEAN_WEIGHTS && d->token_weight_mean != XENT_TOKEN_WEIGHT_MEAN_COUNT)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->token_weight_mean %d is not a xent_token_weight_mean", fn,
                     (int)d->token_weight_mean);
  s = d->vocab_shard ? xent_vocab_check(fn, d) : XENT_OK;
  if (s != XENT_OK) return s;
  /* The workspace holds a few accumulation-type values per row and rank,
     or per row and class slice of a strided call (a record is at most 9
     eight-byte values: xent_shard_record_bytes; the slices' lse one more);
     its size must not wrap around. */
  const uint64_t ranks = d->vocab_shard && d->vocab_shard->ranks > 0 ? (uint64_t)d->vocab_shard->ranks : 0;
  const uint64_t per_row = 2 + 9 * ranks + (d->inner > 1 ? 9 * XENT_MAX_COLUMN_SLICES + 1 : 0);
  if ((uint64_t)d->rows > (SIZE_MAX / 8 - 65536) / (per_row + 2))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->rows is %lld: the workspace's byte count overflows", fn,
                     (long long)d->rows);
  return XENT_OK;
}

xent_status xent_ce_workspace_size(const xent_handle* h, const xent_ce_desc* d, xent_op op, size_t* bytes) {
  xent_clear_error();
  xent_status s = xent_check_ce_desc("xent_ce_workspace_size", h, d);
  if (s != XENT_OK) return s;
  if (op < XENT_OP_FORWARD || op > XENT_OP_FORWARD_BACKWARD)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_ce_workspace_size: op %d is not a xent_op", (int)op);
  if (!bytes) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_ce_workspace_size: bytes is NULL");
  *bytes = xent_ce_op_workspace(h, d, op);
  return XENT_OK;
}

xent_status xent_kernel_count(const xent_handle* handle, size_t* count) {
  xent_clear_error();
  if (!handle) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_kernel_count: handle is NULL");
  if (!count) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_kernel_count: count is NULL");
  xent_table table;
  handle->backend->table(handle, &table);
  *count = table.count;
  return XENT_OK;
}

xent_status xent_kernel_key(const xent_handle* handle, size_t index, const char** key) {
  xent_clear_error();
  if (!handle) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_kernel_key: handle is NULL");
  if (!key) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_kernel_key: key is NULL");
  xent_table table;
  handle->backend->table(handle, &table);
  if (index >= table.count)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_kernel_key: index is %zu, the %s table has %zu kernels", index,
                     table.target, table.count);
  *key = table.entries[index].key;
  return XENT_OK;
}

/* Every buffer of the call is aligned to its element, and no buffer it
   writes overlaps another, except grad == logits, in place, for the
   forward_backward op (checks.h). */
static xent_status check_buffers(const char* fn, const xent_ce_desc* d, const xent_ce_call* c, size_t workspace_bytes) {
  const xent_ce_tensors* t = &c->t;
  const int forward = c->op != XENT_OP_BACKWARD, backward = c->op != XENT_OP_FORWARD;
  const int soft = d->label_type == XENT_PROB;
  const size_t rows = (size_t)d->rows, elems = rows * (size_t)d->classes;
  const size_t eb = xent_dtype_bytes(d->dtype), ab = xent_acc_bytes(d->dtype);
  const size_t lb = xent_dtype_bytes(d->loss_dtype), gb = xent_dtype_bytes(d->grad_dtype);
  const size_t label_b = soft ? eb : d->label_type == XENT_I32 ? 4 : 8;
  const size_t n_loss = d->reduction == XENT_REDUCTION_NONE ? rows : 1;
  const size_t weights_n = (size_t)(d->vocab_shard ? d->vocab_shard->global_classes : d->classes);
  const xent_buffer all[] = {
      {"logits", t->logits, elems * eb, eb, 0},
      {"labels", t->labels, (soft ? elems : rows) * label_b, label_b, 0},
      {"weights", t->weights, weights_n * ab, ab, 0},
      {"lse_in", c->op == XENT_OP_BACKWARD ? t->lse_in : NULL, rows * ab, ab, 0},
      {"dloss", backward ? t->dloss : NULL, n_loss * lb, lb, 0},
      {"grad_bias", backward ? t->grad_bias : NULL, elems * gb, gb, 0},
      {"loss", forward ? t->loss : NULL, n_loss * lb, lb, 1},
      {"lse", forward ? t->lse : NULL, rows * ab, ab, 1},
      {"log_prob", forward ? t->log_prob : NULL, elems * eb, eb, 1},
      {"softmax", forward ? t->softmax : NULL, elems * eb, eb, 1},
      {"grad", backward ? t->grad : NULL, elems * gb, gb, 1},
      {"grad_labels", backward && soft ? t->grad_labels : NULL, elems * eb, eb, 1},
      {"entropy", forward ? t->entropy : NULL, rows * ab, ab, 1},
      {"label_logprob", forward ? t->label_logprob : NULL, rows * ab, ab, 1},
      {"argmax", forward ? t->argmax : NULL, rows * 8, 8, 1},
      {"dentropy", backward ? t->dentropy : NULL, rows * ab, ab, 0},
      {"temperature", t->temperature, rows * ab, ab, 0},
      {"token_weight", t->token_weight, rows * ab, ab, 0},
      {"workspace", c->workspace, workspace_bytes, 8, 1},
  };
  const int in_place = c->op == XENT_OP_FORWARD_BACKWARD && t->grad && t->grad == t->logits;
  const xent_in_place logits_grad = {"logits", "grad", in_place,
                                     " (only grad == logits, in place, with the forward_backward op)"};
  return xent_check_buffers(fn, all, sizeof all / sizeof all[0], &logits_grad);
}

/* One cross-entropy call, gathered, reported as fn: every check, then the
   op. */
static xent_status ce_run(const char* fn, xent_handle* h, const xent_ce_desc* d, const xent_ce_call* c) {
  xent_status s = xent_check_ce_desc(fn, h, d);
  if (s != XENT_OK) return s;
  const xent_ce_tensors* t = &c->t;
  const int has_rows = d->rows > 0;
  const int forward = c->op != XENT_OP_BACKWARD, backward = c->op != XENT_OP_FORWARD;
  const int soft = d->label_type == XENT_PROB;
  if (has_rows && !t->logits) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: logits is NULL", fn);
  if (has_rows && !t->labels) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: labels is NULL", fn);
  if (forward && !t->loss && (has_rows || d->reduction != XENT_REDUCTION_NONE))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: loss is NULL", fn);
  /* A vocabulary-parallel backward with soft labels gathers the rows'
     statistics again instead (it needs more than the lse). */
  if (c->op == XENT_OP_BACKWARD && has_rows && !t->lse_in && !(d->vocab_shard && soft))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: lse is NULL (pass the lse saved by the forward op)", fn);
  if (d->vocab_shard && !c->shard_records && !d->vocab_shard->all_gather && !d->vocab_shard->gathered)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->vocab_shard->all_gather is NULL (xent_vocab_shard_nccl fills it in) and so is "
                     "gathered (the records of xent_ce_shard_records, gathered)", fn);
  if (d->vocab_shard && (t->log_prob || t->softmax))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: log_prob and softmax are not available with desc->vocab_shard (they would need the "
                     "global lse before a third pass over the logits)", fn);
  if (soft && forward && (t->label_logprob || t->argmax))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: %s is set, but it is for hard labels (desc->label_type is XENT_PROB; entropy and "
                     "temperature serve soft labels)",
                     fn, t->label_logprob ? "label_logprob" : "argmax");
  if (t->grad_labels && !soft && backward)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: grad_labels is set, but hard labels (desc->label_type %s) have no gradient",
                     fn, d->label_type == XENT_I32 ? "XENT_I32" : "XENT_I64");
  if (t->temperature && d->temperature != 1.0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: temperature (per row) is set and desc->temperature is %g: pass one or the other (1 = off)", fn,
                     d->temperature);
  if (backward && has_rows && !t->grad) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: grad is NULL", fn);
  if (c->op == XENT_OP_FORWARD_BACKWARD && has_rows && t->grad == t->logits && d->grad_dtype != d->dtype)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: grad == logits (in place) needs desc->grad_dtype == desc->dtype", fn);
  const size_t need = xent_ce_op_workspace(h, d, c->op);
  s = check_buffers(fn, d, c, need);
  if (s != XENT_OK) return s;
  if (c->workspace_bytes < need)
    return xent_fail(XENT_ERROR_WORKSPACE_TOO_SMALL, "%s: workspace_bytes is %zu, this call needs %zu (xent_ce_workspace_size)",
                     fn, c->workspace_bytes, need);
  if (need > 0 && !c->workspace) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: workspace is NULL", fn);
  return xent_ce_op(h, d, c);
}

xent_status xent_ce_run(xent_handle* h, const xent_ce_desc* d, xent_op op, const xent_ce_tensors* tensors,
                        void* workspace, size_t workspace_bytes, void* stream) {
  xent_clear_error();
  if (op < XENT_OP_FORWARD || op > XENT_OP_FORWARD_BACKWARD)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_ce_run: op %d is not a xent_op", (int)op);
  if (!tensors) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_ce_run: tensors is NULL");
  const xent_ce_call c = {.op = op, .t = *tensors, .workspace = workspace, .workspace_bytes = workspace_bytes,
                          .stream = stream};
  return ce_run("xent_ce_run", h, d, &c);
}

/* The records' size of a vocabulary-parallel call, after its checks. */
static xent_status records_size(const char* fn, const xent_handle* h, const xent_ce_desc* d, xent_op op,
                                const xent_ce_tensors* t, size_t* bytes) {
  if (!bytes) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  if (!t) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors is NULL", fn);
  if (op < XENT_OP_FORWARD || op > XENT_OP_FORWARD_BACKWARD)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: op %d is not a xent_op", fn, (int)op);
  xent_status s = xent_check_ce_desc(fn, h, d);
  if (s != XENT_OK) return s;
  if (!d->vocab_shard)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->vocab_shard is NULL: records are a vocabulary-parallel "
                     "call's", fn);
  const xent_ce_call c = {.op = op, .t = *t};
  *bytes = xent_vocab_records_bytes(d, op, xent_ce_uses(&c));
  return XENT_OK;
}

xent_status xent_ce_shard_records_size(const xent_handle* h, const xent_ce_desc* d, xent_op op,
                                       const xent_ce_tensors* t, size_t* bytes) {
  xent_clear_error();
  return records_size("xent_ce_shard_records_size", h, d, op, t, bytes);
}

xent_status xent_ce_shard_records(xent_handle* h, const xent_ce_desc* d, xent_op op, const xent_ce_tensors* t,
                                  void* records, void* workspace, size_t workspace_bytes, void* stream) {
  xent_clear_error();
  const char* fn = "xent_ce_shard_records";
  size_t bytes = 0;
  xent_status s = records_size(fn, h, d, op, t, &bytes);
  if (s != XENT_OK) return s;
  if (bytes == 0) return XENT_OK;
  if (!records) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: records is NULL (%zu bytes expected)", fn, bytes);
  if ((uintptr_t)records % 8)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: records is not 8-byte aligned", fn);
  const xent_ce_call c = {.op = op, .t = *t, .workspace = workspace, .workspace_bytes = workspace_bytes,
                          .stream = stream, .shard_records = records};
  return ce_run(fn, h, d, &c);
}

xent_status xent_ce_forward(xent_handle* h, const xent_ce_desc* d, const void* logits, const void* labels,
                            const void* weights, void* loss, void* lse, void* workspace, size_t workspace_bytes,
                            void* stream) {
  xent_clear_error();
  const xent_ce_call c = {.op = XENT_OP_FORWARD,
                          .t = {.logits = logits, .labels = labels, .weights = weights, .loss = loss, .lse = lse},
                          .workspace = workspace, .workspace_bytes = workspace_bytes, .stream = stream};
  return ce_run("xent_ce_forward", h, d, &c);
}

xent_status xent_ce_backward(xent_handle* h, const xent_ce_desc* d, const void* logits, const void* labels,
                             const void* weights, const void* lse, const void* dloss, void* grad, void* workspace,
                             size_t workspace_bytes, void* stream) {
  xent_clear_error();
  const xent_ce_call c = {
      .op = XENT_OP_BACKWARD,
      .t = {.logits = logits, .labels = labels, .weights = weights, .lse_in = lse, .dloss = dloss, .grad = grad},
      .workspace = workspace, .workspace_bytes = workspace_bytes, .stream = stream};
  return ce_run("xent_ce_backward", h, d, &c);
}

xent_status xent_ce_forward_backward(xent_handle* h, const xent_ce_desc* d, const void* logits, const void* labels,
                                     const void* weights, const void* dloss, void* loss, void* lse, void* grad,
                                     void* workspace, size_t workspace_bytes, void* stream) {
  xent_clear_error();
  const xent_ce_call c = {.op = XENT_OP_FORWARD_BACKWARD,
                          .t = {.logits = logits, .labels = labels, .weights = weights, .dloss = dloss, .loss = loss,
                                .lse = lse, .grad = grad},
                          .workspace = workspace, .workspace_bytes = workspace_bytes, .stream = stream};
  return ce_run("xent_ce_forward_backward", h, d, &c);
}

xent_status xent_ce_scale_grad(xent_handle* h, const xent_ce_desc* d, const void* dloss, void* grad, void* stream) {
  xent_clear_error();
  const char* fn = "xent_ce_scale_grad";
  xent_status s = xent_check_ce_desc(fn, h, d);
  if (s != XENT_OK) return s;
  if (!dloss || d->rows == 0) return XENT_OK;
  if (!grad) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: grad is NULL", fn);
  const size_t lb = xent_dtype_bytes(d->loss_dtype), gb = xent_dtype_bytes(d->grad_dtype);
  const xent_buffer all[] = {
      {"dloss", dloss, (d->reduction == XENT_REDUCTION_NONE ? (size_t)d->rows : 1) * lb, lb, 0},
      {"grad", grad, (size_t)d->rows * (size_t)d->classes * gb, gb, 1},
  };
  s = xent_check_buffers(fn, all, 2, NULL);
  return s != XENT_OK ? s : xent_ce_scale_op(h, d, dloss, grad, stream);
}

/* The softmax family. */

xent_status xent_softmax_desc_init_nd(xent_softmax_desc* d, int ndim, const int64_t* shape, int axis, xent_dtype dtype,
                                      xent_softmax_kind kind) {
  xent_clear_error();
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_softmax_desc_init_nd: desc is NULL");
  memset(d, 0, sizeof *d);
  const xent_status s = split_shape("xent_softmax_desc_init_nd", ndim, shape, axis, &d->rows, &d->classes, &d->inner);
  d->dtype = dtype;
  d->kind = kind;
  return s;
}

static xent_status softmax_run(const char* fn, xent_handle* h, const xent_softmax_desc* d, xent_op op,
                               const xent_softmax_args* args, const void* in2) {
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
  const xent_status s = xent_check_layout(fn, d->rows, d->classes, d->inner, d->dtype);
  if (s != XENT_OK) return s;
  if (d->kind != XENT_SOFTMAX && d->kind != XENT_LOG_SOFTMAX)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->kind %d is not a xent_softmax_kind", fn, (int)d->kind);
  const char* in_name = op == XENT_OP_FORWARD ? "x" : "y";
  const void* in = op == XENT_OP_FORWARD ? args->x : args->y;
  const size_t bytes = (size_t)(d->rows * d->classes) * xent_dtype_bytes(d->dtype);
  if (d->rows > 0) {
    const size_t eb = xent_dtype_bytes(d->dtype);
    xent_status a = xent_check_aligned(fn, in_name, in, eb);
    if (a == XENT_OK) a = xent_check_aligned(fn, "dy", in2, eb);
    if (a == XENT_OK) a = xent_check_aligned(fn, op == XENT_OP_FORWARD ? "y" : "dx", args->out, eb);
    if (a != XENT_OK) return a;
    if (!in) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, in_name);
    if (op == XENT_OP_BACKWARD && !in2) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: dy is NULL", fn);
    if (!args->out) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, op == XENT_OP_FORWARD ? "y" : "dx");
    /* The output may be the input it replaces (x for y, dy for dx), never a
       partial overlap, and dx never overlaps y. */
    if (args->out != (op == XENT_OP_FORWARD ? in : in2) &&
        (xent_overlaps(args->out, bytes, in, bytes) || (in2 && xent_overlaps(args->out, bytes, in2, bytes))))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the output overlaps an input (only y == x, or dx == dy, in place)", fn);
    if (op == XENT_OP_BACKWARD && args->out == in2 && xent_overlaps(args->out, bytes, in, bytes))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: dx overlaps y", fn);
  }
  xent_table table;
  h->backend->table(h, &table);
  char key[96];
  const xent_dispatch_entry* e = xent_softmax_lookup(&table, d, op, key, sizeof key);
  if (!e) return XENT_ERROR_NOT_GENERATED;
  return xent_softmax_launch(h, d, op, e, args);
}

xent_status xent_softmax_forward(xent_handle* h, const xent_softmax_desc* d, const void* x, void* y, void* stream) {
  xent_clear_error();
  xent_softmax_args args = {.x = x, .out = y, .stream = stream};
  if (d) args.rows = d->rows, args.classes = d->classes, args.inner = d->inner;
  if (h) args.row_shape.group = h->row_group, args.row_shape.threads = h->row_threads;
  return softmax_run("xent_softmax_forward", h, d, XENT_OP_FORWARD, &args, NULL);
}

xent_status xent_softmax_backward(xent_handle* h, const xent_softmax_desc* d, const void* y, const void* dy, void* dx,
                                  void* stream) {
  xent_clear_error();
  xent_softmax_args args = {.y = y, .dy = dy, .out = dx, .stream = stream};
  if (d) args.rows = d->rows, args.classes = d->classes, args.inner = d->inner;
  if (h) args.row_shape.group = h->row_group, args.row_shape.threads = h->row_threads;
  return softmax_run("xent_softmax_backward", h, d, XENT_OP_BACKWARD, &args, dy);
}
