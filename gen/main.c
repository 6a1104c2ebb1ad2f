#define _POSIX_C_SOURCE 200809L
/* xentgen: specs/NAME.lua -> variants -> rendered CUDA/HIP sources + dispatch.

   load (spec_load.c, through the Lua DSL) -> filter (filter.c) -> sort ->
   render (render.c) -> dispatch table and manifest (dispatch_emit.c) ->
   [--check: every rendered file parsed by libclang and held to the rules,
   check/] -> commit every file at once (fileio.c). Any error stops before
   the commit: a bad spec, or a rendering that breaks a rule, writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "dispatch_emit.h"
#include "error.h"
#include "filter.h"
#include "lua_host.h"
#include "render.h"
#include "spec_limits.h"
#include "spec_load.h"

#define MAX_SPECS 64

static const char usage[] =
    "usage: xentgen --spec FILE [--spec FILE ...] (--list | --target cuda|hip --out DIR)\n"
    "               [--kernels PATTERNS] [--exclude PATTERNS] [--templates DIR] [--headers DIR]\n"
    "               [--no-line-directives] [--spec-time-limit SECONDS]\n"
    "               [--check [--check-cuda-headers DIR] [--check-hip-on-cuda DIR]]\n"
    "\n"
    "  --spec FILE            a spec (specs/*.lua); repeat for several families\n"
    "  --list                 print every variant's canonical key and exit\n"
    "  --target cuda|hip      which source dialect to render\n"
    "  --out DIR              where to write kernels, headers, dispatch table, manifest\n"
    "  --kernels PATTERNS     keep only keys matching a comma-separated list of shell\n"
    "                         patterns, e.g. 'ce_fwd_*,ce_bwd_bf16_*'\n"
    "  --exclude PATTERNS     drop keys matching any of these patterns\n"
    "  --templates DIR        template directory (default: templates)\n"
    "  --headers DIR          the device library the kernels include, for --check\n"
    "                         (default: kernels beside the template directory)\n"
    "  --no-line-directives   omit #line directives that map code to template lines\n"
    "  --spec-time-limit S    CPU seconds a spec may run (default 20); specs also\n"
    "                         have an instruction and a memory limit (docs/GENERATOR.md)\n"
    "  --check                parse every rendered file with libclang and hold it to\n"
    "                         the rules (index-width, deterministic, graph-safe,\n"
    "                         warp-sync, abi);\n"
    "                         a finding prints templates/FILE:LINE: RULE: WHAT and\n"
    "                         nothing is written\n"
    "  --check-cuda-headers DIR\n"
    "                         for --target cuda: the stand-in CUDA headers the\n"
    "                         rendering is parsed against (default: gen/check/cuda)\n"
    "  --check-hip-on-cuda DIR\n"
    "                         for --target hip: also parse the rendering as it is\n"
    "                         built for NVIDIA GPUs, with the HIP-on-CUDA headers in\n"
    "                         DIR (runtime/hip_on_cuda) over the stand-in CUDA ones\n";

typedef struct options {
  const char* specs[MAX_SPECS];
  int spec_count;
  int list;
  const char* target;
  const char* out;
  const char* kernels;
  const char* exclude;
  const char* templates;
  const char* headers;
  char headers_default[4096];
  int line_directives;
  int spec_seconds;
  int check;
  const char* check_cuda_headers;
  const char* check_hip_on_cuda;
} options;

static int parse_args(int argc, char** argv, options* o, gen_error* err) {
  memset(o, 0, sizeof *o);
  o->templates = "templates";
  o->line_directives = 1;
  o->spec_seconds = GEN_SPEC_CPU_SECONDS;
  const char* seconds = NULL;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char** value = NULL;
    if (strcmp(a, "--list") == 0) {
      o->list = 1;
      continue;
    }
    if (strcmp(a, "--check") == 0) {
      o->check = 1;
      continue;
    }
    if (strcmp(a, "--no-line-directives") == 0) {
      o->line_directives = 0;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
    if (strcmp(a, "--spec") == 0) {
      if (o->spec_count == MAX_SPECS) return gen_fail(err, "at most %d --spec files", MAX_SPECS);
      value = &o->specs[o->spec_count++];
    } else if (strcmp(a, "--target") == 0) {
      value = &o->target;
    } else if (strcmp(a, "--out") == 0) {
      value = &o->out;
    } else if (strcmp(a, "--kernels") == 0) {
      value = &o->kernels;
    } else if (strcmp(a, "--exclude") == 0) {
      value = &o->exclude;
    } else if (strcmp(a, "--check-cuda-headers") == 0) {
      value = &o->check_cuda_headers;
    } else if (strcmp(a, "--check-hip-on-cuda") == 0) {
      value = &o->check_hip_on_cuda;
    } else if (strcmp(a, "--templates") == 0) {
      value = &o->templates;
    } else if (strcmp(a, "--headers") == 0) {
      value = &o->headers;
    } else if (strcmp(a, "--spec-time-limit") == 0) {
      value = &seconds;
    } else {
      return gen_fail(err, "unknown argument '%s' (see --help)", a);
    }
    if (i + 1 >= argc) return gen_fail(err, "%s needs a value", a);
    *value = argv[++i];
  }
  if (o->spec_count == 0) return gen_fail(err, "no --spec given (see --help)");
  if (!o->headers) {
    /* templates/ and kernels/ sit side by side in the source tree. */
    size_t n = strlen(o->templates);
    while (n > 1 && o->templates[n - 1] == '/') n--;
    while (n > 0 && o->templates[n - 1] != '/') n--;
    snprintf(o->headers_default, sizeof o->headers_default, "%.*skernels", (int)(n < 4000 ? n : 4000), o->templates);
    o->headers = o->headers_default;
  }
  if (seconds) {
    char* end = NULL;
    const long n = strtol(seconds, &end, 10);
    if (!*seconds || *end || n < 1 || n > 3600)
      return gen_fail(err, "--spec-time-limit must be a whole number of seconds from 1 to 3600, not '%s'", seconds);
    o->spec_seconds = (int)n;
  }
  if (o->kernels && gen_check_patterns(o->kernels, "--kernels", err) != 0) return -1;
  if (o->exclude && gen_check_patterns(o->exclude, "--exclude", err) != 0) return -1;
  if (!o->list) {
    if (!o->target) return gen_fail(err, "--target cuda|hip is required unless --list is given");
    if (strcmp(o->target, "cuda") != 0 && strcmp(o->target, "hip") != 0)
      return gen_fail(err, "--target must be cuda or hip, not '%s'", o->target);
    if (!o->out) return gen_fail(err, "--out DIR is required unless --list is given");
  }
  return 0;
}

