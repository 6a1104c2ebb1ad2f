#include "spec_load.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "fileio.h"
#include "lua_host.h"

/* Copies string field `name` of the table on top of the stack into dst. */
static int copy_field(lua_State* L, const char* name, char* dst, size_t cap, gen_error* err) {
  lua_getfield(L, -1, name);
  size_t len = 0;
  const char* s = lua_tolstring(L, -1, &len);
  int rc = 0;
  if (!s) rc = gen_fail(err, "internal error: variant field '%s' is missing", name);
  else if (len >= cap) rc = gen_fail(err, "variant field '%s' is too long (%zu >= %zu): %s", name, len, cap, s);
  else memcpy(dst, s, len + 1);
  lua_pop(L, 1);
  return rc;
}

static int copy_variant(lua_State* L, gen_variant* v, gen_error* err) {
  memset(v, 0, sizeof *v);
#define FIELD(lua_name, member) \
  if (copy_field(L, lua_name, v->member, sizeof v->member, err) != 0) return -1
  FIELD("key", key);
  FIELD("family", family);
  FIELD("prefix", prefix);
  FIELD("op", op);
  FIELD("spec", spec);
  FIELD("template", tmpl);
  FIELD("min_arch_hip", min_arch_hip);
  FIELD("tune_cuda", tune_cuda);
  FIELD("tune_hip", tune_hip);
#undef FIELD
  /* The family's axes, named by the DSL in schema order. */
  lua_getfield(L, -1, "axis_names");
  const lua_Integer n = lua_istable(L, -1) ? luaL_len(L, -1) : -1;
  if (n < 0 || n > GEN_AXES_MAX) {
    lua_pop(L, 1);
    return gen_fail(err, "internal error: variant %s has %lld axes (at most %d)", v->key, (long long)n, GEN_AXES_MAX);
  }
  for (lua_Integer i = 1; i <= n; ++i) {
    gen_axis_value* a = &v->axes[v->axis_count++];
    lua_geti(L, -1, i);
    const char* name = lua_tostring(L, -1);
    const int bad = !name || strlen(name) >= sizeof a->name;
    if (!bad) memcpy(a->name, name, strlen(name) + 1);
    lua_pop(L, 1);
    if (bad) {
      lua_pop(L, 1);
      return gen_fail(err, "internal error: variant %s has a bad axis name", v->key);
    }
    lua_pushvalue(L, -2); /* the variant */
    const int rc = copy_field(L, a->name, a->value, sizeof a->value, err);
    lua_pop(L, 1);
    if (rc != 0) {
      lua_pop(L, 1);
      return -1;
    }
  }
  lua_pop(L, 1);
  lua_getfield(L, -1, "min_arch_cuda");
  v->min_arch_cuda = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return 0;
}

int gen_spec_load(lua_State* L, const char* path, gen_variant_list* out, gen_error* err) {
  char* text = NULL;
  if (gen_read_file(path, &text, NULL, err) != 0) return -1;
  int top = lua_gettop(L);
  gen_lua_push_fn(L, "load_spec");
  lua_pushstring(L, path);
  lua_pushstring(L, text);
  free(text);
  int rc = 0;
  if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
    rc = gen_fail(err, "%s", lua_tostring(L, -1));
  } else if (lua_isnil(L, -2)) {
    rc = gen_fail(err, "%s", lua_tostring(L, -1));
  } else {
    lua_pop(L, 1);
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; i <= n && rc == 0; ++i) {
      gen_variant v;
      lua_geti(L, -1, i);
      rc = copy_variant(L, &v, err);
      lua_pop(L, 1);
      if (rc == 0 && gen_variants_push(out, &v) != 0) rc = gen_fail(err, "out of memory");
    }
  }
  lua_settop(L, top);
  return rc;
}
