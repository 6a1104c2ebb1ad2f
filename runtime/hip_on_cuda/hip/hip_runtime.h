/* HIP-on-CUDA, device side: compiles the HIP rendering of the kernels
   (gen:hip, XENT_WARP = 64) with nvcc for an NVIDIA GPU. Launches are CUDA
   launches; the one real difference is the wavefront: HIP's kernels shuffle
   across 64 lanes, an NVIDIA warp has 32. A 64-lane wavefront is emulated as
   a pair of warps (threads 64k .. 64k+63 of a block): a shuffle whose lanes
   stay within 32 is the warp's own shuffle; the xor-32 step exchanges
   between the two warps through shared memory and block barriers.

   The rule this costs is AMD's own: a wavefront operation is reached by
   all 64 threads of the wavefront (a branch around it is uniform per
   wavefront, as xent_warp_any's answer is). The two warps never meet at
   the block's barrier: a block whose wavefronts take different branches, as
   rows whose saved lse needs the backward's second pass beside rows that do
   not, would otherwise reach different block barriers. They meet at a
   barrier of their own wavefront: a named barrier (bar.sync 1 + wavefront,
   64 threads) in a block of at most 15 wavefronts (named barriers 1 to 15
   leave 0 to __syncthreads). A block of 16 (1024 threads: the rows
   kernels' largest shape on AMD, as specs/cross_entropy.lua's tune for hip
   gives rows over 32768 classes) has no named barrier left for its last
   wavefront; there every wavefront meets at an mbarrier of its own in
   shared memory (64 arrivals a phase; arrive releases, the wait acquires),
   which compute-sanitizer's racecheck understands as a barrier. (The first
   version of that path published each warp's half under a counter and
   spun on the partner's: correct, but a flag racecheck cannot see, so it
   reported every exchange as a hazard.) The mbarriers are initialised in
   XENT_BLOCK_BEGIN(), the first statement of every kernel whose block may
   be that large (the rows kernels; empty on every other target). Blocks
   are whole wavefronts (the spec's tune statement checks it for hip),
   one-dimensional, at most 1024 threads. */
#ifndef XENT_HIP_ON_CUDA_RUNTIME_H
#define XENT_HIP_ON_CUDA_RUNTIME_H

#include <cuda_runtime.h>

#include "hip/hip_runtime_api.h"

#define hipLaunchKernelGGL(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)

template <typename K>
static inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* n, K kernel, int threads, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, smem);
}

#define XENT_HIP_ON_CUDA_WAVE 64

#define XENT_HIP_ON_CUDA_MAX_THREADS 1024
#define XENT_HIP_ON_CUDA_BARRIER_WAVES 15

// The halves the two warps of a wavefront exchange, one 64-bit slot a
// thread.
__device__ __forceinline__ unsigned long long* xent_hip_on_cuda_halves() {
  __shared__ unsigned long long halves[XENT_HIP_ON_CUDA_MAX_THREADS];
  return halves;
}

// Each wavefront's mbarrier (a block of more than
// XENT_HIP_ON_CUDA_BARRIER_WAVES wavefronts).
__device__ __forceinline__ unsigned long long* xent_hip_on_cuda_wave_mbarriers() {
  __shared__ unsigned long long bars[XENT_HIP_ON_CUDA_MAX_THREADS / XENT_HIP_ON_CUDA_WAVE];
  return bars;
}

// Set by XENT_BLOCK_BEGIN(): a kernel without it that runs a block of 16
// wavefronts traps at its first exchange rather than wait on mbarriers
// that were never initialised (shared memory starts undefined; 64 bits of
// it equal to this by chance is not a case to plan for).
#define XENT_HIP_ON_CUDA_READY 0x78656e7462656769ull
__device__ __forceinline__ unsigned long long* xent_hip_on_cuda_ready() {
  __shared__ unsigned long long ready;
  return &ready;
}

