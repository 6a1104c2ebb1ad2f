// The on-chip shape's pipeline: a block's slice of one row on its way into
// its shared memory while the block works on another row, and the wait for
// it.
#pragma once

#include "walks.h"

// xent_bulk_copy(dst, at, src, n, bars, b) starts a copy of n 16-byte
// vectors from src (global memory) to dst[at, at + n) (shared memory) that
// completes the next phase of the mbarrier bars[b]; xent_bulk_wait(bars, b,
// parity, newer) waits for the phase of that parity, after which every
// thread of the block may read the vectors (newer: another copy was started
// since, which the wait leaves in flight). Every thread of the block calls
// all three, at the same points (uniform): barriers are inside.
// - sm_90 and later: thread 0 issues one bulk copy (cp.async.bulk) whose
//   bytes wait in no register and no thread's loads, and the block waits on
//   the mbarrier's phase (mbarrier.try_wait.parity).
// - sm_80: the block's threads share the copy in cp.async copies of 16
//   bytes, a commit group each, waited (all but the newer group) at a block
//   barrier.
// - older GPUs: loads and stores, and a block barrier.
// - the emulator: thread 0 copies when it issues (its writes race-checked:
//   a copy into a half that others still read is reported); the wait is a
//   block barrier, which orders thread 0's writes before every thread's
//   reads, and then checks that the phase of that parity is the last
//   completed (else the GPU would wait forever, or read before the bytes
//   land).
// HIP has no such copy: its pipeline holds the next row in registers
// (xent_slice_pipe, below).
#if defined(XENT_TARGET_HIP)
#elif defined(XENT_EMU)
// The mbarrier's state: how many phases have completed.
template <typename Bars>
XENT_DEVICE void xent_bulk_init(Bars bars, int64_t n) {
  if (threadIdx.x == 0)
    for (int64_t i = 0; i < n; ++i) bars.base()[i] = 0;
  __syncthreads();
}
template <typename Stash, typename V, typename Bars>
XENT_DEVICE void xent_bulk_copy(Stash dst, int64_t at, const V* src, int64_t n, Bars bars, int64_t b) {
  if (threadIdx.x != 0) return;
  for (int64_t i = 0; i < n; ++i) dst[at + i] = XENT_LD(src + i);
  bars.base()[b] += 1;
}
template <typename Bars>
XENT_DEVICE void xent_bulk_wait(Bars bars, int64_t b, unsigned parity, bool newer) {
  (void)newer;
  // After the barrier thread 0 has started every copy it starts before its
  // own wait (on a GPU the wait blocks until then).
  __syncthreads();
  const uint64_t done = bars.base()[b];
  if (done == 0 || ((done - 1) & 1u) != parity)
    xent_emu_fail(
        "mbarrier %s[%lld]: a wait for the phase of parity %u, but %llu phases have completed (on a GPU it "
        "would wait for a copy never started, or pass before its bytes land)",
        bars.name(), (long long)b, parity, (unsigned long long)done);
}
#else
XENT_DEVICE uint32_t xent_smem_address(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
XENT_DEVICE void xent_bulk_init(uint64_t* bars, int64_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int64_t i = 0; i < n; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" : : "r"(xent_smem_address(bars + i)) : "memory");
    // The copy engine sees the initialized barriers (the async proxy).
    asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
  }
#else
  (void)bars, (void)n;
#endif
  __syncthreads();
}
template <typename T>
XENT_DEVICE void xent_bulk_copy(xent_vec16<T>* dst, int64_t at, const xent_vec16<T>* src, int64_t n, uint64_t* bars,
                                int64_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    // The expected bytes and this thread's arrival in one: the phase
    // completes when the copy's bytes have landed (at once for none).
    const uint32_t bar = xent_smem_address(bars + b), bytes = (uint32_t)n * 16u;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" : : "r"(bar), "r"(bytes) : "memory");
    if (n > 0)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :
                   : "r"(xent_smem_address(dst + at)), "l"(src), "r"(bytes), "r"(bar)
                   : "memory");
  }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  (void)bars, (void)b;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :
                 : "r"(xent_smem_address(dst + at + i)), "l"(src + i)
                 : "memory");
  asm volatile("cp.async.commit_group;" : : : "memory");
#else
  (void)bars, (void)b;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[at + i] = xent_load16(src + i);
#endif
}
XENT_DEVICE void xent_bulk_wait(uint64_t* bars, int64_t b, unsigned parity, bool newer) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  (void)newer;
  const uint32_t bar = xent_smem_address(bars + b);
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
#else
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (newer) asm volatile("cp.async.wait_group 1;" : : : "memory");
  else asm volatile("cp.async.wait_group 0;" : : : "memory");
#else
  (void)newer;
#endif
  (void)bars, (void)b, (void)parity;
  __syncthreads();
#endif
}
#endif

// The block's slice of row `row` (16-byte vectors of x, [rows, C]): its
// first vector and how many, as xent_slice_walk splits a row over the
// cluster.
template <typename T>
XENT_DEVICE int64_t xent_slice_of(const T* x, int64_t C, int64_t row, const xent_vec16<T>** src) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const T* r = x + row * C;
  const int64_t head = xent_row_head(r, C), vecs = (C - head) / kVec, k = (int64_t)xent_cluster_size();
  const int64_t per = (vecs + k - 1) / k, lo = (int64_t)xent_cluster_rank() * per;
  *src = (const xent_vec16<T>*)(r + head) + lo;
  return lo + per < vecs ? per : (vecs > lo ? vecs - lo : 0);
}

