// The device-side steps of the fused linear cross entropy's chunk loop
// (runtime/ops/linear_ce.c): logits = hidden @ weight^T (+ bias) are made
// and consumed a chunk of rows at a time by the backend's GEMMs and the
// cross_entropy family's fused kernel. What the loop needs beyond those runs
// here, on the device, so that no step waits for the host:
//   BEGIN       the mean's divisor (sum of w[y] over the rows that count; the
//               row count for soft labels; with token weights u, w[y]*u and
//               u, unless the call counts without them), and the dloss every chunk's
//               gradient is scaled by: dloss / divisor (mean), dloss (sum);
//               the chunks' bad-label words reset
//   BIAS        the chunk's logits (accumulation type) += bias
//   BIAS_GRAD   the bias gradient, added chunk by chunk in the accumulation
//               type and written (overwritten or added to) after the last
//   FINISH      the loss from the chunks' sums, added in chunk order; each
//               chunk's lowest bad-label row, counted from the first row of all
//   WEIGHT_GRAD an f16/bf16 grad_weight from its sum over the chunks, which
//               the GEMMs kept in f32: rounded once, not once per chunk
//               (bf16's 8 bits would lose the small chunks' share of a sum)
// Every sum has a fixed order (two-stage sums, chunks in order, a column's
// rows in order): the same inputs give the same bits. The divisor is summed
// exactly as the cross_entropy kernels' totals are, so a chunked mean
// divides by what an unchunked call would.
//
// The traits V of a variant (templates/linear_cross_entropy.tmpl writes
// them): D the dtype (xent_dtype_<dtype>), L the label type (D::T for soft
// labels), kSoft, kReduction (XENT_REDUCE_*), and kChunkBytes, the bytes of
// logits a chunk may hold (the spec's tune).
#pragma once

// The unit includes the launch contract (xent_lce_args) before this header:
// xent_launch.h, which xentgen writes beside it.
#include "../xent_device.h"

static_assert(XENT_PARTIAL_BLOCKS <= XENT_MAX_PARTIALS, "the workspace holds every partial sum");

// The ON_CHIP plan's two passes (CHIP_STATS, CHIP_GRADS): CUDA's, for bf16
// logits and hard labels; on sm_90a or sm_100a machine code (or the
// emulator) alone, which the runtime checks before it takes the plan
// (xent_handle.on_chip, which also says which: xent_lce_args.chip_tcgen05).
#if defined(XENT_TARGET_CUDA)
#include "on_chip.h"
#include "on_chip_sm100.h"
template <class D>
constexpr bool xent_lce_chip_dtype = false;
template <>
constexpr bool xent_lce_chip_dtype<xent_dtype_bf16> = true;
template <class V>
constexpr bool xent_lce_on_chip = !V::kSoft && xent_lce_chip_dtype<typename V::D>;
#endif

// The workspace (xent_lce_workspace_bytes): a bad-label word per chunk, then
// in the accumulation type the divisor, the chunks' dloss, a sum per chunk,
// the partial sums, and the bias gradient.
template <class A>
struct xent_lce_ws {
  unsigned long long* bad;
  A* divisor;
  A* dloss;
  A* sums;
  A* partials;
  A* gbias;
};
template <class A>
XENT_DEVICE xent_lce_ws<A> xent_lce_layout(const xent_lce_args& a, int64_t chunks) {
  xent_lce_ws<A> w;
  w.bad = (unsigned long long*)a.workspace;
  A* acc = (A*)(w.bad + chunks);
  w.divisor = acc;
  w.dloss = acc + 1;
  w.sums = acc + 2;
  w.partials = acc + 2 + chunks;
  w.gbias = acc + 2 + chunks + 2 * XENT_MAX_PARTIALS;
  return w;
}

// A mean over hard labels divides by the sum of their rows' weights; over
// soft labels, by the row count or, with token weights, their sum.
template <class V>
static inline __host__ __device__ bool xent_lce_summed_divisor(const xent_lce_args& a) {
  const bool u_in = a.token_weight && !a.token_weight_count;
  return V::kReduction == XENT_REDUCE_MEAN && (!V::kSoft || u_in);
}

