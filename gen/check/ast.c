/* Syntax-tree helpers shared by the rules (rules.h), and the report. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/check/rules.h"

int check_in_headers(const check_ctx* ctx, const char* path, const char** rest) {
  const char* const dirs[] = {ctx->headers, ctx->headers_real};
  for (int i = 0; i < 2 && path; ++i) {
    if (!dirs[i]) continue;
    const size_t n = strlen(dirs[i]);
    if (strncmp(path, dirs[i], n) == 0 && path[n] == '/') {
      if (rest) *rest = path + n + 1;
      return 1;
    }
  }
  return 0;
}

/* The template file and line of a cursor (through #line), or the device
   header's, under the library's directory as given. */
static void where(const check_ctx* ctx, CXCursor c, const char* fallback, char* buf, size_t cap) {
  CXString file;
  unsigned line = 0, column = 0;
  clang_getPresumedLocation(clang_getCursorLocation(c), &file, &line, &column);
  const char* name = clang_getCString(file);
  /* The renderer's #line names are "templates/<file>"; a precompiled
     header stores them made absolute, so cut them back. */
  const char* t = name ? strstr(name, "/templates/") : NULL;
  const char* rest = NULL;
  if (t) name = t + 1;
  if (name && check_in_headers(ctx, name, &rest)) snprintf(buf, cap, "%s/%s:%u", ctx->headers_given, rest, line);
  else if (name && *name) snprintf(buf, cap, "%s:%u", name, line);
  else snprintf(buf, cap, "%s", fallback);
  clang_disposeString(file);
}

void check_report(check_ctx* ctx, CXCursor at, const char* rule, const char* fmt, ...) {
  char place[1024], what[1024];
  const char* base = strrchr(ctx->file, '/');
  where(ctx, at, base ? base + 1 : ctx->file, place, sizeof place);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s: %s: %s\n", place, rule, what);
  ctx->findings++;
}

int check_in_scope(const check_ctx* ctx, CXCursor c) {
  CXFile file = NULL;
  clang_getExpansionLocation(clang_getCursorLocation(c), &file, NULL, NULL, NULL);
  if (!file) return 0;
  CXString name = clang_getFileName(file);
  const char* n = clang_getCString(name);
  int in = 0;
  if (n) in = strcmp(n, ctx->file) == 0 || (ctx->shared_headers && check_in_headers(ctx, n, NULL));
  clang_disposeString(name);
  return in;
}

int check_skip(const check_ctx* ctx, CXCursor c) {
  return clang_isDeclaration(clang_getCursorKind(c)) && !check_in_scope(ctx, c);
}

static enum CXChildVisitResult first_child(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  *(CXCursor*)data = c;
  return CXChildVisit_Break;
}

CXCursor check_strip_implicit(CXCursor c) {
  for (;;) {
    const enum CXCursorKind k = clang_getCursorKind(c);
    if (k != CXCursor_UnexposedExpr && k != CXCursor_ParenExpr) return c;
    CXCursor child = clang_getNullCursor();
    clang_visitChildren(c, first_child, &child);
    if (clang_Cursor_isNull(child)) return c;
    c = child;
  }
}

int check_int_bits(CXType t) {
  t = clang_getCanonicalType(t);
  if (t.kind < CXType_Bool || t.kind > CXType_Int128) return 0;
  const long long bytes = clang_Type_getSizeOf(t);
  return bytes > 0 ? (int)(bytes * 8) : 0;
}

int check_is_constant(CXCursor c) {
  CXEvalResult r = clang_Cursor_Evaluate(c);
  if (!r) return 0;
  const int is_int = clang_EvalResult_getKind(r) == CXEval_Int;
  clang_EvalResult_dispose(r);
  return is_int;
}

