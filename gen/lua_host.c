#include "lua_host.h"

#include <lauxlib.h>
#include <lualib.h>

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

lua_State* gen_lua_open(gen_error* err) {
  lua_State* L = luaL_newstate();
  if (!L) {
    gen_fail(err, "cannot create a Lua state (out of memory)");
    return NULL;
  }
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
    lua_close(L);
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
