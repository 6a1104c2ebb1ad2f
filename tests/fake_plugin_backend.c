/* A HIP backend that finds no device, for //tests:plugin_test: built with
   runtime/plugin_entry.c into a plugin (libfake_plugin.so), and once more
   with another ABI version (libfake_plugin_abi.so), so that libxent's
   loading is tested on any machine. */
#include "runtime/backend/backend.h"

static xent_status fake_open(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: no HIP device (a test plugin)");
}

static void fake_table(const xent_handle* h, xent_table* t) {
  (void)h;
  t->entries = NULL;
  t->count = 0;
  t->target = "hip (test plugin)";
  t->specs = NULL;
  t->axes = NULL;
}

static xent_status unreachable(xent_handle* h) {
  (void)h;
  return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend: a test plugin runs nothing");
}

static void nothing(xent_handle* h) { (void)h; }

const xent_backend xent_backend_hip = {
    .kind = XENT_BACKEND_HIP,
    .name = "hip",
    .open = fake_open,
    .table = fake_table,
    .flag_alloc = unreachable,
    .flag_free = nothing,
    .collective = XENT_COLLECTIVE_NONE,
};
