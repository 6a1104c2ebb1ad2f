/* The fused linear cross entropy (xent.h, xent_linear_ce_run): the chunk
   loop. Each chunk of rows gets its logits from a GEMM, the generated fused
   forward+backward kernel over them in place (through xent_ce_run's checks
   and launch, so every option means what it means there), and the two
   gradient GEMMs. Around them, the generated steps of family
   linear_cross_entropy (specs/linear_cross_entropy.lua) compute the mean's
   divisor, the bias and its gradient and the loss on the device, so nothing
   waits for the host. The GEMMs are the backend's (backend.h, gemm), one
   loop for all: OpenBLAS (blas_cpu.c) on the cpu backend, f16/bf16
   operands widened there a block at a time; cuBLASLt (gemm_cuda.c) on
   CUDA; hipBLASLt (gemm_hip.c) on HIP, and cuBLASLt again where the HIP
   backend is built for NVIDIA. */
#include <stdint.h>
#include <string.h>

#include "runtime/backend/backend.h"
#include "runtime/dispatch/dispatch.h"
#include "runtime/numeric.h"
#include "runtime/ops/ops.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The chunk's cross-entropy call: n rows; a sum or a mean becomes a sum in
   the accumulation type (the chunks' sums are added, then divided). Its
   gradient of the logits is in their dtype, in place, whatever grad_dtype
   says: the gradient GEMMs take A and B in one dtype (cuBLASLt, hipBLASLt)
   and write grad_hidden and grad_weight in grad_dtype, f32 from f16/bf16
   operands where asked. */
static xent_ce_desc chunk_desc(const xent_linear_ce_desc* d, int64_t n) {
  xent_ce_desc c = d->ce;
  c.rows = n;
  c.grad_dtype = c.dtype;
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


static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

/* The tiled plans' GEMMs are small: they take at most this much of the
   GEMM library's workspace, and at most a sixteenth of the budget (a
   preference: cuBLASLt and hipBLASLt pick algorithms within it, and some
   need none). */
#define TILED_GEMM_WORKSPACE ((size_t)4 << 20)

static int64_t ranks_of(const xent_linear_ce_desc* d) { return d->ce.vocab_shard ? d->ce.vocab_shard->ranks : 1; }

/* The tiled plans sum f16/bf16 gradients in f32 and round them once; f32
   and f64 ones are their own sums. */
static int summed_in_f32(const xent_linear_ce_desc* d) {
  return d->ce.grad_dtype == XENT_F16 || d->ce.grad_dtype == XENT_BF16;
}

/* The regions of a plan of its kind, n rows a chunk and (tiled) tile
   classes a tile. Sizes are bounded before: n * V (the caller's chunk_rows,
   or the PLAN step's) and V * H, N * H by the API's byte-count checks. */
static xent_status layout(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d,
                          xent_linear_ce_plan_kind kind, int64_t n, int64_t tile, size_t budget,
                          xent_linear_ce_plan* L) {
  const int64_t v = d->ce.classes, H = d->hidden;
  const size_t eb = xent_dtype_bytes(d->ce.dtype), ab = xent_acc_bytes(d->ce.dtype);
  const int64_t chunks = d->ce.rows > 0 ? (d->ce.rows + n - 1) / n : 0;
  const int tiled = kind != XENT_LINEAR_CE_PLAN_ONE_PASS;
  const int64_t width = tiled ? tile : v;
  if ((uint64_t)n * (uint64_t)width > (SIZE_MAX / 16) / 8)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the workspace's byte count overflows", fn);
  xent_ce_desc c = chunk_desc(d, n);
  c.classes = width;
  const size_t ce_bytes = tiled ? xent_ce_launcher_workspace(&c, XENT_OP_FORWARD_BACKWARD)
                                : xent_ce_op_workspace(h, &c, XENT_OP_FORWARD_BACKWARD);
  memset(L, 0, sizeof *L);
  size_t at = 0;
  L->kind = kind;
  L->chunk = n;
  L->chunks = chunks;
  L->tile = tiled ? tile : 0;
  L->tiles = tiled ? (v + tile - 1) / tile : 0;
  L->logits = at, at += round64((size_t)n * width * eb);
  if (tiled) {
    /* The f32 sums of f16/bf16 gradients: a tile's grad_weight rows (none
       into main_grad), TILED's chunk of grad_hidden, TILED_HIDDEN_SUM's
       every row of it. f32 and f64 gradients (and main_grad) are their own
       sums. */
    const int sums = summed_in_f32(d);
    const int64_t weight_rows = sums && !d->main_grad ? tile : 0;
    const int64_t hidden_rows = sums && kind == XENT_LINEAR_CE_PLAN_TILED ? n : 0;
    const int64_t acc_rows = weight_rows > hidden_rows ? weight_rows : hidden_rows;
    L->weight_acc = at, at += round64((size_t)acc_rows * (size_t)H * 4);
    if (kind == XENT_LINEAR_CE_PLAN_TILED_HIDDEN_SUM && sums)
      L->hidden_acc = at, at += round64((size_t)d->ce.rows * (size_t)H * 4);
    L->records = at, at += round64((size_t)ranks_of(d) * (size_t)L->tiles * (size_t)n * xent_shard_record_bytes(ab, 1));
    L->lse = at, at += round64((size_t)d->ce.rows * ab);
    L->entropy = at, at += round64((size_t)d->ce.rows * ab);
    L->sum_a = at, at += d->ce.label_type == XENT_PROB ? round64((size_t)d->ce.rows * ab) : 0;
  } else {
    /* An f16/bf16 grad_weight is summed over the chunks in f32 and rounded
       once (WEIGHT_GRAD): rounded at every chunk, as a GEMM into it with
       beta = 1 would, bf16 keeps 8 bits of the running sum and drops what a
       small chunk adds to a large one. One chunk needs no sum; an f32
       grad_dtype is its own. */
    const int half = d->ce.dtype == XENT_F16 || d->ce.dtype == XENT_BF16;
    L->has_weight_acc = half && d->ce.grad_dtype == d->ce.dtype && chunks > 1 && !d->main_grad;
    if (L->has_weight_acc && (uint64_t)v * (uint64_t)H > (SIZE_MAX / 8) / 4)
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: the workspace's byte count overflows", fn);
    L->weight_acc = at, at += L->has_weight_acc ? round64((size_t)v * (size_t)H * 4) : 0;
  }
  const size_t gemm_ws = h->backend->gemm_workspace;
  const size_t cap = TILED_GEMM_WORKSPACE < budget / 16 ? TILED_GEMM_WORKSPACE : (budget / 16) & ~(size_t)255;
  L->gemm_bytes = tiled && gemm_ws > cap ? cap : gemm_ws;
  L->gemm = at, at += round64(L->gemm_bytes);
  L->steps = at, at += round64(xent_lce_workspace_bytes(chunks, v, ab));
  L->ce = at, at += round64(ce_bytes);
  L->total = at;
  return XENT_OK;
}

static const char* plan_name(xent_linear_ce_plan_kind kind) {
  return kind == XENT_LINEAR_CE_PLAN_TILED              ? "TILED"
         : kind == XENT_LINEAR_CE_PLAN_TILED_HIDDEN_SUM ? "TILED_HIDDEN_SUM"
         : kind == XENT_LINEAR_CE_PLAN_ON_CHIP          ? "ON_CHIP"
                                                        : "ONE_PASS";
}

/* A tiled plan of its kind: the caller's tile (chunk_classes, chunk_rows),
   or the largest square tiles (a power of two, 16384 down to `smallest`)
   whose workspace fits the budget, else the smallest. */
static xent_status tiled_plan(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d,
                              xent_linear_ce_plan_kind kind, size_t budget, int64_t smallest, xent_linear_ce_plan* L) {
  const int64_t rows = d->ce.rows > 0 ? d->ce.rows : 1;
  for (int64_t p = d->chunk_classes > 0 ? d->chunk_classes : 16384;; p /= 2) {
    const int64_t n = d->chunk_rows > 0 ? min64(d->chunk_rows, rows) : min64(p, rows);
    const xent_status s = layout(fn, h, d, kind, n, min64(p, d->ce.classes), budget, L);
    if (s != XENT_OK || d->chunk_classes > 0 || L->total <= budget || p / 2 < smallest) return s;
  }
}

/* A tiled plan past a budget the caller set (desc->memory_mib) is refused,
   naming what it needs; past the default, it is the best there is. */
static xent_status over_budget(const char* fn, const xent_linear_ce_desc* d, size_t budget,
                               const xent_linear_ce_plan* L) {
  if (L->total <= budget || d->memory_mib == 0) return XENT_OK;
  const int chip = L->kind == XENT_LINEAR_CE_PLAN_ON_CHIP;
  return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                   "%s: desc->memory_mib is %lld: the call needs at least %zu MiB (plan %s, tiles of %lld rows x "
                   "%lld classes)", fn, (long long)d->memory_mib, (L->total + ((size_t)1 << 20) - 1) >> 20,
                   plan_name(L->kind), (long long)(chip ? L->chip_rows : L->chunk),
                   (long long)(chip ? L->chip_classes : L->tile));
}

/* ON_CHIP (kernels/linear_cross_entropy/on_chip.h): what it serves, the
   rest refused by name (the tensors' part in xent_linear_ce_op). */
static xent_status chip_serves(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d) {
  const xent_ce_desc* c = &d->ce;
  /* The passes' 1-D grids: at most 2^31 - 1 blocks of 128 x 128. */
  const int64_t row_blocks = (c->rows + 127) / 128, class_blocks = (c->classes + 127) / 128;
  const char* why = c->dtype != XENT_BF16        ? "desc->ce.dtype XENT_BF16"
                    : c->label_type == XENT_PROB ? "class indices (desc->ce.label_type XENT_I32 or XENT_I64)"
                    : c->classes >= INT32_MAX    ? "desc->ce.classes below 2^31 - 1"
                    : class_blocks > 0 && row_blocks > INT32_MAX / class_blocks
                        ? "desc->ce.rows x desc->ce.classes in at most 2^31 - 1 blocks of 128 x 128"
                        : NULL;
  if (why)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->plan is XENT_LINEAR_CE_PLAN_ON_CHIP, which takes %s",
                     fn, why);
  if (!h->on_chip)
    return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE,
                     "%s: desc->plan is XENT_LINEAR_CE_PLAN_ON_CHIP, which runs on an sm_90 GPU (H100, H200) with "
                     "the kernels' sm_90a code (--define=xent_cuda_archs=90a with Bazel, "
                     "-DCMAKE_CUDA_ARCHITECTURES=90a-real with CMake), on an sm_100 or sm_103 GPU (B200, B300) with "
                     "their sm_100f code (100f, 100f-real; sm_100a's serves sm_100 alone), or on the emulated CUDA "
                     "rendering; this handle's device or build is none of these",
                     fn);
  return XENT_OK;
}

