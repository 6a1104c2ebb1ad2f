// Softmax cross entropy: the kernels a cross_entropy variant instantiates
// (templates/cross_entropy.tmpl writes each variant's unit: its traits, the
// rows kernel's entry and the launcher).
//
// Hard labels. With p = softmax(x), lse = log sum exp(x), label y:
//   loss_n = (1-eps)*w[y]*(lse - x[y]) + (eps/C)*sum_c w[c]*(lse - x[c])
//   dx_j   = scale_n*(p_j*((1-eps)*w[y] + (eps/C)*sum_c w[c]) - (1-eps)*w[y]*[j==y] - (eps/C)*w[j])
// Rows whose label is ignore_index contribute 0; a label outside [0, C) gives
// a NaN row (or, if asked, counts as ignored) and is never used as an index.
//
// Soft labels: row n carries a distribution t over the C classes (same
// layout and dtype as the logits). With t' = (1-eps)*t + eps/C:
//   loss_n = sum_c w[c]*t'_c*(lse - x_c)
//   dx_j   = scale_n*(p_j*sum_c w[c]*t'_c - w[j]*t'_j)
//   dt_j   = scale_n*(1-eps)*w[j]*(lse - x_j)          (optional grad_labels)
// The mean divides by the number of rows (PyTorch); ignore_index does not apply.
//
// Every formula is shift-invariant, as PyTorch's (x - max) - log sum exp(x -
// max): with m the row's max and lr = log sum exp(x - m), lse - x_c is
// (m - x_c) + lr and p_j is exp((x_j - m) - lr), so logits of 1e8 or 3e38 lose
// nothing to the magnitude of lse. The sums over c of smoothing and soft
// labels are taken relative to r, the row's first logit. A row whose max is
// +inf or NaN is NaN throughout (lr is NaN), as in PyTorch.
// With z-loss, loss_n += z*lse^2 and dx_j += scale_n*2*z*lse*p_j. With a soft
// cap, x is cap*tanh(x/cap) throughout and dx_j gets the factor 1 - tanh^2.
// With a temperature tau (the call's, or a.row_temperature[n]), every formula
// is of z = x/tau (after the cap; m, lse and p are z's) and dx_j gets the
// factor 1/tau. A token weight u_n (a.token_weight) multiplies loss_n and
// its gradient; u_n = 0 gives 0. The mean divides by sum_n w[y_n]*u_n over
// the counted rows (soft labels: sum_n u_n), or, with a.token_weight_count,
// by what it would without them. Per-token outputs
// (token_stats): the entropy H = lr - T/S, where S = sum_c exp(z_c - m) and T =
// sum_c exp(z_c - m)*(z_c - m) (so E_p[z] = m + T/S), the label's log-prob
// z_y - lse and the argmax; with dentropy, dx_j += dentropy_n*p_j*(E_p[z] -
// z_j) (times 1/tau and the cap's factor).
// A row is one position: element c of row r is at (r / inner)*C*inner +
// c*inner + r % inner, so [N, C, d1..dk] inputs are read in place, strided.
// Vocabulary-parallel calls see classes [off, off + C) of a vocabulary of CT
// (a.class_offset, a.global_classes; 0 and C otherwise): labels, weights and
// eps/CT are global, only the logits and their gradient are a slice.
//
// The traits V of a variant (each a compile-time constant):
//   D, L            the dtype (xent_dtype_<dtype>) and the label type (D::T
//                   for soft labels, kSoft)
//   kOp, kReduction XENT_FWD, XENT_BWD or XENT_FWD_BWD; XENT_REDUCE_*
//   kWeights, kSmoothing, kIgnoreIndex, kZLoss, kSoftcap, kTemperature,
//   kTokenStats, kTokenWeight
//                   the option axes: XENT_OFF, XENT_ON or XENT_RUNTIME
//                   (kernels/device/variant.h)
//   kRowLoads       16-byte loads a thread keeps in flight in a row's walk
//   kRowThreads, kRowMinBlocks, kChipThreads, kChipMinBlocks, kColumnThreads,
//   kColumnResident the launch bounds (XENT_ROWS_THREADS, kernels/device/launch.h)
#pragma once

// The unit includes the launch contract (xent_ce_args) before this header:
// xent_launch.h, which xentgen writes beside it.
#include "../xent_device.h"

#include <math.h>

#include "rescale.h"

static_assert(XENT_PARTIAL_BLOCKS <= XENT_MAX_PARTIALS, "the workspace holds every partial sum");

// What a variant's traits imply.
template <class V>
struct xent_ce_facts {
  static constexpr bool kFwd = V::kOp != XENT_BWD;
  static constexpr bool kBwd = V::kOp != XENT_FWD;
  static constexpr bool kSmooth = V::kSmoothing != XENT_OFF;
  static constexpr bool kZLoss = V::kZLoss != XENT_OFF;
  static constexpr bool kCap = V::kSoftcap != XENT_OFF;
  static constexpr bool kTempered = V::kTemperature != XENT_OFF;
  static constexpr bool kStats = V::kTokenStats != XENT_OFF;
  static constexpr bool kTokenWeight = V::kTokenWeight != XENT_OFF;
  // A forward-only variant also serves the two forward passes of a
  // vocabulary-parallel call (shard statistics, then the combine).
  static constexpr bool kShardable = kFwd && !kBwd;
  // The totals kernel runs first when the mean's gradient needs the sum of
  // row weights, or smoothing with weights needs the sum of class weights.
  // Soft labels need neither but with token weights: their mean divides by
  // the row count (or the sum of token weights), and each row sums its own
  // weighted targets.
  static constexpr bool kRowTotals = V::kReduction == XENT_REDUCE_MEAN && kBwd && (!V::kSoft || kTokenWeight);
  static constexpr bool kClassTotals = V::kWeights != XENT_OFF && kSmooth && !V::kSoft;
  static constexpr bool kTotals = kRowTotals || kClassTotals;
  // The forward's per-row losses go to the workspace for the reduce kernels.
  static constexpr bool kReduced = V::kReduction != XENT_REDUCE_NONE && kFwd;
};

// w[c]: the class weight where the variant (or, run time, the call) has
// weights, else 1.
template <class V>
XENT_DEVICE typename V::D::A xent_ce_w(const typename V::D::A* __restrict__ weights, int64_t c) {
  typedef typename V::D::A A;
  if constexpr (V::kWeights == XENT_ON) return weights[c];
  else if constexpr (V::kWeights == XENT_RUNTIME) return weights ? weights[c] : A(1);
  else return A(1);
}

// Row row's token weight u (1 where the variant or the call has none).
template <class V>
XENT_DEVICE typename V::D::A xent_ce_u(const xent_ce_args& a, int64_t row) {
  typedef typename V::D::A A;
  if constexpr (V::kTokenWeight == XENT_OFF) return A(1);
  else if constexpr (V::kTokenWeight == XENT_ON) return ((const A*)a.token_weight)[row];
  else return a.token_weight ? ((const A*)a.token_weight)[row] : A(1);
}

// Whether the mean's divisor holds the token weights.
template <class V>
static inline __host__ __device__ bool xent_ce_u_in_mean(const xent_ce_args& a) {
  return V::kTokenWeight != XENT_OFF && a.token_weight && !a.token_weight_count;
}

// A row's loss l and its weight in the mean, times its token weight u (0
// for u = 0, whatever l is).
template <class V>
XENT_DEVICE void xent_ce_weigh(const xent_ce_args& a, int64_t row, typename V::D::A& l,
                               typename V::D::A& row_weight) {
  typedef typename V::D::A A;
  if constexpr (V::kTokenWeight != XENT_OFF) {
    if (V::kTokenWeight == XENT_ON || a.token_weight) {
      const A u = xent_ce_u<V>(a, row);
      l = u == A(0) ? A(0) : l * u;
      if (!a.token_weight_count) row_weight *= u;
    }
  } else {
    (void)a, (void)row, (void)l, (void)row_weight;
  }
}

// 1 / tau of a row with its own temperature, NaN (and the row recorded, as
// a bad label's) where tau is not finite and > 0.
template <class A>
XENT_DEVICE A xent_ce_row_itau(const xent_ce_args& a, int64_t row, bool lead) {
  const A tau = ((const A*)a.row_temperature)[row], it = A(1) / tau;
  const bool good = tau > A(0) && tau - tau == A(0) && it - it == A(0);
  if (!good && lead && a.bad_label_row) atomicMin(a.bad_label_row, (unsigned long long)row);
  return good ? it : A(NAN);
}

