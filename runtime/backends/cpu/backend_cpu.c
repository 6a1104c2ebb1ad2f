/* The cpu backend. By default its own host code runs the cross entropy and
   the softmax family (native_rows.cc); every other launch, and every launch of a
   handle that xent_cpu_emulate() set to a GPU rendering, runs the generated
   kernels themselves, compiled as host C++ and run by the SIMT emulator
   (runtime/emu) with the same grid, block and shared-memory configuration
   their launchers give the GPU: the CUDA rendering (32-lane warps) or the
   HIP one (64-lane wavefronts). */
#include <stdlib.h>
#include <string.h>

#include "runtime/backend/backend.h"
#include "runtime/backends/cpu/blas_cpu.h"
#include "runtime/backends/cpu/native.h"
#include "xent_launch.h"
#include "runtime/emu/emu.h"

/* The emulated dispatch tables (xent_dispatch_<target>.c with XENT_EMU). */
extern const xent_dispatch_entry xent_cuda_dispatch_emu[];
extern const size_t xent_cuda_dispatch_count_emu;
extern const xent_dispatch_spec xent_cuda_dispatch_specs_emu[];
extern const xent_axis_row xent_cuda_dispatch_axes_emu[];
extern const xent_dispatch_entry xent_hip_dispatch_emu[];
extern const size_t xent_hip_dispatch_count_emu;
extern const xent_dispatch_spec xent_hip_dispatch_specs_emu[];
extern const xent_axis_row xent_hip_dispatch_axes_emu[];

xent_status xent_cpu_emulate(xent_handle* h, xent_backend_kind target) {
  xent_clear_error();
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_cpu_emulate: handle is NULL");
  if (h->backend != &xent_backend_cpu)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_cpu_emulate: the handle's backend is %s, not cpu",
                     h->backend->name);
  if (target != XENT_BACKEND_CPU && target != XENT_BACKEND_CUDA && target != XENT_BACKEND_HIP)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "xent_cpu_emulate: target must be XENT_BACKEND_CPU, XENT_BACKEND_CUDA or XENT_BACKEND_HIP");
  h->emulated = target;
  /* The emulated device's build (xent_emu_set_device): sm_100a's passes for
     an sm_100 build, else sm_90a's. */
  h->on_chip = target != XENT_BACKEND_CUDA ? 0 : xent_emu_get_device().build_arch >= 100 ? 100 : 90;
  return XENT_OK;
}

/* The host is the device, and there is one. */
static xent_status cpu_open(xent_handle* h) {
  h->device = 0;
  return XENT_OK;
}

/* The rendering a handle's launches run (the CUDA one under the native
   path: its table lists the variants, and runs what native_rows.cc does not). */
static const char* rendering(const xent_handle* h) {
  return h->emulated == XENT_BACKEND_HIP ? "hip (emulated)" : "cuda (emulated)";
}

static void cpu_table(const xent_handle* h, xent_table* t) {
  const int hip = h->emulated == XENT_BACKEND_HIP;
  t->entries = hip ? xent_hip_dispatch_emu : xent_cuda_dispatch_emu;
  t->count = hip ? xent_hip_dispatch_count_emu : xent_cuda_dispatch_count_emu;
  t->target = h->emulated == XENT_BACKEND_CPU ? "cpu" : rendering(h);
  t->specs = hip ? xent_hip_dispatch_specs_emu : xent_cuda_dispatch_specs_emu;
  t->axes = hip ? xent_hip_dispatch_axes_emu : xent_cuda_dispatch_axes_emu;
}

static xent_status cpu_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (e->launch(args) != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "cpu backend: %s (%s): %s", e->key, rendering(h), xent_emu_last_message());
  }
  return XENT_OK;
}

static int cpu_native(const xent_handle* h) { return h->emulated == XENT_BACKEND_CPU; }

/* The emulated kernels write host memory: the word lives there. */
static xent_status cpu_flag_alloc(xent_handle* h) {
  h->bad_label_row = malloc(sizeof *h->bad_label_row);
  if (!h->bad_label_row) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: out of memory");
  *h->bad_label_row = XENT_NO_BAD_ROW;
  return XENT_OK;
}

/* One atomic exchange: calls on other threads sharing the handle may be
   recording a row at the same time. */
static xent_status cpu_flag_take(xent_handle* h, const char* fn, void* stream, unsigned long long* row) {
  (void)fn;
  (void)stream; /* the host ran every call to its end */
  *row = __atomic_exchange_n(h->bad_label_row, XENT_NO_BAD_ROW, __ATOMIC_SEQ_CST);
  return XENT_OK;
}

static void cpu_flag_free(xent_handle* h) { free(h->bad_label_row); }

static xent_status cpu_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream) {
  (void)h, (void)fn, (void)stream;
  memset(p, 0, bytes);
  return XENT_OK;
}

/* OpenBLAS, f16/bf16 operands widened (blas_cpu.c); its f32 copies are its
   own, not the caller's workspace. */
static xent_status cpu_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace,
                            size_t workspace_bytes, void* stream) {
  (void)h, (void)workspace, (void)workspace_bytes, (void)stream;
  return xent_cpu_gemm_typed(fn, g);
}

/* No collective library: a vocabulary-parallel caller gives its own
   all_gather. */
const xent_backend xent_backend_cpu = {
    .kind = XENT_BACKEND_CPU,
    .name = "cpu",
    .open = cpu_open,
    .table = cpu_table,
    .launch = cpu_launch,
    .flag_alloc = cpu_flag_alloc,
    .flag_take = cpu_flag_take,
    .flag_free = cpu_flag_free,
    .gemm = cpu_gemm,
    .gemm_free = NULL,
    .gemm_workspace = 0,
    .native = cpu_native,
    .native_ce = xent_cpu_native_ce,
    .native_softmax = xent_cpu_native_softmax,
    .zero = cpu_zero,
    .collective = XENT_COLLECTIVE_NONE,
};
