/* The fused linear cross entropy (xent.h, xent_linear_ce_run): the chunk
   loop. Each chunk of rows gets its logits from a GEMM, the generated fused
   forward+backward kernel over them in place (through xent_ce_run, so every
   option means what it means there), and the two gradient GEMMs. Only the
   cpu backend runs it so far: its GEMMs are OpenBLAS's (blas_cpu.c) in the
   accumulation type, with f16/bf16 operands converted a block at a time. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "blas_cpu.h"
#include "dispatch.h"
#include "internal.h"
#include "numeric.h"

/* Rows of weight converted to f32 at a time (f16/bf16). */
enum { WEIGHT_BLOCK = 4096 };

void xent_linear_ce_desc_init(xent_linear_ce_desc* d, int64_t rows, int64_t hidden, int64_t classes,
                              xent_dtype dtype, xent_label_type label_type, xent_reduction reduction) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  xent_ce_desc_init(&d->ce, rows, classes, dtype, label_type, reduction);
  d->hidden = hidden;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int is_half(xent_dtype t) { return t == XENT_F16 || t == XENT_BF16; }

/* The chunk's cross-entropy call: n rows; a sum or a mean becomes a sum in
   the accumulation type (the chunks' sums are added, then divided). */
static xent_ce_desc chunk_desc(const xent_linear_ce_desc* d, int64_t n) {
  xent_ce_desc c = d->ce;
  c.rows = n;
  if (c.reduction != XENT_REDUCTION_NONE) {
    c.reduction = XENT_REDUCTION_SUM;
    c.loss_dtype = xent_acc_dtype(c.dtype);
  }
  return c;
}

/* The steps' arguments every step shares. */
static xent_lce_args step_args(const xent_linear_ce_desc* d, int64_t chunk_rows, void* steps_ws, void* stream) {
  const xent_ce_desc* c = &d->ce;
  xent_lce_args a;
  memset(&a, 0, sizeof a);
  a.rows = c->rows;
  a.classes = c->classes;
  a.global_classes = c->vocab_shard ? c->vocab_shard->global_classes : c->classes;
  a.chunk_rows = chunk_rows;
  a.ignore_index = c->ignore_index;
  a.all_ignored_zero = c->all_ignored_zero;
  a.loss_f32 = c->loss_dtype != c->dtype;
  a.grad_f32 = c->grad_dtype != c->dtype;
  a.workspace = steps_ws;
  a.stream = stream;
  return a;
}

/* Rows per chunk: the caller's, or the variant's tune data (its PLAN step,
   host code in every rendering: it reads the vocabulary's size only). */
static xent_status chunk_rows(const xent_handle* h, const xent_linear_ce_desc* d, int64_t* rows) {
  const int64_t n = d->ce.rows > 0 ? d->ce.rows : 1;
  if (d->chunk_rows > 0) {
    *rows = min64(d->chunk_rows, n);
    return XENT_OK;
  }
  const xent_dispatch_entry* e = xent_lce_find(h, &d->ce, 0);
  if (!e) return XENT_ERROR_NOT_GENERATED;
  xent_lce_args a = step_args(d, 0, NULL, NULL);
  int64_t planned = 0;
  a.step = XENT_LCE_PLAN;
  a.chunk_rows_out = &planned;
  if (e->launch(&a) != 0 || planned < 1)
    return xent_fail(XENT_ERROR_DEVICE, "xent_linear_ce: %s planned no chunk", e->key);
  *rows = min64(planned, n);
  return XENT_OK;
}

/* The workspace's regions, each 64-byte aligned, in this order. */
typedef struct layout {
  int64_t chunk;   /* rows per chunk */
  int64_t chunks;
  size_t logits;   /* chunk * V, dtype: the CE kernel's input and (in place) its gradient */
  size_t wide;     /* chunk * V, accumulation type: the GEMM's output, then the gradient (f16/bf16, or a
                      grad_dtype other than dtype) */
  size_t hid;      /* chunk * H, accumulation type: the chunk of hidden (f16/bf16) */
  size_t ghid;     /* chunk * H, accumulation type: its gradient (f16/bf16 gradients) */
  size_t wblock;   /* WEIGHT_BLOCK * H, accumulation type: weight rows (f16/bf16) */
  size_t gwblock;  /* WEIGHT_BLOCK * H, accumulation type: their gradient (f16/bf16 gradients) */
  size_t steps;    /* the steps' workspace (xent_lce_workspace_bytes) */
  size_t ce;       /* the cross-entropy call's workspace */
  size_t total;
} layout;

