// The cross entropy's per-token statistics: the entropy and the argmax of a
// row, and the argmax's reductions.
#pragma once

#include "../device/reduce.h"

// Per-token statistics (the spec's token_stats axis): the entropy of a row
// and its argmax, tracked in the pass that reads the row for (m, s).
//
// Entropy. Beside the running max m and s = sum exp(z - m), a thread keeps
// t = sum exp(z - m) * (z - m). Over the row, with totals S and T at the
// row's max M: E_p[z] = M + T / S and H = lse - E_p[z] = log S - T / S, both
// shift-invariant as lr is. Moving t from m to a larger m' multiplies each
// term by f = exp(m - m') and adds (m - m') to its (z - m): t' = f * (t + (m -
// m') * s). A term of z = -inf is 0 (exp(-inf) times -inf would be NaN).
template <typename A, int N>
XENT_DEVICE A xent_online_add_n_t(A& m, A& s, A& t, const A (&x)[N], A scale) {
  // z = x * scale (scale > 0, the temperature's 1/tau, or 1): z's order is
  // x's, so the vector's max is taken on x and scaled once, and each z - max
  // is one FFMA. A masked class (x = -inf, e = 0) adds 0 * lowest to t, not
  // 0 * -inf; a NaN's d stays NaN (fmax(NaN, lowest) is lowest, but e is NaN).
  // Returns the vector's max of x, for the argmax.
  A vx = x[0];
  for (int k = 1; k < N; ++k) vx = fmax(vx, x[k]);
  const A mx = fmax(m, vx * scale);
  A sv = 0, tv = 0;
  for (int k = 0; k < N; ++k) {
    const A d = fma(x[k], scale, -mx);
    const A e = xent_exp(d);
    sv += e;
    tv = fma(e, fmax(d, xent_lowest(A(0))), tv);
  }
  const A d = m - mx, f = xent_exp(d);
  // s == 0: nothing was added yet (m is still the lowest value, and d may
  // be -inf); f == 0: what was added is nothing beside the new max.
  t = (s == A(0) || f == A(0) ? A(0) : f * (t + d * s)) + tv;
  s = s * f + sv;
  m = mx;
  return vx;
}

// float, in pairs as xent_online_add_n.
template <int N>
XENT_DEVICE float xent_online_add_n_t(float& m, float& s, float& t, const float (&x)[N], float scale) {
  static_assert(N % 2 == 0, "16-byte vectors hold an even number of floats");
  float vx = x[0];
  for (int k = 1; k < N; ++k) vx = fmaxf(vx, x[k]);
  const float mx = fmaxf(m, vx * scale);
  const xent_f2 sc = xent_f2_splat(scale), neg = xent_f2_splat(-mx), log2e = xent_f2_splat(XENT_LOG2E);
  xent_f2 sv = xent_f2_splat(0.0f), tv = xent_f2_splat(0.0f);
  for (int k = 0; k < N; k += 2) {
    const xent_f2 d = xent_fma2(xent_f2{x[k], x[k + 1]}, sc, neg);
    const xent_f2 e = xent_exp2_2(xent_mul2(d, log2e));
    sv = xent_add2(sv, e);
    tv = xent_fma2(e, xent_f2{fmaxf(d.a, -FLT_MAX), fmaxf(d.b, -FLT_MAX)}, tv);
  }
  const float d = m - mx, f = xent_exp(d);
  t = (s == 0.0f || f == 0.0f ? 0.0f : f * (t + d * s)) + (tv.a + tv.b);
  s = s * f + (sv.a + sv.b);
  m = mx;
  return vx;
}

template <typename A>
XENT_DEVICE void xent_online_add_t(A& m, A& s, A& t, A x) {
  if (x > m) {
    const A d = m - x, f = xent_exp(d);
    t = s == A(0) || f == A(0) ? A(0) : f * (t + d * s);
    s = s * f + A(1);
    m = x;
  } else {
    const A d = x - m, e = xent_exp(d);
    s += e;
    t += e > A(0) ? e * d : A(0);
  }
}