// The label type of a rows kernel the i32 and i64 variants of the same other
// axes share (gen/lua/dsl.lua's share_rows_kernels): it reads either width,
// as the launcher says (a.wide_labels), so a unit compiles one such kernel,
// not two.
struct xent_int_labels {};
template <class P, class Q>
struct xent_same_type {
  static constexpr bool value = false;
};
template <class P>
struct xent_same_type<P, P> {
  static constexpr bool value = true;
};

// Whether the labels are int64 (else int32).
template <class V>
XENT_DEVICE bool xent_ce_wide_labels(const xent_ce_args& a) {
  if constexpr (xent_same_type<typename V::L, xent_int_labels>::value) return a.wide_labels;
  else return sizeof(typename V::L) == 8;
}

// Row row's hard label.
template <class V>
XENT_DEVICE int64_t xent_ce_label(const xent_ce_args& a, int64_t row) {
  return xent_ce_wide_labels<V>(a) ? ((const int64_t*)a.labels)[row] : (int64_t)((const int32_t*)a.labels)[row];
}

// Row row's hard label, loaded now and put together where it is used
// (value()): as two 32-bit words, each loaded whatever the label width (an
// i32 label's twice), so that no instruction takes a loaded word before the
// walk's loads issue. A widening or a move right after a load (the kernel
// both label widths share) made the thread wait for the label first.
template <class V>
struct xent_ce_label_load {
  int32_t lo = 0, hi = 0;
  __device__ __forceinline__ xent_ce_label_load() {}
  __device__ __forceinline__ xent_ce_label_load(const xent_ce_args& a, int64_t row) {
    const bool wide = xent_ce_wide_labels<V>(a);
    const int32_t* p = (const int32_t*)a.labels + (wide ? 2 * row : row);
    const int64_t second = wide ? 1 : 0;
    lo = p[0];
    hi = p[second];
  }
  __device__ __forceinline__ int64_t value(const xent_ce_args& a) const {
    return xent_ce_wide_labels<V>(a) ? (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo) : (int64_t)lo;
  }
};

// Whether a hard label's row is left out of the loss: its label is
// ignore_index (INT64_MIN, XENT_NO_IGNORE_INDEX, matches no label) or, where
// the call asks, outside [0, CT).
template <class V>
XENT_DEVICE bool xent_ce_ignored(const xent_ce_args& a, int64_t y, bool in_range) {
  if constexpr (V::kIgnoreIndex == XENT_OFF) return a.ignore_invalid_labels && !in_range;
  else return (y == a.ignore_index && a.ignore_index != INT64_MIN) || (a.ignore_invalid_labels && !in_range);
}

// Where a row's loss goes: loss[row] ('none'), or the workspace ws of
// rows rows for the reduce kernels (the loss, then the row's weight in the
// mean).
template <class V>
XENT_DEVICE void xent_ce_store_row(const xent_ce_args& a, typename V::D::A* ws, int64_t rows, int64_t row,
                                   typename V::D::A l, typename V::D::A row_weight) {
  if constexpr (V::kReduction == XENT_REDUCE_NONE) {
    (void)ws, (void)rows, (void)row_weight;
    xent_put<typename V::D>(a.loss, row, l, a.loss_f32);
  } else {
    ws[2 + row] = l;
    ws[2 + rows + row] = row_weight;
  }
}

// A logit after the soft cap, from its stored value.
template <class V>
XENT_DEVICE typename V::D::A xent_ce_logit(typename V::D::T raw, bool capped, typename V::D::A cap) {
  const typename V::D::A x = V::D::load(raw);
  if constexpr (V::kSoftcap == XENT_ON) return xent_softcap(x, cap);
  else if constexpr (V::kSoftcap == XENT_RUNTIME) return capped ? xent_softcap(x, cap) : x;
  else return x;
}

// A 16-byte vector of logits widened (a word at a time) and soft-capped.
template <class V>
XENT_DEVICE void xent_ce_widen(const xent_vec16<typename V::D::T>& c, typename V::D::A (&xv)[V::D::kVec], bool capped,
                               typename V::D::A cap) {
  V::D::widen(c, xv);
  if constexpr (V::kSoftcap == XENT_ON) {
    for (int k = 0; k < V::D::kVec; ++k) xv[k] = xent_softcap(xv[k], cap);
  } else if constexpr (V::kSoftcap == XENT_RUNTIME) {
    if (capped)
      for (int k = 0; k < V::D::kVec; ++k) xv[k] = xent_softcap(xv[k], cap);
  }
}

// Where the two-stage sums' partials lie: after the per-row losses
// (xent_ce_workspace_bytes), which a bwd variant has none of.
template <class V>
XENT_DEVICE typename V::D::A* xent_ce_partials(const xent_ce_args& a) {
  typedef typename V::D::A A;
  if constexpr (xent_ce_facts<V>::kReduced) return (A*)a.workspace + 2 + 2 * a.rows;
  else return (A*)a.workspace + 2;
}

// Items of the totals' stage 1: the rows and the classes side by side.
static inline __host__ __device__ int64_t xent_ce_totals_items(const xent_ce_args& a) {
  return a.rows > a.global_classes ? a.rows : a.global_classes;
}

// Stage 1 of ws[0] = sum over rows of w[y] (the mean's denominator) and
// ws[1] = sum over classes of w[c] (the smoothing term): this block's runs
// of rows and of classes (xent_partial_blocks). Fixed order, no atomics.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_ce_totals(const xent_ce_args a) {
  typedef xent_ce_facts<V> F;
  typedef typename V::D::A A;
  XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
  const A* __restrict__ weights = (const A*)a.weights;
  const int64_t C = a.global_classes;
  A row_weight = 0, class_weight = 0;
  int64_t lo, hi;
  if constexpr (F::kRowTotals) {
    const bool u_in = xent_ce_u_in_mean<V>(a);
    xent_partial_range(a.rows, lo, hi);
    if constexpr (V::kSoft) {
      // (The launcher runs it for soft labels only with token weights.)
      for (int64_t n = lo + threadIdx.x; n < hi; n += blockDim.x) row_weight += xent_ce_u<V>(a, n);
    } else {
      const typename V::L* __restrict__ labels = (const typename V::L*)a.labels;
      for (int64_t n = lo + threadIdx.x; n < hi; n += blockDim.x) {
        const int64_t y = (int64_t)labels[n];
        bool counted = y >= 0 && y < C;
        if constexpr (V::kIgnoreIndex != XENT_OFF) counted = counted && y != a.ignore_index;
        if (counted) row_weight += xent_ce_w<V>(weights, y) * (u_in ? xent_ce_u<V>(a, n) : A(1));
      }
    }
  }
  if constexpr (F::kClassTotals) {
    xent_partial_range(C, lo, hi);
    for (int64_t c = lo + threadIdx.x; c < hi; c += blockDim.x) class_weight += xent_ce_w<V>(weights, c);
  }
  xent_partials_store(xent_ce_partials<V>(a), row_weight, class_weight, scratch);
}

// Stage 2: ws[0] and ws[1] from the partials, in order.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_ce_totals_final(const xent_ce_args a) {
  typedef typename V::D::A A;
  XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
  A row_weight, class_weight;
  xent_partials_sum(xent_ce_partials<V>(a), xent_partial_blocks(xent_ce_totals_items(a)), row_weight, class_weight,
                    scratch);
  if (threadIdx.x == 0) {
    ((A*)a.workspace)[0] = row_weight;
    ((A*)a.workspace)[1] = class_weight;
  }
}

// The tile shape's per-row inputs of rows [first, first + n): the labels
// and, for the backward from a saved lse, that lse, into shared memory,
// four loads a thread issued before their stores (a batch, so that their
// latencies overlap the tile's copy and one another). The caller's barrier
// then makes them whole.
template <class V, class Y, class L>
XENT_DEVICE void xent_ce_tile_inputs(const xent_ce_args& a, int64_t first, int64_t n, Y staged_y, L staged_lse) {
  typedef typename V::D::A A;
  constexpr int kBatch = 4;
  const int64_t threads = (int64_t)blockDim.x;
  for (int64_t r = (int64_t)threadIdx.x; r < n; r += kBatch * threads) {
    int64_t y[kBatch];
    A lse[kBatch];
    (void)lse;
    XENT_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const int64_t at = xent_min_index(r + u * threads, n - 1);
      y[u] = xent_ce_label<V>(a, first + at);
      if constexpr (V::kOp == XENT_BWD) lse[u] = a.lse_in ? ((const A*)a.lse_in)[first + at] : A(0);
    }
    XENT_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      if (r + u * threads >= n) break;
      staged_y[r + u * threads] = y[u];
      if constexpr (V::kOp == XENT_BWD) staged_lse[r + u * threads] = lse[u];
    }
  }
}

