/* The handle's GPU made current for one call of the CUDA runtime, and the
   caller's put back after it. libxent's CUDA runtime keeps a current device
   per host thread of its own, apart from PyTorch's and the caller's: without
   this a call on a machine of several GPUs runs wherever this thread last
   pointed that runtime. Shared by backend_cuda.c and gemm_cuda.c (the latter
   also built as the HIP-on-CUDA backend's GEMM, without backend_cuda.c). */
#ifndef XENT_CUDA_DEVICE_H
#define XENT_CUDA_DEVICE_H

#include <cuda_runtime_api.h>

#include "runtime/base/internal.h"

/* Makes h->device current; *prev: the device to put back (xent_cuda_leave).
   On failure, an XENT_ERROR_DEVICE naming fn. */
static inline xent_status xent_cuda_enter(const xent_handle* h, const char* fn, int* prev) {
  *prev = h->device;
  cudaError_t err = cudaGetDevice(prev);
  if (err == cudaSuccess && *prev != h->device) err = cudaSetDevice(h->device);
  if (err != cudaSuccess) {
    *prev = h->device;
    return xent_fail(XENT_ERROR_DEVICE, "%s: cannot make device %d current: %s", fn, h->device,
                     cudaGetErrorString(err));
  }
  return XENT_OK;
}

static inline void xent_cuda_leave(const xent_handle* h, int prev) {
  if (prev != h->device) (void)cudaSetDevice(prev);
}

#endif
