/* xent_cpu_gemm through OpenBLAS's CBLAS, loaded at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "blas_cpu.h"
#include "internal.h"

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
