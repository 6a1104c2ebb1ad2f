/* Limits on what a spec may cost, enforced in C where Lua's own hooks
   (gen/lua/sandbox.lua) cannot see: a cap on the Lua heap, and a CPU-time
   limit that also stops a long call inside Lua's C library (a pathological
   string pattern, say), which no instruction hook interrupts. */
#ifndef XENT_GEN_SPEC_LIMITS_H
#define XENT_GEN_SPEC_LIMITS_H

#include <stddef.h>

#include <lua.h>

/* A Lua allocator that refuses to grow the heap past a cap while a spec
   runs; ud is a gen_heap. */
typedef struct gen_heap {
  size_t used;       /* bytes the state holds now */
  size_t cap;        /* 0: no cap */
  lua_State* L;      /* to name the spec line when the cap strikes */
  const char* spec;  /* the spec being run, NULL outside a spec */
  char where[600];   /* "path:line" of the refused allocation, or "" */
} gen_heap;

void* gen_heap_alloc(void* ud, void* ptr, size_t osize, size_t nsize);

/* The heap a spec may add to what the generator holds, and its CPU time
   unless --spec-time-limit says otherwise. */
#define GEN_SPEC_HEAP_BYTES ((size_t)512 << 20)
#define GEN_SPEC_CPU_SECONDS 20

/* Starts the limits for spec `path` on L (heap cap and an alarm after
   cpu_seconds of CPU time);
   gen_spec_limits_end lifts them. Past the CPU time, the next Lua
   instruction raises "path:line: ... time limit"; a spec still inside one C
   call a second later ends the process with that message (nothing has been
   written yet: output is committed only after every spec has loaded). */
void gen_spec_limits_begin(lua_State* L, gen_heap* heap, const char* path, int cpu_seconds);
void gen_spec_limits_end(lua_State* L, gen_heap* heap);

#endif
