/* libxent's HIP backend: the plugin libxent_hip.so, loaded by the first
   xent_create that asks for it (plugin_load.c). Linked instead of
   backend_hip.c, so that libxent needs no HIP runtime to load. */
#include "runtime/backend/plugin.h"

xent_status xent_hip_backend(const xent_backend** out) { return xent_plugin_backend(XENT_BACKEND_HIP, out); }