/* ON_CHIP's regions: grad_hidden's f32 sum n rows at a time (n = rows:
   every row's, beside grad_weight's of w classes), pass 1's records over
   slices sized to fill the device, every rank's (wide: the plan does not
   know whether a call asks for per-token outputs), the rows' lse and
   entropy (dentropy without entropy). */
static void chip_layout(const xent_handle* h, const xent_linear_ce_desc* d, int64_t n, int64_t w,
                        xent_linear_ce_plan* L) {
  const int64_t N = d->ce.rows, V = d->ce.classes, H = d->hidden, rows = N > 0 ? N : 1;
  /* Pass 1's blocks: 128 rows of 256 threads, by tiles of 128 classes
     (kernels/linear_cross_entropy/on_chip.h). */
  const int64_t blocks = (rows + 127) / 128, most = (V + 127) / 128;
  const int64_t want = h->resident_threads > 0 ? h->resident_threads / 256 : 3 * blocks;
  const int64_t slices = min64(most, (want + blocks - 1) / blocks > 1 ? (want + blocks - 1) / blocks : 1);
  const int64_t slice = ((V + slices - 1) / slices + 127) / 128 * 128;
  memset(L, 0, sizeof *L);
  L->kind = XENT_LINEAR_CE_PLAN_ON_CHIP;
  L->chunk = rows;
  L->chunks = N > 0 ? 1 : 0;
  L->tile = slice;
  L->tiles = (V + slice - 1) / slice;
  L->chip_rows = n;
  L->chip_classes = w;
  const int sums = summed_in_f32(d), whole = n >= rows;
  const int64_t weight_rows = sums && !d->main_grad ? w : 0, hidden_rows = sums && !whole ? n : 0;
  size_t at = 0;
  L->weight_acc = at, at += round64((size_t)(weight_rows > hidden_rows ? weight_rows : hidden_rows) * H * 4);
  L->hidden_acc = at, at += sums && whole ? round64((size_t)rows * (size_t)H * 4) : 0;
  L->records = at,
  at += round64((size_t)ranks_of(d) * (size_t)L->tiles * (size_t)rows * xent_shard_record_bytes(4, 1));
  L->lse = at, at += round64((size_t)rows * 4);
  L->entropy = at, at += round64((size_t)rows * 4);
  L->sum_a = at, at += d->ce.label_smoothing != 0.0 ? round64((size_t)rows * 4) : 0;
  L->logits = L->gemm = at;
  L->steps = at, at += round64(xent_lce_workspace_bytes(1, V, 4));
  xent_ce_desc c = chunk_desc(d, rows);
  c.classes = slice;
  L->ce = at, at += round64(xent_ce_launcher_workspace(&c, XENT_OP_FORWARD_BACKWARD));
  L->total = at;
}

/* ON_CHIP's plan: every row's grad_hidden sum with the largest grad_weight
   tiles (a power of two, 16384 down to 128 classes) that fit the budget,
   else square tiles of both sums in their own sweeps; desc->chunk_rows and
   chunk_classes fix them. */
