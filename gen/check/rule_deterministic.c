/* deterministic: the same inputs give the same bits on every run.

   Floating-point atomics add in whatever order the hardware serves them,
   so a sum through them changes in its last bits from run to run (xent
   reduces in a fixed tree instead, xent_partial_blocks). Integer atomics
   are exact, but each use is a design decision: the only one allowed is
   the bad-label record, an atomicMin on a 64-bit unsigned row number (the
   lowest bad row, whatever order the blocks run in). */
#include <string.h>

#include "gen/check/rules.h"

static const char* const kAtomics[] = {
    "atomicAdd", "atomicSub", "atomicExch", "atomicMin", "atomicMax", "atomicInc", "atomicDec", "atomicCAS",
    "atomicAnd", "atomicOr", "atomicXor", "unsafeAtomicAdd", "safeAtomicAdd", "atomicAdd_system",
    "atomicAdd_block", "__hip_atomic_fetch_add", "__atomic_fetch_add", "__atomic_add_fetch",
};

static int is_atomic(const char* name) {
  for (size_t i = 0; i < sizeof kAtomics / sizeof kAtomics[0]; ++i)
    if (strcmp(name, kAtomics[i]) == 0) return 1;
  return 0;
}

/* The type the atomic's first argument points at. */
static CXType target_type(CXCursor call) {
  CXType none = {CXType_Invalid, {0, 0}};
  if (clang_Cursor_getNumArguments(call) < 1) return none;
  const CXType p = clang_getCanonicalType(clang_getCursorType(check_strip_implicit(clang_Cursor_getArgument(call, 0))));
  if (p.kind != CXType_Pointer) return none;
  return clang_getCanonicalType(clang_getPointeeType(p));
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  check_ctx* ctx = data;
  if (check_skip(ctx, c)) return CXChildVisit_Continue;
  if (clang_getCursorKind(c) != CXCursor_CallExpr) return CXChildVisit_Recurse;
  char name[256];
  check_callee(c, name, sizeof name);
  if (!is_atomic(name)) return CXChildVisit_Recurse;
  const CXType t = target_type(c);
  CXString spelled = clang_getTypeSpelling(t);
  const char* type = clang_getCString(spelled);
  if (t.kind == CXType_Float || t.kind == CXType_Double || t.kind == CXType_Half || t.kind == CXType_Float16 ||
      t.kind == CXType_BFloat16 || t.kind == CXType_LongDouble) {
    check_report(ctx, c, "deterministic", "%s on %s: a floating-point atomic adds in the order the hardware serves "
                 "it; reduce in a fixed order instead", name, type);
  } else if (!(strcmp(name, "atomicMin") == 0 && t.kind == CXType_ULongLong)) {
    check_report(ctx, c, "deterministic", "%s on %s is not an integer atomic the rule lists (atomicMin on the "
                 "unsigned long long bad-label record)", name, t.kind == CXType_Invalid ? "an unknown type" : type);
  }
  clang_disposeString(spelled);
  return CXChildVisit_Recurse;
}

void rule_deterministic(check_ctx* ctx, CXCursor tu) { clang_visitChildren(tu, visit, ctx); }
