/* Loads one spec through the Lua DSL and appends its variants as C structs. */
#ifndef XENT_GEN_SPEC_LOAD_H
#define XENT_GEN_SPEC_LOAD_H

#include <stddef.h>

#include <lua.h>

#include "error.h"
#include "variant.h"

/* Runs the spec in the sandbox (gen/lua/sandbox.lua) under the limits of
   gen/spec_limits.h, cpu_seconds of CPU time at most. On a mistake in the
   spec, err holds "specs/<file>.lua:<line>: <what>". */
int gen_spec_load(lua_State* L, const char* path, int cpu_seconds, gen_variant_list* out, gen_error* err);

/* The same for a spec's text in memory (size bytes, NUL bytes included),
   named `path` in messages. */
int gen_spec_load_text(lua_State* L, const char* path, const char* text, size_t size, int cpu_seconds,
                       gen_variant_list* out, gen_error* err);

#endif