const char* check_name(CXCursor c, char* buf, unsigned cap) {
  CXString s = clang_getCursorSpelling(c);
  snprintf(buf, cap, "%s", clang_getCString(s));
  clang_disposeString(s);
  if (buf[0]) return buf;
  /* libclang gives a name it has not resolved (in a template, or a
     property such as threadIdx.x) no spelling: take the last identifier of
     its text outside template arguments (ns::f<T> is f, a.b is b). */
  CXTranslationUnit tu = clang_Cursor_getTranslationUnit(c);
  CXToken* tokens = NULL;
  unsigned n = 0;
  clang_tokenize(tu, clang_getCursorExtent(c), &tokens, &n);
  int depth = 0;
  for (unsigned i = 0; i < n; ++i) {
    CXString t = clang_getTokenSpelling(tu, tokens[i]);
    const char* text = clang_getCString(t);
    if (strcmp(text, "<") == 0) depth++;
    else if (strcmp(text, ">") == 0 && depth > 0) depth--;
    else if (depth == 0 && clang_getTokenKind(tokens[i]) == CXToken_Identifier) snprintf(buf, cap, "%s", text);
    clang_disposeString(t);
  }
  if (n) clang_disposeTokens(tu, tokens, n);
  return buf;
}

const char* check_callee(CXCursor call, char* buf, unsigned cap) {
  buf[0] = 0;
  CXCursor ref = clang_getCursorReferenced(call);
  CXString s = clang_Cursor_isNull(ref) ? clang_getCursorSpelling(call) : clang_getCursorSpelling(ref);
  snprintf(buf, cap, "%s", clang_getCString(s));
  clang_disposeString(s);
  if (buf[0]) return buf;
  /* A call in a template that depends on its parameters is not resolved:
     its name is the callee expression's (an overload set, or a name the
     instantiation will look up). */
  CXCursor callee = clang_getNullCursor();
  clang_visitChildren(call, first_child, &callee);
  if (clang_Cursor_isNull(callee)) return buf;
  callee = check_strip_implicit(callee);
  const enum CXCursorKind k = clang_getCursorKind(callee);
  if (k != CXCursor_OverloadedDeclRef && k != CXCursor_DeclRefExpr && k != CXCursor_MemberRefExpr) return buf;
  return check_name(callee, buf, cap);
}

typedef struct kids_acc {
  CXCursor* kids;
  int max, n;
} kids_acc;

static enum CXChildVisitResult collect(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  kids_acc* a = data;
  if (a->n < a->max) a->kids[a->n] = c;
  a->n++;
  return CXChildVisit_Continue;
}

int check_children(CXCursor c, CXCursor* kids, int max) {
  kids_acc a = {kids, max, 0};
  clang_visitChildren(c, collect, &a);
  return a.n < max ? a.n : max;
}

static enum CXChildVisitResult find_cuda_attr(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  const enum CXCursorKind k = clang_getCursorKind(c);
  if (k == CXCursor_CUDADeviceAttr || k == CXCursor_CUDAGlobalAttr) {
    *(int*)data = 1;
    return CXChildVisit_Break;
  }
  return CXChildVisit_Continue;
}

int check_is_device_function(CXCursor fn) {
  int device = 0;
  clang_visitChildren(fn, find_cuda_attr, &device);
  return device;
}

const char* check_text(CXTranslationUnit tu, CXCursor c, char* buf, unsigned cap) {
  CXToken* tokens = NULL;
  unsigned n = 0;
  buf[0] = 0;
  clang_tokenize(tu, clang_getCursorExtent(c), &tokens, &n);
  size_t used = 0;
  for (unsigned i = 0; i < n && used + 1 < cap; ++i) {
    CXString s = clang_getTokenSpelling(tu, tokens[i]);
    const int w = snprintf(buf + used, cap - used, "%s%s", i ? " " : "", clang_getCString(s));
    clang_disposeString(s);
    if (w < 0) break;
    used += (size_t)w < cap - used ? (size_t)w : cap - used - 1;
  }
  if (n) clang_disposeTokens(tu, tokens, n);
  if (used + 1 >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
  return buf;
}
