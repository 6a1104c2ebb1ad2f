/* The HIP backend: finds the generated kernel in xent_hip_dispatch and calls
   its launcher on the caller's stream. No host synchronisation. */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend/backend.h"
#include "xent_launch.h"

/* Declared by the HIP rendering of xent_launch.h; the runtime includes the
   CUDA rendering, whose types are identical. */
extern const xent_dispatch_entry xent_hip_dispatch[];
extern const size_t xent_hip_dispatch_count;
extern const xent_dispatch_spec xent_hip_dispatch_specs[];
extern const xent_axis_row xent_hip_dispatch_axes[];

xent_status xent_hip_open(xent_handle* h) {
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess || count == 0) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: no HIP device (%s)",
                     err != hipSuccess ? hipGetErrorString(err) : "device count is 0");
  }
  hipDeviceProp_t prop;
  if (h->device < 0 && hipGetDevice(&h->device) != hipSuccess)
    return xent_fail(XENT_ERROR_DEVICE, "hip backend: cannot query the current device");
  if (h->device >= count) {
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create_on_device: device %d, but there are %d HIP devices",
                     h->device, count);
  }
  if (hipGetDeviceProperties(&prop, h->device) != hipSuccess)
    return xent_fail(XENT_ERROR_DEVICE, "hip backend: cannot query device %d", h->device);
  /* "gfx90a:sramecc+:xnack-" -> 0x90a */
  h->arch = strncmp(prop.gcnArchName, "gfx", 3) == 0 ? (int)strtol(prop.gcnArchName + 3, NULL, 16) : 0;
  h->resident_threads = (int64_t)prop.multiProcessorCount * prop.maxThreadsPerMultiProcessor;
  return XENT_OK;
}

/* The handle's device made current for one call, the caller's put back
   after it (as the CUDA backend, which says why). */
static xent_status enter(const xent_handle* h, const char* fn, int* prev) {
  *prev = h->device;
  hipError_t err = hipGetDevice(prev);
  if (err == hipSuccess && *prev != h->device) err = hipSetDevice(h->device);
  if (err != hipSuccess) {
    *prev = h->device;
    return xent_fail(XENT_ERROR_DEVICE, "%s: cannot make device %d current: %s", fn, h->device,
                     hipGetErrorString(err));
  }
  return XENT_OK;
}

static void leave(const xent_handle* h, int prev) {
  if (prev != h->device) (void)hipSetDevice(prev);
}

void xent_hip_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = xent_hip_dispatch;
  t->count = xent_hip_dispatch_count;
  t->target = "hip";
  t->specs = xent_hip_dispatch_specs;
  t->axes = xent_hip_dispatch_axes;
}

xent_status xent_hip_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (h->arch < e->min_arch) {
    return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE, "hip backend: %s needs gfx%x, the device is gfx%x", e->key,
                     e->min_arch, h->arch);
  }
  int prev;
  const xent_status s = enter(h, "hip backend", &prev);
  if (s != XENT_OK) return s;
  const int err = e->launch(args);
  leave(h, prev);
  if (err != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "hip backend: launching %s failed: %s", e->key,
                     hipGetErrorString((hipError_t)err));
  }
  return XENT_OK;
}

xent_status xent_hip_flag_alloc(xent_handle* h) {
  int prev;
  xent_status s = enter(h, "xent_create", &prev);
  if (s != XENT_OK) return s;
  void* p = NULL;
  if (hipMalloc(&p, sizeof *h->bad_label_row) != hipSuccess) {
    s = xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: cannot allocate 8 bytes of device memory");
  } else if (hipMemset(p, 0xff, sizeof *h->bad_label_row) != hipSuccess || hipDeviceSynchronize() != hipSuccess) {
    hipFree(p);
    s = xent_fail(XENT_ERROR_DEVICE, "xent_create: cannot initialise device memory");
  } else {
    h->bad_label_row = p;
  }
  leave(h, prev);
  return s;
}

xent_status xent_hip_flag_take(xent_handle* h, const char* fn, void* stream, unsigned long long* row) {
  int prev;
  const xent_status s = enter(h, fn, &prev);
  if (s != XENT_OK) return s;
  hipError_t err;
  if (stream == XENT_WHOLE_DEVICE) {
    err = hipDeviceSynchronize();
    if (err == hipSuccess) err = hipMemcpy(row, h->bad_label_row, sizeof *row, hipMemcpyDeviceToHost);
    if (err == hipSuccess) err = hipMemset(h->bad_label_row, 0xff, sizeof *row);
    /* As the CUDA backend: hipMemset may return before the reset lands, and
       a kernel on another stream could record a bad row that it would erase. */
    if (err == hipSuccess) err = hipDeviceSynchronize();
  } else {
    hipStream_t st = (hipStream_t)stream;
    err = hipMemcpyAsync(row, h->bad_label_row, sizeof *row, hipMemcpyDeviceToHost, st);
    if (err == hipSuccess) err = hipMemsetAsync(h->bad_label_row, 0xff, sizeof *row, st);
    if (err == hipSuccess) err = hipStreamSynchronize(st);
  }
  leave(h, prev);
  if (err != hipSuccess) return xent_fail(XENT_ERROR_DEVICE, "%s: %s", fn, hipGetErrorString(err));
  return XENT_OK;
}

void xent_hip_flag_free(xent_handle* h) {
  int prev;
  if (enter(h, "xent_destroy", &prev) != XENT_OK) return;
  hipFree(h->bad_label_row);
  leave(h, prev);
}

xent_status xent_hip_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream) {
  int prev;
  const xent_status s = enter(h, fn, &prev);
  if (s != XENT_OK) return s;
  const hipError_t err = hipMemsetAsync(p, 0, bytes, (hipStream_t)stream);
  leave(h, prev);
  if (err != hipSuccess) return xent_fail(XENT_ERROR_DEVICE, "%s: %s", fn, hipGetErrorString(err));
  return XENT_OK;
}

XENT_GPU_BACKEND(hip, XENT_BACKEND_HIP, XENT_COLLECTIVE_RCCL);
