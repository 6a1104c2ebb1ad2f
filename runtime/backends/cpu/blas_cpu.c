/* xent_cpu_gemm through OpenBLAS's CBLAS, loaded at run time, and the cpu
   backend's typed GEMM over it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/backends/cpu/blas_cpu.h"
#include "runtime/base/internal.h"
#include "runtime/numeric.h"

/* CBLAS's enum values (cblas.h), and its int: 32 bits in Debian's OpenBLAS
   (the LP64 interface). */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef int blas_int;

typedef void (*sgemm_fn)(int, int, int, blas_int, blas_int, blas_int, float, const float*, blas_int, const float*,
                         blas_int, float, float*, blas_int);
typedef void (*dgemm_fn)(int, int, int, blas_int, blas_int, blas_int, double, const double*, blas_int,
                         const double*, blas_int, double, double*, blas_int);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm;
static dgemm_fn dgemm;
static char why[256];

static void load(void) {
  /* OpenBLAS first; else the system's libblas.so.3 (Debian's alternatives:
     OpenBLAS, BLIS or the reference BLAS, each with the CBLAS entry points). */
  static const char* const sonames[] = {"libopenblas.so.0", "libopenblas.so", "libblas.so.3", NULL};
  void* so = NULL;
  for (int i = 0; !so && sonames[i]; ++i) so = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    snprintf(why, sizeof why, "OpenBLAS could not be loaded (%s); install it (Debian: libopenblas0) or put "
             "libopenblas.so.0 on the library path", dlerror());
    return;
  }
  /* POSIX: a function pointer round-trips through dlsym's void*. */
  *(void**)&sgemm = dlsym(so, "cblas_sgemm");
  *(void**)&dgemm = dlsym(so, "cblas_dgemm");
  if (!sgemm || !dgemm) {
    sgemm = NULL, dgemm = NULL;
    snprintf(why, sizeof why, "the BLAS library was loaded but lacks cblas_sgemm or cblas_dgemm");
  }
}

xent_status xent_cpu_gemm(const char* fn, xent_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                          double alpha, const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c,
                          int64_t ldc) {
  pthread_once(&once, load);
  if (!sgemm) return xent_fail(XENT_ERROR_BLAS, "%s: %s", fn, why);
  const int64_t sizes[6] = {m, n, k, lda, ldb, ldc};
  for (int i = 0; i < 6; ++i)
    if (sizes[i] > 0x7fffffff)
      return xent_fail(XENT_ERROR_BLAS, "%s: a GEMM dimension or stride (%lld) exceeds OpenBLAS's 32-bit integers", fn,
                       (long long)sizes[i]);
  if (m == 0 || n == 0) return XENT_OK;
  const int ta = trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  if (dtype == XENT_F64) {
    dgemm(CBLAS_ROW_MAJOR, ta, tb, (blas_int)m, (blas_int)n, (blas_int)k, alpha, a, (blas_int)lda, b, (blas_int)ldb,
          beta, c, (blas_int)ldc);
  } else {
    sgemm(CBLAS_ROW_MAJOR, ta, tb, (blas_int)m, (blas_int)n, (blas_int)k, (float)alpha, a, (blas_int)lda, b,
          (blas_int)ldb, (float)beta, c, (blas_int)ldc);
  }
  return XENT_OK;
}

/* A sub-matrix of a row-major matrix: rows [r0, r0 + rows) and columns
   [c0, c0 + cols) of the one at p with leading dimension ld. */
typedef struct view {
  xent_dtype dtype;
  const char* p;
  int64_t ld, r0, c0, rows, cols;
} view;

static const void* view_at(const view* v) {
  return v->p + ((size_t)v->r0 * (size_t)v->ld + (size_t)v->c0) * xent_dtype_bytes(v->dtype);
}

static int is_half(xent_dtype t) { return t == XENT_F16 || t == XENT_BF16; }

static float half_to_float(xent_dtype t, uint16_t x) { return t == XENT_BF16 ? xent_bf16_to_float(x) : xent_f16_to_float(x); }

/* The view in f32, packed (leading dimension v->cols), into dst. */
static void widen(const view* v, float* dst) {
  const uint16_t* src = view_at(v);
  for (int64_t r = 0; r < v->rows; ++r)
    for (int64_t c = 0; c < v->cols; ++c) dst[r * v->cols + c] = half_to_float(v->dtype, src[r * v->ld + c]);
}

/* The packed f32 src back into the view, rounded to its dtype. */
static void narrow(const float* src, const view* v) {
  uint16_t* dst = (uint16_t*)view_at(v);
  for (int64_t r = 0; r < v->rows; ++r)
    for (int64_t c = 0; c < v->cols; ++c) {
      const float x = src[r * v->cols + c];
      dst[r * v->ld + c] = v->dtype == XENT_BF16 ? xent_float_to_bf16(x) : xent_float_to_f16(x);
    }
}

/* An operand as OpenBLAS takes it: the view itself (f32/f64), or its f32
   copy in buf (f16/bf16). */
static const void* operand(const view* v, float* buf, int64_t* ld) {
  if (!is_half(v->dtype)) {
    *ld = v->ld;
    return view_at(v);
  }
  widen(v, buf);
  *ld = v->cols;
  return buf;
}

/* C's rows [0, m) += bias, in the accumulation type (C as OpenBLAS wrote it:
   f32 or f64 at c with leading dimension ldc), bias in dtype, offset by
   column c0 of the whole C. */
