/* Linked instead of backend_hip.c or its plugin loader in a library built
   from a project's own specs without the HIP backend (gen/library.bzl):
   xent's own plugin, built from other specs, is not its to load. */
#include "runtime/backend/backend.h"

xent_status xent_hip_backend(const xent_backend** out) {
  *out = NULL;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                   "hip backend: this library was built without HIP (build with --config=rocm)");
}
