/* Variant filters in the style of CUTLASS's --kernels / --exclude-kernels:
   comma-separated shell patterns matched against the canonical key. */
#ifndef XENT_GEN_FILTER_H
#define XENT_GEN_FILTER_H

#include "error.h"
#include "variant.h"

/* The longest pattern --kernels and --exclude take, plus one. */
#define GEN_PATTERN_MAX 256

/* Checks a comma-separated pattern list given to `flag`: no empty pattern,
   none of GEN_PATTERN_MAX characters or more. */
int gen_check_patterns(const char* patterns, const char* flag, gen_error* err);

/* 1 if key matches any pattern of the comma-separated list. */
int gen_matches_any(const char* patterns, const char* key);

/* Keeps variants that match `include` (NULL = all) and no pattern of
   `exclude` (NULL = none), in order. */
void gen_filter(gen_variant_list* list, const char* include, const char* exclude);

#endif
