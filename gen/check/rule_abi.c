/* abi: the launchers the kernel files define are the ones the dispatch
   table names, with the signature xent_launch.h gives them.

   The runtime finds a variant's launcher through the dispatch table
   (xent_dispatch_<target>.c, a sorted array of pointers to functions
   declared there) and calls it through xent_launch.h's xent_launcher type.
   The table's declarations and the kernel files' definitions are separate
   texts: if they drift apart (a renamed key, a launcher that takes its
   arguments by value), C links a call through the wrong type. Checked
   here: each kernel file <key>.cu/.hip defines exactly one launcher,
   xent_<target>_launch_<key> (XENT_LAUNCHER's spelling, with the
   emulator's suffix in that mode), of xent_launcher's function type; and
   the dispatch table declares exactly the launchers defined, each of that
   type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/check/rules.h"

typedef struct abi_scan {
  check_ctx* ctx;
  const char* prefix;   /* xent_<target>_launch_ */
  char want_type[256];  /* xent_launcher's function type */
  /* launcher functions seen: defined (kernel file) or declared (table) */
  char found[8][256];
  CXCursor where[8];
  int count;
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
      check_report(s->ctx, c, "abi", "%s has type %s; xent_launch.h's xent_launcher points to %s", n,
                   clang_getCString(t), s->want_type);
    clang_disposeString(t);
    if (s->count < 8) {
      snprintf(s->found[s->count], sizeof s->found[0], "%s", n);
      s->where[s->count] = c;
    }
    s->count++;
  }
  clang_disposeString(name);
  return CXChildVisit_Continue;
}

static void scan(check_ctx* ctx, CXCursor tu, abi_scan* s, int definitions) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->definitions = definitions;
  s->prefix = strcmp(ctx->target, "hip") == 0 ? "xent_hip_launch_" : "xent_cuda_launch_";
  clang_visitChildren(tu, find_typedef, s);
  if (!s->want_type[0]) {
    check_report(ctx, tu, "abi", "xent_launch.h declares no xent_launcher type");
    return;
  }
  clang_visitChildren(tu, find_launchers, s);
}

void rule_abi_launcher(check_ctx* ctx, CXCursor tu, const char* key, char* name, unsigned cap) {
  abi_scan s;
  name[0] = 0;
  scan(ctx, tu, &s, 1);
  if (!s.want_type[0]) return;
  char want[300];
  snprintf(want, sizeof want, "%s%s%s", s.prefix, key, strcmp(ctx->target, "cuda") == 0 ? "_emu" : "");
  if (s.count != 1 || strcmp(s.found[0], want) != 0) {
    check_report(ctx, s.count ? s.where[0] : tu, "abi", "%s defines %d launcher%s (%s), not exactly %s", ctx->file,
                 s.count, s.count == 1 ? "" : "s", s.count ? s.found[0] : "none", want);
    return;
  }
  snprintf(name, cap, "%s", want);
}

/* The table's launcher declarations, every one, against the names defined. */
typedef struct table_scan {
  abi_scan base;
  const char* const* defined;
  size_t n;
  char* seen;  /* per defined name */
} table_scan;

static enum CXChildVisitResult table_entry(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  table_scan* t = data;
  abi_scan* s = &t->base;
  if (clang_getCursorKind(c) != CXCursor_FunctionDecl || clang_isCursorDefinition(c) || !check_in_scope(s->ctx, c))
    return CXChildVisit_Continue;
  CXString name = clang_getCursorSpelling(c);
  const char* n = clang_getCString(name);
  if (strncmp(n, s->prefix, strlen(s->prefix)) == 0) {
    CXString ty = clang_getTypeSpelling(clang_getCanonicalType(clang_getCursorType(c)));
    if (strcmp(clang_getCString(ty), s->want_type) != 0)
      check_report(s->ctx, c, "abi", "the dispatch table declares %s as %s; xent_launcher points to %s", n,
                   clang_getCString(ty), s->want_type);
    clang_disposeString(ty);
    size_t i = 0;
    while (i < t->n && strcmp(t->defined[i], n) != 0) ++i;
    if (i == t->n) check_report(s->ctx, c, "abi", "the dispatch table names %s, which no kernel file defines", n);
    else t->seen[i] = 1;
  }
  clang_disposeString(name);
  return CXChildVisit_Continue;
}

void rule_abi_dispatch(check_ctx* ctx, CXCursor tu, const char* const* defined, size_t n) {
  table_scan t;
  memset(&t, 0, sizeof t);
  scan(ctx, tu, &t.base, 0);
  if (!t.base.want_type[0]) return;
  t.defined = defined;
  t.n = n;
  t.seen = calloc(n ? n : 1, 1);
  if (!t.seen) return;
  clang_visitChildren(tu, table_entry, &t);
  for (size_t i = 0; i < n; ++i)
    if (!t.seen[i]) check_report(ctx, tu, "abi", "%s is defined but the dispatch table does not name it", defined[i]);
  free(t.seen);
}
