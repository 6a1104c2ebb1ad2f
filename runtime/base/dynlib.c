/* xent_dl_load (dynlib.h). */
#define _GNU_SOURCE
#include "runtime/base/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

int xent_dl_load(const char* library, const char* const* sonames, size_t count, const char* hint,
                 const xent_dl_entry* entries, size_t entry_count, char* why, size_t why_bytes) {
  void* so = NULL;
  for (size_t i = 0; !so && i < count; ++i) so = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    snprintf(why, why_bytes, "%s could not be loaded (%s); %s", library, dlerror(), hint);
    return 0;
  }
  for (size_t i = 0; i < entry_count; ++i) {
    /* POSIX: a function pointer round-trips through dlsym's void*. */
    *entries[i].slot = dlsym(so, entries[i].name);
    if (!*entries[i].slot) {
      snprintf(why, why_bytes, "%s was loaded but lacks %s", library, entries[i].name);
      return 0;
    }
  }
  return 1;
}
