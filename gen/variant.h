/* One generated variant, as plain data. The spec loader fills these from the
   Lua DSL's expansion; everything after loading (filtering, rendering, the
   dispatch table, the manifest) reads only these structs. */
#ifndef XENT_GEN_VARIANT_H
#define XENT_GEN_VARIANT_H

#include <stddef.h>

#define GEN_NAME_MAX 128
#define GEN_PATH_MAX 512

typedef struct gen_variant {
  char key[GEN_NAME_MAX];      /* canonical key: symbol suffix, file name, filter key */
  char family[32];
  char prefix[16];
  char op[16];
  char dtype[16];
  char label[16];
  char reduction[16];
  char weights[16];            /* "runtime" or a specialized value */
  char label_smoothing[16];
  char ignore_index[16];
  char z_loss[16];
  char softcap[16];
  char spec[GEN_PATH_MAX];     /* the spec file it came from */
  char tmpl[64];               /* template file name under templates/ */
  int min_arch_cuda;           /* SM number, e.g. 70 */
  char min_arch_hip[16];       /* gfx name, e.g. "gfx90a" */
} gen_variant;

typedef struct gen_variant_list {
  gen_variant* items;
  size_t count;
  size_t cap;
} gen_variant_list;

/* Appends a copy; returns 0, or -1 when out of memory. */
int gen_variants_push(gen_variant_list* list, const gen_variant* v);
void gen_variants_free(gen_variant_list* list);
/* Sorts by key; returns the index of a duplicate key after sorting, or -1. */
long gen_variants_sort(gen_variant_list* list);

#endif