static xent_status chip_plan(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d, size_t budget,
                             xent_linear_ce_plan* L) {
  xent_status s = chip_serves(fn, h, d);
  if (s != XENT_OK) return s;
  const int64_t rows = d->ce.rows > 0 ? d->ce.rows : 1, V = d->ce.classes;
  for (int whole = d->chunk_rows == 0 || d->chunk_rows >= rows; whole >= 0; --whole) {
    for (int64_t p = 16384;; p /= 2) {
      const int64_t n = whole ? rows : min64(d->chunk_rows > 0 ? d->chunk_rows : p, rows);
      const int64_t w = min64(d->chunk_classes > 0 ? d->chunk_classes : p, V);
      chip_layout(h, d, n, w, L);
      if (L->total <= budget) return XENT_OK;
      if (p / 2 < 128 || (d->chunk_classes > 0 && (whole || d->chunk_rows > 0))) break;
    }
  }
  return over_budget(fn, d, budget, L);
}

xent_status xent_linear_ce_op_plan(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d,
                                   xent_linear_ce_plan* L) {
  const size_t budget = (size_t)(d->memory_mib > 0 ? d->memory_mib : XENT_LINEAR_CE_MEMORY_MIB) << 20;
  const xent_linear_ce_plan_kind kind = (xent_linear_ce_plan_kind)d->plan;
  xent_status s = XENT_OK;
  if (kind == XENT_LINEAR_CE_PLAN_ON_CHIP) return chip_plan(fn, h, d, budget, L);
  if (kind == XENT_LINEAR_CE_PLAN_ONE_PASS || (kind == XENT_LINEAR_CE_PLAN_AUTO && d->chunk_classes == 0)) {
    int64_t n = 0;
    s = chunk_rows(h, d, &n);
    if (s == XENT_OK) s = layout(fn, h, d, XENT_LINEAR_CE_PLAN_ONE_PASS, n, 0, budget, L);
    if (s != XENT_OK || kind == XENT_LINEAR_CE_PLAN_ONE_PASS || L->total <= budget) return s;
  }
  if (kind != XENT_LINEAR_CE_PLAN_AUTO) {
    s = tiled_plan(fn, h, d, kind, budget, 128, L);
    return s == XENT_OK && d->chunk_classes == 0 ? over_budget(fn, d, budget, L) : s;
  }
  /* AUTO, past the one pass: four GEMMs where tiles of 2048 fit, else five. */
  xent_linear_ce_plan t;
  s = tiled_plan(fn, h, d, XENT_LINEAR_CE_PLAN_TILED_HIDDEN_SUM, budget, 2048, &t);
  if (s == XENT_OK && t.total > budget) s = tiled_plan(fn, h, d, XENT_LINEAR_CE_PLAN_TILED, budget, 128, &t);
  if (s == XENT_OK) s = over_budget(fn, d, budget, &t);
  if (s == XENT_OK && (d->chunk_classes > 0 || t.total < L->total)) *L = t;
  return s;
}

/* One call's state, shared by the chunk loop's pieces. */
typedef struct run_ctx {
  const char* fn;
  xent_handle* h;
  const xent_linear_ce_desc* d;
  const xent_linear_ce_tensors* t;
  const xent_linear_ce_plan* L;
  char* ws;
  size_t ws_bytes;
  void* stream;
  const xent_dispatch_entry* steps;
  const xent_dispatch_entry* loss; /* the fused kernel of every chunk (NULL: vocabulary-parallel) */
  xent_vocab_kernels vocab;        /* the vocabulary-parallel chunks' kernels */
} run_ctx;

static xent_status step(const run_ctx* r, xent_lce_args* a) { return xent_backend_launch(r->h, r->steps, a); }

/* bytes of zeros at p, on the call's stream. */
static xent_status zero(const run_ctx* r, void* p, size_t bytes) {
  return r->h->backend->zero(r->h, r->fn, p, bytes, r->stream);
}

/* The cross-entropy call over chunk k's rows (from r0): every per-row tensor
   of the call at r0, the logits and gradient at `logits` (in place), the lse
   written to `lse`'s rows (NULL: not kept); a sum or a mean into the chunk's
   slot, with the dloss BEGIN left; bad labels into the chunk's word. */
static void chunk_call(const run_ctx* r, int64_t k, int64_t r0, xent_op op, void* logits, char* lse,
                       xent_ce_call* call) {
  const xent_ce_desc* c = &r->d->ce;
  const xent_linear_ce_tensors* t = r->t;
  const size_t ab = xent_acc_bytes(c->dtype), lsz = xent_dtype_bytes(c->loss_dtype);
  const size_t lb = c->label_type == XENT_I32   ? 4
                    : c->label_type == XENT_I64 ? 8
                                                : (size_t)c->classes * xent_dtype_bytes(c->dtype);
  char* steps_ws = r->ws + r->L->steps;
  memset(call, 0, sizeof *call);
  call->op = op;
  call->t.logits = logits;
  call->t.grad = logits;
  call->t.labels = (const char*)t->labels + (size_t)r0 * lb;
  call->t.weights = t->weights;
  call->t.lse = lse ? lse + (size_t)r0 * ab : NULL;
  call->t.entropy = t->entropy ? (char*)t->entropy + (size_t)r0 * ab : NULL;
  call->t.label_logprob = t->label_logprob ? (char*)t->label_logprob + (size_t)r0 * ab : NULL;
  call->t.argmax = t->argmax ? t->argmax + r0 : NULL;
  call->t.dentropy = t->dentropy ? (const char*)t->dentropy + (size_t)r0 * ab : NULL;
  call->t.temperature = t->temperature ? (const char*)t->temperature + (size_t)r0 * ab : NULL;
  call->t.token_weight = t->token_weight ? (const char*)t->token_weight + (size_t)r0 * ab : NULL;
  if (c->reduction == XENT_REDUCTION_NONE) {
    call->t.loss = (char*)t->loss + (size_t)r0 * lsz;
    call->t.dloss = t->dloss ? (const char*)t->dloss + (size_t)r0 * lsz : NULL;
  } else {
    call->t.loss = steps_ws + xent_lce_sum_offset(r->L->chunks, k, ab);
    call->t.dloss = steps_ws + xent_lce_dloss_offset(r->L->chunks, ab);
  }
  call->workspace = r->ws + r->L->ce;
  call->workspace_bytes = r->ws_bytes - r->L->ce;
  call->stream = r->stream;
  call->bad_label_row = (unsigned long long*)(steps_ws + xent_lce_bad_offset(k));
  call->row_group = r->h->row_group;
  call->row_threads = r->h->row_threads;
}

/* The fused kernel over the chunk's logits (rows r0 .. r0 + n): the loss (or
   the chunk's sum), the lse, and the gradient in place; a bad label's row
   goes to the chunk's own word, counted from its first row. */
static xent_status chunk_loss(const run_ctx* r, int64_t k, int64_t r0, int64_t n, void* logits) {
  const xent_ce_desc cd = chunk_desc(r->d, n);
  xent_ce_call call;
  chunk_call(r, k, r0, XENT_OP_FORWARD_BACKWARD, logits, (char*)r->t->lse, &call);
  if (r->d->ce.vocab_shard)
    return xent_vocab_run(r->h, &cd, &call, xent_ce_launcher_workspace(&cd, XENT_OP_FORWARD_BACKWARD), &r->vocab);
  const xent_ce_args args = xent_ce_args_for(&cd, &call);
  return xent_ce_launch(r->h, &cd, XENT_OP_FORWARD_BACKWARD, r->loss, &args);
}

