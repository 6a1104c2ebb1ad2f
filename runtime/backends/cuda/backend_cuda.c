/* The CUDA backend: finds the generated kernel in xent_cuda_dispatch and
   calls its launcher on the caller's stream. No host synchronisation. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "runtime/backend/backend.h"
#include "runtime/backends/cuda/cuda_device.h"
#include "xent_launch.h"

#include "xent_cuda_archs.h"

/* The table's key schema (xent_launch.h declares the rest of the table). */
extern const xent_axis_row xent_cuda_dispatch_axes[];

static xent_status code_fits(int device, int arch);
static int chip_passes(int arch);

xent_status xent_cuda_open(xent_handle* h) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "cuda backend: no CUDA device (%s)",
                     err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
  }
  if (h->device < 0 && cudaGetDevice(&h->device) != cudaSuccess)
    return xent_fail(XENT_ERROR_DEVICE, "cuda backend: cannot query the current device");
  if (h->device >= count) {
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_create_on_device: device %d, but there are %d CUDA devices",
                     h->device, count);
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, h->device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, h->device) != cudaSuccess) {
    return xent_fail(XENT_ERROR_DEVICE, "cuda backend: cannot query device %d", h->device);
  }
  h->arch = major * 10 + minor;
  int sms = 0, threads = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, h->device) == cudaSuccess &&
      cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, h->device) == cudaSuccess)
    h->resident_threads = (int64_t)sms * threads;
  h->on_chip = chip_passes(h->arch);
  return code_fits(h->device, h->arch);
}

/* The ON_CHIP plan's passes a GPU of `arch` runs with this build's machine
   code (xent_handle.on_chip): 90 where it is sm_90 and the kernels carry
   sm_90a code (kernels/linear_cross_entropy/on_chip.h's wgmma); 100 where
   they carry sm_100a code and it is sm_100, or sm_100f code (the family's)
   and it is sm_100 or a later 10.x such as sm_103 (on_chip_sm100.h's
   tcgen05); else 0. Plain sm_90's and sm_100's code traps in them. */
static int chip_passes(int arch) {
  static const int sass[] = XENT_CUDA_SASS_ARCHS, exact[] = XENT_CUDA_SASS_EXACT;
  for (size_t i = 0; i < sizeof sass / sizeof sass[0]; ++i) {
    if (sass[i] == 90 && exact[i] == 1 && arch == 90) return 90;
    if (sass[i] == 100 && ((exact[i] == 1 && arch == 100) || (exact[i] == 2 && arch / 10 == 10 && arch >= 100)))
      return 100;
  }
  return 0;
}

/* Whether the kernels carry code a GPU of compute capability `arch` (major *
   10 + minor) can run, by NVIDIA's compatibility rules (CUDA C++
   Programming Guide, "Binary Compatibility" and "PTX Compatibility"):
   machine code for sm_XY runs on a GPU X.Z with Z >= Y, same major; an "a"
   architecture's only on that GPU; PTX for compute_XY is compiled by the
   driver for any GPU of capability XY or above. Checked here, at
   xent_create, rather than found out as "no kernel image" at the first
   call. A build of PTX alone lists machine code {0}: none. */
static xent_status code_fits(int device, int arch) {
  static const int sass[] = XENT_CUDA_SASS_ARCHS, exact[] = XENT_CUDA_SASS_EXACT;
  const int n = (int)(sizeof sass / sizeof sass[0]), ptx = XENT_CUDA_PTX_ARCH;
  if (ptx > 0 && arch >= ptx) return XENT_OK;
  for (int i = 0; i < n; ++i) {
    if (sass[i] > 0 && (exact[i] == 1 ? arch == sass[i] : arch / 10 == sass[i] / 10 && arch >= sass[i])) return XENT_OK;
  }
  char built[256];
  int len = 0;
  for (int i = 0; i < n; ++i)
    if (sass[i] > 0)
      len += snprintf(built + len, sizeof built - (size_t)len, "%ssm_%d%s", len ? ", " : "", sass[i],
                      exact[i] == 1 ? "a" : exact[i] == 2 ? "f" : "");
  if (ptx > 0) snprintf(built + len, sizeof built - (size_t)len, "%sthe PTX of compute_%d", len ? " and " : "", ptx);
  return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE,
                   "cuda backend: device %d is sm_%d (compute capability %d.%d), and this build's CUDA kernels carry "
                   "code for %s, none of which runs there: rebuild with --define=xent_cuda_archs=%d (Bazel) or "
                   "-DCMAKE_CUDA_ARCHITECTURES=%d (CMake)",
                   device, arch, arch / 10, arch % 10, built, arch, arch);
}

