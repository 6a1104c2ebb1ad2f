/* libFuzzer harness for the generator's untrusted input: a spec's text goes
   through the sandboxed loader (gen/spec_load.c, gen/lua/sandbox.lua) with
   its limits, and every spec that loads is rendered for both targets from
   the real templates (gen/render.c) and its dispatch table emitted. Built
   with AddressSanitizer and UBSan by tests/fuzz/run.sh, which runs it for a
   bounded time from the real specs (specs/) and the hostile ones in
   tests/fuzz/corpus.

   What counts as a bug: any crash or sanitizer report, a loader that
   accepts a spec and then fails to render it (the DSL let through what the
   templates cannot use), and a sandbox that leaks: after every input the
   generator's own string library must be intact. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gen/dispatch_emit.h"
#include "gen/fileio.h"
#include "gen/lua_host.h"
#include "gen/render.h"
#include "gen/spec_load.h"

static lua_State* state(void) {
  static lua_State* L;
  if (!L) {
    gen_error err;
    L = gen_lua_open(&err);
    if (!L) {
      fprintf(stderr, "spec_fuzzer: %s\n", err.msg);
      abort();
    }
  }
  return L;
}

/* The generator's string library is what it was: a spec replaced nothing
   outside its own copy, and the string metatable points back at it. */
static void check_sandbox_restored(lua_State* L) {
  const int top = lua_gettop(L);
  if (luaL_dostring(L, "local s = ('ab'):rep(2, '-') return s == 'ab-ab' and string.format('%d', 7) == '7' "
                       "and table.concat({'x', 'y'}) == 'xy' and getmetatable('').__index == string") != LUA_OK ||
      !lua_toboolean(L, -1)) {
    fprintf(stderr, "spec_fuzzer: the spec changed the generator's own libraries\n");
    abort();
  }
  lua_settop(L, top);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lua_State* L = state();
  gen_variant_list variants = {0};
  gen_error err;
  const int rc = gen_spec_load_text(L, "specs/fuzz.lua", (const char*)data, size, 2, &variants, &err);
  check_sandbox_restored(L);
  if (rc == 0) {
    gen_variants_sort(&variants);
    /* A few variants are enough to exercise the templates with the spec's
       axes and tune tables; all of them would make each input slow. */
    if (variants.count > 3) variants.count = 3;
    for (int t = 0; t < 2; ++t) {
      gen_output_set outputs = {0};
      const char* target = t ? "hip" : "cuda";
      gen_render_options opt = {target, "templates", t};
      if (gen_render_all(L, &variants, &opt, &outputs, &err) != 0 ||
          gen_emit_dispatch(L, &variants, target, &outputs, &err) != 0) {
        fprintf(stderr, "spec_fuzzer: a spec that loads does not render: %s\n", err.msg);
        abort();
      }
      gen_output_free(&outputs);
    }
  } else if (strncmp(err.msg, "specs/fuzz.lua", 14) != 0 && strncmp(err.msg, "spec path", 9) != 0) {
    /* Every refusal names the spec (and, but for a few, the line). */
    fprintf(stderr, "spec_fuzzer: an error without the spec's name: %s\n", err.msg);
    abort();
  }
  gen_variants_free(&variants);
  return 0;
}
