/* A host stand-in for the parts of the CUDA runtime that xent's CUDA backend
   and launchers call, linked into a test executable ahead of libcudart (an
   executable's own definitions win over a shared library's): a machine of
   two GPUs that records every call, so that a test can check what the
   launch path asks of the driver without one. Memory is host memory;
   kernels never run (a launch is recorded, with its configuration and the
   device current at the time). What it models, and nothing more:
   - a current device per host thread (cudaGetDevice/cudaSetDevice);
   - per device: the opt-in shared memory and cluster launch attributes;
   - per kernel function and device: cudaFuncAttributeMaxDynamicSharedMemorySize
     (refused past the opt-in maximum less the static size), and what
     cudaFuncGetAttributes reports (static shared memory, ptxVersion);
   - the last-error slot (cudaGetLastError / cudaPeekAtLastError), which the
     test can fill as other code would. */
#define _POSIX_C_SOURCE 200809L
#include "tests/fake_cudart.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

fake_cuda_state fake_cuda = {
    .devices = 2,
    .optin = {227 * 1024, 227 * 1024},
    .clusters = {1, 1},
    .ptx_version = 90,
    .static_smem = 528,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int current = 0;
static _Thread_local cudaError_t last_error = cudaSuccess;

static void record_on(fake_call_kind kind, const void* stream, const void* func, size_t bytes, unsigned cluster,
                      int value) {
  pthread_mutex_lock(&lock);
  if (fake_cuda.ncalls < FAKE_MAX_CALLS) {
    fake_call* c = &fake_cuda.calls[fake_cuda.ncalls++];
    c->kind = kind;
    c->device = current;
    c->func = func;
    c->stream = stream;
    c->bytes = bytes;
    c->cluster = cluster;
    c->value = value;
  }
  pthread_mutex_unlock(&lock);
}

static void record(fake_call_kind kind, const void* func, size_t bytes, unsigned cluster, int value) {
  record_on(kind, NULL, func, bytes, cluster, value);
}

static cudaError_t fail(cudaError_t err) {
  last_error = err;
  return err;
}

void fake_cuda_set_last_error(int err) { last_error = (cudaError_t)err; }
int fake_cuda_current_device(void) { return current; }
void fake_cuda_set_current_device(int device) { current = device; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = fake_cuda.devices;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= fake_cuda.devices) return fail(cudaErrorInvalidDevice);
  if (device != current) record(FAKE_SET_DEVICE, NULL, 0, 0, device);
  current = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= fake_cuda.devices) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = (fake_cuda.cc[device] ? fake_cuda.cc[device] : 90) / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = (fake_cuda.cc[device] ? fake_cuda.cc[device] : 90) % 10; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = fake_cuda.optin[device]; break;
    case cudaDevAttrClusterLaunch: *value = fake_cuda.clusters[device]; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;             /* an H100 SXM's */
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char* cudaGetErrorString(cudaError_t err) { return err == cudaSuccess ? "no error" : "fake CUDA error"; }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  memset(p, value, bytes);
  record(FAKE_MEMSET, NULL, bytes, 0, value);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  memset(p, value, bytes);
  record_on(FAKE_MEMSET_ASYNC, stream, NULL, bytes, 0, value);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  (void)kind;
  memmove(dst, src, bytes);
  record(FAKE_MEMCPY, NULL, bytes, 0, 0);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
  (void)kind;
  memmove(dst, src, bytes);
  record_on(FAKE_MEMCPY_ASYNC, stream, NULL, bytes, 0, 0);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  record_on(FAKE_STREAM_SYNC, stream, NULL, 0, 0, 0);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  record(FAKE_SYNC, NULL, 0, 0, 0);
  return cudaSuccess;
}

/* The attribute record of (func, current device); under lock. */
static fake_func* func_of(const void* func) {
  for (int i = 0; i < fake_cuda.nfuncs; ++i)
    if (fake_cuda.funcs[i].func == func && fake_cuda.funcs[i].device == current) return &fake_cuda.funcs[i];
  if (fake_cuda.nfuncs == FAKE_MAX_FUNCS) abort();
  fake_func* f = &fake_cuda.funcs[fake_cuda.nfuncs++];
  memset(f, 0, sizeof *f);
  f->func = func;
  f->device = current;
  f->max_dynamic = 48 * 1024 - fake_cuda.static_smem;
  return f;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  memset(attr, 0, sizeof *attr);
  pthread_mutex_lock(&lock);
  const fake_func* f = func_of(func);
  attr->maxDynamicSharedSizeBytes = f->max_dynamic;
  pthread_mutex_unlock(&lock);
  attr->sharedSizeBytes = fake_cuda.static_smem;
  attr->ptxVersion = fake_cuda.ptx_version;
  attr->binaryVersion = 90;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return fail(cudaErrorInvalidValue);
  if (value < 0 || (size_t)value + fake_cuda.static_smem > (size_t)fake_cuda.optin[current])
    return fail(cudaErrorInvalidValue);
  pthread_mutex_lock(&lock);
  fake_func* f = func_of(func);
  f->max_dynamic = value;
  f->sets++;
  pthread_mutex_unlock(&lock);
  record(FAKE_SET_ATTRIBUTE, func, (size_t)value, 0, value);
  return cudaSuccess;
}

/* Occupancy: one block an SM (of the 132), whatever the kernel; a cluster
   of k blocks k SMs. */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func, int threads,
                                                                   size_t smem, unsigned flags) {
  (void)func, (void)threads, (void)smem, (void)flags;
  *blocks = 1;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveClusters(int* clusters, const void* func, const cudaLaunchConfig_t* config) {
  (void)func;
  unsigned cluster = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) cluster = config->attrs[i].val.clusterDim.x;
  if (!fake_cuda.clusters[current]) return fail(cudaErrorInvalidValue);
  *clusters = 132 / (int)cluster;
  return cudaSuccess;
}

/* The launch rules the fake holds launches to (as the driver): dynamic
   shared memory at most the function's attribute, clusters only where the
   device has them and the code was built for them. */
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  (void)args;
  unsigned cluster = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) cluster = config->attrs[i].val.clusterDim.x;
  pthread_mutex_lock(&lock);
  const fake_func* f = func_of(func);
  const int max_dynamic = f->max_dynamic;
  pthread_mutex_unlock(&lock);
  record(FAKE_LAUNCH, func, config->dynamicSmemBytes, cluster, (int)config->gridDim.y);
  pthread_mutex_lock(&lock);
  if (fake_cuda.ncalls <= FAKE_MAX_CALLS) fake_cuda.calls[fake_cuda.ncalls - 1].grid_x = config->gridDim.x;
  pthread_mutex_unlock(&lock);
  if (config->dynamicSmemBytes > (size_t)max_dynamic) return fail(cudaErrorInvalidValue);
  if (cluster > 1 && (!fake_cuda.clusters[current] || fake_cuda.ptx_version < 90)) return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