// A strided call cut along its class axis (a.column_slices > 1; the grid's
// y is the slice, runtime/ops/column_split.c): this block's classes [first,
// first + classes) of every row, `skip` elements on from the row's first,
// seen as one slice of a vocabulary-parallel call sees its own (its records
// the slice's [rows] of shard_stats; labels, weights and global_classes the
// whole axis's). Else the whole row. (The body moves its pointers by these
// offsets rather than taking a moved copy of the arguments: from a copy
// nvcc no longer knows they are global memory, and every load is generic.)
struct xent_ce_cut {
  int64_t slice, first, classes, skip;
};
template <int kShape>
XENT_DEVICE xent_ce_cut xent_ce_cut_of(const xent_ce_args& a) {
  if (kShape != XENT_COLUMN || a.column_slices <= 1) return {0, 0, a.classes, 0};
  const int64_t per = (a.classes + a.column_slices - 1) / a.column_slices, slice = (int64_t)xent_grid_row();
  const int64_t first = slice * per, left = a.classes > first ? a.classes - first : 0;
  return {slice, first, left < per ? left : per, first * a.inner};
}

// Statistics and loss (fwd), then the gradient (bwd) of each row, in any
// shape of the row walk (kShape, kernels/device/rows.h). XENT_ON_CHIP: a
// cluster of blocks per row, each walking its slice of the row from its
// shared memory, where the pipeline (pipe, kernels/device/pipeline.h)
// copied it while the last row was walked: the fused pass moves the
// logits' bytes once in, once out.
// The rows kernel reads kReduction only as none or not, so that a mean and a
// sum variant can share one (the launcher's divide_by_total tells them apart).
template <class V, int kShape, class Pipe, class Part, class IPart>
XENT_DEVICE void xent_ce_rows_body(const xent_ce_args& a, int row_group, const Pipe& pipe, Part part, IPart ipart) {
  typedef xent_ce_facts<V> F;
  typedef typename V::D D;
  typedef typename D::T T;
  typedef typename D::A A;
  constexpr int kVec = D::kVec;
  constexpr bool kColumn = kShape == XENT_COLUMN;
  // The tile shape: rows read from the block's tile in shared memory
  // (kernels/device/rows.h); its launcher takes it only for hard labels and
  // calls without the per-element extras or f32 gradients (xent_ce_tile_ok).
  constexpr bool kTile = kShape == XENT_TILE;
  static_assert(!kTile || !V::kSoft, "the tile shape reads no second row (soft labels)");
  constexpr int kRowLoads = V::kRowLoads;
  (void)pipe, (void)part, (void)ipart;
  const xent_ce_cut cut = xent_ce_cut_of<kShape>(a);
  const T* x = (const T*)a.logits + cut.skip;
  // The labels: a distribution t (soft) or a class per row.
  [[maybe_unused]] const T* __restrict__ t = V::kSoft ? (const T*)a.labels + cut.skip : nullptr;
  const A* __restrict__ weights = (const A*)a.weights;
  A* ws = (A*)a.workspace;
  const int64_t rows = a.rows, C = cut.classes, inner = kColumn ? a.inner : 1;
  // (A framework's slice offset may live on the device: a.class_offset_at.)
  const int64_t off = (a.class_offset_at ? *a.class_offset_at : a.class_offset) + cut.first, CT = a.global_classes;
  const A eps = (A)a.label_smoothing, z = (A)a.z_loss, cap = (A)a.softcap;
  const bool smoothing = eps != A(0), capped = cap != A(0);
  A itau = (A)a.inv_temperature;  // 1 / tau: the call's, or (a.row_temperature) the row's
  (void)weights, (void)ws, (void)eps, (void)z, (void)cap, (void)smoothing, (void)capped, (void)off, (void)CT,
      (void)itau;
  XENT_SHARED_ARRAY(A, scratch, 4 * XENT_MAX_WARPS);
  // The argmax's candidates, reduced as int64 (xent_group_min2).
  XENT_SHARED_ARRAY(int64_t, iscratch, F::kStats && F::kFwd ? 2 * XENT_MAX_WARPS : 1);
  // The strided shape's 16-byte loads are staged here (xent_column_walk).
  XENT_SHARED_ARRAY16(T, stage, kColumn ? XENT_COLUMN_STAGE(V::kColumnThreads, T) : 1);
  // The tile shape's rows, the tile's first row at element 0, and their
  // labels and (the backward) saved lse, staged with them: each pass of rows
  // reads them from there, not with a load from memory of its own.
  XENT_SHARED_ARRAY16(T, staged, kTile ? XENT_TILE_BYTES / (int)sizeof(T) : 1);
  XENT_SHARED_ARRAY(int64_t, staged_y, kTile ? XENT_TILE_MAX_ROWS : 1);
  XENT_SHARED_ARRAY(A, staged_lse, kTile && !F::kFwd ? XENT_TILE_MAX_ROWS : 1);
  (void)staged, (void)staged_y, (void)staged_lse;
  const bool first_block = kShape != XENT_ON_CHIP || xent_cluster_rank() == 0;

  // The row's scalars: w[c], the logit at element e after the cap, and z,
  // the logit scaled by the temperature (read outside the walks: per row).
  const auto W = [&](int64_t c) { return xent_ce_w<V>(weights, c); };
  const auto X = [&](int64_t e) {
    if constexpr (kTile) return xent_ce_logit<V>((T)staged[e], capped, cap);
    else return xent_ce_logit<V>(XENT_LD(x + (e)), capped, cap);
  };
  const auto Z = [&](int64_t e) {
    if constexpr (F::kTempered) return X(e) * itau;
    else return X(e);
  };
  // The smoothed target t'_j of a soft-label row, read at element e (moved
  // by the row's tshift where the labels' rows are a.label_stride apart).
  [[maybe_unused]] int64_t tshift = 0;
  [[maybe_unused]] const auto soft_target = [&](int64_t e) -> A {
    const A tj = D::load(t[e + tshift]);
    if constexpr (V::kSmoothing == XENT_ON) return (1 - eps) * tj + eps / A(CT);
    else if constexpr (V::kSmoothing == XENT_RUNTIME) return smoothing ? (1 - eps) * tj + eps / A(CT) : tj;
    else return tj;
  };
  // sum_c w[c] over the vocabulary (ws[1], the totals kernel's).
  [[maybe_unused]] const auto sum_w = [&]() -> A {
    if constexpr (V::kWeights == XENT_ON) return ws[1];
    else if constexpr (V::kWeights == XENT_RUNTIME) return weights ? ws[1] : A(CT);
    else return A(CT);
  };

  const xent_row_walk walk = xent_rows<kShape>(row_group);
  const int64_t lane = walk.lane, group = walk.group;
  // A read-only walk of a row (f per scalar, fv per whole 16-byte vector):
  // from memory, or in the tile shape from the tile.
  const auto each_vec = [&](int64_t base, int64_t width, auto f, auto fv) XENT_INLINE_LAMBDA {
    if constexpr (kTile) xent_tile_walk<T>(staged, base, width, lane, group, xent_vec_sink<decltype(fv)>{fv}, f);
    else xent_row_each_vec<kRowLoads, kColumn>(x, base, width, inner, stage, lane, group, f, fv);
  };
  // The tile shape walks the passes of its tile (blockDim / group rows
  // each), rows [tile_first, tile_end) staged in shared memory, then its
  // next tile, the grid's tiles on; the other shapes step by walk.step.
  const int64_t per = kTile ? xent_tile_rows(C, group, (int64_t)blockDim.x, (int64_t)sizeof(T)) : 0;
  int64_t tile_first = 0, tile_end = 0;
  (void)per, (void)tile_first, (void)tile_end;
  // (A launch without clusters has a cluster a block: xent_cluster_id() is
  // the block's index.)
  for (int64_t tile = kTile ? (int64_t)xent_cluster_id() * per : walk.first; tile < rows;
       tile = kTile ? xent_tile_next(tile, walk.step, tile_first, tile_end, (int64_t)xent_clusters() * per)
                    : tile + walk.step) {
    // The on-chip shape: this row's slice is in the stash from vector
    // `half` on, the next row's on its way.
    [[maybe_unused]] int64_t half = 0;
    if constexpr (kShape == XENT_ON_CHIP) half = pipe.take(tile);
    if constexpr (kTile) {
      if (tile >= tile_end) {
        // A new tile: the last one's gradient out, this one's rows in, and
        // their labels and saved lse while the rows are in flight.
        const int64_t n = xent_min_index(per, rows - tile);
        xent_tile_next_rows<F::kBwd, kRowLoads>(x, (T*)a.grad, C, tile_first, tile_end - tile_first, tile, n, staged);
        xent_ce_tile_inputs<V>(a, tile, n, staged_y, staged_lse);
        xent_tile_wait();
        __syncthreads();
        tile_first = tile;
        tile_end = tile + n;
      }
    }
    // A slot past the last row (live false) reads the last row's label,
    // walks no classes and stores nothing (xent_tile_slot).
    const xent_slot at = xent_tile_slot(walk, tile, rows, C);
    const int64_t row = at.row, width = at.width;
    const bool lead = at.live && lane == 0 && first_block;  // stores the row's scalars
    (void)lead;
    if constexpr (F::kTempered) {
      if (a.row_temperature) itau = xent_ce_row_itau<A>(a, row, lead);
    }
    // Element 0 of the row: in memory, or in the tile shape in the tile
    // (tile_first is 0 in the other shapes).
    // (A column slice's rows are the whole axis apart: xent_ce_cut.)
    const int64_t base = xent_row_base(row - tile_first, kColumn ? a.classes : C, inner);
    if constexpr (V::kSoft && !kColumn) tshift = a.label_stride > 0 ? row * (a.label_stride - C) : 0;
    // Hard labels: the row's label, whether it is ignored or out of range,
    // and its class in this slice of the vocabulary, if it is here. The
    // label is loaded here and used after the forward's walk (take_label),
    // so that the walk's loads are in flight with it: a short row is one
    // batch of loads, and each load waited on before it is a memory latency
    // more per row (docs/PERFORMANCE.md, "the waits before a row's loads").
    int64_t y = 0, yl = 0;
    bool in_range = false, ignored = false, here = false;
    (void)y, (void)yl, (void)in_range, (void)ignored, (void)here;
    [[maybe_unused]] const xent_ce_label_load<V> label =
        V::kSoft || kTile ? xent_ce_label_load<V>() : xent_ce_label_load<V>(a, row);
    A m, lr, lse, sum_a = 0, sum_b = 0;
    [[maybe_unused]] A s = 0, T_sum = 0, Em = 0;
    [[maybe_unused]] A xy = 0, r = 0;
    [[maybe_unused]] int64_t amax = 0;
    const auto take_label = [&]() {
      if constexpr (!V::kSoft) {
        if constexpr (kTile) y = staged_y[row - tile_first];
        else y = label.value(a);
        in_range = y >= 0 && y < CT;
        // xent_ce_ignored's rule, written out: called here, it changes how
        // nvcc allocates the rows kernel's registers (docs/PERFORMANCE.md).
        if constexpr (V::kIgnoreIndex == XENT_OFF) ignored = a.ignore_invalid_labels && !in_range;
        else ignored = (y == a.ignore_index && a.ignore_index != INT64_MIN) || (a.ignore_invalid_labels && !in_range);
        yl = y - off;
        here = in_range && yl >= 0 && yl < C;
        // A label outside [0, CT) is never used as an index; its row is NaN
        // and the lowest such row is kept for xent_check() (atomicMin: the
        // same answer whatever order the blocks run in).
        if (!ignored && !in_range && lead && a.bad_label_row) atomicMin(a.bad_label_row, (unsigned long long)row);
        // x[y], just read by the walk (from cache), before the group's
        // reduction: with in-place gradients the other threads of the group
        // overwrite the row right after it.
        if constexpr (F::kFwd) xy = (lead && !ignored && here) ? Z(base + yl * inner) : A(0);
      }
    };
    if constexpr (!F::kFwd) take_label();

    // The row's statistics: m, lr = log s and lse, the sums of soft labels
    // and smoothing (sum_a, sum_b), and the per-token ones (T_sum, the T
    // above; amax; Em for the entropy's gradient).
    if constexpr (F::kFwd) {
      if constexpr (V::kSoft || F::kSmooth) {
        // The reference the sums of x are taken from: the row's (or slice's)
        // first logit, 0 where it is not finite. Every thread reads it, and in
        // place its owner overwrites it after the reduction (the warp sync
        // below). Only where there are sums (sums_vec): its wait is a memory
        // latency before the walk of a short row. (The on-chip shape's rows
        // are long, and there the test cost sm_100's statistics walk its
        // branch around the sums: docs/PERFORMANCE.md.)
        const bool summed = kShape == XENT_ON_CHIP || V::kSoft || V::kSmoothing != XENT_RUNTIME || smoothing;
        const A r0 = width > 0 && summed ? Z(base) : A(0);
        r = !(r0 - r0 == A(0)) ? A(0) : r0;
      }
      // One pass: online (max, sum of exp) and the row's other sums.
      m = xent_lowest(A(0));
      const auto sums = [&](int64_t j, A xj) {
        const int64_t e = base + j * inner;
        (void)e, (void)j, (void)xj;
        if constexpr (V::kSoft) {
          const A wt = W(off + j) * soft_target(e);
          sum_a += wt;             // sum_c w[c]*t'_c
          sum_b += wt * (xj - r);  // sum_c w[c]*t'_c*(x_c - r)
        } else if constexpr (F::kSmooth) {
          if (V::kSmoothing == XENT_ON || smoothing) {
            const A wj = W(off + j);
            sum_a += wj * (xj - r);                    // sum_c w[c]*(x_c - r)
            if constexpr (F::kShardable) sum_b += wj;  // sum_c w[c], for a vocabulary slice
          }
        }
      };
      // A vector's sums behind one branch, not one per element: sums() of
      // hard labels does nothing without smoothing.
      const bool sums_vec = V::kSoft || V::kSmoothing != XENT_RUNTIME || smoothing;
      (void)sums_vec;
      [[maybe_unused]] int64_t slice_argmax = XENT_NO_INDEX;
      [[maybe_unused]] bool slice_nan = false;
      if constexpr (F::kTempered || F::kStats) {
        // The walk runs in two copies: the plain one, and one for calls with
        // a temperature or per-token outputs, which scales each z and tracks
        // t and the argmax (kernels/cross_entropy/token_stats.h). The choice
        // is the call's, the same for every row: the reductions below it
        // synchronize the block.
        const bool tempered = (A)a.inv_temperature != A(1) || a.row_temperature;
        (void)tempered;
        bool fwd_extras;
        if constexpr (V::kTemperature == XENT_ON || V::kTokenStats == XENT_ON) {
          fwd_extras = true;
        } else if constexpr (F::kTempered && F::kStats) {
          fwd_extras = tempered || a.entropy || a.argmax || (F::kBwd && a.dentropy) ||
                       (F::kShardable && a.shard_token_stats);
        } else if constexpr (F::kTempered) {
          fwd_extras = tempered;
        } else {
          fwd_extras = a.entropy || a.argmax || (F::kBwd && a.dentropy) || (F::kShardable && a.shard_token_stats);
        }
        A t_own = 0;  // sum exp(z - m) * (z - m) (token_stats.h)
        xent_argmax<A> am = xent_argmax_init<A>();
        (void)t_own, (void)am;
        const auto walk_stats = [&](auto extras_flag) {
          constexpr bool kX = decltype(extras_flag)::value;
          const auto add = [&](int64_t j, T raw) {
            A xj = xent_ce_logit<V>(raw, capped, cap);
            if (kX) {
              if constexpr (F::kTempered) xj *= itau;
              if constexpr (F::kStats) {
                xent_online_add_t(m, s, t_own, xj);
                xent_argmax_add(am, j, xj);
              } else {
                xent_online_add(m, s, xj);
              }
            } else {
              xent_online_add(m, s, xj);
            }
            sums(j, xj);
          };
          // A whole 16-byte vector: its max first, no branch per element.
          const auto add_vec = [&](int64_t j0, const xent_vec16<T>& c) {
            A xv[kVec];
            xent_ce_widen<V>(c, xv, capped, cap);
            if (kX) {
              if constexpr (F::kStats) {
                // z = x * itau inside the update (one FFMA per element), the
                // vector's max shared with the argmax.
                xent_token_stats_add_n(m, s, t_own, am, j0, xv, F::kTempered ? itau : A(1));
                if constexpr (F::kTempered) {
                  if (sums_vec)
                    for (int k = 0; k < kVec; ++k) sums(j0 + k, xv[k] * itau);
                } else {
                  if (sums_vec)
                    for (int k = 0; k < kVec; ++k) sums(j0 + k, xv[k]);
                }
              } else {
                for (int k = 0; k < kVec; ++k) xv[k] *= itau;
                xent_online_add_n(m, s, xv);
                if (sums_vec)
                  for (int k = 0; k < kVec; ++k) sums(j0 + k, xv[k]);
              }
            } else {
              xent_online_add_n(m, s, xv);
              if (sums_vec)
                for (int k = 0; k < kVec; ++k) sums(j0 + k, xv[k]);
            }
          };
          if constexpr (kShape == XENT_ON_CHIP)
            xent_slice_walk<kRowLoads>(x, base, width, lane, group, pipe.stash, half,
                                       xent_vec_sink<decltype(add_vec)>{add_vec}, add);
          else each_vec(base, width, add, add_vec);
        };
        if (fwd_extras) walk_stats(xent_bool<true>());
        else walk_stats(xent_bool<false>());
        take_label();
        const A m_own = m, s_own = s;  // this thread's, for T below
        (void)m_own, (void)s_own;
        xent_group_reduce(m, s, sum_a, sum_b, group, scratch);
        if constexpr (kShape == XENT_ON_CHIP) xent_cluster_reduce(m, s, sum_a, sum_b, part);
        if constexpr (F::kStats) {
          // The row's T (every thread's t moved to the row's max) and argmax
          // (the lowest index holding the max, or the lowest NaN), reduced
          // like (m, s). Vocabulary-parallel: this slice's argmax as a global
          // class (none where it has no value above the lowest and no NaN),
          // and whether it is a NaN's.
          if (fwd_extras) {
            A u = xent_entropy_share(m_own, s_own, t_own, m), unused = 0;
            int64_t cand = am.bi != XENT_NO_INDEX && am.bv == m ? am.bi : XENT_NO_INDEX, nan_at = am.bn;
            xent_group_sum2(u, unused, group, scratch);
            xent_group_min2(cand, nan_at, group, iscratch);
            if constexpr (kShape == XENT_ON_CHIP) {
              A no_m = xent_lowest(A(0)), no_s = 0;
              xent_cluster_reduce(no_m, no_s, u, unused, part);
              xent_cluster_min2(cand, nan_at, ipart);
            }
            T_sum = u;
            amax = nan_at != XENT_NO_INDEX ? nan_at : cand != XENT_NO_INDEX ? cand : 0;
            if constexpr (F::kShardable) {
              slice_nan = nan_at != XENT_NO_INDEX;
              slice_argmax = slice_nan || cand != XENT_NO_INDEX ? off + amax : XENT_NO_INDEX;
            }
          }
        }
      } else {
        const auto add = [&](int64_t j, T raw) {
          const A xj = xent_ce_logit<V>(raw, capped, cap);
          xent_online_add(m, s, xj);
          sums(j, xj);
        };
        // A whole 16-byte vector: its max first, no branch per element.
        const auto add_vec = [&](int64_t j0, const xent_vec16<T>& c) {
          A xv[kVec];
          xent_ce_widen<V>(c, xv, capped, cap);
          xent_online_add_n(m, s, xv);
          if (sums_vec)
            for (int k = 0; k < kVec; ++k) sums(j0 + k, xv[k]);
        };
        if constexpr (kShape == XENT_ON_CHIP)
          xent_slice_walk<kRowLoads>(x, base, width, lane, group, pipe.stash, half,
                                     xent_vec_sink<decltype(add_vec)>{add_vec}, add);
        else each_vec(base, width, add, add_vec);
        take_label();
        xent_group_reduce(m, s, sum_a, sum_b, group, scratch);
        if constexpr (kShape == XENT_ON_CHIP) xent_cluster_reduce(m, s, sum_a, sum_b, part);
      }
      // m - m is NaN where m is +inf or NaN: then so is every output but lse
      // (+inf for a row with a +inf logit, as torch.logsumexp).
      const A log_s = xent_log(s);
      lr = log_s + (m - m);
      lse = xent_lse(m, log_s);
      if (F::kShardable && lead && a.shard_stats) {
        if constexpr (F::kShardable) {
          // Vocabulary-parallel, first pass: this slice's (ref, s, a, b), ref
          // its max (0 where no logit is finite) and b relative to it, so that
          // its share of the row's loss is a*(lse - ref) - b (xent_gathered_row).
          const A ref = s == A(0) ? A(0) : m;
          A* st = (A*)a.shard_stats + xent_shard_record<A>(a.shard_token_stats) * (row + cut.slice * rows);
          st[0] = ref;
          st[1] = s;
          if constexpr (V::kSoft) {
            st[2] = sum_a;
            st[3] = sum_b + sum_a * (r - ref);
          } else {
            // The label's class, if in this slice: w[y]*(lse - x[y]).
            A sa = here ? W(y) : A(0), sb = here ? sa * (xy - ref) : A(0);
            if constexpr (F::kSmooth) {
              // Smoothing: (1-eps) of that, and eps/CT*sum_c w[c]*(lse - x_c)
              // over the slice (sum_b holds the slice's sum of w, sum_a that
              // of w*(x - r)).
              if (V::kSmoothing == XENT_ON || smoothing) {
                sa = (1 - eps) * sa + eps / A(CT) * sum_b;
                sb = (1 - eps) * sb + eps / A(CT) * (sum_a + sum_b * (r - ref));
              }
            }
            st[2] = sa;
            st[3] = sb;
          }
          if constexpr (F::kStats) {
            if (a.shard_token_stats) {
              // Wide records (xent_gathered_row): t relative to ref (T is
              // relative to m, and 0 with s), the label's z - ref where this
              // slice holds it, and the slice's argmax as a global class.
              st[4] = T_sum;
              if constexpr (V::kSoft) {
                st[5] = st[6] = 0;
              } else {
                const bool holds = !ignored && here;
                st[5] = holds ? xy - ref : A(0);
                st[6] = holds ? A(1) : A(0);
              }
              st[7] = slice_nan ? A(NAN) : m;
              *(int64_t*)(st + 8) = slice_argmax;
            }
          }
        }
      } else if (lead) {
        A l = 0, row_weight = 0;
        if constexpr (V::kSoft) {
          l = ((m - r) + lr) * sum_a - sum_b;
          if constexpr (F::kZLoss) {
            if (V::kZLoss == XENT_ON || z != 0) l += z * lse * lse;
          }
          row_weight = 1;
          xent_ce_weigh<V>(a, row, l, row_weight);
          if constexpr (F::kStats) {
            if (a.entropy) ((A*)a.entropy)[row] = lr - T_sum / s;
          }
        } else {
          // Per-token outputs: 0 for an ignored row, NaN for a bad label's.
          A entropy = 0, logprob = 0;
          (void)entropy, (void)logprob;
          if (!ignored) {
            if (in_range) {
              row_weight = W(y);
              l = row_weight * ((m - xy) + lr);
              if constexpr (F::kSmooth) {
                if (V::kSmoothing == XENT_ON || smoothing)
                  l = (1 - eps) * l + eps / A(CT) * (sum_w() * ((m - r) + lr) - sum_a);
              }
              if constexpr (F::kZLoss) {
                if (V::kZLoss == XENT_ON || z != 0) l += z * lse * lse;
              }
              xent_ce_weigh<V>(a, row, l, row_weight);
              if constexpr (F::kStats) {
                entropy = lr - T_sum / s;
                logprob = -((m - xy) + lr);
              }
            } else {
              l = A(NAN);
              if constexpr (F::kStats) entropy = logprob = A(NAN);
            }
          }
          if constexpr (F::kStats) {
            if (a.entropy) ((A*)a.entropy)[row] = entropy;
            if (a.label_logprob) ((A*)a.label_logprob)[row] = logprob;
            if (a.argmax) a.argmax[row] = off + amax;
          }
        }
        xent_ce_store_row<V>(a, ws, rows, row, l, row_weight);
        if (a.lse_out) ((A*)a.lse_out)[row] = lse;
      }
      if constexpr (!F::kBwd) {
        // Optional extra outputs (ONNX log_prob, Paddle return_softmax).
        if (!kTile && (a.log_prob || a.softmax)) {
          for (int64_t j = lane; j < width; j += group) {
            const int64_t e = base + j * inner;
            const A xj = Z(e);
            if (a.log_prob) ((T*)a.log_prob)[e] = D::store((xj - m) - lr);
            if (a.softmax) ((T*)a.softmax)[e] = D::store(xent_exp((xj - m) - lr));
          }
        }
      }
    } else {
      // p_j = exp((x_j - m) - lr). For a vocabulary-parallel call, the global
      // m and lr combined from every slice's statistics (a.gathered); else the
      // lse saved by the forward pass, m = lse and lr = 0.
      lr = 0;
      [[maybe_unused]] A gathered_Em = 0;  // E_p[z] - m from wide records (dentropy)
      if (a.gathered) {
        const xent_gathered<A> g = xent_gathered_row((const A*)a.gathered, rows, a.shards, row, a.shard_token_stats);
        lse = g.lse, m = g.m, lr = g.lr, sum_a = g.sum_a;
        if constexpr (F::kStats) gathered_Em = g.Em;
      } else {
        if constexpr (kTile) lse = m = staged_lse[row - tile_first];
        else lse = m = ((const A*)a.lse_in)[row];
      }
      // A saved lse beyond +-64 lost the logits' precision when it was
      // rounded to A (|lse| ulps of p: 2^-18 at 64, everything at 1e8): such a
      // row's statistics are taken again from its logits, in one more pass
      // over that row only. A vocabulary slice cannot (its logits are not the
      // row's): there the saved lse is used as it is (xent.h). The entropy's
      // gradient needs E_p[z] - m = T/S (Em), which the saved lse does not
      // give: with dentropy, every row takes its statistics again.
      const bool again = !a.shards && at.live && (lse > A(64) || lse < A(-64) || (F::kStats && a.dentropy));
      Em = gathered_Em;
      A m2 = xent_lowest(A(0)), s2 = 0, t2 = 0, unused_a = 0, unused_b = 0;
      (void)t2;
      const auto second_pass = [&] {
        each_vec(
            base, again ? width : 0,
            [&](int64_t, T raw) {
              A xj = xent_ce_logit<V>(raw, capped, cap);
              if constexpr (F::kTempered) xj = xj * itau;
              if constexpr (F::kStats) xent_online_add_t(m2, s2, t2, xj);
              else xent_online_add(m2, s2, xj);
            },
            [&](int64_t, const xent_vec16<T>& c) {
              A xv[kVec];
              xent_ce_widen<V>(c, xv, capped, cap);
              // The statistics' update scales inside (one FFMA an element).
              if constexpr (F::kStats) {
                xent_online_add_n_t(m2, s2, t2, xv, F::kTempered ? itau : A(1));
              } else {
                if constexpr (F::kTempered)
                  for (int k = 0; k < kVec; ++k) xv[k] = xv[k] * itau;
                xent_online_add_n(m2, s2, xv);
              }
            });
      };
      // The second pass's reduction is reached by all the threads that share
      // a row or by none: a block-wide group votes with a barrier (whose
      // answer is the block's), a group within a warp with the warp's vote.
      if (group > XENT_WARP) {
        if (xent_block_any(again)) {
          second_pass();
          const A m_own = m2, s_own = s2;
          (void)m_own, (void)s_own;
          xent_block_reduce(m2, s2, unused_a, unused_b, scratch);
          if constexpr (F::kStats) {
            A unused = 0;
            t2 = xent_entropy_share(m_own, s_own, t2, m2);
            xent_block_sum2(t2, unused, scratch);
          }
        }
      } else if (xent_warp_any(again)) {
        second_pass();
        const A m_own = m2, s_own = s2;
        (void)m_own, (void)s_own;
        xent_lanes_reduce(m2, s2, unused_a, unused_b, (int)group);
        if constexpr (F::kStats) {
          A unused = 0;
          t2 = xent_entropy_share(m_own, s_own, t2, m2);
          xent_lanes_sum2(t2, unused, (int)group);
        }
      }
      if (again) {
        m = m2;
        const A log_s = xent_log(s2);
        lr = log_s + (m2 - m2);
        lse = xent_lse(m, log_s);
        if constexpr (F::kStats) Em = t2 / s2;
      }
      if constexpr (V::kSoft) {
        // The row's sum_c w[c]*t'_c, which the forward pass would have had
        // (all slices' share, gathered, in a vocabulary-parallel call).
        if (!a.gathered) {
          for (int64_t j = lane; j < width; j += group) sum_a += W(off + j) * soft_target(base + j * inner);
          xent_group_sum2(sum_a, sum_b, group, scratch);
        }
      }
    }
    if constexpr (F::kBwd) {
      A scale = a.dloss ? xent_get<D>(a.dloss, V::kReduction == XENT_REDUCE_NONE ? row : 0, a.loss_f32) : A(1);
      if constexpr (V::kReduction != XENT_REDUCE_NONE) {
        // The mean's divisor (the launcher's flag: this kernel may serve the
        // sum too).
        if (a.divide_by_total) scale /= V::kSoft && !xent_ce_u_in_mean<V>(a) ? A(rows) : ws[0];
      }
      // The token weight scales the loss's gradient (not the entropy's); a
      // row it weighs out gets none of it, as an ignored row.
      [[maybe_unused]] bool weighed_out = false;
      if constexpr (F::kTokenWeight) {
        const A u = xent_ce_u<V>(a, row);
        weighed_out = u == A(0);
        scale = weighed_out ? A(0) : scale * u;
      }
      // Soft labels: dx_j = coef*p_j - scale*w[j]*t'_j. Hard labels: dx_j =
      // coef*p_j - b*[j == y] - c*w[j], with the upstream scale folded in
      // before rounding to the gradient dtype.
      A coef = 0, b = 0, c = 0;
      (void)b, (void)c;
      if constexpr (V::kSoft) {
        if (!weighed_out) {
          coef = scale * sum_a;
          if constexpr (F::kZLoss) {
            if (V::kZLoss == XENT_ON || z != 0) coef += scale * 2 * z * lse;
          }
        }
      } else {
        if (!ignored && !weighed_out) {
          if (in_range) {
            b = scale * W(y);
            coef = b;
            if constexpr (F::kSmooth) {
              if (V::kSmoothing == XENT_ON || smoothing) {
                b = (1 - eps) * b;
                c = scale * eps / A(CT);
                coef = b + c * sum_w();
              }
            }
            if constexpr (F::kZLoss) {
              if (V::kZLoss == XENT_ON || z != 0) coef += scale * 2 * z * lse;
            }
          } else {
            coef = A(NAN);
          }
        }
      }
      // The entropy's gradient, dentropy_n*p_j*(Em - (z_j - m)) (none for an
      // ignored row): its first term joins coef, the second is per element.
      A dent = 0;
      if constexpr (F::kStats) {
        if constexpr (F::kFwd) Em = T_sum / s;  // E_p[z] - m, from the forward pass
        dent = a.dentropy && (V::kSoft || !ignored) ? ((const A*)a.dentropy)[row] : A(0);
        coef += dent * Em;
      }
      // A masked class (z = -inf, p = 0) adds 0, not 0 * -inf.
      const auto dent_term = [&](A p, A zj) { return p > A(0) ? dent * p * (zj - m) : A(0); };
      (void)dent_term;
      // The gradient of element j; the row walk stores it (16 bytes at a
      // time where aligned). In place (grad == x) is safe: each element is
      // read, then written, by the one thread that owns it, after every other
      // read of it (x[y] and the first logit: the warp sync below).
      // kExtras: the optional outputs (grad_bias, grad_labels, log_prob,
      // softmax). The walk is compiled with and without them, so that a call
      // without them spends no predicated load or store per element on them.
      // kPlain: a call with the run-time options that cost per element (the
      // soft cap; smoothing's class weights; the temperature and the entropy's
      // gradient) off and fewer than 2^32 classes: compiled apart too, it
      // spends no branch, load or multiply per element on them, and compares
      // class indices in 32 bits.
      const A lr2 = xent_exp_shift_of(lr);  // p_j = xent_exp_shifted(x_j - m, lr2)
      const auto grad_of = [&](auto extras, auto plain_flag, int64_t j, T raw) -> A {
        constexpr bool kExtras = decltype(extras)::value;
        constexpr bool kPlain = decltype(plain_flag)::value;
        (void)kPlain;
        const int64_t e = base + j * inner;
        (void)e;
        A xj = D::load(raw), dcap = 1;
        if constexpr (F::kCap) {
          // Through the cap: d(cap*tanh(x/cap))/dx = 1 - tanh^2(x/cap).
          if (V::kSoftcap == XENT_ON || (!kPlain && capped)) {
            const A th = xent_tanh(xj / cap);
            xj = cap * th;
            dcap = 1 - th * th;
          }
        }
        if constexpr (F::kTempered) {
          // To z: dz/dx = 1/tau.
          if (!kPlain) {
            xj *= itau;
            dcap *= itau;
          }
        }
        const A p = xent_exp_shifted(xj - m, lr2);
        A dx;
        if constexpr (V::kSoft) {
          const A wj = W(off + j);
          dx = coef * p - scale * wj * soft_target(e);
          if constexpr (F::kStats) dx = dx - (kPlain ? A(0) : dent_term(p, xj));
          dx = dx * dcap;
          if (kExtras && a.grad_labels) {
            A keep = 1;
            if constexpr (V::kSmoothing == XENT_ON) keep = 1 - eps;
            else if constexpr (V::kSmoothing == XENT_RUNTIME) keep = smoothing ? 1 - eps : A(1);
            ((T*)a.grad_labels + cut.skip)[e] = D::store(scale * keep * wj * ((m - xj) + lr));
          }
        } else {
          // Whether j is the label's class: in the plain walk on the low 32
          // bits (exact there: it runs only with CT < 2^32, so j and every yl
          // with b != 0 differ in the low 32 bits unless equal), a third of
          // the instructions of a 64-bit compare per element.
          const bool at_label = kPlain ? (uint32_t)j == (uint32_t)yl : j == yl;
          dx = coef * p - (at_label ? b : A(0));
          if constexpr (F::kSmooth) dx = dx - (kPlain ? A(0) : c * W(off + j));
          if constexpr (F::kStats) dx = dx - (kPlain ? A(0) : dent_term(p, xj));
          dx = dx * dcap;
        }
        if (kExtras && a.grad_bias) dx += xent_get<D>(a.grad_bias, e + cut.skip, a.grad_f32);
        if constexpr (F::kFwd) {
          if (kExtras && a.log_prob) ((T*)a.log_prob)[e] = D::store((xj - m) - lr);
          if (kExtras && a.softmax) ((T*)a.softmax)[e] = D::store(p);
        }
        return dx;
      };
      const bool extras =
          !kTile && (a.grad_bias || (V::kSoft && a.grad_labels) || (F::kFwd && (a.log_prob || a.softmax)));
      if constexpr (F::kFwd) {
        // In place, the gradient pass overwrites elements that other threads
        // of the group read before the reduction (x[y], read by the lead; the
        // row's first logit, the reference r of the sums, read by all): with a
        // group within one warp, that reduction was shuffles, which do not
        // order memory. (The emulator's global race detector checks this.)
        if (group <= XENT_WARP) xent_warp_sync();
      }
      const bool grad_f32 = D::kMixed && a.grad_f32 != 0;
      const auto grad_out = xent_output<T>((char*)a.grad + cut.skip * (grad_f32 ? 4 : (int64_t)sizeof(T)), grad_f32,
                                           typename D::to());
      const auto walk_grad = [&](auto extras_flag, auto plain_flag) XENT_INLINE_LAMBDA {
        // The optional outputs' walk is for rare calls: one copy of its code
        // (xent_row_walk_io's kCompact), the same loads in flight.
        constexpr bool kCompactWalk = decltype(extras_flag)::value;
        (void)kCompactWalk;
        const auto one = [&](int64_t j, T raw) -> A { return grad_of(extras_flag, plain_flag, j, raw); };
        // Hard labels: a whole vector of the plain walk at once, widened a
        // word at a time, and the label's class tested once per vector (its
        // offset in the vector, in 32 bits as at_label), where grad_of tests
        // each element. The same values as grad_of's: coef * p_j, and
        // coef * p_y - b at the label.
        const auto grad_vec = [&](int64_t j0, const xent_vec16<T>& cv, A(&d)[kVec]) {
          if constexpr (decltype(plain_flag)::value && !decltype(extras_flag)::value) {
            A xv[kVec], p[kVec];
            D::widen(cv, xv);
            // The rows on chip keep the exps one at a time (the same values):
            // their kernels have no register to spare for the pairs.
            if constexpr (kShape == XENT_ON_CHIP) {
              XENT_UNROLL
              for (int k = 0; k < kVec; ++k) {
                p[k] = xent_exp_shifted(xv[k] - m, lr2);
                d[k] = coef * p[k];
              }
            } else {
              xent_scaled_probs_n(xv, m, lr2, coef, p, d);
            }
            const uint32_t at_k = (uint32_t)yl - (uint32_t)j0;
            if (at_k < (uint32_t)kVec) {
              XENT_UNROLL
#if defined(XENT_TARGET_HIP)
              // A select per element, not a store under a test: clang turns
              // the stores into one store at d[at_k], an index known at run
              // time only, which puts d in scratch memory.
              for (int k = 0; k < kVec; ++k) d[k] = (uint32_t)k == at_k ? coef * p[k] - b : d[k];
#else
              for (int k = 0; k < kVec; ++k)
                if ((uint32_t)k == at_k) d[k] = coef * p[k] - b;
#endif
            }
          } else {
            XENT_UNROLL
            for (int k = 0; k < kVec; ++k) d[k] = one(j0 + k, cv.e[k]);
          }
        };
        const auto grad = [&] {
          if constexpr (V::kSoft) return one;
          else return xent_with_vec(one, grad_vec);
        }();
        if constexpr (kShape == XENT_ON_CHIP)
          xent_slice_walk<kRowLoads>(x, base, width, lane, group, pipe.stash, half, grad_out, grad);
        else if constexpr (kTile)
          xent_tile_walk<T>(staged, base, width, lane, group, grad_out, grad);
        else
          xent_row_walk_io<kRowLoads, kColumn, kCompactWalk>(x, base, width, inner, stage, lane, group, grad_out, grad);
      };
      // The plain walk applies where the run-time options it leaves out are
      // off; a variant with one of them compiled in never takes it.
      constexpr bool kCanPlain =
          V::kSoftcap != XENT_ON && (V::kSoft || V::kSmoothing != XENT_ON) && V::kTemperature != XENT_ON;
      if (extras) walk_grad(xent_bool<true>(), xent_bool<false>());
      else if constexpr (!kCanPlain) walk_grad(xent_bool<false>(), xent_bool<false>());
      else if ((V::kSoft || CT <= (int64_t)0xffffffff) && (V::kSoftcap != XENT_RUNTIME || !capped) &&
               (V::kSoft || V::kSmoothing != XENT_RUNTIME || !smoothing) &&
               (V::kTemperature != XENT_RUNTIME || itau == A(1)) && (!F::kStats || !a.dentropy))
        walk_grad(xent_bool<false>(), xent_bool<true>());
      else walk_grad(xent_bool<false>(), xent_bool<false>());
    }
  }
  // The tile shape's last tile's gradient.
  if constexpr (kTile && F::kBwd) xent_tile_last_rows((T*)a.grad, C, tile_first, tile_end - tile_first, staged);
}