void xent_cuda_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = xent_cuda_dispatch;
  t->count = xent_cuda_dispatch_count;
  t->target = "cuda";
  t->specs = xent_cuda_dispatch_specs;
  t->axes = xent_cuda_dispatch_axes;
}

xent_status xent_cuda_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (h->arch < e->min_arch) {
    return xent_fail(XENT_ERROR_UNSUPPORTED_DEVICE, "cuda backend: %s needs sm_%d, the device is sm_%d", e->key,
                     e->min_arch, h->arch);
  }
  int prev;
  xent_status s = xent_cuda_enter(h, "cuda backend", &prev);
  if (s != XENT_OK) return s;
  /* The launcher's own launches' status (xent_device.h), never an error
     other code left pending in the runtime. */
  const int err = e->launch(args);
  xent_cuda_leave(h, prev);
  if (err != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "cuda backend: launching %s failed: %s", e->key,
                     cudaGetErrorString((cudaError_t)err));
  }
  return XENT_OK;
}

xent_status xent_cuda_flag_alloc(xent_handle* h) {
  int prev;
  xent_status s = xent_cuda_enter(h, "xent_create", &prev);
  if (s != XENT_OK) return s;
  void* p = NULL;
  if (cudaMalloc(&p, sizeof *h->bad_label_row) != cudaSuccess) {
    s = xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: cannot allocate 8 bytes of device memory");
  } else if (cudaMemset(p, 0xff, sizeof *h->bad_label_row) != cudaSuccess ||
             cudaDeviceSynchronize() != cudaSuccess) {
    cudaFree(p);
    s = xent_fail(XENT_ERROR_DEVICE, "xent_create: cannot initialise device memory");
  } else {
    h->bad_label_row = p;
  }
  xent_cuda_leave(h, prev);
  return s;
}

/* The record is read after every kernel before it, and reset before any
   kernel after it: cudaMemset is ordered on the legacy default stream only
   and may return before it lands, so a kernel on a non-blocking stream (as
   PyTorch's are) could record a bad row before the reset, which would then
   erase it. The device is waited for again after the reset. */
xent_status xent_cuda_flag_take(xent_handle* h, const char* fn, void* stream, unsigned long long* row) {
  int prev;
  xent_status s = xent_cuda_enter(h, fn, &prev);
  if (s != XENT_OK) return s;
  cudaError_t err;
  if (stream == XENT_WHOLE_DEVICE) {
    err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaMemcpy(row, h->bad_label_row, sizeof *row, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess) err = cudaMemset(h->bad_label_row, 0xff, sizeof *row);
    /* cudaMemset may return before the reset lands, and a kernel on another
       stream could record a bad row that it would then erase. */
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
  } else {
    /* Read, then reset, after the stream's work; the host waits for that
       stream alone. */
    cudaStream_t st = (cudaStream_t)stream;
    err = cudaMemcpyAsync(row, h->bad_label_row, sizeof *row, cudaMemcpyDeviceToHost, st);
    if (err == cudaSuccess) err = cudaMemsetAsync(h->bad_label_row, 0xff, sizeof *row, st);
    if (err == cudaSuccess) err = cudaStreamSynchronize(st);
  }
  xent_cuda_leave(h, prev);
  if (err != cudaSuccess) return xent_fail(XENT_ERROR_DEVICE, "%s: %s", fn, cudaGetErrorString(err));
  return XENT_OK;
}

void xent_cuda_flag_free(xent_handle* h) {
  int prev;
  if (xent_cuda_enter(h, "xent_destroy", &prev) != XENT_OK) return;
  cudaFree(h->bad_label_row);
  xent_cuda_leave(h, prev);
}

XENT_GPU_BACKEND(cuda, XENT_BACKEND_CUDA, XENT_COLLECTIVE_NCCL);
