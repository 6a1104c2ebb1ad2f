#include "variant.h"

#include <stdlib.h>
#include <string.h>

int gen_variants_push(gen_variant_list* list, const gen_variant* v) {
  if (list->count == list->cap) {
    size_t cap = list->cap ? list->cap * 2 : 64;
    gen_variant* items = realloc(list->items, cap * sizeof *items);
    if (!items) return -1;
    list->items = items;
    list->cap = cap;
  }
  list->items[list->count++] = *v;
  return 0;
}

void gen_variants_free(gen_variant_list* list) {
  free(list->items);
  list->items = NULL;
  list->count = list->cap = 0;
}

static int by_key(const void* a, const void* b) {
  return strcmp(((const gen_variant*)a)->key, ((const gen_variant*)b)->key);
}

long gen_variants_sort(gen_variant_list* list) {
  if (list->count > 1) qsort(list->items, list->count, sizeof *list->items, by_key);
  for (size_t i = 1; i < list->count; ++i) {
    if (strcmp(list->items[i - 1].key, list->items[i].key) == 0) return (long)i;
  }
  return -1;
}
