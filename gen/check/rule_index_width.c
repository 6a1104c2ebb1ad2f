/* index-width: an index into global memory is computed in 64 bits.

   PyTorch's overflow bugs (85786, 90793, 111484, 190139) are all one
   shape: an offset such as row * C evaluated in a 32-bit int and widened
   only afterwards, right at small sizes and wrong past 2^31 elements. On
   the syntax tree: for every subscript of a pointer and every pointer
   plus or minus an integer, the integer must have a 64-bit type, and no
   multiplication, addition, subtraction or shift inside it may be typed
   narrower than 64 bits unless it folds to a constant. Subscripts of
   arrays (locals, shared memory, a vector's elements) are not offsets into
   a tensor and are left alone; so are integers whose type depends on a
   template parameter not yet known. In a template (the family kernels are
   templates on a variant's traits) a pointer to a dependent type, such as
   `const T*` with T the traits' dtype, is still a pointer: `x + offset`
   is checked though the sum's own type is not yet known, and also where
   the parser keeps it as a call of an `operator+` to look up at
   instantiation (HIP's headers declare some, for their vector types). */
#include <stdio.h>
#include <string.h>

#include "gen/check/rules.h"

static int is_pointer(CXType t) { return clang_getCanonicalType(t).kind == CXType_Pointer; }

static int is_array(CXType t) {
  const enum CXTypeKind k = clang_getCanonicalType(t).kind;
  return k == CXType_ConstantArray || k == CXType_IncompleteArray || k == CXType_VariableArray ||
         k == CXType_DependentSizedArray;
}

typedef struct scan_state {
  check_ctx* ctx;
  CXCursor index;
} scan_state;

/* 32-bit arithmetic anywhere inside an index expression. */
static enum CXChildVisitResult scan(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  scan_state* st = data;
  if (clang_getCursorKind(c) == CXCursor_ArraySubscriptExpr) return CXChildVisit_Continue;  // checked on its own
  if (clang_getCursorKind(c) == CXCursor_BinaryOperator) {
    const enum CXBinaryOperatorKind k = clang_getCursorBinaryOperatorKind(c);
    if (k == CXBinaryOperator_Mul || k == CXBinaryOperator_Add || k == CXBinaryOperator_Sub ||
        k == CXBinaryOperator_Shl) {
      const int bits = check_int_bits(clang_getCursorType(c));
      if (bits > 0 && bits < 64 && !check_is_constant(c)) {
        char text[256];
        CXString type = clang_getTypeSpelling(clang_getCursorType(c));
        check_report(st->ctx, c, "index-width", "'%s' is computed in %d bits (%s) before it is widened for an index",
                     check_text(st->ctx->tu, c, text, sizeof text), bits, clang_getCString(type));
        clang_disposeString(type);
        return CXChildVisit_Continue;
      }
    }
  }
  return CXChildVisit_Recurse;
}

/* The integer added to (or subscripting) a pointer. */
static void check_offset(check_ctx* ctx, CXCursor at, CXCursor index) {
  const CXCursor bare = check_strip_implicit(index);
  if (check_is_constant(bare)) return;
  const int bits = check_int_bits(clang_getCursorType(bare));
  if (bits > 0 && bits < 64) {
    char text[256];
    CXString type = clang_getTypeSpelling(clang_getCursorType(bare));
    check_report(ctx, at, "index-width", "the offset '%s' into a pointer is %d-bit (%s); compute it in int64_t",
                 check_text(ctx->tu, bare, text, sizeof text), bits, clang_getCString(type));
    clang_disposeString(type);
    return;
  }
  scan_state st = {ctx, bare};
  clang_visitChildren(bare, scan, &st);
  if (clang_getCursorKind(bare) == CXCursor_BinaryOperator) scan(bare, at, &st);
}

/* The operands of `a + b` or `a - b` that the parser left as a call of an
   operator to resolve at instantiation: its children are the left operand,
   a reference to the operator (spelled as the operator's token), and the
   right operand. */
static int operator_operands(check_ctx* ctx, CXCursor c, CXCursor* operands) {
  CXCursor kids[4];
  if (check_children(c, kids, 4) != 3) return 0;
  const enum CXCursorKind k = clang_getCursorKind(kids[1]);
  if (k != CXCursor_DeclRefExpr && k != CXCursor_OverloadedDeclRef) return 0;
  char op[8];
  check_text(ctx->tu, kids[1], op, sizeof op);
  if (strcmp(op, "+") != 0 && strcmp(op, "-") != 0) return 0;
  operands[0] = kids[0];
  operands[1] = kids[2];
  return 1;
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  check_ctx* ctx = data;
  if (check_skip(ctx, c)) return CXChildVisit_Continue;
  const enum CXCursorKind kind = clang_getCursorKind(c);
  if (kind == CXCursor_ArraySubscriptExpr) {
    CXCursor kids[2];
    if (check_children(c, kids, 2) == 2) {
      const CXCursor base = check_strip_implicit(kids[0]);
      if (!is_array(clang_getCursorType(base)) && is_pointer(clang_getCursorType(kids[0])))
        check_offset(ctx, c, kids[1]);
    }
  } else if (kind == CXCursor_BinaryOperator || kind == CXCursor_CompoundAssignOperator) {
    const enum CXBinaryOperatorKind k = clang_getCursorBinaryOperatorKind(c);
    const int additive = k == CXBinaryOperator_Add || k == CXBinaryOperator_Sub || k == CXBinaryOperator_AddAssign ||
                         k == CXBinaryOperator_SubAssign;
    CXCursor kids[2];
    if (additive && check_children(c, kids, 2) == 2) {
      const CXType left = clang_getCursorType(check_strip_implicit(kids[0]));
      const CXType right = clang_getCursorType(check_strip_implicit(kids[1]));
      const int left_is_pointer = is_pointer(left) || is_array(left);
      const int right_is_pointer = is_pointer(right) || is_array(right);
      // Pointer +- integer; in a template the sum's type may be dependent.
      const int dependent = clang_getCursorType(c).kind == CXType_Dependent;
      if ((is_pointer(clang_getCursorType(c)) || dependent) && left_is_pointer != right_is_pointer)
        check_offset(ctx, c, left_is_pointer ? kids[1] : kids[0]);
    }
  } else if (kind == CXCursor_CallExpr) {
    CXCursor ops[2];
    if (operator_operands(ctx, c, ops)) {
      const int left_is_pointer = is_pointer(clang_getCursorType(check_strip_implicit(ops[0])));
      const int right_is_pointer = is_pointer(clang_getCursorType(check_strip_implicit(ops[1])));
      if (left_is_pointer != right_is_pointer) check_offset(ctx, c, left_is_pointer ? ops[1] : ops[0]);
    }
  }
  return CXChildVisit_Recurse;
}

void rule_index_width(check_ctx* ctx, CXCursor tu) { clang_visitChildren(tu, visit, ctx); }
