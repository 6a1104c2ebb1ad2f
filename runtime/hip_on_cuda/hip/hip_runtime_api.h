/* HIP-on-CUDA, host API: the part of HIP's runtime API that xent uses
   (runtime/backend_hip.c), mapped onto the CUDA runtime, in C and C++. With
   it, the HIP rendering of every kernel and the HIP backend run on an NVIDIA
   GPU: the HIP path executes on real hardware, not only compiles. ROCm's own
   hip/nvidia_detail headers do the same job but do not compile against
   CUDA 13. See README.md here. */
#ifndef XENT_HIP_ON_CUDA_RUNTIME_API_H
#define XENT_HIP_ON_CUDA_RUNTIME_API_H

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define XENT_HIP_ON_CUDA 1

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
#define hipSuccess cudaSuccess
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

/* The fields xent reads. gcnArchName names the AMD target whose
   rendering runs here: gfx90a (wave64, what the HIP kernels are written
   for), followed by the NVIDIA device that emulates it; the device's SMs
   stand for its CUs. */
typedef struct hipDeviceProp_t {
  char name[256];
  char gcnArchName[256];
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
} hipDeviceProp_t;

static inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  struct cudaDeviceProp p;
  const cudaError_t err = cudaGetDeviceProperties(&p, device);
  if (err != cudaSuccess) return err;
  snprintf(prop->name, sizeof prop->name, "%s", p.name);
  snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "gfx90a:hip-on-cuda:sm_%d%d", p.major, p.minor);
  prop->multiProcessorCount = p.multiProcessorCount;
  prop->maxThreadsPerMultiProcessor = p.maxThreadsPerMultiProcessor;
  return cudaSuccess;
}

static inline hipError_t hipGetDeviceCount(int* count) { return cudaGetDeviceCount(count); }
static inline hipError_t hipGetDevice(int* device) { return cudaGetDevice(device); }
static inline hipError_t hipSetDevice(int device) { return cudaSetDevice(device); }
static inline const char* hipGetErrorString(hipError_t err) { return cudaGetErrorString(err); }
static inline hipError_t hipGetLastError(void) { return cudaGetLastError(); }
static inline hipError_t hipMalloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
static inline hipError_t hipFree(void* p) { return cudaFree(p); }
static inline hipError_t hipMemset(void* p, int value, size_t bytes) { return cudaMemset(p, value, bytes); }
static inline hipError_t hipMemsetAsync(void* p, int value, size_t bytes, void* stream) {
  return cudaMemsetAsync(p, value, bytes, (cudaStream_t)stream);
}
static inline hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  return cudaMemcpy(dst, src, bytes, kind);
}
static inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                                        void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream);
}
/* The device attributes and kernel attributes the on-chip launch asks
   (kernels/device/target_hip.h). */
typedef enum cudaDeviceAttr hipDeviceAttribute_t;
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
static inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  return cudaDeviceGetAttribute(value, attr, device);
}
typedef struct cudaFuncAttributes hipFuncAttributes;
static inline hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, const void* func) {
  return cudaFuncGetAttributes(attr, func);
}
typedef enum cudaFuncAttribute hipFuncAttribute;
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
static inline hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(func, attr, value);
}
static inline hipError_t hipDeviceSynchronize(void) { return cudaDeviceSynchronize(); }
static inline hipError_t hipStreamSynchronize(void* stream) { return cudaStreamSynchronize((cudaStream_t)stream); }

#endif