static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

static xent_status plan(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d, layout* L) {
  int64_t n = 0;
  xent_status s = chunk_rows(h, d, &n);
  if (s != XENT_OK) return s;
  const int64_t v = d->ce.classes, hd = d->hidden, vb = min64(v, WEIGHT_BLOCK);
  const size_t eb = xent_dtype_bytes(d->ce.dtype), ab = xent_acc_bytes(d->ce.dtype);
  const int half = is_half(d->ce.dtype), half_grad = is_half(d->ce.grad_dtype);
  const int wide = half || d->ce.grad_dtype != d->ce.dtype;
  const int64_t chunks = d->ce.rows > 0 ? (d->ce.rows + n - 1) / n : 0;
  if ((uint64_t)n * (uint64_t)v > (SIZE_MAX / 16) / 8 || (uint64_t)(n + vb) * (uint64_t)hd > (SIZE_MAX / 16) / 8)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the workspace's byte count overflows", fn);
  xent_ce_desc c = chunk_desc(d, n);
  size_t ce_bytes = 0;
  s = xent_ce_workspace_size(h, &c, XENT_OP_FORWARD_BACKWARD, &ce_bytes);
  if (s != XENT_OK) return s;
  size_t at = 0;
  L->chunk = n;
  L->chunks = chunks;
  L->logits = at, at += round64((size_t)n * v * eb);
  L->wide = at, at += wide ? round64((size_t)n * v * ab) : 0;
  L->hid = at, at += half ? round64((size_t)n * hd * ab) : 0;
  L->ghid = at, at += half_grad ? round64((size_t)n * hd * ab) : 0;
  L->wblock = at, at += half ? round64((size_t)vb * hd * ab) : 0;
  L->gwblock = at, at += half_grad ? round64((size_t)vb * hd * ab) : 0;
  L->steps = at, at += round64(xent_lce_workspace_bytes(chunks, v, ab));
  L->ce = at, at += round64(ce_bytes);
  L->total = at;
  return XENT_OK;
}

