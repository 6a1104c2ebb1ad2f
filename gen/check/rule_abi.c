/* abi: the launchers the kernel files define are the ones the dispatch
   table names, with the signature xent_launch.h gives them.

   The runtime finds a variant's launcher through the dispatch table
   (xent_dispatch_<target>.c, a sorted array of pointers to functions
   declared there) and calls it through xent_launch.h's xent_launcher type.
   The table's declarations and the kernel files' definitions are separate
   texts: if they drift apart (a renamed key, a launcher that takes its
   arguments by value), C links a call through the wrong type. Checked
   here: each kernel file <key>.cu/.hip defines exactly one launcher,
   xent_<target>_launch_<key> (XENT_LAUNCHER's spelling), of
   xent_launcher's function type; and
   the dispatch table declares exactly the launchers defined, each of that
   type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/check/rules.h"

/* A launcher function seen: defined (kernel file) or declared (table). */
typedef struct abi_launcher {
  char name[256];
  CXCursor at;
} abi_launcher;

typedef struct abi_scan {
  check_ctx* ctx;
  const char* prefix;   /* xent_<target>_launch_ */
  char want_type[256];  /* xent_launcher's function type */
  abi_launcher* found;  /* growable */
  int count, cap;
  int definitions;  /* look for definitions (1) or declarations (0) */
} abi_scan;

static enum CXChildVisitResult find_typedef(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  abi_scan* s = data;
  if (clang_getCursorKind(c) != CXCursor_TypedefDecl) return CXChildVisit_Continue;
  CXString name = clang_getCursorSpelling(c);
  if (strcmp(clang_getCString(name), "xent_launcher") == 0) {
    const CXType p = clang_getCanonicalType(clang_getTypedefDeclUnderlyingType(c));
    CXString t = clang_getTypeSpelling(clang_getCanonicalType(clang_getPointeeType(p)));
    snprintf(s->want_type, sizeof s->want_type, "%s", clang_getCString(t));
    clang_disposeString(t);
  }
  clang_disposeString(name);
  return CXChildVisit_Continue;
}

/* Every launcher definition (or declaration) in scope: its type checked
   against xent_launcher's, its name and place kept. */
static enum CXChildVisitResult find_launchers(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  abi_scan* s = data;
  const enum CXCursorKind k = clang_getCursorKind(c);
  if (k == CXCursor_LinkageSpec) return CXChildVisit_Recurse;  // extern "C" { ... }
  if (k != CXCursor_FunctionDecl || !check_in_scope(s->ctx, c)) return CXChildVisit_Continue;
  if (s->definitions != (clang_isCursorDefinition(c) != 0)) return CXChildVisit_Continue;
  CXString name = clang_getCursorSpelling(c);
  const char* n = clang_getCString(name);
  if (strncmp(n, s->prefix, strlen(s->prefix)) == 0) {
    CXString t = clang_getTypeSpelling(clang_getCanonicalType(clang_getCursorType(c)));
    if (strcmp(clang_getCString(t), s->want_type) != 0)
      check_report(s->ctx, c, "abi", "%s%s has type %s; xent_launch.h's xent_launcher points to %s",
                   s->definitions ? "" : "the dispatch table's ", n, clang_getCString(t), s->want_type);
    clang_disposeString(t);
    if (s->count == s->cap) {
      const int cap = s->cap ? 2 * s->cap : 8;
      abi_launcher* grown = realloc(s->found, (size_t)cap * sizeof *grown);
      if (grown) {
        s->found = grown;
        s->cap = cap;
      }
    }
    if (s->count < s->cap) {
      snprintf(s->found[s->count].name, sizeof s->found[0].name, "%s", n);
      s->found[s->count].at = c;
      s->count++;
    }
  }
  clang_disposeString(name);
  return CXChildVisit_Continue;
}

/* Fills s with the launchers of tu: definitions or declarations. Returns 0
   when xent_launch.h's type was found (s->found must then be freed). */
static int scan(check_ctx* ctx, CXCursor tu, abi_scan* s, int definitions) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->definitions = definitions;
  s->prefix = strcmp(ctx->target, "hip") == 0 ? "xent_hip_launch_" : "xent_cuda_launch_";
  clang_visitChildren(tu, find_typedef, s);
  if (!s->want_type[0]) {
    check_report(ctx, tu, "abi", "xent_launch.h declares no xent_launcher type");
    return -1;
  }
  clang_visitChildren(tu, find_launchers, s);
  return 0;
}

void rule_abi_launcher(check_ctx* ctx, CXCursor tu, const char* key, char* name, unsigned cap) {
  abi_scan s;
  name[0] = 0;
  if (scan(ctx, tu, &s, 1) != 0) return;
  char want[300];
  snprintf(want, sizeof want, "%s%s", s.prefix, key);
  if (s.count != 1 || strcmp(s.found[0].name, want) != 0) {
    check_report(ctx, s.count ? s.found[0].at : tu, "abi", "%s defines %d launcher%s (%s), not exactly %s", ctx->file,
                 s.count, s.count == 1 ? "" : "s", s.count ? s.found[0].name : "none", want);
  } else {
    snprintf(name, cap, "%s", want);
  }
  free(s.found);
}

void rule_abi_dispatch(check_ctx* ctx, CXCursor tu, const char* const* defined, size_t n) {
  abi_scan s;
  if (scan(ctx, tu, &s, 0) != 0) return;
  char* seen = calloc(n ? n : 1, 1);
  for (int k = 0; seen && k < s.count; ++k) {
    size_t i = 0;
    while (i < n && strcmp(defined[i], s.found[k].name) != 0) ++i;
    if (i == n)
      check_report(ctx, s.found[k].at, "abi", "the dispatch table names %s, which no kernel file defines",
                   s.found[k].name);
    else seen[i] = 1;
  }
  for (size_t i = 0; seen && i < n; ++i)
    if (!seen[i]) check_report(ctx, tu, "abi", "%s is defined but the dispatch table does not name it", defined[i]);
  free(seen);
  free(s.found);
}