// XENT_BLOCK_BEGIN() (xent_device.h): every thread of the block is here, at
// the kernel's first statement, so the mbarriers are set before any thread
// arrives at one.
__device__ __forceinline__ void xent_hip_on_cuda_block_begin() {
  if (threadIdx.x < XENT_HIP_ON_CUDA_MAX_THREADS / XENT_HIP_ON_CUDA_WAVE) {
    const unsigned bar = (unsigned)__cvta_generic_to_shared(&xent_hip_on_cuda_wave_mbarriers()[threadIdx.x]);
    asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(XENT_HIP_ON_CUDA_WAVE) : "memory");
  }
  if (threadIdx.x == 0) *xent_hip_on_cuda_ready() = XENT_HIP_ON_CUDA_READY;
  __syncthreads();
}

// The 64 threads of this thread's wavefront meet, and their shared-memory
// accesses before it are ordered before those after it, as by
// __syncthreads among them.
__device__ __forceinline__ void xent_hip_on_cuda_wave_barrier() {
  if (blockDim.x <= XENT_HIP_ON_CUDA_BARRIER_WAVES * XENT_HIP_ON_CUDA_WAVE) {
    asm volatile("bar.sync %0, 64;" ::"r"(1 + threadIdx.x / XENT_HIP_ON_CUDA_WAVE) : "memory");
    return;
  }
  if (blockDim.x > XENT_HIP_ON_CUDA_MAX_THREADS || *xent_hip_on_cuda_ready() != XENT_HIP_ON_CUDA_READY) __trap();
  const unsigned bar =
      (unsigned)__cvta_generic_to_shared(&xent_hip_on_cuda_wave_mbarriers()[threadIdx.x / XENT_HIP_ON_CUDA_WAVE]);
  // This phase completes at the wavefront's 64th arrival; a thread's next
  // arrival belongs to the next phase, which cannot complete before this
  // thread arrives, so the phase a waiter names is never overtaken.
  unsigned long long phase;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(phase) : "r"(bar) : "memory");
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.test_wait.shared.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "l"(phase)
        : "memory");
  }
}

// The xor-32 step of a wavefront shuffle: thread t gets thread t ^ 32's 64
// bits (t ^ 32 is in t's wavefront). Both warps finish reading the
// previous exchange, write, meet, read.
__device__ __forceinline__ unsigned long long xent_hip_on_cuda_exchange32(unsigned long long v) {
  const unsigned t = threadIdx.x;
  unsigned long long* halves = xent_hip_on_cuda_halves();
  xent_hip_on_cuda_wave_barrier();
  halves[t] = v;
  xent_hip_on_cuda_wave_barrier();
  return halves[t ^ 32];
}

// HIP's __shfl_xor(var, lane_mask, width = 64) on 32-lane warps. Values of
// up to 8 bytes pass through the exchange as their bits (an int64 beyond
// 2^53 included).
template <typename T>
__device__ __forceinline__ T __shfl_xor(T v, int lane_mask, int width = XENT_HIP_ON_CUDA_WAVE) {
  static_assert(sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
  if (lane_mask >= 32 && width > 32) {
    unsigned long long bits = 0;
    __builtin_memcpy(&bits, &v, sizeof v);
    bits = xent_hip_on_cuda_exchange32(bits);
    __builtin_memcpy(&v, &bits, sizeof v);
    return v;
  }
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width < 32 ? width : 32);
}

// HIP's __any(p) over a 64-lane wavefront: the warp's vote, then the other
// warp's through the xor-32 exchange (so the same rule applies). A macro,
// because CUDA declares a (deprecated, maskless) __any of its own.
__device__ __forceinline__ int xent_hip_on_cuda_any(int p) {
  const int warp = __any_sync(0xffffffffu, p);
  return warp | (xent_hip_on_cuda_exchange32((unsigned long long)warp) != 0);
}
#define __any(p) xent_hip_on_cuda_any(p)

#endif