// BEGIN, stage 1 (a summed divisor): this block's run of rows
// (xent_partial_range) of the sum of w[y]*u over rows whose label is in
// [0, CT) and not ignore_index (soft labels: of u).
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS)
    xent_lce_divisor(const xent_lce_args a, int64_t chunks) {
  typedef typename V::D::A A;
  typedef typename V::L L;
  XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
  const L* __restrict__ labels = (const L*)a.labels;
  const A* __restrict__ weights = (const A*)a.weights;
  const A* __restrict__ u = a.token_weight_count ? nullptr : (const A*)a.token_weight;
  const int64_t CT = a.global_classes;
  const bool ignore = a.ignore_index != INT64_MIN;
  A total = 0, unused = 0;
  int64_t lo, hi;
  xent_partial_range(a.rows, lo, hi);
  for (int64_t n = lo + threadIdx.x; n < hi; n += blockDim.x) {
    const A un = u ? u[n] : A(1);
    if constexpr (V::kSoft) {
      total += un;
    } else {
      const int64_t y = (int64_t)labels[n];
      if (y >= 0 && y < CT && !(ignore && y == a.ignore_index)) total += (weights ? weights[y] : A(1)) * un;
    }
  }
  xent_partials_store(xent_lce_layout<A>(a, chunks).partials, total, unused, scratch);
}

// BEGIN, stage 2 (one block): the divisor and the chunks' dloss, and every
// chunk's bad-label word reset.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_lce_begin(const xent_lce_args a, int64_t chunks) {
  typedef typename V::D D;
  typedef typename D::A A;
  const xent_lce_ws<A> w = xent_lce_layout<A>(a, chunks);
  for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x) w.bad[k] = ~0ull;
  if constexpr (V::kReduction != XENT_REDUCE_NONE) {
    A divisor;
    XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
    if (xent_lce_summed_divisor<V>(a)) {
      A unused;
      xent_partials_sum(w.partials, xent_partial_blocks(a.rows), divisor, unused, scratch);
    } else if constexpr (V::kReduction == XENT_REDUCE_MEAN) {
      divisor = A(a.rows);  // soft labels: the mean divides by the rows (PyTorch)
    } else {
      divisor = 1;
    }
    if (threadIdx.x == 0) {
      const A dloss = a.dloss ? xent_get<D>(a.dloss, 0, a.loss_f32) : A(1);
      *w.divisor = divisor;
      *w.dloss = V::kReduction == XENT_REDUCE_MEAN ? dloss / divisor : dloss;
    }
  }
}

// BIAS: the chunk's n rows of logits, in the accumulation type, += bias.
template <class V>
static XENT_GLOBAL void __launch_bounds__(256) xent_lce_bias(const xent_lce_args a, int64_t n) {
  typedef typename V::D D;
  const typename D::T* __restrict__ bias = (const typename D::T*)a.bias;
  typename D::A* __restrict__ logits = (typename D::A*)a.acc_logits;
  const int64_t C = a.classes, total = n * C;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x)
    logits[e] += D::load(bias[e % C]);
}

// BIAS_GRAD: a thread per class, the chunk's n rows in order.
template <class V>
static XENT_GLOBAL void __launch_bounds__(256) xent_lce_bias_grad(const xent_lce_args a, int64_t n, int64_t chunks) {
  typedef typename V::D D;
  typedef typename D::A A;
  const xent_lce_ws<A> w = xent_lce_layout<A>(a, chunks);
  const int64_t C = a.classes;
  const bool first = a.chunk == 0, last = a.chunk == chunks - 1;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
    A total = first ? (a.accumulate ? xent_get<D>(a.grad_bias, c, a.grad_f32) : A(0)) : w.gbias[c];
    // The chunk's gradient of the logits is in their dtype (runtime/ops/linear_ce.c).
    for (int64_t r = 0; r < n; ++r) total += D::load(((const typename D::T*)a.grad)[r * C + c]);
    if (last) {
      xent_put<D>(a.grad_bias, c, total, a.grad_f32);
    } else {
      w.gbias[c] = total;
    }
  }
}

