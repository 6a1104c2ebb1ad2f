/* Linked instead of backend_cuda.c or its plugin loader in a library built
   from a project's own specs without the CUDA backend (gen/library.bzl):
   xent's own plugin, built from other specs, is not its to load. */
#include "runtime/backend/backend.h"

xent_status xent_cuda_backend(const xent_backend** out) {
  *out = NULL;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "cuda backend: this library was built without CUDA (build with --config=cuda)");
}
