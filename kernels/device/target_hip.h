// HIP's target primitives (XENT_TARGET_HIP): launches, shuffles and barriers
// of 64-lane wavefronts; no clusters. Under XENT_EMU the emulator's.
#pragma once

#include <stdint.h>

// CDNA wavefronts are 64 lanes wide.
#if defined(XENT_EMU)
#include "xent_emu.h"
#define XENT_WARP 64
#define XENT_LAUNCH(kernel, grid, block, smem, stream, ...)                                                            \
  XENT_EMU_LAUNCH(kernel, XENT_WARP, XENT_EMU_SMEM_HIP, grid, block, smem, stream, __VA_ARGS__)
#define XENT_LAST_ERROR() xent_emu_last_error()
#define XENT_REFUSED_SHAPE(name) xent_emu_refuse_launch(name, XENT_REFUSED_SHAPE_WHY)
// The on-chip shape's launch: a cluster is one block (counted as such).
#define XENT_LAUNCH_CLUSTER(kernel, grid, block, smem, cluster, stream, ...)                                           \
  XENT_EMU_LAUNCH_CLUSTER(kernel, XENT_WARP, XENT_EMU_SMEM_HIP, grid, block, smem, 1u, stream, __VA_ARGS__)
// The driver's answers (kernels/device/launch.h asks them): a CDNA device's
// 64 KiB of LDS a workgroup, no clusters, and the emulator's record of
// each kernel function and its resident blocks.
static inline int xent_drv_device(int* ordinal, int64_t* smem_optin, int* clusters) {
  *ordinal = 0;
  *smem_optin = XENT_EMU_SMEM_HIP;
  *clusters = 0;
  return 0;
}
template <typename K>
static inline int xent_drv_kernel(K* kernel, int64_t* static_smem, int* ptx_version) {
  *static_smem = xent_emu::static_smem(kernel);
  *ptx_version = 0;
  return 0;
}
template <typename K>
static inline int xent_drv_raise_smem(K* kernel, const char* name, int64_t bytes) {
  (void)kernel, (void)name, (void)bytes;  // within the LDS a workgroup has without one
  return 0;
}
template <typename K>
static inline int xent_drv_resident(K* kernel, unsigned threads, size_t smem, unsigned cluster, int* n) {
  (void)kernel, (void)threads, (void)smem, (void)cluster;
  *n = xent_emu::kResident;
  return 0;
}
#else
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define XENT_WARP 64
#define XENT_LAUNCH(kernel, grid, block, smem, stream, ...)                                                            \
  hipLaunchKernelGGL(kernel, (grid), (block), (smem), (stream), __VA_ARGS__)
#define XENT_LAST_ERROR() ((int)hipGetLastError())
// hipErrorInvalidConfiguration (9, as CUDA's; the HIP-on-CUDA shim maps
// neither name).
#define XENT_REFUSED_SHAPE(name) ((void)(name), (void)hipGetLastError(), 9)
#define XENT_SHARED_ARRAY(T, name, n) __shared__ T name[n]
// The launch's dynamic shared memory as an array of T, 16-byte aligned (the
// on-chip shape's).
#define XENT_DYNAMIC_SHARED(T, name)                                                                                   \
  extern __shared__ __attribute__((aligned(16))) unsigned char xent_dyn_[];                                            \
  T* const name = reinterpret_cast<T*>(xent_dyn_)
// The on-chip shape's launch: a cluster is one block.
#define XENT_LAUNCH_CLUSTER(kernel, grid, block, smem, cluster, stream, ...)                                           \
  XENT_LAUNCH(kernel, grid, block, smem, stream, __VA_ARGS__)
// The driver's answers (kernels/device/launch.h asks them): no clusters,
// and the dynamic LDS a workgroup may have (a CDNA device's 64 KiB; on
// NVIDIA, HIP-on-CUDA's, the opt-in maximum, as CUDA's, raised per kernel).
// A failed query's error is cleared: it is xent's own, and the caller falls
// back.
#if defined(XENT_HIP_ON_CUDA)
#define XENT_HIP_SMEM_LIMIT hipDeviceAttributeSharedMemPerBlockOptin
#else
#define XENT_HIP_SMEM_LIMIT hipDeviceAttributeMaxSharedMemoryPerBlock
#endif
static inline int xent_drv_device(int* ordinal, int64_t* smem_optin, int* clusters) {
  int bytes = 0;
  if (hipGetDevice(ordinal) != hipSuccess || hipDeviceGetAttribute(&bytes, XENT_HIP_SMEM_LIMIT, *ordinal) != hipSuccess) {
    (void)hipGetLastError();
    return 1;
  }
  *smem_optin = bytes;
  *clusters = 0;
  return 0;
}
template <typename... Params>
static inline int xent_drv_kernel(void (*kernel)(Params...), int64_t* static_smem, int* ptx_version) {
  hipFuncAttributes fa;
  if (hipFuncGetAttributes(&fa, (const void*)kernel) != hipSuccess) {
    (void)hipGetLastError();
    return 1;
  }
  *static_smem = (int64_t)fa.sharedSizeBytes;
  *ptx_version = 0;
  return 0;
}
template <typename... Params>
static inline int xent_drv_raise_smem(void (*kernel)(Params...), const char* name, int64_t bytes) {
  (void)name;
  if (hipFuncSetAttribute((const void*)kernel, hipFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != hipSuccess) {
    (void)hipGetLastError();
    return 1;
  }
  return 0;
}
// The blocks the device holds at once (a cluster is one).
template <typename... Params>
static inline int xent_drv_resident(void (*kernel)(Params...), unsigned threads, size_t smem, unsigned cluster,
                                    int* n) {
  (void)cluster;
  int dev = 0, cus = 0, per_cu = 0;
  if (hipGetDevice(&dev) != hipSuccess ||
      hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess ||
      hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, kernel, (int)threads, smem) != hipSuccess) {
    (void)hipGetLastError();
    return 1;
  }
  *n = cus * per_cu;
  return 0;
}
#endif

