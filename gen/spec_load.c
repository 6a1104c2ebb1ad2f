#include "spec_load.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "fileio.h"
#include "lua_host.h"

/* What each variant field may hold. Keys become file names and C symbols,
   the spec path is written into every generated file, and the rest into
   code: whatever the DSL lets through, nothing outside these sets reaches a
   path or a generated file. */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_"
#define FILE_CHARS NAME_CHARS "."
#define TUNE_CHARS "0123456789-=: stridedchunkloads"

/* Copies string field `name` of the table on top of the stack into dst;
   `allowed` is the characters it may hold (NULL: any but control
   characters). */
static int copy_field(lua_State* L, const char* name, char* dst, size_t cap, const char* allowed, gen_error* err) {
  lua_getfield(L, -1, name);
  size_t len = 0;
  const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  int rc = 0;
  if (!s) {
    rc = gen_fail(err, "internal error: variant field '%s' is missing", name);
  } else if (len >= cap) {
    rc = gen_fail(err, "variant field '%s' is too long (%zu >= %zu): %.64s...", name, len, cap, s);
  } else {
    size_t bad = len;
    for (size_t i = 0; i < len && bad == len; ++i) {
      const unsigned char c = (unsigned char)s[i];
      if (allowed ? !c || !strchr(allowed, c) : c < 0x20 || c == 0x7f) bad = i;
    }
    if (len == 0 || bad < len)
      rc = gen_fail(err, "internal error: variant field '%s' is empty or has a character outside [%s]",
                    name, allowed ? allowed : "printable");
    else memcpy(dst, s, len + 1);
  }
  lua_pop(L, 1);
  return rc;
}

static int copy_variant(lua_State* L, gen_variant* v, gen_error* err) {
  memset(v, 0, sizeof *v);
#define FIELD(lua_name, member, allowed) \
  if (copy_field(L, lua_name, v->member, sizeof v->member, allowed, err) != 0) return -1
  FIELD("key", key, NAME_CHARS);
  FIELD("family", family, NAME_CHARS);
  FIELD("prefix", prefix, NAME_CHARS);
  FIELD("op", op, NAME_CHARS);
  FIELD("spec", spec, NULL);
  FIELD("template", tmpl, FILE_CHARS);
  FIELD("min_arch_hip", min_arch_hip, NAME_CHARS);
  FIELD("tune_cuda", tune_cuda, TUNE_CHARS);
  FIELD("tune_hip", tune_hip, TUNE_CHARS);
  FIELD("rows_key_cuda", rows_key_cuda, NAME_CHARS);
  FIELD("rows_key_hip", rows_key_hip, NAME_CHARS);
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
    const int bad = !name || strlen(name) >= sizeof a->name || strspn(name, NAME_CHARS) != strlen(name);
    if (!bad) memcpy(a->name, name, strlen(name) + 1);
    lua_pop(L, 1);
    if (bad) {
      lua_pop(L, 1);
      return gen_fail(err, "internal error: variant %s has a bad axis name", v->key);
    }
    lua_pushvalue(L, -2); /* the variant */
    const int rc = copy_field(L, a->name, a->value, sizeof a->value, NAME_CHARS, err);
    lua_pop(L, 1);
    if (rc != 0) {
      lua_pop(L, 1);
      return -1;
    }
  }
  lua_pop(L, 1);
  lua_getfield(L, -1, "min_arch_cuda");
  v->min_arch_cuda = (int)lua_tointeger(L, -1);
  if (strncmp(v->key, v->prefix, strlen(v->prefix)) != 0) {
    lua_pop(L, 1);
    return gen_fail(err, "internal error: variant key %s does not start with its prefix %s", v->key, v->prefix);
  }
  lua_pop(L, 1);
  return 0;
}

int gen_spec_load_text(lua_State* L, const char* path, const char* text, size_t size, int cpu_seconds,
                       gen_variant_list* out, gen_error* err) {
  for (const char* p = path; *p; ++p) {
    /* The path is written into every generated file and the manifest. */
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return gen_fail(err, "spec path has a control character: %.200s", path);
  }
  if (strlen(path) >= GEN_PATH_MAX) return gen_fail(err, "spec path is %zu characters (at most %d)", strlen(path), GEN_PATH_MAX - 1);
  int top = lua_gettop(L);
  gen_lua_push_fn(L, "load_spec");
  lua_pushstring(L, path);
  lua_pushlstring(L, text, size); /* all of it: the DSL refuses a NUL byte */
  int rc = 0;
  gen_heap* heap = gen_lua_heap(L);
  gen_spec_limits_begin(L, heap, path, cpu_seconds);
  const int status = lua_pcall(L, 2, 2, 0);
  gen_spec_limits_end(L, heap);
  if (heap->where[0]) {
    rc = gen_fail(err, "%s: the spec took more than the generator's %zu MiB of memory", heap->where,
                  GEN_SPEC_HEAP_BYTES >> 20);
  } else if (status != LUA_OK) {
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

int gen_spec_load(lua_State* L, const char* path, int cpu_seconds, gen_variant_list* out, gen_error* err) {
  char* text = NULL;
  size_t size = 0;
  if (gen_read_file(path, &text, &size, err) != 0) return -1;
  const int rc = gen_spec_load_text(L, path, text, size, cpu_seconds, out, err);
  free(text);
  return rc;
}
