#define _POSIX_C_SOURCE 200809L
#include "render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_host.h"

/* Template texts are read once per run; there are only a handful. */
typedef struct template_cache {
  char name[64];
  char* text;
} template_cache;

#define MAX_TEMPLATES 32

static const char* template_text(template_cache* cache, const char* dir, const char* name, gen_error* err) {
  int i = 0;
  for (; i < MAX_TEMPLATES && cache[i].text; ++i) {
    if (strcmp(cache[i].name, name) == 0) return cache[i].text;
  }
  if (i == MAX_TEMPLATES) {
    gen_fail(err, "internal error: more than %d templates", MAX_TEMPLATES);
    return NULL;
  }
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
    gen_fail(err, "template path too long: %.100s...", dir);
    return NULL;
  }
  if (gen_read_file(path, &cache[i].text, NULL, err) != 0) return NULL;
  snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
  return cache[i].text;
}

static void push_variant(lua_State* L, const gen_variant* v) {
  lua_createtable(L, 0, 16);
#define SET(lua_name, member)     \
  lua_pushstring(L, v->member); \
  lua_setfield(L, -2, lua_name)
  SET("key", key);
  SET("family", family);
  SET("prefix", prefix);
  SET("op", op);
  SET("spec", spec);
  SET("template", tmpl);
  SET("min_arch_hip", min_arch_hip);
  SET("tune_cuda", tune_cuda);
  SET("tune_hip", tune_hip);
  SET("rows_key_cuda", rows_key_cuda);
  SET("rows_key_hip", rows_key_hip);
#undef SET
  for (int i = 0; i < v->axis_count; ++i) {
    lua_pushstring(L, v->axes[i].value);
    lua_setfield(L, -2, v->axes[i].name);
  }
  lua_pushinteger(L, v->min_arch_cuda);
  lua_setfield(L, -2, "min_arch_cuda");
}

const char* gen_target_extension(lua_State* L, const char* target) {
  static char ext[16];
  gen_lua_push_fn(L, "extensions");
  lua_getfield(L, -1, target);
  const char* s = lua_tostring(L, -1);
  const char* result = NULL;
  if (s && strlen(s) < sizeof ext) {
    snprintf(ext, sizeof ext, "%s", s);
    result = ext;
  }
  lua_pop(L, 2);
  return result;
}

int gen_launcher_symbol(lua_State* L, const char* target, const char* key, char* buf, size_t cap, gen_error* err) {
  gen_lua_push_fn(L, "symbols");
  lua_pushstring(L, target);
  lua_pushstring(L, key);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    gen_fail(err, "internal error: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  lua_getfield(L, -1, "launcher");
  snprintf(buf, cap, "%s", lua_tostring(L, -1));
  lua_pop(L, 2);
  return 0;
}

/* Calls the Lua function on the stack with `nargs` arguments already pushed;
   on success takes the rendered text into *text (malloc'd). */
static int call_render(lua_State* L, int nargs, char** text, const char* what, gen_error* err) {
  if (lua_pcall(L, nargs, 2, 0) != LUA_OK) {
    gen_fail(err, "%s: %s", what, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  if (lua_isnil(L, -2)) {
    gen_fail(err, "%s: %s", what, lua_tostring(L, -1));
    lua_pop(L, 2);
    return -1;
  }
  *text = strdup(lua_tostring(L, -2));
  lua_pop(L, 2);
  return *text ? 0 : gen_fail(err, "out of memory");
}

static int render_shared(lua_State* L, const gen_variant_list* variants, const gen_render_options* opt,
                         template_cache* cache, const char* tmpl, const char* out_name, gen_output_set* out,
                         gen_error* err) {
  const char* text = template_text(cache, opt->templates_dir, tmpl, err);
  if (!text) return -1;
  gen_lua_push_fn(L, "render_shared");
  lua_pushstring(L, tmpl);
  lua_pushstring(L, opt->target);
  lua_pushstring(L, text);
  lua_pushboolean(L, opt->line_directives);
  lua_createtable(L, (int)variants->count, 0);
  for (size_t i = 0; i < variants->count; ++i) {
    push_variant(L, &variants->items[i]);
    lua_seti(L, -2, (lua_Integer)i + 1);
  }
  char* rendered = NULL;
  if (call_render(L, 5, &rendered, out_name, err) != 0) return -1;
  return gen_output_add(out, out_name, rendered, err);
}

int gen_render_all(lua_State* L, const gen_variant_list* variants, const gen_render_options* opt,
                   gen_output_set* out, gen_error* err) {
  const char* ext = gen_target_extension(L, opt->target);
  if (!ext) return gen_fail(err, "unknown target '%s' (expected cuda or hip)", opt->target);
  template_cache cache[MAX_TEMPLATES];
  memset(cache, 0, sizeof cache);
  int rc = render_shared(L, variants, opt, cache, "xent_launch.h.tmpl", "xent_launch.h", out, err);
  for (size_t i = 0; i < variants->count && rc == 0; ++i) {
    const gen_variant* v = &variants->items[i];
    const char* text = template_text(cache, opt->templates_dir, v->tmpl, err);
    if (!text) {
      rc = -1;
      break;
    }
    gen_lua_push_fn(L, "render_variant");
    push_variant(L, v);
    lua_pushstring(L, opt->target);
    lua_pushstring(L, text);
    lua_pushboolean(L, opt->line_directives);
    char name[GEN_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s%s", v->key, ext);
    char* rendered = NULL;
    rc = call_render(L, 4, &rendered, name, err);
    if (rc == 0) rc = gen_output_add(out, name, rendered, err);
  }
  for (int i = 0; i < MAX_TEMPLATES && cache[i].text; ++i) free(cache[i].text);
  return rc;
}
