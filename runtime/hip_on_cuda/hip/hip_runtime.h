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
   not, would otherwise reach different block barriers. They meet at a named
   barrier of their own (bar.sync 1 + wavefront, 64 threads) in a block of
   at most 15 wavefronts (named barriers 1 to 15 leave 0 to __syncthreads).
   A block of 16 (1024 threads: the rows kernels' largest shape on AMD, as
   specs/cross_entropy.lua's tune for hip gives rows over 32768 classes) has
   no barrier left for its last wavefront; there each warp publishes its
   half in shared memory under a counter of its own and waits for its
   partner's counter (the two warps are resident in one block, so the wait
   ends). The counters start at zero in XENT_BLOCK_BEGIN(), the first
   statement of every kernel whose block may be that large (the rows
   kernels; empty on every other target). Blocks are whole wavefronts (the
   spec's tune statement checks it for hip), one-dimensional, at most 1024
   threads. */
#ifndef XENT_HIP_ON_CUDA_RUNTIME_H
#define XENT_HIP_ON_CUDA_RUNTIME_H

#include <cuda_runtime.h>

#include "hip/hip_runtime_api.h"

#define hipLaunchKernelGGL(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)

#define XENT_HIP_ON_CUDA_WAVE 64

#define XENT_HIP_ON_CUDA_MAX_THREADS 1024
#define XENT_HIP_ON_CUDA_BARRIER_WAVES 15

// Each warp's count of the exchanges it has published (a block of more than
// XENT_HIP_ON_CUDA_BARRIER_WAVES wavefronts), and the halves exchanged,
// double-buffered by the count's parity: a warp writes a buffer again only
// after its partner has published the exchange after the one it read there.
__device__ __forceinline__ unsigned* xent_hip_on_cuda_counts() {
  __shared__ unsigned counts[XENT_HIP_ON_CUDA_MAX_THREADS / 32];
  return counts;
}
__device__ __forceinline__ unsigned long long (*xent_hip_on_cuda_halves())[XENT_HIP_ON_CUDA_MAX_THREADS] {
  __shared__ unsigned long long halves[2][XENT_HIP_ON_CUDA_MAX_THREADS];
  return halves;
}

// Set by XENT_BLOCK_BEGIN(): a kernel without it that runs a block of 16
// wavefronts traps at its first exchange rather than reading counters that
// were never set (shared memory starts undefined; 64 bits of it equal to
// this by chance is not a case to plan for).
#define XENT_HIP_ON_CUDA_READY 0x78656e7462656769ull
__device__ __forceinline__ unsigned long long* xent_hip_on_cuda_ready() {
  __shared__ unsigned long long ready;
  return &ready;
}

// XENT_BLOCK_BEGIN() (xent_device.h): every thread of the block is here, at
// the kernel's first statement, so the counters start at zero for all.
__device__ __forceinline__ void xent_hip_on_cuda_block_begin() {
  if (threadIdx.x < XENT_HIP_ON_CUDA_MAX_THREADS / 32) xent_hip_on_cuda_counts()[threadIdx.x] = 0;
  if (threadIdx.x == 0) *xent_hip_on_cuda_ready() = XENT_HIP_ON_CUDA_READY;
  __syncthreads();
}

// The 64 threads of this thread's wavefront meet (and their shared-memory
// accesses are ordered, as by __syncthreads among them); a block of at most
// XENT_HIP_ON_CUDA_BARRIER_WAVES wavefronts.
__device__ __forceinline__ void xent_hip_on_cuda_wave_barrier() {
  asm volatile("bar.sync %0, 64;" ::"r"(1 + threadIdx.x / XENT_HIP_ON_CUDA_WAVE) : "memory");
}

// The xor-32 step of a wavefront shuffle: thread t gets thread t ^ 32's 64
// bits (t ^ 32 is in t's wavefront).
__device__ __forceinline__ unsigned long long xent_hip_on_cuda_exchange32(unsigned long long v) {
  const unsigned t = threadIdx.x;
  unsigned long long(*halves)[XENT_HIP_ON_CUDA_MAX_THREADS] = xent_hip_on_cuda_halves();
  if (blockDim.x <= XENT_HIP_ON_CUDA_BARRIER_WAVES * XENT_HIP_ON_CUDA_WAVE) {
    // Both warps finish reading the previous exchange, write, meet, read.
    xent_hip_on_cuda_wave_barrier();
    halves[0][t] = v;
    xent_hip_on_cuda_wave_barrier();
    return halves[0][t ^ 32];
  }
  if (blockDim.x > XENT_HIP_ON_CUDA_MAX_THREADS || *xent_hip_on_cuda_ready() != XENT_HIP_ON_CUDA_READY) __trap();
  volatile unsigned* counts = xent_hip_on_cuda_counts();
  const unsigned warp = t / 32, n = counts[warp] + 1;
  halves[n & 1][t] = v;
  __syncwarp();  // the warp's halves are written before lane 0 publishes them
  if (t % 32 == 0) {
    __threadfence_block();
    counts[warp] = n;
  }
  while ((int)(counts[warp ^ 1] - n) < 0) {
  }
  __threadfence_block();
  const unsigned long long other = halves[n & 1][t ^ 32];
  __syncwarp();  // every lane reads this warp's count after lane 0 wrote it
  return other;
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
