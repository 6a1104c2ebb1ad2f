/* Renders templates for a target: one kernel file per variant, plus the
   launch header shared by all of them. (They include the device library,
   kernels/xent_device.h, which is not rendered.) */
#ifndef XENT_GEN_RENDER_H
#define XENT_GEN_RENDER_H

#include <lua.h>

#include "error.h"
#include "fileio.h"
#include "variant.h"

typedef struct gen_render_options {
  const char* target;          /* "cuda" or "hip" */
  const char* templates_dir;   /* where *.tmpl are read from */
  int line_directives;         /* emit #line pointing at templates */
} gen_render_options;

/* File extension of kernel sources for a target (".cu", ".hip"); NULL if the
   target is unknown. */
const char* gen_target_extension(lua_State* L, const char* target);

/* Symbol of a variant's launcher for a target (into buf). */
int gen_launcher_symbol(lua_State* L, const char* target, const char* key, char* buf, size_t cap, gen_error* err);

int gen_render_all(lua_State* L, const gen_variant_list* variants, const gen_render_options* opt,
                   gen_output_set* out, gen_error* err);

#endif
