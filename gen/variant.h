/* One generated variant, as plain data. The spec loader fills these from the
   Lua DSL's expansion; everything after loading (filtering, rendering, the
   dispatch table, the manifest) reads only these structs. */
#ifndef XENT_GEN_VARIANT_H
#define XENT_GEN_VARIANT_H

#include <stddef.h>

#define GEN_NAME_MAX 128
#define GEN_PATH_MAX 512
#define GEN_AXES_MAX 16

/* One axis of a family's schema and this variant's value on it: a
   specialized value, or "runtime". */
typedef struct gen_axis_value {
  char name[32];
  char value[32];
} gen_axis_value;

typedef struct gen_variant {
  char key[GEN_NAME_MAX];      /* canonical key: symbol suffix, file name, filter key */
  char family[32];
  char prefix[16];
  char op[16];
  gen_axis_value axes[GEN_AXES_MAX]; /* in the schema's order (gen/lua/dsl.lua) */
  int axis_count;
  char spec[GEN_PATH_MAX];     /* the spec file it came from */
  char tmpl[64];               /* template file name under templates/ */
  int min_arch_cuda;           /* SM number, e.g. 70 */
  char min_arch_hip[16];       /* gfx name, e.g. "gfx90a" */
  char tune_cuda[GEN_PATH_MAX]; /* launch shapes per target, as dsl.lua's launch_shapes() writes them */
  char tune_hip[GEN_PATH_MAX];
  char rows_key_cuda[GEN_NAME_MAX]; /* the key naming the rows kernel per target: key, or the */
  char rows_key_hip[GEN_NAME_MAX];  /* mean's and sum's shared one (gen/lua/dsl.lua) */
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
