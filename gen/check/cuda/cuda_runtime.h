// xentgen --check's stand-in for CUDA's cuda_runtime.h: clang 19 cannot
// read CUDA 13's own headers, so the CUDA rendering is parsed as CUDA
// (-x cuda --cuda-device-only -nocudainc) against these declarations of
// what the generated code uses. They declare only; nothing is compiled
// with them. A name the templates start to use must be added here (the
// check then fails with clang's "undeclared identifier").
#pragma once
#include <stddef.h>

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __grid_constant__ __attribute__((grid_constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

#include <__clang_cuda_builtin_vars.h>

struct dim3 {
  unsigned x, y, z;
  __host__ __device__ constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) float2 { float x, y; };
__host__ __device__ float4 make_float4(float x, float y, float z, float w);

typedef struct CUstream_st* cudaStream_t;
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef enum cudaError cudaError_t;
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrClusterLaunch = 120
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaLaunchAttributeID { cudaLaunchAttributeClusterDimension = 4 };
union cudaLaunchAttributeValue {
  struct { unsigned x, y, z; } clusterDim;
  char pad[64];
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  int maxDynamicSharedSizeBytes;
  int ptxVersion, binaryVersion;
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
// What the HIP-on-CUDA headers read (hipGetDeviceProperties).
struct cudaDeviceProp {
  char name[256];
  int major, minor;
  int multiProcessorCount, maxThreadsPerMultiProcessor;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned numAttrs;
};

// The runtime API, host side: what the launchers may call, and what the
// graph-safe rule forbids (declared so that a planted call parses).
extern "C" {
cudaError_t cudaGetLastError(void);
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0 };
enum { cudaEnableDefault = 0 };
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* found);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
const char* cudaGetErrorString(cudaError_t err);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, int kind);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, cudaStream_t stream);
// What clang lowers kernel<<<grid, block, smem, stream>>> to (the one it
// expects when it cannot see which CUDA this is).
cudaError_t cudaConfigureCall(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0);
}
template <typename T>
cudaError_t cudaFuncSetAttribute(T* fn, cudaFuncAttribute attr, int value);
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* fn);
template <typename T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, T* fn, int threads, size_t smem);
template <typename T>
cudaError_t cudaOccupancyMaxActiveClusters(int* clusters, T* fn, const cudaLaunchConfig_t* config);
template <typename... Params, typename... Args>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(Params...), Args... args);

// Device intrinsics.
__device__ void __syncthreads(void);
__device__ void __trap(void);
__device__ int __syncthreads_or(int p);
__device__ int __syncthreads_and(int p);
__device__ int __syncthreads_count(int p);
__device__ void __syncwarp(unsigned mask = 0xffffffffu);
__device__ void __threadfence_block(void);
__device__ size_t __cvta_generic_to_shared(const void* p);
__device__ int __any_sync(unsigned mask, int p);
__device__ int __all_sync(unsigned mask, int p);
__device__ unsigned __ballot_sync(unsigned mask, int p);
template <typename T> __device__ T __shfl_sync(unsigned mask, T v, int lane, int width = 32);
template <typename T> __device__ T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32);
template <typename T> __device__ T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32);
template <typename T> __device__ T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32);
// The legacy maskless forms (gone for sm_70 and later): declared so that
// the warp-sync rule can name them rather than clang stopping at them. Not
// when the HIP rendering is parsed over the HIP-on-CUDA headers, which
// define HIP's wavefront forms under these names.
#if !defined(XENT_CHECK_HIP_ON_CUDA)
template <typename T> __device__ T __shfl(T v, int lane, int width = 32);
template <typename T> __device__ T __shfl_up(T v, unsigned delta, int width = 32);
template <typename T> __device__ T __shfl_down(T v, unsigned delta, int width = 32);
template <typename T> __device__ T __shfl_xor(T v, int lane_mask, int width = 32);
__device__ int __any(int p);
__device__ int __all(int p);
__device__ unsigned __ballot(int p);
#endif
__device__ unsigned long long atomicMin(unsigned long long* p, unsigned long long v);
__device__ unsigned long long atomicMax(unsigned long long* p, unsigned long long v);
__device__ unsigned long long atomicAdd(unsigned long long* p, unsigned long long v);
__device__ unsigned atomicAdd(unsigned* p, unsigned v);
__device__ int atomicAdd(int* p, int v);
__device__ float atomicAdd(float* p, float v);
__device__ double atomicAdd(double* p, double v);
__device__ float __uint_as_float(unsigned x);
extern "C" __device__ void* memcpy(void* dst, const void* src, size_t bytes);
extern "C" __device__ void* memset(void* dst, int value, size_t bytes);
__device__ unsigned __float_as_uint(float x);

// libdevice's math, device side (the host's comes from <math.h>).
__device__ float expf(float);
__device__ float exp2f(float);
__device__ float logf(float);
__device__ float log2f(float);
__device__ float tanhf(float);
__device__ float fmaxf(float, float);
__device__ float fminf(float, float);
__device__ float fabsf(float);
__device__ float fmaf(float, float, float);
__device__ double exp(double);
__device__ double exp2(double);
__device__ double log(double);
__device__ double log2(double);
__device__ double tanh(double);
__device__ double fmax(double, double);
__device__ double fmin(double, double);
__device__ double fabs(double);
__device__ double fma(double, double, double);
__device__ float fma(float, float, float);
__device__ float fmax(float, float);