// The rows kernel's body, its shared memory by shape: the on-chip shape's
// two halves of slices of rows (16-byte vectors) with their mbarriers, and
// its partial statistics for the other blocks of the cluster.
template <class V, int kShape>
XENT_DEVICE void xent_ce_rows(const xent_ce_args& a, int row_group) {
  typedef typename V::D::T T;
  XENT_BLOCK_BEGIN();
  if constexpr (kShape == XENT_ON_CHIP) {
    XENT_DYNAMIC_SHARED(xent_vec16<T>, stash);
    XENT_SHARED_ARRAY(uint64_t, bars, 2);
    XENT_SHARED_ARRAY(typename V::D::A, part, 4);
    XENT_SHARED_ARRAY(int64_t, ipart, 2);
    const xent_row_walk walk = xent_rows<kShape>(row_group);
    const auto pipe = xent_slice_pipe_of((const T*)a.logits, a.classes, walk.first, walk.step, a.rows, stash, bars);
    xent_ce_rows_body<V, kShape>(a, row_group, pipe, part, ipart);
  } else {
    xent_ce_rows_body<V, kShape>(a, row_group, nullptr, nullptr, nullptr);
  }
}

// Vocabulary-parallel, second pass (a thread per row, after the all-gather):
// the global lse and the row's loss from every slice's (ref, s, a, b), and
// with wide records the per-token outputs, stored rank by rank in a.gathered
// as [shards][rows][record] (xent_gathered_row). No logits are read.
// Launch bounds: one block per SM at least, which leaves ptxas the
// registers f64's per-token outputs need.
template <class V>
static XENT_GLOBAL void __launch_bounds__(V::kColumnThreads, 1) xent_ce_combine(const xent_ce_args a) {
  typedef xent_ce_facts<V> F;
  typedef typename V::D::A A;
  [[maybe_unused]] const typename V::L* __restrict__ labels = (const typename V::L*)a.labels;
  [[maybe_unused]] const A* __restrict__ weights = (const A*)a.weights;  // the row's weight in the mean
  [[maybe_unused]] A* ws = (A*)a.workspace;
  const int64_t rows = a.rows, CT = a.global_classes;
  const A z = (A)a.z_loss;
  (void)z, (void)CT;
  for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += (int64_t)gridDim.x * blockDim.x) {
    const xent_gathered<A> g = xent_gathered_row((const A*)a.gathered, rows, a.shards, row, a.shard_token_stats);
    const A lse = g.lse;
    A l = 0, row_weight = 0;  // row_weight: the row's weight in the mean
    // A bad temperature's row is NaN in the records; reported here (the
    // on-chip linear CE's first pass records nothing), as a bad label's.
    if (a.row_temperature) (void)xent_ce_row_itau<A>(a, row, true);
    (void)row_weight;
    if constexpr (V::kSoft) {
      l = g.loss;
      if constexpr (F::kZLoss) {
        if (V::kZLoss == XENT_ON || z != 0) l += z * lse * lse;
      }
      row_weight = 1;
      xent_ce_weigh<V>(a, row, l, row_weight);
      if constexpr (F::kStats) {
        if (a.shard_token_stats && a.entropy) ((A*)a.entropy)[row] = g.lr - g.Em;
      }
      if (a.sum_a_out) ((A*)a.sum_a_out)[row] = g.sum_a;
    } else {
      const int64_t y = (int64_t)labels[row];
      const bool in_range = y >= 0 && y < CT;
      const bool ignored = xent_ce_ignored<V>(a, y, in_range);
      if (!ignored) {
        if (in_range) {
          if constexpr (V::kReduction != XENT_REDUCE_NONE) row_weight = xent_ce_w<V>(weights, y);
          l = g.loss;
          if constexpr (F::kZLoss) {
            if (V::kZLoss == XENT_ON || z != 0) l += z * lse * lse;
          }
          xent_ce_weigh<V>(a, row, l, row_weight);
          // The row's whole coefficient of p (smoothed: (1 - eps) w[y] +
          // eps / C sum_c w[c]), for the on-chip linear CE's second pass.
          if (a.sum_a_out) ((A*)a.sum_a_out)[row] = g.sum_a;
        } else {
          // Recorded here too: the on-chip linear CE's first pass reads no
          // labels, so the combine is the first to see them.
          l = A(NAN);
          if (a.bad_label_row) atomicMin(a.bad_label_row, (unsigned long long)row);
        }
      }
      if constexpr (F::kStats) {
        // Per-token outputs, as one device has them: 0 for an ignored row,
        // NaN for a bad label's; the argmax of every row.
        if (a.shard_token_stats) {
          const A nan = A(NAN);
          if (a.entropy) ((A*)a.entropy)[row] = ignored ? A(0) : in_range ? g.lr - g.Em : nan;
          if (a.label_logprob) {
            A lp = nan;
            if (!in_range || !xent_gathered_logprob((const A*)a.gathered, rows, a.shards, row, g, lp)) lp = nan;
            ((A*)a.label_logprob)[row] = ignored ? A(0) : lp;
          }
          if (a.argmax) a.argmax[row] = xent_gathered_argmax((const A*)a.gathered, rows, a.shards, row);
        }
      }
    }
    xent_ce_store_row<V>(a, ws, rows, row, l, row_weight);
    if (a.lse_out) ((A*)a.lse_out)[row] = lse;
  }
}