/* BIAS: chunk k's logits of `classes` columns in the accumulation type
   (acc_logits, the whole vocabulary's or a tile's) += bias (from the
   tile's first class). */
static xent_status chunk_bias(const run_ctx* r, int64_t k, int64_t classes, const void* bias, void* acc_logits) {
  xent_lce_args a = step_args(r->d, r->L->chunk, r->ws + r->L->steps, r->stream);
  a.step = XENT_LCE_BIAS;
  a.chunk = k;
  a.classes = classes;
  a.bias = bias;
  a.acc_logits = acc_logits;
  return step(r, &a);
}

/* BIAS_GRAD: grad_bias from the chunk's gradient as the kernel stored it. */
static xent_status chunk_bias_grad(const run_ctx* r, int64_t k, const void* grad) {
  xent_lce_args a = step_args(r->d, r->L->chunk, r->ws + r->L->steps, r->stream);
  a.step = XENT_LCE_BIAS_GRAD;
  a.chunk = k;
  a.grad = grad;
  a.grad_bias = r->t->grad_bias;
  a.accumulate = r->d->accumulate;
  return step(r, &a);
}

static xent_status gemm(const run_ctx* r, const xent_gemm* g) {
  return r->h->backend->gemm(r->h, r->fn, g, r->ws + r->L->gemm, r->L->gemm_bytes, r->stream);
}

/* One chunk of rows, r0 .. r0 + n: logits = hidden @ weight^T (+ bias, in
   the GEMM's epilogue; f64: the BIAS step), the fused kernel over them with
   the gradient in place (or, in grad_dtype, beside them), then
   grad_hidden = grad @ weight and grad_weight (+)= grad^T @ hidden. */
static xent_status chunk(const run_ctx* r, int64_t k) {
  const xent_linear_ce_plan L = *r->L;
  const xent_ce_desc* c = &r->d->ce;
  const xent_linear_ce_tensors* t = r->t;
  const xent_dtype dt = c->dtype, gt = c->grad_dtype;
  const int64_t N = c->rows, V = c->classes, H = r->d->hidden, rows = L.chunk;
  const size_t eb = xent_dtype_bytes(dt), gb = xent_dtype_bytes(gt);
  void* logits = r->ws + L.logits;
  void* grad = logits; /* the chunk's gradient of the logits, in place, dtype */
  const int64_t r0 = k * rows, n = min64(rows, N - r0);
  const char* hid = (const char*)t->hidden + (size_t)r0 * H * eb;
  const int bias_step = t->bias && dt == XENT_F64;
  const xent_gemm forward = {.a_dtype = dt, .b_dtype = dt, .c_dtype = dt, .ta = 0, .tb = 1, .m = n, .n = V, .k = H,
                             .alpha = 1.0, .beta = 0.0, .a = hid, .lda = H, .b = t->weight, .ldb = H, .c = logits,
                             .ldc = V, .bias = bias_step ? NULL : t->bias};
  xent_status s = gemm(r, &forward);
  if (s != XENT_OK) return s;
  if (bias_step) {
    s = chunk_bias(r, k, V, t->bias, logits);
    if (s != XENT_OK) return s;
  }
  s = chunk_loss(r, k, r0, n, logits);
  if (s != XENT_OK) return s;
  if (t->grad_hidden) {
    const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = gt, .ta = 0, .tb = 0, .m = n, .n = H, .k = V,
                         .alpha = 1.0, .beta = 0.0, .a = grad, .lda = V, .b = t->weight, .ldb = H,
                         .c = (char*)t->grad_hidden + (size_t)r0 * H * gb, .ldc = H};
    s = gemm(r, &g);
    if (s != XENT_OK) return s;
  }
  if (t->grad_weight || t->main_grad) {
    /* Into grad_weight, its f32 sum (the old value is added to that at the
       end, by WEIGHT_GRAD), or the caller's f32 main_grad. */
    const int acc = L.has_weight_acc;
    const int overwrite = k == 0 && (acc || !r->d->accumulate);
    void* out = t->main_grad ? t->main_grad : acc ? (void*)(r->ws + L.weight_acc) : t->grad_weight;
    const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = acc || t->main_grad ? XENT_F32 : gt, .ta = 1,
                         .tb = 0, .m = V, .n = H, .k = n, .alpha = 1.0, .beta = overwrite ? 0.0 : 1.0, .a = grad,
                         .lda = V, .b = hid, .ldb = H, .c = out, .ldc = H};
    s = gemm(r, &g);
    if (s != XENT_OK) return s;
    if (acc && k == L.chunks - 1) {
      xent_lce_args a = step_args(r->d, L.chunk, r->ws + L.steps, r->stream);
      a.step = XENT_LCE_WEIGHT_GRAD;
      a.weight_acc = (const float*)(r->ws + L.weight_acc);
      a.grad_weight = t->grad_weight;
      a.hidden = H;
      a.accumulate = r->d->accumulate;
      s = step(r, &a);
      if (s != XENT_OK) return s;
    }
  }
  return t->grad_bias ? chunk_bias_grad(r, k, grad) : XENT_OK;
}

/* The tiled plans (xent.h, docs/LINEAR_CE.md). Tile (k, j) is chunk k's
   rows r0 .. r0 + n against tile j's classes v0 .. v0 + w: its logits come
   from a GEMM of those rows of hidden and rows of weight. The tiles of a
   chunk are the slices of a vocabulary-parallel call (vocab_parallel.c),
   ranks * tiles of them: each writes its row records, the chunk's loss, lse
   and per-token outputs come from all of them (the combine), and each
   tile's gradient from them too. The sweeps over the tiles:
     1. chunk by chunk, each tile's records, then the combine;
     2. (TILED, grad_hidden) chunk by chunk, each tile's gradient, whose
        product with its weight rows is summed over the tiles in f32 and
        rounded;
     3. (grad_weight, grad_bias; TILED_HIDDEN_SUM's grad_hidden) tile by
        tile, each chunk's gradient from its rows' lse, whose product with
        its hidden rows is summed over the chunks in f32 and rounded, the
        bias's column sums likewise; TILED_HIDDEN_SUM's product with the
        tile's weight rows summed into every row's grad_hidden in f32,
        rounded after the last tile. */
typedef struct tile_call {
  xent_vocab_shard shard;
  xent_ce_desc desc;
  xent_ce_call call;
} tile_call;

static int64_t tile_width(const xent_linear_ce_plan* L, int64_t v, int64_t j) {
  return min64(L->tile, v - j * L->tile);
}

/* Tile (k, j)'s logits into the workspace: hidden[chunk] @ weight[tile]^T
   (+ bias[tile], in the GEMM's epilogue; f64: the BIAS step, as the one
   pass's). */