// WEIGHT_GRAD (f16, bf16): grad_weight = round(sum over the chunks (+ its old
// value)), an element per thread; the sum is f32 (the GEMMs' output type).
template <class V>
static XENT_GLOBAL void __launch_bounds__(256) xent_lce_weight_grad(const xent_lce_args a) {
  typedef typename V::D D;
  typedef typename D::T T;
  const int64_t total = a.classes * a.hidden;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const float old = a.accumulate ? D::load(((T*)a.grad_weight)[e]) : 0.0f;
    ((T*)a.grad_weight)[e] = D::store(a.weight_acc[e] + old);
  }
}

// ROW_RECORDS (the tiled plans' gradients from the rows' lse, with the
// entropy's gradient or soft labels): chunk `chunk`'s rows as the records
// of one vocabulary slice (kernels/cross_entropy/vocab_parallel.h) whose
// reference is the row's lse and sum 1, so that lse is the gathered lse;
// soft labels' a is the row's sum of w[c] * t'_c (the combine's); wide, the
// entropy share t = -H gives E_p[z] - lse = -H, E_p[z] being lse - H. The
// backward's gathered path then has what it needs.
template <class V>
static XENT_GLOBAL void __launch_bounds__(256) xent_lce_row_records(const xent_lce_args a, int64_t n) {
  typedef typename V::D::A A;
  const int64_t rec = xent_shard_record<A>(a.wide != 0), r0 = a.chunk * a.chunk_rows;
  const A* lse = (const A*)a.lse + r0;
  const A* entropy = a.wide ? (const A*)a.entropy + r0 : nullptr;
  const A* sum_a = a.sum_a ? (const A*)a.sum_a + r0 : nullptr;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    A* st = (A*)a.records + i * rec;
    st[0] = lse[i];
    st[1] = 1;
    st[2] = sum_a ? sum_a[i] : A(0);
    st[3] = 0;
    if (entropy) {
      st[5] = st[6] = st[7] = 0;
      st[4] = -entropy[i];
      *(int64_t*)(st + 8) = XENT_NO_INDEX;
    }
  }
}

// FINISH (one block): the loss, and the bad-label rows.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_lce_finish(const xent_lce_args a, int64_t chunks) {
  typedef typename V::D D;
  typedef typename D::A A;
  const xent_lce_ws<A> w = xent_lce_layout<A>(a, chunks);
  for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x)
    if (w.bad[k] != ~0ull && a.bad_label_row)
      atomicMin(a.bad_label_row, (unsigned long long)(k * a.chunk_rows) + w.bad[k]);
  if constexpr (V::kReduction != XENT_REDUCE_NONE) {
    if (threadIdx.x == 0) {
      // One thread, chunk by chunk: the order the sums were made in.
      A total = 0;
      for (int64_t k = 0; k < chunks; ++k) total += w.sums[k];
      A loss = total;
      if constexpr (V::kReduction == XENT_REDUCE_MEAN) {
        const A divisor = *w.divisor;
        // PyTorch: 0/0 = NaN when every row is ignored; ONNX Runtime: 0.
        loss = divisor == 0 && a.all_ignored_zero ? A(0) : total / divisor;
      }
      xent_put<D>(a.loss, 0, loss, a.loss_f32);
    }
  }
}

#if defined(XENT_TARGET_CUDA)
// Whether the device lets `kernel` have XENT_LCE_CHIP_SMEM of dynamic shared
// memory: past 48 KiB once its limit is raised, once per kernel and device
// (launch.h's xent_kernel_prepare; `known` the launch site's).
template <typename K>
static bool xent_lce_chip_ready(K* kernel, const char* name, int64_t (&known)[XENT_MAX_DEVICES]) {
  static_assert((int)XENT_LCE_TM_SMEM <= (int)XENT_LCE_CHIP_SMEM, "sm_100a's passes ask no more");
  return xent_kernel_prepare(kernel, name, known).max_dynamic >= XENT_LCE_CHIP_SMEM;
}
#endif

