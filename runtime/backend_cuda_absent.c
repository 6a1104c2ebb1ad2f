/* Linked instead of backend_cuda.c when the library is built without
   --config=cuda. */
#include "backend.h"
#include "dispatch.h"

xent_status xent_cuda_open(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "cuda backend: this libxent was built without CUDA (build with --config=cuda)");
}

void xent_cuda_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = NULL;
  t->count = 0;
  t->target = "cuda";
  t->specs = NULL;
}

xent_status xent_cuda_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  (void)h;
  (void)e;
  (void)args;
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

xent_status xent_cuda_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                           void* stream) {
  (void)h, (void)g, (void)workspace, (void)workspace_bytes, (void)stream;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s: cuda backend: not built in", fn);
}

void xent_cuda_gemm_free(xent_handle* h) { (void)h; }

xent_status xent_cuda_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream) {
  (void)h;
  (void)p, (void)bytes, (void)stream;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s: cuda backend: not built in", fn);
}

XENT_GPU_BACKEND(cuda, XENT_BACKEND_CUDA, XENT_COLLECTIVE_NCCL);
