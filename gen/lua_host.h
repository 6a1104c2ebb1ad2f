/* The embedded Lua state: the spec DSL, the template engine and the variant
   context, loaded from gen/lua/ (compiled into the binary). */
#ifndef XENT_GEN_LUA_HOST_H
#define XENT_GEN_LUA_HOST_H

#include <lua.h>

#include "error.h"
#include "spec_limits.h"

/* A fresh state with the standard libraries and the xentgen module loaded.
   Returns NULL and fills err on failure. */
lua_State* gen_lua_open(gen_error* err);

/* Closes a state from gen_lua_open. */
void gen_lua_close(lua_State* L);

/* The counted heap the state allocates from (gen/spec_limits.h). */
gen_heap* gen_lua_heap(lua_State* L);

/* Pushes xentgen.<fn> onto the stack. */
void gen_lua_push_fn(lua_State* L, const char* fn);

#endif
