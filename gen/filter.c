#include "filter.h"

#include <fnmatch.h>
#include <string.h>

int gen_check_patterns(const char* patterns, const char* flag, gen_error* err) {
  const char* p = patterns;
  for (;;) {
    const char* comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == 0) return gen_fail(err, "%s: an empty pattern in '%.200s' (a comma too many?)", flag, patterns);
    if (len >= GEN_PATTERN_MAX)
      return gen_fail(err, "%s: a pattern of %zu characters (at most %d): %.64s...", flag, len, GEN_PATTERN_MAX - 1, p);
    if (!comma) return 0;
    p = comma + 1;
  }
}

int gen_matches_any(const char* patterns, const char* key) {
  const char* p = patterns;
  while (*p) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char pattern[GEN_PATTERN_MAX];
    if (len < sizeof pattern) { /* gen_check_patterns refused longer ones */
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