// static: each kernel file has its own copy, so the CUDA and HIP renderings
// (32- and 64-lane warps) can be linked into one program, as the emulator does.
#define XENT_DEVICE static __device__ __forceinline__
#define XENT_GLOBAL __global__
typedef hipStream_t xent_stream_t;
// The first statement of a kernel whose block may hold more than 15
// wavefronts (the rows kernels): HIP-on-CUDA's 64-lane wavefronts start
// their exchange counters there (runtime/hip_on_cuda/hip/hip_runtime.h);
// nothing on AMD or under the emulator.
#if defined(XENT_HIP_ON_CUDA_WAVE)
#define XENT_BLOCK_BEGIN() xent_hip_on_cuda_block_begin()
#else
#define XENT_BLOCK_BEGIN()
#endif

// The on-chip shape's buffers (kernels/device/pipeline.h): one row's slice
// in LDS, the next one's on its way in registers, at most XENT_CHIP_HELD
// 16-byte vectors a thread (a block of 512 holds 32 KiB; at 8 the fused
// kernel spilled).
#define XENT_CHIP_BUFFERS 1
#define XENT_CHIP_HELD 4

// No thread-block clusters: a cluster is one block (an on-chip shape's
// launch is a plain one).
#define XENT_CLUSTER_SYNC() __syncthreads()
XENT_DEVICE unsigned xent_cluster_rank() { return 0; }
XENT_DEVICE unsigned xent_cluster_size() { return 1; }
XENT_DEVICE unsigned xent_cluster_id() { return blockIdx.x; }
XENT_DEVICE unsigned xent_clusters() { return gridDim.x; }
template <typename T>
XENT_DEVICE T xent_cluster_view(T p, unsigned) {
  return p;
}

XENT_DEVICE float xent_shfl_xor(float v, int lane_mask) { return __shfl_xor(v, lane_mask, XENT_WARP); }
XENT_DEVICE double xent_shfl_xor(double v, int lane_mask) { return __shfl_xor(v, lane_mask, XENT_WARP); }
XENT_DEVICE int64_t xent_shfl_xor(int64_t v, int lane_mask) {
  return (int64_t)__shfl_xor((long long)v, lane_mask, XENT_WARP);
}
// The same with lane_mask below 32 (lanes of an aligned group of at most
// 32). Built for NVIDIA (HIP-on-CUDA), that stays within one 32-lane warp:
// the warp's own shuffle, without the wavefront's barrier.
#if defined(__CUDACC__) && !defined(XENT_EMU)
XENT_DEVICE double xent_shfl_xor_near(double v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
#else
XENT_DEVICE double xent_shfl_xor_near(double v, int lane_mask) { return __shfl_xor(v, lane_mask, XENT_WARP); }
#endif
XENT_DEVICE bool xent_warp_any(bool p) { return __any(p) != 0; }
// p, which the caller knows is the same in every active lane, read from the
// first one into a scalar register: clang cannot prove such a value
// uniform, and where it cannot, it lays a branch's two sides out one after
// the other under exec masks (each skipped at run time where no lane takes
// it, but both on the paths through the code that the ISA report reads).
#if defined(__AMDGCN__) && !defined(XENT_EMU)
XENT_DEVICE bool xent_same_in_wave(bool p) { return __builtin_amdgcn_readfirstlane((int)p) != 0; }
#else
XENT_DEVICE bool xent_same_in_wave(bool p) { return p; }
#endif
// xent_warp_sync() orders the memory accesses of the wavefront's lanes,
// xent_group_sync<kLanes>() those of the kLanes lanes (a power of two up to
// 8) of this thread's aligned group. A wavefront runs in lockstep and issues
// its memory accesses in program order, so on AMD both are only a compiler
// barrier and a wavefront-scope fence (no access moves across them); the
// emulator (threads one at a time, every lane in the mask) and HIP-on-CUDA
// (32-lane warps) sync the lanes.
#if defined(XENT_EMU)
XENT_DEVICE void xent_warp_sync() { __syncwarp(~0ull); }
template <int kLanes>
XENT_DEVICE void xent_group_sync() {
  __syncwarp(((1ull << kLanes) - 1) << ((unsigned)threadIdx.x % 64u & ~(unsigned)(kLanes - 1)));
}
#elif defined(__CUDACC__)
XENT_DEVICE void xent_warp_sync() { __syncwarp(); }
template <int kLanes>
XENT_DEVICE void xent_group_sync() {
  __syncwarp(((1u << kLanes) - 1) << ((unsigned)threadIdx.x % 32u & ~(unsigned)(kLanes - 1)));
}
#else
XENT_DEVICE void xent_warp_sync() {
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "wavefront");
}
template <int kLanes>
XENT_DEVICE void xent_group_sync() {
  xent_warp_sync();
}
#endif

XENT_DEVICE float xent_load_f16(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
XENT_DEVICE uint16_t xent_store_f16(float v) { return __half_as_ushort(__float2half_rn(v)); }

// No minimum of resident blocks in the launch bounds (target.h).
#define XENT_COLUMN_MIN_BLOCKS(threads, resident) 1
