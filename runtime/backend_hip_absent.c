/* Linked instead of backend_hip.c when the library is built without
   --config=rocm. */
#include "internal.h"

xent_status xent_hip_open(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "hip backend: this libxent was built without HIP (build with --config=rocm)");
}

xent_status xent_hip_ce_run(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call) {
  (void)h;
  (void)d;
  (void)call;
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