// A thread's t moved to the row's max M (after the (m, s) reduction), for a
// plain sum over the row's threads: the row's T.
template <typename A>
XENT_DEVICE A xent_entropy_share(A m, A s, A t, A M) {
  const A d = m - M, f = xent_exp(d);
  return s == A(0) || f == A(0) ? A(0) : f * (t + d * s);
}

// Argmax: the first index of the row's largest z, or of its first NaN
// (torch.argmax). A thread keeps its largest value bv and that value's
// lowest index bi, and its lowest NaN index bn; XENT_NO_INDEX is none. A
// 16-byte vector costs its max and a compare unless it holds a new maximum.
#define XENT_NO_INDEX INT64_MAX
template <typename A>
struct xent_argmax {
  A bv;
  int64_t bi, bn;
};

template <typename A>
XENT_DEVICE xent_argmax<A> xent_argmax_init() {
  // The lowest finite value, as the running max: the tie rule takes a z
  // equal to it while bi is none, and a row of -inf keeps none.
  return xent_argmax<A>{xent_lowest(A(0)), XENT_NO_INDEX, XENT_NO_INDEX};
}

template <typename A>
XENT_DEVICE void xent_argmax_add(xent_argmax<A>& r, int64_t j, A z) {
  if (z > r.bv || (z == r.bv && j < r.bi)) {
    r.bv = z;
    r.bi = j;
  }
  if (z != z && j < r.bn) r.bn = j;
}

// NaN is looked for only where the thread's s already is NaN (a NaN or a
// +inf logit reached it): once in a vector, never in a row without one. x
// are the vector's logits before the scale, vx their max (from
// xent_online_add_n_t), the value kept is z = vx * scale.
template <typename A, int N>
XENT_DEVICE void xent_argmax_add_n(xent_argmax<A>& r, int64_t j0, const A (&x)[N], A vx, A scale, A s) {
  const A vm = vx * scale;
  if (vm > r.bv || (vm == r.bv && j0 < r.bi)) {
    int k = 0;
    while (k < N - 1 && !(x[k] == vx)) ++k;
    r.bv = vm;
    r.bi = j0 + k;
  }
  if (s != s) {
    for (int k = 0; k < N; ++k)
      if (x[k] != x[k] && j0 + k < r.bn) r.bn = j0 + k;
  }
}

// The per-token statistics' update for a 16-byte vector: the online (m, s,
// t) and the argmax together (xent_online_add_n_t, xent_argmax_add_n).
// Returns the vector's max of x.
template <typename A, int N>
XENT_DEVICE A xent_token_stats_add_n(A& m, A& s, A& t, xent_argmax<A>& r, int64_t j0, const A (&x)[N], A scale) {
  const A vx = xent_online_add_n_t(m, s, t, x, scale);
  xent_argmax_add_n(r, j0, x, vx, scale, s);
  return vx;
}