static xent_status check(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d) {
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
  if (d->hidden < 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->hidden is %lld, must be >= 1", fn, (long long)d->hidden);
  if (d->chunk_rows < 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->chunk_rows is %lld, must be >= 0 (0 = the default)", fn,
                     (long long)d->chunk_rows);
  if (d->accumulate != 0 && d->accumulate != 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->accumulate is %d, must be 0 or 1", fn, d->accumulate);
  if (d->ce.inner != 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->ce.inner is %lld, must be 1 (logits [rows, classes])", fn,
                     (long long)d->ce.inner);
  return XENT_OK;
}

xent_status xent_linear_ce_workspace_size(const xent_handle* h, const xent_linear_ce_desc* d, size_t* bytes) {
  xent_clear_error();
  const char* fn = "xent_linear_ce_workspace_size";
  if (!bytes) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  xent_status s = check(fn, h, d);
  if (s != XENT_OK) return s;
  layout L;
  s = plan(fn, h, d, &L);
  if (s != XENT_OK) return s;
  *bytes = L.total;
  return XENT_OK;
}

/* dst[i] = src[i] in the accumulation type, for count elements. */
static void widen(xent_dtype t, const void* src, void* dst, int64_t count) {
  float* out = dst;
  const uint16_t* in = src;
  if (t == XENT_BF16)
    for (int64_t i = 0; i < count; ++i) out[i] = xent_bf16_to_float(in[i]);
  else
    for (int64_t i = 0; i < count; ++i) out[i] = xent_f16_to_float(in[i]);
}

/* dst[i] = src[i] (accumulation type) rounded to t, plus dst[i] when add. */
static void narrow(xent_dtype t, const void* src, void* dst, int64_t count, int add) {
  const float* in = src;
  uint16_t* out = dst;
  for (int64_t i = 0; i < count; ++i) {
    float x = in[i];
    if (add) x += t == XENT_BF16 ? xent_bf16_to_float(out[i]) : xent_f16_to_float(out[i]);
    out[i] = t == XENT_BF16 ? xent_float_to_bf16(x) : xent_float_to_f16(x);
  }
}

xent_status xent_linear_ce_run(xent_handle* h, const xent_linear_ce_desc* d, const xent_linear_ce_tensors* t,
                               void* workspace, size_t workspace_bytes, void* stream) {
  xent_clear_error();
  const char* fn = "xent_linear_ce_run";
  xent_status s = check(fn, h, d);
  if (s != XENT_OK) return s;
  if (!t) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors is NULL", fn);
  if (h->kind != XENT_BACKEND_CPU)
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                     "%s: the fused linear cross entropy runs on the cpu backend only so far, not on %s", fn,
                     xent_backend_name(h->kind));
  if (!t->hidden) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->hidden is NULL", fn);
  if (!t->weight) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->weight is NULL", fn);
  if (!t->labels) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->labels is NULL", fn);
  if (!t->loss) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->loss is NULL", fn);
  if (t->grad_bias && !t->bias)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->grad_bias is set but tensors->bias is NULL", fn);
  layout L;
  s = plan(fn, h, d, &L);
  if (s != XENT_OK) return s;
  if (L.total > 0 && !workspace) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: workspace is NULL", fn);
  if (workspace_bytes < L.total)
    return xent_fail(XENT_ERROR_WORKSPACE_TOO_SMALL, "%s: workspace_bytes is %zu, %zu needed", fn, workspace_bytes,
                     L.total);
  if (((uintptr_t)workspace & 63) != 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: workspace must be 64-byte aligned", fn);

  const xent_ce_desc* c = &d->ce;
  const xent_dtype dt = c->dtype, gt = c->grad_dtype, acc = xent_acc_dtype(dt);
  const int64_t N = c->rows, V = c->classes, H = d->hidden, chunk = L.chunk, chunks = L.chunks;
  const size_t eb = xent_dtype_bytes(dt), ab = xent_acc_bytes(dt), gb = xent_dtype_bytes(gt);
  const size_t lb = c->label_type == XENT_I32 ? 4 : c->label_type == XENT_I64 ? 8 : (size_t)V * eb;
  const int half = is_half(dt), half_grad = is_half(gt), in_place = gt == dt;
  char* ws = workspace;
  void* logits = ws + L.logits;
  /* The gradient in the accumulation type: the GEMMs' operand. */
  void* grad = half || !in_place ? (void*)(ws + L.wide) : logits;
  char* steps_ws = ws + L.steps;
  const xent_dispatch_entry* steps = xent_lce_find(h, c, t->weights != NULL);
  if (!steps) return XENT_ERROR_NOT_GENERATED;

  /* BEGIN: the mean's divisor and the chunks' dloss, on the device. */
  xent_lce_args sa = step_args(d, chunk, steps_ws, stream);
  sa.step = XENT_LCE_BEGIN;
  sa.labels = t->labels;
  sa.weights = t->weights;
  sa.dloss = c->reduction != XENT_REDUCTION_NONE ? t->dloss : NULL;
  s = xent_backend_launch(h, steps, &sa);
  if (s != XENT_OK) return s;

  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t r0 = k * chunk, n = min64(chunk, N - r0);
    const char* hid = (const char*)t->hidden + (size_t)r0 * H * eb;
    const void* hid_acc = hid;
    if (half) {
      widen(dt, hid, ws + L.hid, n * H);
      hid_acc = ws + L.hid;
    }
    /* The chunk's logits: hidden @ weight^T (+ bias), in the accumulation
       type, then in dtype for the kernel. */
    void* out = half ? (void*)(ws + L.wide) : logits;
    for (int64_t v0 = 0; v0 < V; v0 += WEIGHT_BLOCK) {
      const int64_t vb = min64(WEIGHT_BLOCK, V - v0);
      const void* w = (const char*)t->weight + (size_t)v0 * H * eb;
      if (half) {
        widen(dt, w, ws + L.wblock, vb * H);
        w = ws + L.wblock;
      }
      s = xent_cpu_gemm(fn, acc, 0, 1, n, vb, H, 1.0, hid_acc, H, w, H, 0.0, (char*)out + (size_t)v0 * ab, V);
      if (s != XENT_OK) return s;
    }
    if (t->bias) {
      xent_lce_args ba = step_args(d, chunk, steps_ws, stream);
      ba.step = XENT_LCE_BIAS;
      ba.chunk = k;
      ba.bias = t->bias;
      ba.acc_logits = out;
      s = xent_backend_launch(h, steps, &ba);
      if (s != XENT_OK) return s;
    }
    if (half) narrow(dt, out, logits, n * V, 0);

    /* The fused kernel: loss (or the chunk's sum), lse, and the gradient;
       a bad label's row goes to the chunk's word, counted from its first. */
    xent_ce_desc cd = chunk_desc(d, n);
    xent_ce_call call;
    memset(&call, 0, sizeof call);
    call.op = XENT_OP_FORWARD_BACKWARD;
    call.t.logits = logits;
    call.t.labels = (const char*)t->labels + (size_t)r0 * lb;
    call.t.weights = t->weights;
    call.t.lse = t->lse ? (char*)t->lse + (size_t)r0 * ab : NULL;
    if (c->reduction == XENT_REDUCTION_NONE) {
      call.t.loss = (char*)t->loss + (size_t)r0 * xent_dtype_bytes(c->loss_dtype);
      call.t.dloss = t->dloss ? (const char*)t->dloss + (size_t)r0 * xent_dtype_bytes(c->loss_dtype) : NULL;
    } else {
      call.t.loss = steps_ws + xent_lce_sum_offset(chunks, k, ab);
      call.t.dloss = steps_ws + xent_lce_dloss_offset(chunks, ab);
    }
    call.t.grad = in_place ? logits : grad;
    call.workspace = ws + L.ce;
    call.workspace_bytes = workspace_bytes - L.ce;
    call.stream = stream;
    call.bad_label_row = (unsigned long long*)(steps_ws + xent_lce_bad_offset(k));
    s = xent_ce_run_call(fn, h, &cd, &call);
    if (s != XENT_OK) return s;
    if (half && in_place) widen(dt, logits, grad, n * V);

    /* grad_hidden = grad @ weight; grad_weight (+)= grad^T @ hidden;
       grad_bias (+)= the column sums of grad. */
    void* gh = !t->grad_hidden ? NULL : half_grad ? (void*)(ws + L.ghid) : (char*)t->grad_hidden + (size_t)r0 * H * gb;
    const int overwrite = k == 0 && !d->accumulate;
    for (int64_t v0 = 0; v0 < V && (t->grad_hidden || t->grad_weight); v0 += WEIGHT_BLOCK) {
      const int64_t vb = min64(WEIGHT_BLOCK, V - v0);
      const void* g = (const char*)grad + (size_t)v0 * ab;
      if (t->grad_hidden) {
        const void* w = (const char*)t->weight + (size_t)v0 * H * eb;
        if (half) {
          widen(dt, w, ws + L.wblock, vb * H);
          w = ws + L.wblock;
        }
        s = xent_cpu_gemm(fn, acc, 0, 0, n, H, vb, 1.0, g, V, w, H, v0 > 0 ? 1.0 : 0.0, gh, H);
        if (s != XENT_OK) return s;
      }
      if (t->grad_weight) {
        char* gw = (char*)t->grad_weight + (size_t)v0 * H * gb;
        if (half_grad) {
          s = xent_cpu_gemm(fn, acc, 1, 0, vb, H, n, 1.0, g, V, hid_acc, H, 0.0, ws + L.gwblock, H);
          if (s == XENT_OK) narrow(gt, ws + L.gwblock, gw, vb * H, !overwrite);
        } else {
          s = xent_cpu_gemm(fn, acc, 1, 0, vb, H, n, 1.0, g, V, hid_acc, H, overwrite ? 0.0 : 1.0, gw, H);
        }
        if (s != XENT_OK) return s;
      }
    }
    if (t->grad_hidden && half_grad) narrow(gt, gh, (char*)t->grad_hidden + (size_t)r0 * H * gb, n * H, 0);
    if (t->grad_bias) {
      /* From the gradient as the kernel stored it (grad dtype). */
      xent_lce_args ga = step_args(d, chunk, steps_ws, stream);
      ga.step = XENT_LCE_BIAS_GRAD;
      ga.chunk = k;
      ga.grad = call.t.grad;
      ga.grad_bias = t->grad_bias;
      ga.accumulate = d->accumulate;
      s = xent_backend_launch(h, steps, &ga);
      if (s != XENT_OK) return s;
    }
  }

  /* Nothing to add: the outputs a chunk would have set. */
  if (chunks == 0 && !d->accumulate) {
    if (t->grad_weight) memset(t->grad_weight, 0, (size_t)V * H * gb);
    if (t->grad_bias) memset(t->grad_bias, 0, (size_t)V * gb);
  }
  /* FINISH: the loss from the chunks' sums, and the bad-label rows. */
  xent_lce_args fa = step_args(d, chunk, steps_ws, stream);
  fa.step = XENT_LCE_FINISH;
  fa.loss = c->reduction != XENT_REDUCTION_NONE ? t->loss : NULL;
  fa.bad_label_row = h->bad_label_row;
  return xent_backend_launch(h, steps, &fa);
}
