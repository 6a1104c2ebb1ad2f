/* The dispatch table (generated C: a sorted array looked up by binary search,
   no static constructors) and the manifest (one row per variant). */
#ifndef XENT_GEN_DISPATCH_EMIT_H
#define XENT_GEN_DISPATCH_EMIT_H

#include <lua.h>

#include "error.h"
#include "fileio.h"
#include "variant.h"

/* Adds xent_dispatch_<target>.c and manifest.tsv to out. Variants must be
   sorted by key. */
int gen_emit_dispatch(lua_State* L, const gen_variant_list* variants, const char* target, gen_output_set* out,
                      gen_error* err);

#endif
