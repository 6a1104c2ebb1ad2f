/* The cpu backend: the generated kernels themselves, compiled as host C++
   and run by the SIMT emulator (runtime/emu), with the same grid, block and
   shared-memory configuration their launchers give the GPU. By default it
   runs the CUDA rendering (32-lane warps); xent_cpu_emulate() switches a
   handle to the HIP rendering (64-lane wavefronts). */
#include <stdlib.h>

#include "dispatch.h"
#include "runtime/emu/emu.h"
#include "internal.h"

/* The emulated dispatch tables (xent_dispatch_<target>.c with XENT_EMU). */
extern const xent_dispatch_entry xent_cuda_dispatch_emu[];
extern const size_t xent_cuda_dispatch_count_emu;
extern const xent_dispatch_spec xent_cuda_dispatch_specs_emu[];
extern const xent_dispatch_entry xent_hip_dispatch_emu[];
extern const size_t xent_hip_dispatch_count_emu;
extern const xent_dispatch_spec xent_hip_dispatch_specs_emu[];

xent_status xent_cpu_emulate(xent_handle* h, xent_backend_kind target) {
  xent_clear_error();
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_cpu_emulate: handle is NULL");
  if (h->kind != XENT_BACKEND_CPU)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_cpu_emulate: the handle's backend is %s, not cpu",
                     xent_backend_name(h->kind));
  if (target != XENT_BACKEND_CUDA && target != XENT_BACKEND_HIP)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_cpu_emulate: target must be XENT_BACKEND_CUDA or XENT_BACKEND_HIP");
  h->emulated = target;
  return XENT_OK;
}

void xent_cpu_table(const xent_handle* h, xent_table* t) {
  const int hip = h->emulated == XENT_BACKEND_HIP;
  t->entries = hip ? xent_hip_dispatch_emu : xent_cuda_dispatch_emu;
  t->count = hip ? xent_hip_dispatch_count_emu : xent_cuda_dispatch_count_emu;
  t->target = hip ? "hip (emulated)" : "cuda (emulated)";
  t->specs = hip ? xent_hip_dispatch_specs_emu : xent_cuda_dispatch_specs_emu;
}

xent_status xent_cpu_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  if (e->launch(args) != 0) {
    return xent_fail(XENT_ERROR_DEVICE, "cpu backend: %s (%s): %s", e->key,
                     h->emulated == XENT_BACKEND_HIP ? "hip (emulated)" : "cuda (emulated)", xent_emu_last_message());
  }
  return XENT_OK;
}

/* The emulated kernels write host memory: the word lives there. */
xent_status xent_cpu_flag_alloc(xent_handle* h) {
  h->bad_label_row = malloc(sizeof *h->bad_label_row);
  if (!h->bad_label_row) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "xent_create: out of memory");
  *h->bad_label_row = XENT_NO_BAD_ROW;
  return XENT_OK;
}

/* One atomic exchange: calls on other threads sharing the handle may be
   recording a row at the same time. */
xent_status xent_cpu_flag_take(xent_handle* h, unsigned long long* row) {
  *row = __atomic_exchange_n(h->bad_label_row, XENT_NO_BAD_ROW, __ATOMIC_SEQ_CST);
  return XENT_OK;
}

void xent_cpu_flag_free(xent_handle* h) { free(h->bad_label_row); }
