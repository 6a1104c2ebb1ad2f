/* Linked instead of backend_hip.c when the library is built without
   --config=rocm. */
#include "backend.h"
#include "dispatch.h"

xent_status xent_hip_open(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "hip backend: this libxent was built without HIP (build with --config=rocm)");
}

void xent_hip_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = NULL;
  t->count = 0;
  t->target = "hip";
  t->specs = NULL;
}

xent_status xent_hip_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  (void)h;
  (void)e;
  (void)args;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: not built in");
}

xent_status xent_hip_flag_alloc(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: not built in");
}

xent_status xent_hip_flag_take(xent_handle* h, unsigned long long* row) {
  (void)h;
  (void)row;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: not built in");
}

void xent_hip_flag_free(xent_handle* h) { (void)h; }

/* xent_hip_gemm and xent_hip_gemm_free: gemm_hip.c, which needs no HIP
   headers and is linked in either way; only a HIP handle reaches it. */

xent_status xent_hip_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream) {
  (void)h;
  (void)p, (void)bytes, (void)stream;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s: hip backend: not built in", fn);
}

XENT_GPU_BACKEND(hip, XENT_BACKEND_HIP, XENT_COLLECTIVE_RCCL);