// float: a vector's common case, one test and a branch beside the sums, and
// the rest in one rare branch that does what the generic version does, with
// the same values (up to the sign of a zero t). The common case is a vector
// below the thread's max (vm < m: no rescale; and no argmax change, as r.bv
// is m: both start at the lowest value and take every value's max) whose
// t's terms, unclamped, are all numbers: a NaN logit, a +inf max (d = inf -
// inf or -inf) and a masked class (e = 0 times d = -inf) each make one NaN,
// so such a vector takes the rare branch, where the clamp and the argmax's
// NaN scan are. (A vector in the common case has no NaN, so a NaN s from an
// earlier one needs no scan of it.)
template <int N>
XENT_DEVICE float xent_token_stats_add_n(float& m, float& s, float& t, xent_argmax<float>& r, int64_t j0,
                                         const float (&x)[N], float scale) {
  static_assert(N % 2 == 0, "16-byte vectors hold an even number of floats");
  float vx = x[0];
  for (int k = 1; k < N; ++k) vx = fmaxf(vx, x[k]);
  const float vm = vx * scale, mx = fmaxf(m, vm);
  const xent_f2 sc = xent_f2_splat(scale), neg = xent_f2_splat(-mx), log2e = xent_f2_splat(XENT_LOG2E);
  xent_f2 sv = xent_f2_splat(0.0f), tv = xent_f2_splat(0.0f);
  for (int k = 0; k < N; k += 2) {
    const xent_f2 d = xent_fma2(xent_f2{x[k], x[k + 1]}, sc, neg);
    const xent_f2 e = xent_exp2_2(xent_mul2(d, log2e));
    sv = xent_add2(sv, e);
    tv = xent_fma2(e, d, tv);
  }
  const float s_v = sv.a + sv.b;
  float t_v = tv.a + tv.b;
  if (vm < m && t_v == t_v) {
    t += t_v;
    s += s_v;
    return vx;
  }
  if (t_v != t_v && s_v == s_v) {
    // A masked class: t's terms again, clamped as xent_online_add_n_t's.
    tv = xent_f2_splat(0.0f);
    for (int k = 0; k < N; k += 2) {
      const xent_f2 d = xent_fma2(xent_f2{x[k], x[k + 1]}, sc, neg);
      const xent_f2 e = xent_exp2_2(xent_mul2(d, log2e));
      tv = xent_fma2(e, xent_f2{fmaxf(d.a, -FLT_MAX), fmaxf(d.b, -FLT_MAX)}, tv);
    }
    t_v = tv.a + tv.b;
  }
  const float d = m - mx, f = xent_exp(d);
  t = (s == 0.0f || f == 0.0f ? 0.0f : f * (t + d * s)) + t_v;
  s = s * f + s_v;
  m = mx;
  xent_argmax_add_n(r, j0, x, vx, scale, s);
  return vx;
}

// The minimum of two int64 values over a row's `group` threads (argmax's
// candidates), as xent_group_sum2 sums: lanes by shuffles, a block through
// `scratch` (2 * XENT_MAX_WARPS int64), a cluster (after its blocks)
// through `part` (2 int64 of each block's shared memory).
XENT_DEVICE void xent_lanes_min2(int64_t& a, int64_t& b, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    const int64_t a2 = xent_shfl_xor(a, offset), b2 = xent_shfl_xor(b, offset);
    a = a2 < a ? a2 : a;
    b = b2 < b ? b2 : b;
  }
}

template <typename Scratch>
XENT_DEVICE void xent_block_min2(int64_t& a, int64_t& b, Scratch scratch) {
  xent_lanes_min2(a, b, XENT_WARP);
  const int warp = (int)(threadIdx.x / XENT_WARP);
  const int lane = (int)(threadIdx.x % XENT_WARP);
  if (lane == 0) {
    scratch[warp] = a;
    scratch[XENT_MAX_WARPS + warp] = b;
  }
  __syncthreads();
  // As xent_block_reduce: lanes past the last warp take its own values
  // again (a minimum is unchanged by a repeat).
  const int width = xent_warps_width(), w = xent_partial_of_lane(width);
  a = scratch[w >= 0 ? w : warp];
  b = scratch[XENT_MAX_WARPS + (w >= 0 ? w : warp)];
  xent_lanes_min2(a, b, width);
  __syncthreads();
}

template <typename Scratch>
XENT_DEVICE void xent_group_min2(int64_t& a, int64_t& b, int64_t group, Scratch scratch) {
  if (group > XENT_WARP) xent_block_min2(a, b, scratch);
  else xent_lanes_min2(a, b, (int)group);
}

template <typename Part>
XENT_DEVICE void xent_cluster_min2(int64_t& a, int64_t& b, Part part) {
  const unsigned k = xent_cluster_size();
  if (k == 1) return;
  if (threadIdx.x == 0) {
    part[0] = a;
    part[1] = b;
  }
  XENT_CLUSTER_SYNC();
  const auto p = xent_cluster_view(part, (unsigned)(threadIdx.x % XENT_WARP) % k);
  a = p[0];
  b = p[1];
  xent_lanes_min2(a, b, (int)k);
  XENT_CLUSTER_SYNC();
}
