// CUDA's target primitives (XENT_TARGET_CUDA): launches and the driver's
// answers, clusters, shuffles, barriers; under XENT_EMU the emulator's.
#pragma once

#include <stdint.h>

#if defined(XENT_EMU)
// Host C++ under the SIMT emulator (runtime/emu): every GPU thread is a
// fiber; the code below this block is the same as on the GPU.
#include "xent_emu.h"
#define XENT_WARP 32
// The emulator's swizzle is of offsets from the array (warpgroup_mma.h).
#define XENT_DYNAMIC_SHARED_1024(T, name) XENT_DYNAMIC_SHARED(T, name)
#define XENT_LAUNCH(kernel, grid, block, smem, stream, ...)                                                            \
  XENT_EMU_LAUNCH(kernel, XENT_WARP, XENT_EMU_SMEM_CUDA, grid, block, smem, stream, __VA_ARGS__)
#define XENT_LAST_ERROR() xent_emu_last_error()
// A launch shape the launcher refuses (xent_asked_shape): the launcher's
// status, as a GPU's refusal of a block past the launch bounds would be.
#define XENT_REFUSED_SHAPE(name) xent_emu_refuse_launch(name, XENT_REFUSED_SHAPE_WHY)
// A launch in clusters (none for 1), held to the driver's rules as the
// emulator models them (emu.h): 48 KiB of shared memory unless the
// kernel's attribute was raised, clusters only of code built for them.
#define XENT_LAUNCH_CLUSTER(kernel, grid, block, smem, cluster, stream, ...)                                           \
  XENT_EMU_LAUNCH_CLUSTER(kernel, XENT_WARP, XENT_EMU_SMEM_CUDA, grid, block, smem, cluster, stream, __VA_ARGS__)
// The driver's answers (xent_kernel_prepare below asks them): the emulated
// device's, and the emulator's record of each kernel function.
static inline int xent_drv_device(int* ordinal, int64_t* smem_optin, int* clusters) {
  const xent_emu_device d = xent_emu_get_device();
  *ordinal = d.ordinal;
  *smem_optin = (int64_t)d.smem_optin;
  *clusters = d.cluster_launch;
  return 0;
}
template <typename K>
static inline int xent_drv_kernel(K* kernel, int64_t* static_smem, int* ptx_version) {
  *static_smem = xent_emu::static_smem(kernel);
  *ptx_version = xent_emu_get_device().build_arch;
  return 0;
}
template <typename K>
static inline int xent_drv_raise_smem(K* kernel, const char* name, int64_t bytes) {
  return xent_emu_func_set_max_dynamic_smem(xent_emu::func_id(kernel), name, (long long)bytes);
}
// The clusters the emulated device holds at once (xent_emu::kResident).
template <typename K>
static inline int xent_drv_resident(K* kernel, unsigned threads, size_t smem, unsigned cluster, int* n) {
  (void)kernel, (void)threads, (void)smem, (void)cluster;
  *n = xent_emu::kResident;
  return 0;
}
#define XENT_CLUSTER_SYNC() xent_emu_cluster_sync(__FILE__, __LINE__)
static inline unsigned xent_cluster_rank() { return xent_emu_cluster_rank(); }
static inline unsigned xent_cluster_size() { return xent_emu_cluster_size(); }
static inline unsigned xent_cluster_id() { return blockIdx.x / xent_emu_cluster_size(); }
static inline unsigned xent_clusters() { return gridDim.x / xent_emu_cluster_size(); }
template <typename T>
static inline xent_emu::shared_array<T> xent_cluster_view(const xent_emu::shared_array<T>& a, unsigned rank) {
  return xent_emu::cluster_view(a, rank);
}
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#define XENT_WARP 32
// Every launch returns its own status (cudaLaunchKernelEx), and a launcher
// returns the first of its launches' (XENT_LAST_ERROR): never an error that
// other code left pending in the CUDA runtime, which cudaGetLastError would
// report as xent's.
#define XENT_LAUNCH(kernel, grid, block, smem, stream, ...)                                                            \
  xent_launch_note(xent_launch_ex(kernel, #kernel, (grid), (block), (smem), 1, (stream), __VA_ARGS__))
#define XENT_LAST_ERROR() xent_launch_take()
// cudaErrorInvalidConfiguration, what the driver answers a block past the
// kernel's launch bounds ("invalid configuration argument"), in place of
// any error the launcher's earlier launches noted.
#define XENT_REFUSED_SHAPE(name) ((void)(name), (void)xent_launch_take(), 9)
#define XENT_SHARED_ARRAY(T, name, n) __shared__ T name[n]
// The launch's dynamic shared memory as an array of T (16-byte aligned).
#define XENT_DYNAMIC_SHARED(T, name)                                                                                   \
  extern __shared__ __align__(16) unsigned char xent_dyn_[];                                                           \
  T* const name = reinterpret_cast<T*>(xent_dyn_)
// ...1024-byte aligned: the 128-byte swizzle's atoms, which the tensor
// cores read from absolute addresses (warpgroup_mma.h).
#define XENT_DYNAMIC_SHARED_1024(T, name)                                                                              \
  extern __shared__ __align__(1024) unsigned char xent_dyn1024_[];                                                     \
  T* const name = reinterpret_cast<T*>(xent_dyn1024_)

// Thread-block clusters (sm_90 and later; the launcher uses them only on a
// device that has them, so below sm_90 a cluster is one block).
#define XENT_CLUSTER_SYNC() xent_cluster_sync()
static __device__ __forceinline__ void xent_cluster_sync() {
#if __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();
#endif
}
static __device__ __forceinline__ unsigned xent_cluster_rank() {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  return 0;
#endif
}
static __device__ __forceinline__ unsigned xent_cluster_size() {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}
// The cluster's index in the grid and the grid's clusters, along x (the
// grid is whole clusters along x; without a cluster launch, a block is its
// own cluster). Special registers: no division by the cluster's size.
static __device__ __forceinline__ unsigned xent_cluster_id() {
#if __CUDA_ARCH__ >= 900
  unsigned id;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(id));
  return id;
#else
  return blockIdx.x;
#endif
}
static __device__ __forceinline__ unsigned xent_clusters() {
#if __CUDA_ARCH__ >= 900
  unsigned n;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(n));
  return n;
#else
  return gridDim.x;
#endif
}
// Block `rank`'s copy of this block's shared variable at p (distributed
// shared memory).
template <typename T>
static __device__ __forceinline__ T* xent_cluster_view(T* p, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
#else
  return p;
#endif
}

