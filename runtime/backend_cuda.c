/* The CUDA backend: finds the generated kernel in xent_cuda_dispatch and
   calls its launcher on the caller's stream. No host synchronisation. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "dispatch.h"
#include "internal.h"

xent_status xent_cuda_open(xent_handle* h) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "cuda backend: no CUDA device (%s)",
                     err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
  }
  int major = 0, minor = 0;
  if (cudaGetDevice(&h->device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, h->device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, h->device) != cudaSuccess) {
    return xent_fail(XENT_ERROR_DEVICE, "cuda backend: cannot query the current device");
  }
  h->arch = major * 10 + minor;
  return XENT_OK;
}

void xent_cuda_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = xent_cuda_dispatch;
  t->count = xent_cuda_dispatch_count;
  t->target = "cuda";
}

xent_status xent_cuda_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (h->arch < e->min_arch) {
    return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE, "cuda backend: %s needs sm_%d, the device is sm_%d", e->key,
                     e->min_arch, h->arch);
  }
  const int err = e->launch(args);
  if (err != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "cuda backend: launching %s failed: %s", e->key,
                     cudaGetErrorString((cudaError_t)err));
  }
  return XENT_OK;
}

xent_status xent_cuda_flag_alloc(xent_handle* h) {
  void* p = NULL;
  if (cudaMalloc(&p, sizeof *h->bad_label_row) != cudaSuccess)
    return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: cannot allocate 8 bytes of device memory");
  if (cudaMemset(p, 0xff, sizeof *h->bad_label_row) != cudaSuccess) {
    cudaFree(p);
    return xent_fail(XENT_ERROR_DEVICE, "xent_create: cannot initialise device memory");
  }
  h->bad_label_row = p;
  return XENT_OK;
}

xent_status xent_cuda_flag_take(xent_handle* h, unsigned long long* row) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(row, h->bad_label_row, sizeof *row, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess) err = cudaMemset(h->bad_label_row, 0xff, sizeof *row);
  if (err != cudaSuccess) return xent_fail(XENT_ERROR_DEVICE, "xent_check: %s", cudaGetErrorString(err));
  return XENT_OK;
}

void xent_cuda_flag_free(xent_handle* h) { cudaFree(h->bad_label_row); }
