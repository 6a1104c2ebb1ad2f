#define _POSIX_C_SOURCE 200809L
#include "spec_limits.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* The innermost frame of the running spec, as "path:line", into buf. Reads
   the call stack only and formats by hand (no allocation, no stdio), so the
   allocator and the alarm's handler may call it. */
static void spec_where(lua_State* L, const char* spec, char* buf, size_t cap) {
  size_t n = 0;
  for (const char* p = spec; *p && n + 1 < cap; ++p) buf[n++] = *p;
  buf[n] = 0;
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); ++level) {
    if (!lua_getinfo(L, "Sl", &ar)) break;
    if (ar.source[0] != '@' || strcmp(ar.source + 1, spec) != 0 || ar.currentline < 0) continue;
    char digits[16];
    int d = 0;
    for (int line = ar.currentline; d == 0 || line > 0; line /= 10) digits[d++] = (char)('0' + line % 10);
    if (n + 1 + (size_t)d >= cap) return;
    buf[n++] = ':';
    while (d > 0) buf[n++] = digits[--d];
    buf[n] = 0;
    return;
  }
}

void* gen_heap_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  gen_heap* heap = ud;
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    heap->used -= old;
    return NULL;
  }
  if (heap->cap && nsize > old && heap->used - old + nsize > heap->cap) {
    if (heap->spec && heap->L && !heap->where[0]) spec_where(heap->L, heap->spec, heap->where, sizeof heap->where);
    return NULL; /* Lua raises "not enough memory" */
  }
  void* p = realloc(ptr, nsize);
  if (p) heap->used = heap->used - old + nsize;
  return p;
}

/* The CPU-time alarm. The state and spec are globals because a signal
   handler has no other way to reach them; one spec runs at a time. */
static lua_State* volatile alarm_state;
static const char* volatile alarm_spec;
static volatile sig_atomic_t alarm_rang;
static int alarm_seconds;

static void time_hook(lua_State* L, lua_Debug* unused) {
  (void)unused;
  char where[600];
  spec_where(L, alarm_spec ? alarm_spec : "?", where, sizeof where);
  lua_sethook(L, NULL, 0, 0);
  lua_pushfstring(L, "%s: the spec ran past the generator's limit of %d s of CPU time", where, alarm_seconds);
  lua_error(L);
}

static void write_all(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void on_alarm(int sig) {
  (void)sig;
  if (!alarm_rang) {
    /* lua_sethook is safe to call from a signal handler (lua.c does it for
       Ctrl-C): the next instruction the VM runs calls time_hook. */
    alarm_rang = 1;
    lua_sethook(alarm_state, time_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
    struct itimerval grace = {{0, 0}, {1, 0}};
    setitimer(ITIMER_PROF, &grace, NULL);
    return;
  }
  /* Still inside one C call a second later: no hook will run. Nothing has
     been written (output is committed after every spec has loaded). */
  char where[600];
  spec_where(alarm_state, alarm_spec ? alarm_spec : "?", where, sizeof where);
  write_all("xentgen: ");
  write_all(where);
  write_all(": the spec ran past the generator's CPU-time limit inside one library call"
            " (a pathological string pattern?)\n");
  _exit(1);
}

void gen_spec_limits_begin(lua_State* L, gen_heap* heap, const char* path, int cpu_seconds) {
  heap->L = L;
  heap->spec = path;
  heap->where[0] = 0;
  heap->cap = heap->used + GEN_SPEC_HEAP_BYTES;
  alarm_state = L;
  alarm_spec = path;
  alarm_rang = 0;
  alarm_seconds = cpu_seconds;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval limit = {{0, 0}, {cpu_seconds, 0}};
  setitimer(ITIMER_PROF, &limit, NULL);
}

void gen_spec_limits_end(lua_State* L, gen_heap* heap) {
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  signal(SIGPROF, SIG_DFL);
  if (alarm_rang) lua_sethook(L, NULL, 0, 0);
  alarm_state = NULL;
  alarm_spec = NULL;
  heap->cap = 0;
  heap->spec = NULL;
}