// The first error of this thread's launches since the launcher began.
static thread_local int xent_launch_error_ = 0;
static inline void xent_launch_note(int err) {
  if (err != 0 && xent_launch_error_ == 0) xent_launch_error_ = err;
}
static inline int xent_launch_take() {
  const int err = xent_launch_error_;
  xent_launch_error_ = 0;
  return err;
}

// A launch's configuration in clusters of `cluster` blocks along x (no
// cluster attribute for 1), the attribute kept in *attr.
static inline cudaLaunchConfig_t xent_cluster_config(dim3 grid, dim3 block, size_t smem, unsigned cluster,
                                                     cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = cluster > 1 ? 1 : 0;
  return config;
}

// kernel<<<grid, block, smem, stream>>> in clusters of `cluster` blocks
// along x (none for 1). Returns the launch's own status.
template <typename... Params, typename... Args>
static inline int xent_launch_ex(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, size_t smem,
                                 unsigned cluster, cudaStream_t stream, Args... args) {
  (void)name;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = xent_cluster_config(grid, block, smem, cluster, stream, &attr);
  return (int)cudaLaunchKernelEx(&config, kernel, args...);
}
#define XENT_LAUNCH_CLUSTER(kernel, grid, block, smem, cluster, stream, ...)                                           \
  xent_launch_note(xent_launch_ex(kernel, #kernel, (grid), (block), (smem), (cluster), (stream), __VA_ARGS__))

// The driver's answers (xent_kernel_prepare below asks them). A failed
// query leaves its error in the runtime's last-error slot: cleared, since
// it is xent's own and the caller falls back.
static inline int xent_drv_device(int* ordinal, int64_t* smem_optin, int* clusters) {
  int optin = 0;
  if (cudaGetDevice(ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(clusters, cudaDevAttrClusterLaunch, *ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, *ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  *smem_optin = optin;
  return 0;
}
template <typename... Params>
static inline int xent_drv_kernel(void (*kernel)(Params...), int64_t* static_smem, int* ptx_version) {
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  *static_smem = (int64_t)fa.sharedSizeBytes;
  *ptx_version = fa.ptxVersion;
  return 0;
}
// The clusters (of one block: the blocks) the device holds at once.
template <typename... Params>
static inline int xent_drv_resident(void (*kernel)(Params...), unsigned threads, size_t smem, unsigned cluster,
                                    int* n) {
  cudaError_t err;
  if (cluster <= 1) {
    int dev = 0, sms = 0, per_sm = 0;
    err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, smem);
    *n = sms * per_sm;
  } else {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t config = xent_cluster_config(dim3(cluster), dim3(threads), smem, cluster, 0, &attr);
    err = cudaOccupancyMaxActiveClusters(n, kernel, &config);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return 0;
}
template <typename... Params>
static inline int xent_drv_raise_smem(void (*kernel)(Params...), const char* name, int64_t bytes) {
  (void)name;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return 0;
}
#endif

// static: each kernel file has its own copy, so the CUDA and HIP renderings
// (32- and 64-lane warps) can be linked into one program, as the emulator does.
#define XENT_DEVICE static __device__ __forceinline__
#define XENT_GLOBAL __global__
typedef cudaStream_t xent_stream_t;
// The first statement of a kernel whose block may hold more than 15 HIP
// wavefronts (the rows kernels): nothing here; see the hip target.
#define XENT_BLOCK_BEGIN()

// The on-chip shape's buffers (kernels/device/pipeline.h): two halves of
// shared memory, one row's slice walked while the next one's is copied in;
// nothing held in registers.
#define XENT_CHIP_BUFFERS 2
#define XENT_CHIP_HELD 0

// Every lane of the warp takes part; the mask says so (Volta and later do not
// run a warp in lockstep).
XENT_DEVICE float xent_shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
XENT_DEVICE double xent_shfl_xor(double v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
XENT_DEVICE int64_t xent_shfl_xor(int64_t v, int lane_mask) {
  return (int64_t)__shfl_xor_sync(0xffffffffu, (long long)v, lane_mask);
}
// The same with lane_mask below 32 (lanes of an aligned group of at most 32).
XENT_DEVICE double xent_shfl_xor_near(double v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
// Whether p holds in any lane of the warp (every lane takes part).
XENT_DEVICE bool xent_warp_any(bool p) { return __any_sync(0xffffffffu, p) != 0; }
// p, which the caller knows is the same in every active lane (see the HIP
// one); nothing to do on CUDA, where a branch's sides are not laid out one
// after the other.
XENT_DEVICE bool xent_same_in_wave(bool p) { return p; }
// Orders the memory accesses of the warp's lanes before it against those
// after it: shuffles exchange values but do not order memory.
XENT_DEVICE void xent_warp_sync() { __syncwarp(); }
// The same for the kLanes lanes (a power of two up to 8) of this thread's
// aligned group within the warp; the other lanes need not be there.
template <int kLanes>
XENT_DEVICE void xent_group_sync() {
  __syncwarp(((1u << kLanes) - 1) << ((unsigned)threadIdx.x % 32u & ~(unsigned)(kLanes - 1)));
}

XENT_DEVICE float xent_load_f16(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
XENT_DEVICE uint16_t xent_store_f16(float v) { return __half_as_ushort(__float2half_rn(v)); }

// The launch bounds' minimum of resident blocks for the strided shape
// (target.h), per architecture.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
// Blackwell (sm_100, sm_120): ptxas there needs more registers than sm_90's
// for the strided kernels and spilled at sm_90's bound, so it is asked for
// one resident block fewer (at least one).
// (clang-format would take "(threads) - 1" for a cast.)
// clang-format off
#define XENT_COLUMN_MIN_BLOCKS(threads, resident) ((resident) / (threads) > 1 ? (resident) / (threads) - 1 : 1)
// clang-format on
#else
#define XENT_COLUMN_MIN_BLOCKS(threads, resident) ((resident) / (threads))
#endif