static xent_status tile_logits(const run_ctx* r, int64_t r0, int64_t n, int64_t v0, int64_t w) {
  const xent_dtype dt = r->d->ce.dtype;
  const int64_t H = r->d->hidden;
  const size_t eb = xent_dtype_bytes(dt);
  const char* bias = r->t->bias ? (const char*)r->t->bias + (size_t)v0 * eb : NULL;
  const int bias_step = bias && dt == XENT_F64;
  const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = dt, .ta = 0, .tb = 1, .m = n, .n = w, .k = H,
                       .alpha = 1.0, .beta = 0.0, .a = (const char*)r->t->hidden + (size_t)r0 * H * eb, .lda = H,
                       .b = (const char*)r->t->weight + (size_t)v0 * H * eb, .ldb = H, .c = r->ws + r->L->logits,
                       .ldc = w, .bias = bias_step ? NULL : bias};
  const xent_status s = gemm(r, &g);
  return s != XENT_OK || !bias_step ? s : chunk_bias(r, r0 / r->L->chunk, w, bias, r->ws + r->L->logits);
}

/* The cross-entropy call over tile (k, j) as a slice of the vocabulary:
   chunk k's rows (chunk_call), the tile's classes at their offset in the
   whole vocabulary, among ranks * tiles slices. */
static void tile_setup(const run_ctx* r, int64_t k, int64_t j, xent_op op, tile_call* tc) {
  const xent_ce_desc* c = &r->d->ce;
  const xent_linear_ce_plan* L = r->L;
  const int64_t r0 = k * L->chunk, n = min64(L->chunk, c->rows - r0);
  const xent_vocab_shard* user = c->vocab_shard;
  memset(tc, 0, sizeof *tc);
  tc->shard.class_offset = (user ? user->class_offset : 0) + j * L->tile;
  tc->shard.global_classes = user ? user->global_classes : c->classes;
  tc->shard.ranks = (int)(ranks_of(r->d) * L->tiles);
  tc->shard.rank = (int)((user ? user->rank : 0) * L->tiles + j);
  tc->desc = chunk_desc(r->d, n);
  tc->desc.classes = tile_width(L, c->classes, j);
  tc->desc.vocab_shard = &tc->shard;
  /* The rows' lse: the call's, or the workspace's, written by the combine
     and read by sweep 3. */
  char* lse = r->t->lse ? (char*)r->t->lse : r->ws + L->lse;
  chunk_call(r, k, r0, op, r->ws + L->logits, lse, &tc->call);
  tc->call.t.lse_in = tc->call.t.lse;
  /* Soft labels: the tile's block of the [rows, V] targets, whose rows are
     V apart (tile_args). */
  if (c->label_type == XENT_PROB)
    tc->call.t.labels = (const char*)r->t->labels + ((size_t)r0 * (size_t)c->classes + (size_t)(j * L->tile)) *
                                                        xent_dtype_bytes(c->dtype);
}

/* A tile call's kernel arguments: soft labels' rows are the whole
   vocabulary (of this rank) apart, not the tile's width. */
static xent_ce_args tile_args(const run_ctx* r, const tile_call* tc) {
  xent_ce_args a = xent_ce_args_for(&tc->desc, &tc->call);
  if (r->d->ce.label_type == XENT_PROB) a.label_stride = r->d->ce.classes;
  a.shard_token_stats = r->vocab.token_stats;
  return a;
}

/* Sweep 3 takes each chunk's gradient from one record a row (ROW_RECORDS)
   where the rows' lse is not enough: the entropy's gradient (E_p[z]), soft
   labels (the row's sum of w[c] * t'_c). */
static int from_row_records(const run_ctx* r) {
  return r->t->dentropy != NULL || r->d->ce.label_type == XENT_PROB;
}

/* The chunk's records, [ranks * tiles][n], and the bytes of one slice's. */
static char* chunk_records(const run_ctx* r) { return r->ws + r->L->records; }
static size_t record_bytes(const run_ctx* r, int64_t n) {
  return (size_t)n * xent_shard_record_bytes(xent_acc_bytes(r->d->ce.dtype), r->vocab.token_stats);
}

/* The rows' entropy: the call's, or the workspace's. */
static char* entropy_of(const run_ctx* r) { return r->t->entropy ? (char*)r->t->entropy : r->ws + r->L->entropy; }

/* Sweep 3 from row records (from_row_records): each chunk's rows as one
   record each, made from their lse, entropy (wide records) and sum of
   w[c] * t'_c (soft labels) into the records region (free by then): every
   chunk's once where the region holds them all (it holds ranks * tiles
   chunks' worth: V >= N at square tiles), else chunk k's before each of its
   tiles. row_records_at: where chunk k's are. */
static int row_records_once(const run_ctx* r) {
  return r->L->chunks <= ranks_of(r->d) * r->L->tiles;
}
static char* row_records_at(const run_ctx* r, int64_t k) {
  return chunk_records(r) + (row_records_once(r) ? record_bytes(r, k * r->L->chunk) : 0);
}
static xent_status row_records(const run_ctx* r, int64_t k) {
  xent_lce_args a = step_args(r->d, r->L->chunk, r->ws + r->L->steps, r->stream);
  a.step = XENT_LCE_ROW_RECORDS;
  a.chunk = k;
  a.lse = r->t->lse ? (const char*)r->t->lse : r->ws + r->L->lse;
  a.wide = r->vocab.token_stats;
  a.entropy = a.wide ? entropy_of(r) : NULL;
  a.sum_a = r->d->ce.label_type == XENT_PROB ? r->ws + r->L->sum_a : NULL;
  a.records = row_records_at(r, k);
  return step(r, &a);
}

/* Every rank's records beside this rank's `bytes` of them, which lie at
   its place in `records` (vocabulary-parallel; nothing for one rank). */
static xent_status gather_records(const run_ctx* r, char* records, size_t bytes) {
  const xent_vocab_shard* user = r->d->ce.vocab_shard;
  if (!user || user->ranks <= 1) return XENT_OK;
  const int rc = user->all_gather(user->ctx, records + (size_t)user->rank * bytes, records, bytes, r->stream);
  if (rc == 0) return XENT_OK;
  return xent_fail(XENT_ERROR_COLLECTIVE,
                   "%s: desc->ce.vocab_shard->all_gather returned %d (rank %d of %d, %zu bytes per rank)", r->fn, rc,
                   user->rank, user->ranks, bytes);
}

/* Sweep 1 for chunk k: each tile's records; every rank's (all_gather); the
   combine: the chunk's loss (or sum), lse and per-token outputs. */
static xent_status tiled_statistics(const run_ctx* r, int64_t k) {
  const xent_linear_ce_plan* L = r->L;
  const int64_t n = min64(L->chunk, r->d->ce.rows - k * L->chunk);
  const size_t slice = record_bytes(r, n);
  char* records = chunk_records(r);
  tile_call tc;
  xent_status s;
  for (int64_t j = 0; j < L->tiles; ++j) {
    if ((s = tile_logits(r, k * L->chunk, n, j * L->tile, tile_width(L, r->d->ce.classes, j))) != XENT_OK) return s;
    tile_setup(r, k, j, XENT_OP_FORWARD_BACKWARD, &tc);
    xent_ce_args a = tile_args(r, &tc);
    a.shard_stats = records + (size_t)tc.shard.rank * slice;
    a.loss = a.lse_out = NULL;
    if ((s = xent_backend_launch(r->h, r->vocab.forward, &a)) != XENT_OK) return s;
  }
  if ((s = gather_records(r, records, (size_t)L->tiles * slice)) != XENT_OK) return s;
  tile_setup(r, k, 0, XENT_OP_FORWARD_BACKWARD, &tc);
  /* Sweep 3's records need each row's entropy (row_records). */
  if (r->t->dentropy && !r->t->entropy)
    tc.call.t.entropy = entropy_of(r) + (size_t)k * L->chunk * xent_acc_bytes(r->d->ce.dtype);
  xent_ce_args a = tile_args(r, &tc);
  a.gathered = records;
  a.shards = tc.shard.ranks;
  if (r->d->ce.label_type == XENT_PROB)
    a.sum_a_out = r->ws + L->sum_a + (size_t)k * (size_t)L->chunk * xent_acc_bytes(r->d->ce.dtype);
  return xent_backend_launch(r->h, r->vocab.forward, &a);
}

