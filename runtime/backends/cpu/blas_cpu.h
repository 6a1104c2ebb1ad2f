/* The cpu backend's GEMM for the fused linear cross entropy: OpenBLAS's
   CBLAS, loaded with dlopen on first use (as nccl.c loads NCCL), so xent
   neither links against it nor needs it for anything else. */
#ifndef XENT_BLAS_CPU_H
#define XENT_BLAS_CPU_H

#include "runtime/base/internal.h"

/* C[m, n] = alpha * op(A) op(B) + beta * C, row-major, where op(A) is
   [m, k] (A^T when trans_a) and op(B) is [k, n] (B^T when trans_b); lda,
   ldb, ldc are the row strides. dtype XENT_F32 (cblas_sgemm) or XENT_F64
   (cblas_dgemm). XENT_ERROR_BLAS, naming the library or the size at fault,
   if OpenBLAS cannot be loaded or a size exceeds its 32-bit integers. */
xent_status xent_cpu_gemm(const char* fn, xent_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                          double alpha, const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c,
                          int64_t ldc);

/* The cpu backend's xent_gemm (backend.h, gemm) over xent_cpu_gemm: f32
   and f64 operands as they are; f16/bf16 ones widened to f32, and an
   f16/bf16 C computed in f32 and rounded once at the end, a block of at
   most XENT_CPU_GEMM_BLOCK rows or columns at a time along the GEMM's
   largest dimension (the vocabulary), so that its f32 copies stay small;
   the bias added in the accumulation type before C is rounded.
   XENT_ERROR_OUT_OF_MEMORY if those copies cannot be allocated. */
enum { XENT_CPU_GEMM_BLOCK = 4096 };
xent_status xent_cpu_gemm_typed(const char* fn, const xent_gemm* g);

#endif