static void add_bias(xent_dtype acc, xent_dtype bias_dtype, const void* bias, int64_t c0, void* c, int64_t m,
                     int64_t n, int64_t ldc) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t col = c0 + j;
      if (acc == XENT_F64) {
        ((double*)c)[r * ldc + j] += ((const double*)bias)[col];
      } else {
        const float b = bias_dtype == XENT_F32 ? ((const float*)bias)[col]
                                               : half_to_float(bias_dtype, ((const uint16_t*)bias)[col]);
        ((float*)c)[r * ldc + j] += b;
      }
    }
}

xent_status xent_cpu_gemm_typed(const char* fn, const xent_gemm* g) {
  const xent_dtype acc = g->b_dtype == XENT_F64 ? XENT_F64 : XENT_F32;
  const xent_dtype types[3] = {g->a_dtype, g->b_dtype, g->c_dtype};
  for (int i = 0; i < 3; ++i)
    if ((types[i] == XENT_F64) != (acc == XENT_F64))
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: a GEMM of %s, %s and %s operands mixes f64 with another dtype",
                       fn, xent_dtype_name(g->a_dtype), xent_dtype_name(g->b_dtype), xent_dtype_name(g->c_dtype));
  if (g->bias && acc == XENT_F64)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: a GEMM's bias is for f16, bf16 and f32 operands (internal.h)", fn);
  /* Blocks along the largest dimension: m (rows of op(A) and C), n
     (columns of op(B) and C), or k (op(A)'s columns, op(B)'s rows: C is
     whole, and every block after the first adds to it). */
  const int64_t dims[3] = {g->m, g->n, g->k};
  int split = 0;
  for (int i = 1; i < 3; ++i)
    if (dims[i] > dims[split]) split = i;
  const int64_t block = dims[split] < XENT_CPU_GEMM_BLOCK ? dims[split] : XENT_CPU_GEMM_BLOCK;
  const int64_t bm = split == 0 ? block : g->m, bn = split == 1 ? block : g->n, bk = split == 2 ? block : g->k;
  const int half_c = is_half(g->c_dtype);
  float* abuf = is_half(g->a_dtype) ? malloc(sizeof(float) * (size_t)(bm * bk > 0 ? bm * bk : 1)) : NULL;
  float* bbuf = is_half(g->b_dtype) ? malloc(sizeof(float) * (size_t)(bk * bn > 0 ? bk * bn : 1)) : NULL;
  float* cbuf = half_c ? malloc(sizeof(float) * (size_t)(bm * bn > 0 ? bm * bn : 1)) : NULL;
  xent_status s = XENT_OK;
  if ((is_half(g->a_dtype) && !abuf) || (is_half(g->b_dtype) && !bbuf) || (half_c && !cbuf))
    s = xent_fail(XENT_ERROR_OUT_OF_MEMORY, "%s: cannot allocate the cpu GEMM's f32 copies (%lld x %lld x %lld)", fn,
                  (long long)bm, (long long)bn, (long long)bk);
  const int64_t steps = dims[split] > 0 ? (dims[split] + block - 1) / block : 1;
  /* A C of f16/bf16 split along k stays in f32 over every block. */
  const view whole_c = {g->c_dtype, g->c, g->ldc, 0, 0, g->m, g->n};
  if (s == XENT_OK && half_c && split == 2 && g->beta != 0.0) widen(&whole_c, cbuf);
  for (int64_t i = 0; s == XENT_OK && i < steps; ++i) {
    const int64_t j0 = i * block, len = dims[split] - j0 < block ? dims[split] - j0 : block;
    const int64_t m0 = split == 0 ? j0 : 0, n0 = split == 1 ? j0 : 0, k0 = split == 2 ? j0 : 0;
    const int64_t m = split == 0 ? len : g->m, n = split == 1 ? len : g->n, k = split == 2 ? len : g->k;
    /* op(A)[m0.., k0..] is A[m0.., k0..], or A[k0.., m0..] stored transposed;
       op(B)[k0.., n0..] likewise. */
    const view a = g->ta ? (view){g->a_dtype, g->a, g->lda, k0, m0, k, m} : (view){g->a_dtype, g->a, g->lda, m0, k0, m, k};
    const view b = g->tb ? (view){g->b_dtype, g->b, g->ldb, n0, k0, n, k} : (view){g->b_dtype, g->b, g->ldb, k0, n0, k, n};
    const view c = {g->c_dtype, g->c, g->ldc, m0, n0, m, n};
    int64_t lda = 0, ldb = 0;
    const void* pa = operand(&a, abuf, &lda);
    const void* pb = operand(&b, bbuf, &ldb);
    const double beta = split == 2 && i > 0 ? 1.0 : g->beta;
    void* pc = (void*)view_at(&c);
    int64_t ldc = g->ldc;
    if (half_c) {
      /* The whole C (split along k) or this block's, in f32. */
      pc = cbuf;
      ldc = split == 2 ? g->n : n;
      if (split != 2 && beta != 0.0) widen(&c, cbuf);
    }
    s = xent_cpu_gemm(fn, acc, g->ta, g->tb, m, n, k, g->alpha, pa, lda, pb, ldb, beta, pc, ldc);
    if (s != XENT_OK) break;
    const int last = i == steps - 1;
    if (split != 2) {
      if (g->bias && m > 0) add_bias(acc, g->b_dtype, g->bias, n0, pc, m, n, ldc);
      if (half_c) narrow(cbuf, &c);
    } else if (last) {
      if (g->bias && g->m > 0) add_bias(acc, g->b_dtype, g->bias, 0, half_c ? (void*)cbuf : g->c, g->m, g->n,
                                        half_c ? g->n : g->ldc);
      if (half_c) narrow(cbuf, &whole_c);
    }
  }
  free(abuf);
  free(bbuf);
  free(cbuf);
  return s;
}