#if defined(XENT_TARGET_CUDA)
// A launch whose tensor maps the driver refused: the launcher's status
// (cudaErrorInvalidValue), with the reason under the emulator.
static inline int xent_lce_chip_no_map(const char* name) {
#if defined(XENT_EMU)
  return xent_emu_refuse_launch(name, "the driver refused a tensor map of hidden or weight");
#else
  (void)name, (void)xent_launch_take();
  return 1;
#endif
}
#endif

// CHIP_STATS and CHIP_GRADS (on_chip.h's kernels): one chunk of every row
// (the steps' workspace for one chunk); pass 2's scale is BEGIN's dloss
// (reduced) or the rows' own (none).
template <class V>
static int xent_lce_chip_launch(const xent_lce_args& a, xent_stream_t stream) {
#if defined(XENT_TARGET_CUDA)
  if constexpr (xent_lce_on_chip<V>) {
    typedef typename V::L L;
    static int64_t known[8][XENT_MAX_DEVICES];  // the kernels' limits, as xent_lce_chip_ready found them
    // sm_90a's passes (on_chip.h) or, on an sm_100 whose code is sm_100a's,
    // the tensor-memory ones (on_chip_sm100.h): the same arguments and grids.
    const bool tm = a.chip_tcgen05 != 0;
    const dim3 block(tm ? (unsigned)XENT_LCE_TM_THREADS : (unsigned)XENT_LCE_CHIP_THREADS);
    const xent_lce_chip_logit logit = {(float)a.softcap, (float)(1.0 / a.temperature)};
    if (a.step == XENT_LCE_CHIP_STATS) {
      xent_lce_chip_args<L> c = {{},
                                 {},
                                 false,
                                 (const uint16_t*)a.hidden_data,
                                       (const uint16_t*)a.weight_data,
                                       (const L*)a.labels,
                                       (float*)a.records,
                                       (const float*)a.weights,
                                       (const uint16_t*)a.bias,
                                       logit,
                                       a.rows,
                                       a.hidden,
                                       a.classes,
                                       a.slice,
                                       a.ignore_index,
                                       (float)a.label_smoothing,
                                       (const float*)a.row_temperature,
                                       a.class_offset,
                                       a.global_classes};
      c.group = XENT_LCE_CHIP_GROUP;
      if (xent_lce_chip_maps(c, a.rows, a.classes) != 0) return xent_lce_chip_no_map("xent_lce_chip_stats");
      const int64_t blocks = xent_lce_chip_blocks(a.rows, XENT_LCE_CHIP_BLOCK_ROWS);
      const int64_t slices = xent_lce_chip_blocks(a.classes, a.slice);
      const dim3 grid((unsigned)(blocks * slices));  // under 2^31 (linear_ce.c's chip_serves)
      if (blocks > 0 && slices > 0 && tm && a.wide) {
        if (!xent_lce_chip_ready(xent_lce_chip_stats_sm100<L, true>, "xent_lce_chip_stats_sm100", known[4]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_stats_sm100");
        XENT_LAUNCH((xent_lce_chip_stats_sm100<L, true>), grid, block, XENT_LCE_TM_SMEM, stream, c);
      } else if (blocks > 0 && slices > 0 && tm) {
        if (!xent_lce_chip_ready(xent_lce_chip_stats_sm100<L, false>, "xent_lce_chip_stats_sm100", known[3]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_stats_sm100");
        XENT_LAUNCH((xent_lce_chip_stats_sm100<L, false>), grid, block, XENT_LCE_TM_SMEM, stream, c);
      } else if (blocks > 0 && slices > 0 && a.wide) {
        if (!xent_lce_chip_ready(xent_lce_chip_stats<L, true>, "xent_lce_chip_stats", known[1]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_stats");
        XENT_LAUNCH((xent_lce_chip_stats<L, true>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      } else if (blocks > 0 && slices > 0) {
        if (!xent_lce_chip_ready(xent_lce_chip_stats<L, false>, "xent_lce_chip_stats", known[0]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_stats");
        XENT_LAUNCH((xent_lce_chip_stats<L, false>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      }
    } else {
      const bool rows_own = V::kReduction == XENT_REDUCE_NONE;
      const int kind = !rows_own ? XENT_LCE_CHIP_DLOSS_SCALAR
                       : !a.dloss ? XENT_LCE_CHIP_DLOSS_ONE
                       : a.loss_f32 ? XENT_LCE_CHIP_DLOSS_ROWS_F32
                                    : XENT_LCE_CHIP_DLOSS_ROWS_BF16;
      xent_lce_chip_grad_args<L> c = {{},
                                      {},
                                      false,
                                      (const uint16_t*)a.hidden_data,
                                            (const uint16_t*)a.weight_data,
                                            (const L*)a.labels,
                                            (const float*)a.lse,
                                            (const float*)a.weights,
                                            (const uint16_t*)a.bias,
                                            logit,
                                            (float)a.z_loss,
                                            rows_own ? a.dloss : (const char*)a.workspace + xent_lce_dloss_offset(1, 4),
                                            kind,
                                            a.grad_hidden_sum,
                                            a.grad_weight_sum,
                                            a.grad_bias_sum,
                                            a.rows,
                                            a.hidden,
                                            a.classes,
                                            a.ignore_index,
                                            a.row0,
                                            a.row_end,
                                            a.class0,
                                            a.class_end,
                                            a.ignore_invalid_labels != 0,
                                            (float)a.label_smoothing,
                                            (const float*)a.sum_a,
                                            (const float*)a.row_temperature,
                                            (const float*)a.token_weight,
                                            (const float*)a.dentropy,
                                            (const float*)a.entropy,
                                            a.class_offset,
                                            a.global_classes};
      c.group = XENT_LCE_CHIP_GROUP;
      if (xent_lce_chip_maps(c, a.row_end, a.class_end) != 0) return xent_lce_chip_no_map("xent_lce_chip_grads");
      // Both renderings' blocks: 256 rows x 128 classes where only
      // grad_weight (and grad_bias) is summed, else 128 x 256.
      const bool tall = !a.grad_hidden_sum;
      const int64_t block_rows = tall ? xent_lce_chip_block<true>::kRows : xent_lce_chip_block<false>::kRows;
      const int64_t block_classes = tall ? xent_lce_chip_block<true>::kClasses : xent_lce_chip_block<false>::kClasses;
      const int64_t blocks = xent_lce_chip_blocks(a.row_end - a.row0, block_rows);
      const int64_t tiles = xent_lce_chip_blocks(a.class_end - a.class0, block_classes);
      const dim3 grid((unsigned)(blocks * tiles));  // under 2^31 (linear_ce.c's chip_serves)
      if (blocks > 0 && tiles > 0 && tm && tall) {
        if (!xent_lce_chip_ready(xent_lce_chip_grads_sm100<L, true>, "xent_lce_chip_grads_sm100", known[7]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_grads_sm100");
        XENT_LAUNCH((xent_lce_chip_grads_sm100<L, true>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      } else if (blocks > 0 && tiles > 0 && tm) {
        if (!xent_lce_chip_ready(xent_lce_chip_grads_sm100<L, false>, "xent_lce_chip_grads_sm100", known[5]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_grads_sm100");
        XENT_LAUNCH((xent_lce_chip_grads_sm100<L, false>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      } else if (blocks > 0 && tiles > 0 && tall) {
        if (!xent_lce_chip_ready(xent_lce_chip_grads<L, true>, "xent_lce_chip_grads", known[6]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_grads");
        XENT_LAUNCH((xent_lce_chip_grads<L, true>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      } else if (blocks > 0 && tiles > 0) {
        if (!xent_lce_chip_ready(xent_lce_chip_grads<L, false>, "xent_lce_chip_grads", known[2]))
          return XENT_REFUSED_SHAPE("xent_lce_chip_grads");
        XENT_LAUNCH((xent_lce_chip_grads<L, false>), grid, block, XENT_LCE_CHIP_SMEM, stream, c);
      }
    }
    return XENT_LAST_ERROR();
  }
#endif
  (void)a, (void)stream;  // never asked of this variant (runtime/ops/linear_ce.c)
#if defined(XENT_EMU)
  return xent_emu_refuse_launch("xent_lce_chip", "bf16 logits and hard labels on CUDA only");
#else
  return 1;  // cudaErrorInvalidValue, hipErrorInvalidValue
#endif
}

// The launcher: one step of the chunk loop (a.step, XENT_LCE_*).
template <class V>
static int xent_lce_launch(const void* args) {
  const xent_lce_args a = *(const xent_lce_args*)args;
  const xent_stream_t stream = (xent_stream_t)a.stream;
  const int64_t chunks = a.rows > 0 && a.chunk_rows > 0 ? (a.rows + a.chunk_rows - 1) / a.chunk_rows : 0;
  const int64_t n = a.chunk_rows < a.rows - a.chunk * a.chunk_rows ? a.chunk_rows : a.rows - a.chunk * a.chunk_rows;
  switch (a.step) {
    case XENT_LCE_PLAN: {
      // The most rows, a power of two, whose logits fit in the tune's
      // kChunkBytes; the whole vocabulary's, so that every rank of a
      // vocabulary-parallel call takes the same chunks.
      const int64_t row_bytes = a.global_classes * (int64_t)sizeof(typename V::D::T);
      int64_t rows = 1;
      while (rows * 2 * row_bytes <= V::kChunkBytes && rows < a.rows) rows *= 2;
      *a.chunk_rows_out = rows;
      return 0;
    }
    case XENT_LCE_BEGIN:
      if (xent_lce_summed_divisor<V>(a))
        XENT_LAUNCH(xent_lce_divisor<V>, dim3(xent_partial_blocks(a.rows)), dim3(XENT_PARTIAL_THREADS), 0, stream, a,
                    chunks);
      XENT_LAUNCH(xent_lce_begin<V>, dim3(1), dim3(XENT_PARTIAL_THREADS), 0, stream, a, chunks);
      break;
    case XENT_LCE_BIAS:
      if (n > 0)
        XENT_LAUNCH(xent_lce_bias<V>, dim3(xent_grid_blocks((n * a.classes + 255) / 256)), dim3(256), 0, stream, a, n);
      break;
    case XENT_LCE_BIAS_GRAD:
      if (n > 0)
        XENT_LAUNCH(xent_lce_bias_grad<V>, dim3(xent_grid_blocks((a.classes + 255) / 256)), dim3(256), 0, stream, a, n,
                    chunks);
      break;
    case XENT_LCE_FINISH:
      XENT_LAUNCH(xent_lce_finish<V>, dim3(1), dim3(XENT_PARTIAL_THREADS), 0, stream, a, chunks);
      break;
    case XENT_LCE_ROW_RECORDS:
      if (n > 0)
        XENT_LAUNCH(xent_lce_row_records<V>, dim3(xent_grid_blocks((n + 255) / 256)), dim3(256), 0, stream, a, n);
      break;
    case XENT_LCE_CHIP_STATS:
    case XENT_LCE_CHIP_GRADS:
      return xent_lce_chip_launch<V>(a, stream);
    case XENT_LCE_WEIGHT_GRAD:
      if constexpr (V::D::kMixed) {
        if (a.classes * a.hidden > 0)
          XENT_LAUNCH(xent_lce_weight_grad<V>, dim3(xent_grid_blocks((a.classes * a.hidden + 255) / 256)), dim3(256), 0,
                      stream, a);
      }
      break;
  }
  return XENT_LAST_ERROR();
}
