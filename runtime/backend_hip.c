/* The HIP backend: finds the generated kernel in xent_hip_dispatch and calls
   its launcher on the caller's stream. No host synchronisation. */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "internal.h"

/* Declared by the HIP rendering of xent_launch.h; the runtime includes the
   CUDA rendering, whose types are identical. */
extern const xent_dispatch_entry xent_hip_dispatch[];
extern const size_t xent_hip_dispatch_count;

xent_status xent_hip_open(xent_handle* h) {
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess || count == 0) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: no HIP device (%s)",
                     err != hipSuccess ? hipGetErrorString(err) : "device count is 0");
  }
  hipDeviceProp_t prop;
  if (hipGetDevice(&h->device) != hipSuccess || hipGetDeviceProperties(&prop, h->device) != hipSuccess) {
    return xent_fail(XENT_ERROR_DEVICE, "hip backend: cannot query the current device");
  }
  /* "gfx90a:sramecc+:xnack-" -> 0x90a */
  h->arch = strncmp(prop.gcnArchName, "gfx", 3) == 0 ? (int)strtol(prop.gcnArchName + 3, NULL, 16) : 0;
  return XENT_OK;
}

void xent_hip_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = xent_hip_dispatch;
  t->count = xent_hip_dispatch_count;
  t->target = "hip";
}

xent_status xent_hip_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (h->arch < e->min_arch) {
    return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE, "hip backend: %s needs gfx%x, the device is gfx%x", e->key,
                     e->min_arch, h->arch);
  }
  const int err = e->launch(args);
  if (err != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "hip backend: launching %s failed: %s", e->key,
                     hipGetErrorString((hipError_t)err));
  }
  return XENT_OK;
}

xent_status xent_hip_flag_alloc(xent_handle* h) {
  void* p = NULL;
  if (hipMalloc(&p, sizeof *h->bad_label_row) != hipSuccess)
    return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: cannot allocate 8 bytes of device memory");
  if (hipMemset(p, 0xff, sizeof *h->bad_label_row) != hipSuccess) {
    hipFree(p);
    return xent_fail(XENT_ERROR_DEVICE, "xent_create: cannot initialise device memory");
  }
  h->bad_label_row = p;
  return XENT_OK;
}

xent_status xent_hip_flag_take(xent_handle* h, unsigned long long* row) {
  hipError_t err = hipDeviceSynchronize();
  if (err == hipSuccess) err = hipMemcpy(row, h->bad_label_row, sizeof *row, hipMemcpyDeviceToHost);
  if (err == hipSuccess) err = hipMemset(h->bad_label_row, 0xff, sizeof *row);
  if (err != hipSuccess) return xent_fail(XENT_ERROR_DEVICE, "xent_check: %s", hipGetErrorString(err));
  return XENT_OK;
}

void xent_hip_flag_free(xent_handle* h) { hipFree(h->bad_label_row); }

xent_status xent_hip_zero(const char* fn, void* p, size_t bytes, void* stream) {
  const hipError_t err = hipMemsetAsync(p, 0, bytes, (hipStream_t)stream);
  if (err != hipSuccess) return xent_fail(XENT_ERROR_DEVICE, "%s: %s", fn, hipGetErrorString(err));
  return XENT_OK;
}