/* Tile (k, j)'s gradient in place of its logits: from the chunk's records
   (sweep 2), or from its rows' lse (sweep 3, when the records are another
   chunk's); with dentropy, from one record a row made of the rows' lse and
   entropy (ROW_RECORDS), which give E_p[z] too. */
static xent_status tile_gradient(const run_ctx* r, int64_t k, int64_t j, int from_records) {
  tile_call tc;
  tile_setup(r, k, j, from_records ? XENT_OP_FORWARD_BACKWARD : XENT_OP_BACKWARD, &tc);
  xent_ce_args a = tile_args(r, &tc);
  a.gathered = from_records ? chunk_records(r) : NULL;
  a.shards = tc.shard.ranks;
  a.loss = a.lse_out = NULL;
  if (!from_records && from_row_records(r)) {
    const xent_status s = row_records_once(r) ? XENT_OK : row_records(r, k);
    if (s != XENT_OK) return s;
    a.gathered = row_records_at(r, k);
    a.shards = 1;
  }
  return xent_backend_launch(r->h, r->vocab.backward, &a);
}

/* Rounds an f32 sum of rows x cols into an f16/bf16 matrix (WEIGHT_GRAD). */
static xent_status round_sum_of(const run_ctx* r, int64_t rows, int64_t cols, const float* sum, void* out,
                                int accumulate) {
  xent_lce_args a = step_args(r->d, r->L->chunk, r->ws + r->L->steps, r->stream);
  a.step = XENT_LCE_WEIGHT_GRAD;
  a.classes = rows;
  a.weight_acc = sum;
  a.grad_weight = out;
  a.hidden = cols;
  a.accumulate = accumulate;
  return step(r, &a);
}
/* ...of rows x H. */
static xent_status round_sum(const run_ctx* r, int64_t rows, const float* sum, void* out, int accumulate) {
  return round_sum_of(r, rows, r->d->hidden, sum, out, accumulate);
}

static xent_status tiled(const run_ctx* r) {
  const xent_linear_ce_plan* L = r->L;
  const xent_linear_ce_tensors* t = r->t;
  const xent_dtype dt = r->d->ce.dtype;
  const int64_t N = r->d->ce.rows, V = r->d->ce.classes, H = r->d->hidden;
  const size_t eb = xent_dtype_bytes(dt), gb = xent_dtype_bytes(r->d->ce.grad_dtype);
  const int hidden_sum = L->kind == XENT_LINEAR_CE_PLAN_TILED_HIDDEN_SUM;
  /* f16/bf16 gradients are summed in f32 in the workspace and rounded once;
     f32 and f64 ones (the logits', or grad_dtype) and main_grad (f32) are
     summed where they are, in their own type. */
  const int sums = summed_in_f32(r->d);
  const xent_dtype own = r->d->ce.grad_dtype, hidden_t = sums ? XENT_F32 : own;
  void* tile = r->ws + L->logits;
  void* acc = r->ws + L->weight_acc;
  char* hacc = sums ? r->ws + L->hidden_acc : (char*)t->grad_hidden;
  const size_t hacc_b = sums ? 4 : gb;
  void* weight_out = t->main_grad ? t->main_grad : t->grad_weight;
  const int weight_sum = sums && !t->main_grad;
  const xent_dtype weight_t = sums || t->main_grad ? XENT_F32 : own;
  xent_status s = XENT_OK;
  /* Sweep 1, and TILED's sweep 2 (grad_hidden from the chunk's records). */
  for (int64_t k = 0; k < L->chunks && s == XENT_OK; ++k) {
    const int64_t r0 = k * L->chunk, n = min64(L->chunk, N - r0);
    s = tiled_statistics(r, k);
    for (int64_t j = 0; j < L->tiles && s == XENT_OK && t->grad_hidden && !hidden_sum; ++j) {
      const int64_t v0 = j * L->tile, w = tile_width(L, V, j);
      s = tile_logits(r, r0, n, v0, w);
      if (s == XENT_OK) s = tile_gradient(r, k, j, 1);
      void* out = sums ? acc : (char*)t->grad_hidden + (size_t)r0 * H * gb;
      const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = hidden_t, .ta = 0, .tb = 0, .m = n, .n = H,
                           .k = w, .alpha = 1.0, .beta = j == 0 ? 0.0 : 1.0, .a = tile, .lda = w,
                           .b = (const char*)t->weight + (size_t)v0 * H * eb, .ldb = H, .c = out, .ldc = H};
      if (s == XENT_OK) s = gemm(r, &g);
    }
    if (s == XENT_OK && t->grad_hidden && !hidden_sum && sums)
      s = round_sum(r, n, (float*)acc, (char*)t->grad_hidden + (size_t)r0 * H * eb, 0);
  }
  /* The last sweep, tile by tile (each chunk's gradient from its rows' lse):
     grad_weight and grad_bias, summed over the chunks; TILED_HIDDEN_SUM's
     grad_hidden too, summed over the tiles for every row. */
  const int wanted = weight_out || t->grad_bias || (hidden_sum && t->grad_hidden);
  for (int64_t k = 0; k < L->chunks && s == XENT_OK && wanted && from_row_records(r) && row_records_once(r); ++k)
    s = row_records(r, k);
  for (int64_t j = 0; j < L->tiles && s == XENT_OK && wanted; ++j) {
    const int64_t v0 = j * L->tile, w = tile_width(L, V, j);
    for (int64_t k = 0; k < L->chunks && s == XENT_OK; ++k) {
      const int64_t r0 = k * L->chunk, n = min64(L->chunk, N - r0);
      s = tile_logits(r, r0, n, v0, w);
      if (s == XENT_OK) s = tile_gradient(r, k, j, 0);
      if (s == XENT_OK && weight_out) {
        /* Into the f32 sum (overwritten at the first chunk; the old value
           is added when it is rounded), or summed where it lies (added to
           from the first chunk on with accumulate). */
        const int overwrite = k == 0 && (weight_sum || !r->d->accumulate);
        void* out = weight_sum ? acc : (char*)weight_out + (size_t)v0 * H * xent_dtype_bytes(weight_t);
        const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = weight_t, .ta = 1, .tb = 0, .m = w, .n = H,
                             .k = n, .alpha = 1.0, .beta = overwrite ? 0.0 : 1.0, .a = tile, .lda = w,
                             .b = (const char*)t->hidden + (size_t)r0 * H * eb, .ldb = H, .c = out, .ldc = H};
        s = gemm(r, &g);
      }
      if (s == XENT_OK && hidden_sum && t->grad_hidden) {
        const xent_gemm g = {.a_dtype = dt, .b_dtype = dt, .c_dtype = hidden_t, .ta = 0, .tb = 0, .m = n, .n = H,
                             .k = w, .alpha = 1.0, .beta = j == 0 ? 0.0 : 1.0, .a = tile, .lda = w,
                             .b = (const char*)t->weight + (size_t)v0 * H * eb, .ldb = H,
                             .c = hacc + (size_t)r0 * H * hacc_b, .ldc = H};
        s = gemm(r, &g);
      }
      if (s == XENT_OK && t->grad_bias) {
        xent_lce_args a = step_args(r->d, L->chunk, r->ws + L->steps, r->stream);
        a.step = XENT_LCE_BIAS_GRAD;
        a.chunk = k;
        a.classes = w;
        a.grad = tile;
        a.grad_bias = (char*)t->grad_bias + (size_t)v0 * gb;
        a.accumulate = r->d->accumulate;
        s = step(r, &a);
      }
    }
    if (s == XENT_OK && weight_out && weight_sum)
      s = round_sum(r, w, (float*)acc, (char*)t->grad_weight + (size_t)v0 * H * eb, r->d->accumulate);
  }
  if (s == XENT_OK && hidden_sum && t->grad_hidden && sums) s = round_sum(r, N, (const float*)hacc, t->grad_hidden, 0);
  return s;
}

