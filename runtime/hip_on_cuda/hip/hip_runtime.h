/* HIP-on-CUDA, device side: compiles the HIP rendering of the kernels
   (gen:hip, XENT_WARP = 64) with nvcc for an NVIDIA GPU. Launches are CUDA
   launches; the one real difference is the wavefront: HIP's kernels shuffle
   across 64 lanes, an NVIDIA warp has 32. A 64-lane wavefront is emulated as
   a pair of warps (threads 64k .. 64k+63 of a block): a shuffle whose lanes
   stay within 32 is the warp's own shuffle; the xor-32 step exchanges
   between the two warps through shared memory and block barriers.

   The rule this costs is AMD's own: a wavefront operation is reached by
   all 64 threads of the wavefront (a branch around it is uniform per
   wavefront, as xent_warp_any's answer is). The two warps meet at a named
   barrier of their own (bar.sync 1 + wavefront, 64 threads), never at the
   block's: a block whose wavefronts take different branches, as rows whose
   saved lse needs the backward's second pass beside rows that do not,
   would otherwise reach different block barriers. Named barriers 1 to 15
   leave 0 to __syncthreads, so a block is at most 15 wavefronts (960
   threads; xent's HIP launches use at most 256): a larger one traps.
   Blocks are whole wavefronts (the spec's tune statement checks it for
   hip), one-dimensional. */
#ifndef XENT_HIP_ON_CUDA_RUNTIME_H
#define XENT_HIP_ON_CUDA_RUNTIME_H

#include <cuda_runtime.h>

#include "hip/hip_runtime_api.h"

#define hipLaunchKernelGGL(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)

#define XENT_HIP_ON_CUDA_WAVE 64

// The 64 threads of this thread's wavefront meet (and their shared-memory
// accesses are ordered, as by __syncthreads among them).
__device__ __forceinline__ void xent_hip_on_cuda_wave_barrier() {
  const unsigned wave = threadIdx.x / XENT_HIP_ON_CUDA_WAVE;
  if (wave >= 15) __trap();
  asm volatile("bar.sync %0, 64;" ::"r"(1 + wave) : "memory");
}

// The xor-32 step of a wavefront shuffle: thread t gets thread t ^ 32's value
// (t ^ 32 is in t's wavefront). The first barrier lets both warps finish
// reading the previous exchange.
__device__ __forceinline__ double xent_hip_on_cuda_exchange32(double v) {
  __shared__ double wave_pairs[960];
  xent_hip_on_cuda_wave_barrier();
  wave_pairs[threadIdx.x] = v;
  xent_hip_on_cuda_wave_barrier();
  return wave_pairs[threadIdx.x ^ 32];
}

// HIP's __shfl_xor(var, lane_mask, width = 64) on 32-lane warps. Doubles
// pass through the exchange exactly; floats widen to double and back.
template <typename T>
__device__ __forceinline__ T __shfl_xor(T v, int lane_mask, int width = XENT_HIP_ON_CUDA_WAVE) {
  if (lane_mask >= 32 && width > 32) return (T)xent_hip_on_cuda_exchange32((double)v);
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width < 32 ? width : 32);
}

// HIP's __any(p) over a 64-lane wavefront: the warp's vote, then the other
// warp's through the xor-32 exchange (so the same rule applies). A macro,
// because CUDA declares a (deprecated, maskless) __any of its own.
__device__ __forceinline__ int xent_hip_on_cuda_any(int p) {
  const int warp = __any_sync(0xffffffffu, p);
  return warp | (xent_hip_on_cuda_exchange32((double)warp) != 0.0);
}
#define __any(p) xent_hip_on_cuda_any(p)

#endif
