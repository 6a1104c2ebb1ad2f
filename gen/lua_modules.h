/* The Lua half of the generator, embedded at build time by gen/embed.c. */
#ifndef XENT_GEN_LUA_MODULES_H
#define XENT_GEN_LUA_MODULES_H

#include <stddef.h>

typedef struct gen_lua_module {
  const char* name;   /* require() name */
  const char* path;   /* source path, used as the chunk name in errors */
  const char* text;
  size_t size;
} gen_lua_module;

/* Terminated by an entry whose name is NULL. */
extern const gen_lua_module gen_lua_modules[];

#endif