/* The ON_CHIP plan (xent.h; kernels/linear_cross_entropy/on_chip.h): pass
   1's records of every row over the plan's slices of the vocabulary (of
   this rank's classes, then every rank's: all_gather), the combine (the
   loss, the lse), then pass 2's launches: where grad_hidden's
   f32 sum holds every row, tiles of chip_classes classes, each making both
   products; else a sweep of chip_rows rows at a time (G @ W) and one of
   chip_classes classes (G^T @ hidden, and grad_bias's column sums of G).
   f16/bf16 gradients are summed in f32 in the workspace and rounded once;
   f32 ones and main_grad are their own sums, zeroed first (grad_weight,
   main_grad and grad_bias unless accumulate). */
static xent_status on_chip(const run_ctx* r) {
  const xent_linear_ce_plan* L = r->L;
  const xent_linear_ce_tensors* t = r->t;
  const int64_t N = r->d->ce.rows, V = r->d->ce.classes, H = r->d->hidden;
  xent_lce_args a = step_args(r->d, L->chunk, r->ws + L->steps, r->stream);
  a.labels = t->labels;
  a.weights = t->weights;
  a.bias = t->bias;
  a.z_loss = r->d->ce.z_loss;
  a.softcap = r->d->ce.softcap;
  a.temperature = r->d->ce.temperature;
  a.label_smoothing = r->d->ce.label_smoothing;
  a.row_temperature = t->temperature;
  a.token_weight = t->token_weight;
  a.hidden_data = t->hidden;
  a.weight_data = t->weight;
  a.hidden = H;
  a.chip_tcgen05 = r->h->on_chip == 100; /* sm_100a's passes, else sm_90a's */
  const xent_vocab_shard* user = r->d->ce.vocab_shard;
  const size_t bytes = (size_t)L->tiles * record_bytes(r, N);  /* a rank's records */
  a.class_offset = user ? user->class_offset : 0;
  a.step = XENT_LCE_CHIP_STATS;
  a.records = r->ws + L->records + (user ? (size_t)user->rank * bytes : 0);
  a.slice = L->tile;
  a.wide = r->vocab.token_stats;
  xent_status s = step(r, &a);
  if (s == XENT_OK) s = gather_records(r, r->ws + L->records, bytes);
  if (s != XENT_OK) return s;
  tile_call tc;
  tile_setup(r, 0, 0, XENT_OP_FORWARD_BACKWARD, &tc);
  /* dentropy's term in pass 2 takes each row's entropy from the combine. */
  if (t->dentropy && !t->entropy) tc.call.t.entropy = entropy_of(r);
  xent_ce_args c = tile_args(r, &tc);
  c.gathered = r->ws + L->records;
  c.shards = tc.shard.ranks;
  /* Smoothed, each row's coefficient of p, for CHIP_GRADS. */
  const int smooth = r->d->ce.label_smoothing != 0.0;
  c.sum_a_out = smooth ? r->ws + L->sum_a : NULL;
  if ((s = xent_backend_launch(r->h, r->vocab.forward, &c)) != XENT_OK) return s;

  void* weight_out = t->main_grad ? t->main_grad : t->grad_weight;
  if (!t->grad_hidden && !weight_out && !t->grad_bias) return XENT_OK;
  const int sums = summed_in_f32(r->d), whole = L->chip_rows >= N, weight_sum = sums && t->grad_weight;
  float* acc = (float*)(r->ws + L->weight_acc);
  float* hidden_sum = !t->grad_hidden ? NULL
                      : !sums         ? (float*)t->grad_hidden
                      : whole         ? (float*)(r->ws + L->hidden_acc)
                                      : acc;
  /* grad_bias's f32 sum: the steps' workspace's (an f16/bf16 grad_bias), or
     grad_bias itself. */
  float* bias_sum = !t->grad_bias ? NULL
                    : sums        ? (float*)(r->ws + L->steps + xent_lce_gbias_offset(L->chunks, 4))
                                  : (float*)t->grad_bias;
  const size_t hb = (size_t)H * 4;
  if (hidden_sum && (whole || !sums)) s = zero(r, hidden_sum, (size_t)N * hb);
  if (s == XENT_OK && weight_out && !weight_sum && !r->d->accumulate) s = zero(r, weight_out, (size_t)V * hb);
  if (s == XENT_OK && bias_sum && (sums || !r->d->accumulate)) s = zero(r, bias_sum, (size_t)V * 4);
  a.step = XENT_LCE_CHIP_GRADS;
  a.lse = t->lse ? (const char*)t->lse : r->ws + L->lse;
  a.dloss = t->dloss;
  a.sum_a = smooth ? r->ws + L->sum_a : NULL;
  a.dentropy = t->dentropy;
  a.entropy = t->dentropy ? entropy_of(r) : NULL;
  a.ignore_invalid_labels = r->d->ce.invalid_labels == XENT_INVALID_LABELS_IGNORE;
  /* grad_hidden a chunk of rows at a time, over the whole vocabulary. */
  for (int64_t r0 = 0; r0 < N && s == XENT_OK && hidden_sum && !whole; r0 += L->chip_rows) {
    const int64_t n = min64(L->chip_rows, N - r0);
    a.row0 = r0, a.row_end = r0 + n, a.class0 = 0, a.class_end = V;
    a.grad_hidden_sum = sums ? acc : hidden_sum + (size_t)r0 * H;
    a.grad_weight_sum = a.grad_bias_sum = NULL;
    if (sums) s = zero(r, acc, (size_t)n * hb);
    if (s == XENT_OK) s = step(r, &a);
    if (s == XENT_OK && sums) s = round_sum(r, n, acc, (char*)t->grad_hidden + (size_t)r0 * H * 2, 0);
  }
  /* grad_weight and grad_bias a tile of classes at a time over every row,
     with grad_hidden where its sum holds every row. */
  const int tiles = weight_out || bias_sum || (hidden_sum && whole);
  for (int64_t v0 = 0; v0 < V && s == XENT_OK && tiles; v0 += L->chip_classes) {
    const int64_t w = min64(L->chip_classes, V - v0);
    a.row0 = 0, a.row_end = N, a.class0 = v0, a.class_end = v0 + w;
    a.grad_hidden_sum = whole ? hidden_sum : NULL;
    a.grad_weight_sum = !weight_out ? NULL : weight_sum ? acc : (float*)weight_out + (size_t)v0 * H;
    a.grad_bias_sum = bias_sum ? bias_sum + v0 : NULL;
    if (weight_sum) s = zero(r, acc, (size_t)w * hb);
    if (s == XENT_OK) s = step(r, &a);
    if (s == XENT_OK && weight_sum)
      s = round_sum(r, w, acc, (char*)t->grad_weight + (size_t)v0 * H * 2, r->d->accumulate);
  }
  if (s == XENT_OK && hidden_sum && whole && sums) s = round_sum(r, N, hidden_sum, t->grad_hidden, 0);
  if (s == XENT_OK && bias_sum && sums) s = round_sum_of(r, V, 1, bias_sum, t->grad_bias, r->d->accumulate);
  return s;
}

