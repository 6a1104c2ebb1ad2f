/* A call's buffers against each other (checks.h). */
#include <stdint.h>
#include <string.h>

#include "runtime/api/checks.h"

int xent_overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return a && b && an && bn && x < y + bn && y < x + an;
}

xent_status xent_check_aligned(const char* fn, const char* name, const void* p, size_t align) {
  if (p && (uintptr_t)p % align != 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: %s (%p) is not aligned to its %zu-byte elements", fn, name, p,
                     align);
  return XENT_OK;
}

xent_status xent_check_buffers(const char* fn, const xent_buffer* all, size_t n, const xent_in_place* in_place) {
  for (size_t i = 0; i < n; ++i) {
    const xent_status s = xent_check_aligned(fn, all[i].name, all[i].p, all[i].align);
    if (s != XENT_OK) return s;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const xent_buffer *a = &all[i], *b = &all[j];
      if (!(a->written || b->written) || !xent_overlaps(a->p, a->bytes, b->p, b->bytes)) continue;
      const int pair = in_place && ((!strcmp(a->name, in_place->read) && !strcmp(b->name, in_place->written)) ||
                                    (!strcmp(a->name, in_place->written) && !strcmp(b->name, in_place->read)));
      if (pair && in_place->allowed && a->p == b->p) continue;
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: %s overlaps %s%s", fn, b->name, a->name,
                       pair ? in_place->hint : "");
    }
  }
  return XENT_OK;
}
