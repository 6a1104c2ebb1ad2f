/* Linked instead of backend_cuda.c when the library is built without
   --config=cuda. */
#include "internal.h"

xent_status xent_cuda_open(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "cuda backend: this libxent was built without CUDA (build with --config=cuda)");
}

xent_status xent_cuda_ce_run(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call) {
  (void)h;
  (void)d;
  (void)call;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "cuda backend: not built in");
}

xent_status xent_cuda_flag_alloc(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "cuda backend: not built in");
}

xent_status xent_cuda_flag_take(xent_handle* h, unsigned long long* row) {
  (void)h;
  (void)row;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "cuda backend: not built in");
}

void xent_cuda_flag_free(xent_handle* h) { (void)h; }
