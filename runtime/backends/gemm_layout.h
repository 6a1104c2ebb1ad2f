/* A row-major GEMM (internal.h's xent_gemm) as the column-major call that
   cuBLASLt and hipBLASLt take. Shared by gemm_cuda.c and gemm_hip.c.

   A row-major X[r, c] with leading dimension ld is the column-major X^T
   [c, r] with the same ld. So C[m, n] = op(A) op(B) is, column-major,
   C^T[n, m] = op(B)^T op(A)^T: the library's first operand is our B, its
   second our A, each with its own transpose flag, and the library's result
   is C^T [n, m]. A bias of one value per column of the row-major C is one
   per row of C^T: what the libraries' BIAS epilogue adds. */
#ifndef XENT_GEMM_LAYOUT_H
#define XENT_GEMM_LAYOUT_H

#include <stdint.h>

#include "runtime/base/internal.h"

typedef struct xent_gemm_operand {
  const void* data;
  int transposed;  /* the library applies its transpose to this operand */
  uint64_t rows, cols; /* as stored, column-major */
  int64_t ld;
} xent_gemm_operand;

typedef struct xent_gemm_column_major {
  xent_gemm_operand first, second; /* D = op(first) op(second) */
  uint64_t rows, cols;             /* of D (and C): n, m */
  int64_t ld;
} xent_gemm_column_major;

/* The GPU libraries take A and B in one dtype, and C (and D) in theirs or,
   for f16/bf16 A and B, in f32 with f32 compute: what cuBLASLt's and
   hipBLASLt's tables of supported types list (internal.h, xent_gemm). */
static inline xent_status xent_gemm_check_types(const char* fn, const char* library, const xent_gemm* g) {
  const int half = g->b_dtype == XENT_F16 || g->b_dtype == XENT_BF16;
  if (g->a_dtype == g->b_dtype && (g->c_dtype == g->b_dtype || (half && g->c_dtype == XENT_F32))) return XENT_OK;
  return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                   "%s: %s GEMM of %s, %s and %s operands: A and B in one dtype, C in theirs (or f32 for f16/bf16)", fn,
                   library, xent_dtype_name(g->a_dtype), xent_dtype_name(g->b_dtype), xent_dtype_name(g->c_dtype));
}

static inline xent_gemm_column_major xent_gemm_to_column_major(const xent_gemm* g) {
  xent_gemm_column_major cm;
  /* op(B)^T: B stored row-major [k, n] (tb = 0) or [n, k] (tb = 1) is, as
     stored column-major, [n, k] or [k, n]; the library's op of it must give
     [n, k]. */
  cm.first.data = g->b;
  cm.first.transposed = g->tb;
  cm.first.rows = g->tb ? (uint64_t)g->k : (uint64_t)g->n;
  cm.first.cols = g->tb ? (uint64_t)g->n : (uint64_t)g->k;
  cm.first.ld = g->ldb;
  /* op(A)^T: A stored row-major [m, k] (ta = 0) or [k, m] (ta = 1); the
     library's op of it must give [k, m]. */
  cm.second.data = g->a;
  cm.second.transposed = g->ta;
  cm.second.rows = g->ta ? (uint64_t)g->m : (uint64_t)g->k;
  cm.second.cols = g->ta ? (uint64_t)g->k : (uint64_t)g->m;
  cm.second.ld = g->lda;
  cm.rows = (uint64_t)g->n;
  cm.cols = (uint64_t)g->m;
  cm.ld = g->ldc;
  return cm;
}

#endif