// Stage 1 of the sum or mean of the per-row losses (and their weights): this
// block's run of rows (xent_partial_blocks), in a fixed order.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_ce_reduce_partials(const xent_ce_args a) {
  typedef typename V::D::A A;
  XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
  const A* __restrict__ ws = (const A*)a.workspace;
  const int64_t rows = a.rows;
  int64_t lo, hi;
  xent_partial_range(rows, lo, hi);
  A total = 0, total_weight = 0;
  for (int64_t n = lo + threadIdx.x; n < hi; n += blockDim.x) {
    total += ws[2 + n];
    total_weight += ws[2 + rows + n];
  }
  xent_partials_store(xent_ce_partials<V>(a), total, total_weight, scratch);
}

// Stage 2: the sum or mean from the partials, in order.
template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_PARTIAL_THREADS) xent_ce_reduce(const xent_ce_args a) {
  typedef typename V::D::A A;
  XENT_SHARED_ARRAY(A, scratch, 2 * XENT_MAX_WARPS);
  A total, total_weight;
  xent_partials_sum(xent_ce_partials<V>(a), xent_partial_blocks(a.rows), total, total_weight, scratch);
  if (threadIdx.x == 0) {
    if constexpr (V::kReduction == XENT_REDUCE_SUM) {
      xent_put<typename V::D>(a.loss, 0, total, a.loss_f32);
    } else {
      // PyTorch: 0/0 = NaN when every row is ignored; ONNX Runtime: 0.
      const A mean = total_weight == 0 && a.all_ignored_zero ? A(0) : total / total_weight;
      xent_put<typename V::D>(a.loss, 0, mean, a.loss_f32);
    }
  }
}