// The on-chip shape's rows in turn: a cluster walks rows first, first +
// step, ... (its turns 0, 1, ...), each block its slice of the row
// (xent_slice_walk's [lo, hi) of the row's 16-byte vectors) from its
// dynamic shared memory (stash), while its slice of the next row is on its
// way. `half` vectors: the slice of the longest run of whole vectors a row
// of C can have, as the launcher sized it (xent_pick_launch). take(row)
// returns the stash's first vector of row `row`'s slice.
#if defined(XENT_TARGET_HIP)
// HIP: one buffer of LDS, and the next row's slice in registers
// (XENT_CHIP_HELD vectors a thread; the launcher keeps the slice within
// them): its loads are issued before the walks of this row and stored to
// LDS after them, so they are in flight while this row is reduced and its
// gradient written. (CDNA's loads into LDS move 4 bytes a lane on gfx942,
// and no engine copies a whole slice.) `bars` is not used. Its own name:
// the emulator links both renderings into one program, where one template
// name with two bodies would be one body for both (the linker keeps one).
template <typename T, typename Stash, typename Bars>
struct xent_slice_pipe_held {
  const T* x;
  int64_t C, first, step, rows, half;
  Stash stash;
  Bars bars;
  mutable xent_vec16<T> held[XENT_CHIP_HELD];
  mutable int64_t n;  // the vectors of the slice held

  // Issues the loads of row `row`'s slice into this thread's registers.
  __device__ __forceinline__ void fetch(int64_t row) const {
    const xent_vec16<T>* src;
    n = xent_slice_of(x, C, row, &src);
    XENT_UNROLL
    for (int j = 0; j < XENT_CHIP_HELD; ++j) {
      const int64_t i = (int64_t)threadIdx.x + (int64_t)j * blockDim.x;
      if (i < n) held[j] = xent_load16(src + i);
    }
  }
  __device__ __forceinline__ void begin() const {
    if (first < rows) fetch(first);
  }
  // Row `row`'s turn: once every thread is done with the buffer (the last
  // row's walks), the held slice goes into it and the next row's loads are
  // issued; a barrier, and the buffer holds this row's slice.
  __device__ __forceinline__ int64_t take(int64_t row) const {
    __syncthreads();
    XENT_UNROLL
    for (int j = 0; j < XENT_CHIP_HELD; ++j) {
      const int64_t i = (int64_t)threadIdx.x + (int64_t)j * blockDim.x;
      if (i < n) stash[i] = held[j];
    }
    if (row + step < rows) fetch(row + step);
    __syncthreads();
    return 0;
  }
};
#else
// CUDA: two halves, one walked while the block's copy of the next row's
// slice lands in the other. bars: two mbarriers in shared memory, one a
// half.
template <typename T, typename Stash, typename Bars>
struct xent_slice_pipe {
  const T* x;
  int64_t C, first, step, rows, half;
  Stash stash;
  Bars bars;

  // Starts the copy of row `row`'s slice into the half of turn `turn`.
  __device__ __forceinline__ void fetch(int64_t row, int64_t turn) const {
    const xent_vec16<T>* src;
    const int64_t n = xent_slice_of(x, C, row, &src);
    xent_bulk_copy(stash, (turn & 1) * half, src, n, bars, turn & 1);
  }
  // The cluster's first row on its way (every thread of the block calls it).
  __device__ __forceinline__ void begin() const {
    xent_bulk_init(bars, 2);
    if (first < rows) fetch(first, 0);
  }
  // Row `row`'s turn: once every thread is done with the other half (the
  // last row's walks), the next row's copy into it starts; then the wait
  // for this row's.
  __device__ __forceinline__ int64_t take(int64_t row) const {
    const int64_t turn = (row - first) / step;
    const bool more = row + step < rows;
    __syncthreads();
    if (more) fetch(row + step, turn + 1);
    xent_bulk_wait(bars, turn & 1, (unsigned)((turn >> 1) & 1), more);
    return (turn & 1) * half;
  }
};
#endif

// The pipeline of a kernel whose cluster takes rows first, first + step, ...
// of x ([rows, C], contiguous); its blocks' buffers sized as the launcher's.
#if defined(XENT_TARGET_HIP)
template <typename T, typename Stash, typename Bars>
using xent_slice_pipe_t = xent_slice_pipe_held<T, Stash, Bars>;
#else
template <typename T, typename Stash, typename Bars>
using xent_slice_pipe_t = xent_slice_pipe<T, Stash, Bars>;
#endif
template <typename T, typename Stash, typename Bars>
XENT_DEVICE xent_slice_pipe_t<T, Stash, Bars> xent_slice_pipe_of(const T* x, int64_t C, int64_t first, int64_t step,
                                                                 int64_t rows, Stash stash, Bars bars) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t k = (int64_t)xent_cluster_size();
  xent_slice_pipe_t<T, Stash, Bars> p = {x, C, first, step, rows, (C / kVec + k - 1) / k, stash, bars};
  p.begin();
  return p;
}
