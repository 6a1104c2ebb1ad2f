// Online softmax statistics and their reductions over lanes, a block, a
// row's group of threads and a cluster.
#pragma once

#include "exp_log.h"

// The row's lse from its max m and log_s = log sum exp(x - m): +inf where m
// is +inf (torch.logsumexp), whatever s is (inf - inf made it NaN).
template <typename A>
XENT_DEVICE A xent_lse(A m, A log_s) {
  return m > -xent_lowest(m) ? m : m + log_s;
}

// Online softmax statistics of one row: running max m and sum s of exp(x - m).
template <typename A>
XENT_DEVICE void xent_online_add(A& m, A& s, A x) {
  if (x > m) {
    s = s * xent_exp(m - x) + A(1);
    m = x;
  } else {
    s += xent_exp(x - m);
  }
}

// The same for the elements of a 16-byte vector at once: one rescale of s
// for the vector's max instead of a data-dependent branch per element, and
// one exp per element. fmax skips NaN, which reaches s through its exp; a
// +inf max makes s NaN (inf - inf), which xent_lse and lr handle.
template <typename A, int N>
XENT_DEVICE void xent_online_add_n(A& m, A& s, const A (&x)[N]) {
  A mx = m;
  for (int k = 0; k < N; ++k) mx = fmax(mx, x[k]);
  A t = 0;
  for (int k = 0; k < N; ++k) t += xent_exp(x[k] - mx);
  s = s * xent_exp(m - mx) + t;
  m = mx;
}

// float: the exps in pairs, summed as two running sums (even and odd
// elements) added at the vector's end; the same order for every batch.
template <int N>
XENT_DEVICE void xent_online_add_n(float& m, float& s, const float (&x)[N]) {
  static_assert(N % 2 == 0, "16-byte vectors hold an even number of floats");
  float mx = m;
  for (int k = 0; k < N; ++k) mx = fmaxf(mx, x[k]);
  const xent_f2 neg = xent_f2_splat(-mx), log2e = xent_f2_splat(XENT_LOG2E);
  xent_f2 t = xent_f2_splat(0.0f);
  for (int k = 0; k < N; k += 2)
    t = xent_add2(t, xent_exp2_2(xent_mul2(xent_add2(xent_f2{x[k], x[k + 1]}, neg), log2e)));
  s = s * xent_exp(m - mx) + (t.a + t.b);
  m = mx;
}

template <typename A>
XENT_DEVICE void xent_online_merge(A& m, A& s, A m2, A s2) {
  const A mm = m > m2 ? m : m2;
  s = s * xent_exp(m - mm) + s2 * xent_exp(m2 - mm);
  m = mm;
}

// Butterfly reduction of (m, s) and two plain sums over aligned groups of
// `width` lanes (a power of two up to the warp), in a fixed order: every
// lane gets its group's result. Every lane of the warp must call it.
template <typename A>
XENT_DEVICE void xent_lanes_reduce(A& m, A& s, A& a, A& b, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    const A m2 = xent_shfl_xor(m, offset);
    const A s2 = xent_shfl_xor(s, offset);
    xent_online_merge(m, s, m2, s2);
    a += xent_shfl_xor(a, offset);
    b += xent_shfl_xor(b, offset);
  }
}

template <typename A>
XENT_DEVICE void xent_lanes_sum2(A& a, A& b, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    a += xent_shfl_xor(a, offset);
    b += xent_shfl_xor(b, offset);
  }
}

// The block's partials, one a warp, are merged by every warp at once: lane
// l takes warp l % width's (width the smallest power of two holding the
// block's warps; the identity past the last warp) and the lanes reduce
// with the butterfly above. The same tree in every warp and every run, so
// every thread gets the same bits (a lane and its partner compute each
// merge with the operands swapped, and max, + and * are commutative): log2
// of width merges, where a loop over the warps took one per warp.
XENT_DEVICE int xent_warps_width() {
  const int warps = (int)((blockDim.x + XENT_WARP - 1) / XENT_WARP);
  int width = 1;
  while (width < warps) width *= 2;
  return width;
}

// This thread's lane of the merge above: the warp whose partial it takes,
// or -1 for the identity.
XENT_DEVICE int xent_partial_of_lane(int width) {
  const int warps = (int)((blockDim.x + XENT_WARP - 1) / XENT_WARP);
  const int w = (int)(threadIdx.x % XENT_WARP) % width;
  return w < warps ? w : -1;
}

