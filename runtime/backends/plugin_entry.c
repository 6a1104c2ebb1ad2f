/* A GPU backend's plugin side (plugin.h): xent_plugin_open, the one symbol
   libxent_cuda.so / libxent_hip.so export, and the error reporting the
   backend's files call (xent_fail), forwarded to libxent's with the
   plugin's own path in front, so that "no CUDA device" names the file that
   looked. Compiled with XENT_PLUGIN_NAME set to cuda or hip. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/backend/plugin.h"

#ifndef XENT_PLUGIN_NAME
#error "plugin_entry.c: build with -DXENT_PLUGIN_NAME=cuda or hip"
#endif
#define XENT_CAT2(a, b) a##b
#define XENT_CAT(a, b) XENT_CAT2(a, b)

extern const xent_backend XENT_CAT(xent_backend_, XENT_PLUGIN_NAME);

static const xent_plugin_host* host;
static char own_path[512] = "xent plugin";

xent_status xent_fail(xent_status status, const char* fmt, ...) {
  char message[1024];
  const int n = snprintf(message, sizeof message, "%s: ", own_path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message + n, sizeof message - (size_t)n, fmt, ap);
  va_end(ap);
  return host ? host->fail(status, message) : status;
}

__attribute__((visibility("default"))) const xent_plugin* xent_plugin_open(const xent_plugin_host* h) {
  static const xent_plugin plugin = {
      .abi = XENT_PLUGIN_ABI_INIT,
      .backend = &XENT_CAT(xent_backend_, XENT_PLUGIN_NAME),
  };
  /* The host's table is read only once its ABI is known to match. */
  if (!h || memcmp(&h->abi, &plugin.abi, sizeof plugin.abi) != 0) return &plugin;
  Dl_info info;
  if (dladdr((void*)&xent_plugin_open, &info) && info.dli_fname)
    snprintf(own_path, sizeof own_path, "%s", info.dli_fname);
  host = h;
  return &plugin;
}
