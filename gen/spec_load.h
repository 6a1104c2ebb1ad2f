/* Loads one spec through the Lua DSL and appends its variants as C structs. */
#ifndef XENT_GEN_SPEC_LOAD_H
#define XENT_GEN_SPEC_LOAD_H

#include <lua.h>

#include "error.h"
#include "variant.h"

/* On a mistake in the spec, err holds "specs/<file>.lua:<line>: <what>". */
int gen_spec_load(lua_State* L, const char* path, gen_variant_list* out, gen_error* err);

#endif