static int run(const options* o, gen_error* err) {
  lua_State* L = gen_lua_open(err);
  if (!L) return -1;
  gen_variant_list variants = {0};
  gen_output_set outputs = {0};
  int rc = 0;
  for (int i = 0; i < o->spec_count && rc == 0; ++i) rc = gen_spec_load(L, o->specs[i], o->spec_seconds, &variants, err);
  if (rc == 0) {
    long dup = gen_variants_sort(&variants);
    if (dup >= 0) {
      const gen_variant* v = &variants.items[dup];
      rc = gen_fail(err, "%s: variant %s is also generated by %s", v->spec, v->key, variants.items[dup - 1].spec);
    }
  }
  if (rc == 0) {
    gen_filter(&variants, o->kernels, o->exclude);
    if (variants.count == 0) rc = gen_fail(err, "no variant left after --kernels/--exclude");
  }
  if (rc == 0 && o->list) {
    for (size_t i = 0; i < variants.count; ++i) printf("%s\n", variants.items[i].key);
  } else if (rc == 0) {
    gen_render_options ropt = {o->target, o->templates, o->line_directives};
    rc = gen_render_all(L, &variants, &ropt, &outputs, err);
    if (rc == 0) rc = gen_emit_dispatch(L, &variants, o->target, &outputs, err);
    if (rc == 0 && o->check) {
      gen_check_options copt = {.target = o->target,
                                .cuda_headers = o->check_cuda_headers,
                                .device_headers = o->headers,
                                .verbose = 1};
      rc = gen_check_outputs(&outputs, &copt, err);
      if (rc == 0 && o->check_hip_on_cuda && strcmp(o->target, "hip") == 0) {
        copt.hip_on_cuda_headers = o->check_hip_on_cuda;
        rc = gen_check_outputs(&outputs, &copt, err);
      }
    }
    if (rc == 0) rc = gen_output_commit(&outputs, o->out, err);
  }
  gen_output_free(&outputs);
  gen_variants_free(&variants);
  gen_lua_close(L);
  return rc;
}

int main(int argc, char** argv) {
  gen_error err = {{0}};
  options o;
  int parsed = parse_args(argc, argv, &o, &err);
  if (parsed == 1) {
    fputs(usage, stdout);
    return 0;
  }
  if (parsed != 0 || run(&o, &err) != 0) {
    fprintf(stderr, "xentgen: %s\n", err.msg);
    return 1;
  }
  return 0;
}
