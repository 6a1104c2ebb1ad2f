/* libxent's side of the plugin boundary (plugin.h): finding, loading and
   checking a GPU backend's plugin. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend/plugin.h"

const char* xent_plugin_file(xent_backend_kind kind) {
  return kind == XENT_BACKEND_HIP ? "libxent_hip.so" : "libxent_cuda.so";
}

static xent_status host_fail(xent_status status, const char* message) { return xent_fail(status, "%s", message); }

static const xent_plugin_host host = {.abi = XENT_PLUGIN_ABI_INIT, .fail = host_fail};

/* One loaded plugin per kind, kept for the process: its kernels stay
   registered with the GPU runtime, so it is never unloaded. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const xent_backend* loaded[2];

/* The directory of the file libxent's code is in (a shared libxent, or the
   program it is linked into), into dir; 0 where unknown. */
static int own_directory(char* dir, size_t cap) {
  Dl_info info;
  if (!dladdr((void*)&xent_plugin_backend, &info) || !info.dli_fname || !info.dli_fname[0]) return 0;
  char path[PATH_MAX];
  const char* name = info.dli_fname;
  /* The main program may be named by a path relative to where it started,
     or as a bare name: /proc/self/exe says where it is. */
  if (!strchr(name, '/')) {
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    name = path;
  }
  const char* slash = strrchr(name, '/');
  const size_t len = (size_t)(slash - name);
  if (len + 1 > cap) return 0;
  memcpy(dir, name, len);
  dir[len] = 0;
  if (len == 0) strcpy(dir, "/");
  return 1;
}

static int exists(const char* path) { return access(path, F_OK) == 0; }

/* Where the plugin is: the first directory of XENT_PLUGIN_PATH that has it,
   else libxent's own. `looked` lists the places tried, for the error. */
static int find_plugin(const char* file, char* path, size_t cap, char* looked, size_t looked_cap) {
  looked[0] = 0;
  const char* list = getenv("XENT_PLUGIN_PATH");
  if (list && *list) {
    const char* p = list;
    while (*p) {
      const size_t len = strcspn(p, ":");
      if (len > 0) {
        snprintf(path, cap, "%.*s/%s", (int)len, p, file);
        if (exists(path)) return 1;
      }
      p += len;
      if (*p == ':') ++p;
    }
    snprintf(looked, looked_cap, "XENT_PLUGIN_PATH=%s, ", list);
  }
  char dir[PATH_MAX];
  if (own_directory(dir, sizeof dir)) {
    snprintf(path, cap, "%s/%s", dir, file);
    if (exists(path)) return 1;
    const size_t used = strlen(looked);
    snprintf(looked + used, looked_cap - used, "%s (beside libxent)", dir);
  } else {
    const size_t used = strlen(looked);
    snprintf(looked + used, looked_cap - used, "libxent's directory unknown");
  }
  return 0;
}

static xent_status load(xent_backend_kind kind, const xent_backend** out) {
  const char* file = xent_plugin_file(kind);
  const char* name = kind == XENT_BACKEND_HIP ? "hip" : "cuda";
  char path[PATH_MAX + 64], looked[PATH_MAX * 2 + 128];
  if (!find_plugin(file, path, sizeof path, looked, sizeof looked)) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                     "%s backend: plugin %s not found (looked in %s); build it with --config=%s, or set "
                     "XENT_PLUGIN_PATH to its directory",
                     name, file, looked, kind == XENT_BACKEND_HIP ? "rocm" : "cuda");
  }
  /* RTLD_LOCAL: the plugin's own symbols stay its own (it exports only its
     entry), and two plugins never bind to each other's. */
  void* so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s backend: plugin %s could not be loaded: %s", name, path,
                     dlerror());
  }
  xent_plugin_open_fn open = NULL;
  /* POSIX: a function pointer round-trips through dlsym's void*. */
  *(void**)&open = dlsym(so, XENT_PLUGIN_ENTRY);
  if (!open) {
    dlclose(so);
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s backend: %s is not a xent plugin (it lacks %s)", name, path,
                     XENT_PLUGIN_ENTRY);
  }
  const xent_plugin* plugin = open(&host);
  /* The version first: the rest of another version's descriptor may have
     another layout. */
  const xent_plugin_abi ours = host.abi;
  if (!plugin || plugin->abi.version != ours.version) {
    const unsigned theirs = plugin ? plugin->abi.version : 0;
    dlclose(so);
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                     "%s backend: plugin %s has ABI version %u, this libxent has ABI version %u; use the plugin built "
                     "with this libxent",
                     name, path, theirs, ours.version);
  }
  if (memcmp(&plugin->abi, &ours, sizeof ours) != 0) {
    const xent_plugin_abi theirs = plugin->abi;
    dlclose(so);
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE,
                     "%s backend: plugin %s has ABI version %u with other structure sizes (%u/%u/%u/%u/%u/%u, this "
                     "libxent's %u/%u/%u/%u/%u/%u); use the plugin built with this libxent",
                     name, path, theirs.version, theirs.handle_bytes, theirs.backend_bytes, theirs.entry_bytes,
                     theirs.args_bytes, theirs.gemm_bytes, theirs.table_bytes, ours.handle_bytes, ours.backend_bytes,
                     ours.entry_bytes, ours.args_bytes, ours.gemm_bytes, ours.table_bytes);
  }
  if (!plugin->backend || plugin->backend->kind != kind) {
    dlclose(so);
    return xent_fail(XENT_ERROR_BACKEND_UNAVAILABLE, "%s backend: plugin %s holds another backend (%s)", name, path,
                     plugin->backend ? plugin->backend->name : "none");
  }
  *out = plugin->backend;
  return XENT_OK;
}

xent_status xent_plugin_backend(xent_backend_kind kind, const xent_backend** out) {
  if (kind != XENT_BACKEND_CUDA && kind != XENT_BACKEND_HIP)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_plugin_backend: kind %d has no plugin", (int)kind);
  const int slot = kind == XENT_BACKEND_HIP;
  pthread_mutex_lock(&lock);
  xent_status s = XENT_OK;
  if (!loaded[slot]) s = load(kind, &loaded[slot]);
  *out = loaded[slot];
  pthread_mutex_unlock(&lock);
  return s;
}