// Block-wide reduction of (m, s) and two plain sums, in a fixed order (the
// same tree every run: bitwise reproducible). Every thread of the block must
// call it; every thread gets the result. `scratch` holds 4 * XENT_MAX_WARPS
// (a __shared__ array, or the emulator's checked view of one).
template <typename A, typename Scratch>
XENT_DEVICE void xent_block_reduce(A& m, A& s, A& a, A& b, Scratch scratch) {
  xent_lanes_reduce(m, s, a, b, XENT_WARP);
  const int warp = (int)(threadIdx.x / XENT_WARP);
  const int lane = (int)(threadIdx.x % XENT_WARP);
  if (lane == 0) {
    scratch[warp] = m;
    scratch[XENT_MAX_WARPS + warp] = s;
    scratch[2 * XENT_MAX_WARPS + warp] = a;
    scratch[3 * XENT_MAX_WARPS + warp] = b;
  }
  __syncthreads();
  const int width = xent_warps_width(), w = xent_partial_of_lane(width);
  m = w >= 0 ? A(scratch[w]) : xent_lowest(A(0));
  s = w >= 0 ? A(scratch[XENT_MAX_WARPS + w]) : A(0);
  a = w >= 0 ? A(scratch[2 * XENT_MAX_WARPS + w]) : A(0);
  b = w >= 0 ? A(scratch[3 * XENT_MAX_WARPS + w]) : A(0);
  xent_lanes_reduce(m, s, a, b, width);
  // The scratch may be reused right after this returns.
  __syncthreads();
}

// Block-wide sum of two values in a fixed order; every thread gets the result.
template <typename A, typename Scratch>
XENT_DEVICE void xent_block_sum2(A& a, A& b, Scratch scratch) {
  xent_lanes_sum2(a, b, XENT_WARP);
  const int warp = (int)(threadIdx.x / XENT_WARP);
  const int lane = (int)(threadIdx.x % XENT_WARP);
  if (lane == 0) {
    scratch[warp] = a;
    scratch[XENT_MAX_WARPS + warp] = b;
  }
  __syncthreads();
  const int width = xent_warps_width(), w = xent_partial_of_lane(width);
  a = w >= 0 ? A(scratch[w]) : A(0);
  b = w >= 0 ? A(scratch[XENT_MAX_WARPS + w]) : A(0);
  xent_lanes_sum2(a, b, width);
  __syncthreads();
}

// Two-stage sums (xent_partial_blocks), stage 1's end: the block's sums of
// a and b, stored by thread 0 as the block's pair of partials.
template <typename A, typename Scratch>
XENT_DEVICE void xent_partials_store(A* partials, A a, A b, Scratch scratch) {
  xent_block_sum2(a, b, scratch);
  if (threadIdx.x == 0) {
    partials[2 * (int64_t)blockIdx.x] = a;
    partials[2 * (int64_t)blockIdx.x + 1] = b;
  }
}

// Two-stage sums (xent_partial_blocks), stage 2: the sums of the first
// `blocks` partial pairs, in a fixed order.
template <typename A, typename Scratch>
XENT_DEVICE void xent_partials_sum(const A* partials, unsigned blocks, A& a, A& b, Scratch scratch) {
  a = 0;
  b = 0;
  for (int64_t k = threadIdx.x; k < (int64_t)blocks; k += blockDim.x) {
    a += partials[2 * k];
    b += partials[2 * k + 1];
  }
  xent_block_sum2(a, b, scratch);
}

// The reductions of one row's `group` threads (xent_rows): shuffles within
// the warp for a group up to the warp's width, the block-wide reductions
// above for a whole block. group is the same in every thread of a block, so
// the block-wide branch is taken by all of them. A group of 1 (a thread per
// row) reduces nothing.
template <typename A, typename Scratch>
XENT_DEVICE void xent_group_reduce(A& m, A& s, A& a, A& b, int64_t group, Scratch scratch) {
  if (group > XENT_WARP) xent_block_reduce(m, s, a, b, scratch);
  else xent_lanes_reduce(m, s, a, b, (int)group);
}

template <typename A, typename Scratch>
XENT_DEVICE void xent_group_sum2(A& a, A& b, int64_t group, Scratch scratch) {
  if (group > XENT_WARP) xent_block_sum2(a, b, scratch);
  else xent_lanes_sum2(a, b, (int)group);
}

// The on-chip shape's reduction across the blocks of a cluster, after each
// block's own (xent_block_reduce): each block publishes its (m, s, a, b) in
// `part` (4 elements of its shared memory), and after a cluster sync every
// warp reads all k of them through distributed shared memory, lane l the
// one of rank l % k, and merges them with the same butterfly: every block
// gets the same, reproducible result. The second sync keeps every block's
// `part` alive and unchanged until all have read it. Every thread of the
// cluster must call it.
template <typename A, typename Part>
XENT_DEVICE void xent_cluster_reduce(A& m, A& s, A& a, A& b, Part part) {
  const unsigned k = xent_cluster_size();
  if (k == 1) return;
  if (threadIdx.x == 0) {
    part[0] = m;
    part[1] = s;
    part[2] = a;
    part[3] = b;
  }
  XENT_CLUSTER_SYNC();
  const auto p = xent_cluster_view(part, (unsigned)(threadIdx.x % XENT_WARP) % k);
  m = p[0];
  s = p[1];
  a = p[2];
  b = p[3];
  xent_lanes_reduce(m, s, a, b, (int)k);
  XENT_CLUSTER_SYNC();
}