/* grad_weight (or main_grad) and grad_bias when there are no rows (nothing to add). */
static xent_status zero_outputs(const run_ctx* r) {
  const xent_linear_ce_tensors* t = r->t;
  const size_t gb = xent_dtype_bytes(r->d->ce.grad_dtype);
  const size_t vh = (size_t)r->d->ce.classes * (size_t)r->d->hidden;
  const size_t sizes[3] = {vh * gb, (size_t)r->d->ce.classes * gb, vh * 4};
  void* outs[3] = {t->grad_weight, t->grad_bias, t->main_grad};
  for (int i = 0; i < 3; ++i) {
    if (!outs[i]) continue;
    const xent_status s = zero(r, outs[i], sizes[i]);
    if (s != XENT_OK) return s;
  }
  return XENT_OK;
}

xent_status xent_linear_ce_op(const char* fn, xent_handle* h, const xent_linear_ce_desc* d,
                              const xent_linear_ce_plan* plan, const xent_linear_ce_tensors* t, void* workspace,
                              size_t workspace_bytes, void* stream) {
  const xent_linear_ce_plan L = *plan;
  xent_status s;
  if (L.total > 0 && !workspace) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: workspace is NULL", fn);
  if (workspace_bytes < L.total)
    return xent_fail(XENT_ERROR_WORKSPACE_TOO_SMALL, "%s: workspace_bytes is %zu, %zu needed", fn, workspace_bytes,
                     L.total);
  if (((uintptr_t)workspace & 63) != 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: workspace must be 64-byte aligned", fn);
  /* The option axes the tensors decide: the class weights, and any
     per-token output (the chunks' fused kernel computes them). */
  const int stats = t->entropy || t->label_logprob || t->argmax || t->dentropy;
  const int uses = (t->weights ? XENT_USES_WEIGHTS : 0) | (stats ? XENT_USES_TOKEN_STATS : 0) |
                   (t->temperature ? XENT_USES_ROW_TEMPERATURE : 0) | (t->token_weight ? XENT_USES_TOKEN_WEIGHT : 0);
  const xent_dispatch_entry* steps = xent_lce_find(h, &d->ce, uses);
  if (!steps) return XENT_ERROR_NOT_GENERATED;
  /* The chunks' kernels, found once: the fused kernel, or the
     vocabulary-parallel path's forward and backward (a chunk's key does
     not depend on its rows). */
  const xent_ce_desc chunk_ce = chunk_desc(d, L.chunk);
  const xent_dispatch_entry* loss = NULL;
  xent_vocab_kernels vocab = {NULL, NULL, 0};
  if (L.chunks > 0 && L.kind != XENT_LINEAR_CE_PLAN_ONE_PASS) {
    /* The tiles are slices of the vocabulary (their kernels' key does not
       depend on the slice). */
    const run_ctx probe = {.fn = fn, .h = h, .d = d, .t = t, .L = &L, .ws = workspace, .ws_bytes = workspace_bytes};
    tile_call tc;
    tile_setup(&probe, 0, 0, XENT_OP_FORWARD_BACKWARD, &tc);
    const xent_status s = xent_vocab_find(h, &tc.desc, XENT_OP_FORWARD_BACKWARD, uses, &vocab);
    if (s != XENT_OK) return s;
  } else if (L.chunks > 0 && d->ce.vocab_shard) {
    const xent_status s = xent_vocab_find(h, &chunk_ce, XENT_OP_FORWARD_BACKWARD, uses, &vocab);
    if (s != XENT_OK) return s;
  } else if (L.chunks > 0) {
    loss = xent_ce_find(h, &chunk_ce, XENT_OP_FORWARD_BACKWARD, uses);
    if (!loss) return XENT_ERROR_NOT_GENERATED;
  }
  const run_ctx r = {.fn = fn, .h = h, .d = d, .t = t, .L = &L, .ws = workspace, .ws_bytes = workspace_bytes,
                     .stream = stream, .steps = steps, .loss = loss, .vocab = vocab};

  /* BEGIN: the mean's divisor and the chunks' dloss, on the device. */
  xent_lce_args a = step_args(d, L.chunk, r.ws + L.steps, stream);
  a.step = XENT_LCE_BEGIN;
  a.labels = t->labels;
  a.weights = t->weights;
  a.token_weight = t->token_weight;
  a.token_weight_count = d->ce.token_weight_mean == XENT_TOKEN_WEIGHT_MEAN_COUNT;
  a.dloss = d->ce.reduction != XENT_REDUCTION_NONE ? t->dloss : NULL;
  s = step(&r, &a);
  const int is_tiled = L.kind != XENT_LINEAR_CE_PLAN_ONE_PASS;
  if (s == XENT_OK && L.kind == XENT_LINEAR_CE_PLAN_ON_CHIP && L.chunks > 0) s = on_chip(&r);
  else if (s == XENT_OK && is_tiled && L.chunks > 0) s = tiled(&r);
  for (int64_t k = 0; s == XENT_OK && !is_tiled && k < L.chunks; ++k) s = chunk(&r, k);
  if (s == XENT_OK && L.chunks == 0 && !d->accumulate) s = zero_outputs(&r);
  if (s != XENT_OK) return s;
  /* FINISH: the loss from the chunks' sums, and the bad-label rows. */
  a = step_args(d, L.chunk, r.ws + L.steps, stream);
  a.step = XENT_LCE_FINISH;
  a.loss = d->ce.reduction != XENT_REDUCTION_NONE ? t->loss : NULL;
  a.bad_label_row = h->bad_label_row;
  return step(&r, &a);
}
