#include "lua_host.h"

#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lualib.h>

#include "gen/spec_limits.h"
#include "gen/lua_modules.h"

/* package.preload loader for one embedded module (upvalue 1: the entry). */
static int load_embedded(lua_State* L) {
  const gen_lua_module* m = lua_touserdata(L, lua_upvalueindex(1));
  char chunk[256];
  snprintf(chunk, sizeof chunk, "@%s", m->path);
  if (luaL_loadbufferx(L, m->text, m->size, chunk, "t") != LUA_OK) return lua_error(L);
  lua_call(L, 0, 1);
  return 1;
}

/* Lua's default panic: an error outside any protected call. */
static int panic(lua_State* L) {
  fprintf(stderr, "xentgen: internal error in Lua: %s\n", lua_tostring(L, -1));
  return 0;
}

lua_State* gen_lua_open(gen_error* err) {
  /* Counts the heap so that a spec's share of it can be capped. */
  gen_heap* heap = calloc(1, sizeof *heap);
  lua_State* L = heap ? lua_newstate(gen_heap_alloc, heap) : NULL;
  if (!L) {
    free(heap);
    gen_fail(err, "cannot create a Lua state (out of memory)");
    return NULL;
  }
  lua_atpanic(L, panic);
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  for (const gen_lua_module* m = gen_lua_modules; m->name; ++m) {
    lua_pushlightuserdata(L, (void*)m);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, m->name);
  }
  lua_pop(L, 2);
  lua_getglobal(L, "require");
  lua_pushstring(L, "xentgen");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    gen_fail(err, "internal error loading the generator's Lua modules: %s", lua_tostring(L, -1));
    gen_lua_close(L);
    return NULL;
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "xentgen");
  return L;
}

void gen_lua_push_fn(lua_State* L, const char* fn) {
  lua_getfield(L, LUA_REGISTRYINDEX, "xentgen");
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
}

gen_heap* gen_lua_heap(lua_State* L) {
  void* ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

void gen_lua_close(lua_State* L) {
  gen_heap* heap = gen_lua_heap(L);
  lua_close(L);
  free(heap);
}