// Whether a call may take the tile shape (XENT_TILE): the logits and a
// gradient 16-byte aligned, the gradient in T, and none of the outputs per
// element beside it (log_prob, softmax, grad_bias), which the tile does not
// stage. (Soft labels never take it: their kernels have no tile shape.)
template <class V>
static inline bool xent_ce_tile_ok(const xent_ce_args& a) {
  typedef xent_ce_facts<V> F;
  if (((uintptr_t)a.logits & 15) != 0) return false;
  if (F::kBwd && (((uintptr_t)a.grad & 15) != 0 || (V::D::kMixed && a.grad_f32) || a.grad_bias)) return false;
  return !(F::kFwd && (a.log_prob || a.softmax));
}

// The strided launch's rows of blocks: one per class slice.
static inline unsigned xent_column_grid_y(const xent_ce_args& a) {
  return a.column_slices > 1 ? (unsigned)a.column_slices : 1u;
}

// The launcher: the totals where the call needs them, the rows kernel (the
// unit's `rows(a, stream)`: its launch in the spec's shapes, or the refused
// shape's status), and the reduction. A fwd variant also runs the two
// forward passes of a vocabulary-parallel call: the rows kernel for the
// slice's statistics (a.shard_stats), and the combine (a.gathered). A
// fwd_bwd variant asked to rescale (a.rescale) scales the gradient it wrote
// earlier by dloss, and does nothing else (rescale.h).
template <class V, class Rows>
static int xent_ce_launch(xent_ce_args a, Rows rows) {
  typedef xent_ce_facts<V> F;
  a.divide_by_total = V::kReduction == XENT_REDUCE_MEAN;
  a.wide_labels = !V::kSoft && sizeof(typename V::L) == 8;  // int64 hard labels (a soft variant's L is its targets' type)
  const xent_stream_t stream = (xent_stream_t)a.stream;
  if constexpr (V::kOp == XENT_FWD_BWD) {
    if (a.rescale) return xent_ce_launch_rescale<V>(a, stream);
  }
  if constexpr (F::kShardable) {
    if (a.shard_stats) {
      if (const int refused = rows(a, stream)) return refused;
      return XENT_LAST_ERROR();
    }
  }
  if constexpr (F::kTotals) {
    // Where the variant has the option at run time, the call's argument
    // says whether the totals are needed; the combine needs none (each slice
    // summed its own weights).
    bool need = !(F::kShardable && a.gathered);
    if constexpr (!F::kRowTotals) {
      if constexpr (V::kWeights == XENT_RUNTIME) need = need && a.weights;
      if constexpr (V::kSmoothing == XENT_RUNTIME) need = need && a.label_smoothing != 0;
    } else if constexpr (V::kSoft) {
      need = need && xent_ce_u_in_mean<V>(a);  // soft labels' only total: the token weights'
    }
    if (need) {
      XENT_LAUNCH(xent_ce_totals<V>, dim3(xent_partial_blocks(xent_ce_totals_items(a))), dim3(XENT_PARTIAL_THREADS), 0,
                  stream, a);
      XENT_LAUNCH(xent_ce_totals_final<V>, dim3(1), dim3(XENT_PARTIAL_THREADS), 0, stream, a);
    }
  }
  if constexpr (F::kShardable) {
    if (a.gathered) {
      if (a.rows > 0)
        XENT_LAUNCH(xent_ce_combine<V>, dim3(xent_grid_blocks((a.rows + V::kColumnThreads - 1) / V::kColumnThreads)),
                    dim3(V::kColumnThreads), 0, stream, a);
    } else if (const int refused = rows(a, stream)) {
      return refused;
    }
  } else if (const int refused = rows(a, stream)) {
    return refused;
  }
  if constexpr (F::kReduced) {
    XENT_LAUNCH(xent_ce_reduce_partials<V>, dim3(xent_partial_blocks(a.rows)), dim3(XENT_PARTIAL_THREADS), 0, stream,
                a);
    XENT_LAUNCH(xent_ce_reduce<V>, dim3(1), dim3(XENT_PARTIAL_THREADS), 0, stream, a);
  }
  return XENT_LAST_ERROR();
}
