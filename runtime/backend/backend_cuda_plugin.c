/* libxent's CUDA backend: the plugin libxent_cuda.so, loaded by the first
   xent_create that asks for it (plugin_load.c). Linked instead of
   backend_cuda.c, so that libxent needs no CUDA runtime to load. */
#include "runtime/backend/plugin.h"

xent_status xent_cuda_backend(const xent_backend** out) { return xent_plugin_backend(XENT_BACKEND_CUDA, out); }
