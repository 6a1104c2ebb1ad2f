#include "filter.h"

#include <fnmatch.h>
#include <string.h>

int gen_matches_any(const char* patterns, const char* key) {
  const char* p = patterns;
  while (*p) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char pattern[256];
    if (len > 0 && len < sizeof pattern) {
      memcpy(pattern, p, len);
      pattern[len] = 0;
      if (fnmatch(pattern, key, 0) == 0) return 1;
    }
    p += len + (comma ? 1 : 0);
  }
  return 0;
}

void gen_filter(gen_variant_list* list, const char* include, const char* exclude) {
  size_t kept = 0;
  for (size_t i = 0; i < list->count; ++i) {
    const char* key = list->items[i].key;
    if (include && !gen_matches_any(include, key)) continue;
    if (exclude && gen_matches_any(exclude, key)) continue;
    list->items[kept++] = list->items[i];
  }
  list->count = kept;
}
