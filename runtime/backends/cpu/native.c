/* The cpu backend's own code: the build of native_rows.cc for this CPU's
   instruction set, and the threads its calls use. */
#define _GNU_SOURCE
#include "runtime/backends/cpu/native.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

/* Whether to run the AVX2 build: the CPU has AVX2 and FMA, and
   XENT_CPU_ISA does not say sse2 (the tests run both builds). Asked once;
   racing threads agree. */
static int has_avx2(void) {
#if defined(__x86_64__) && defined(XENT_NATIVE_AVX2)
  static int known = -1;
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (v < 0) {
    const char* isa = getenv("XENT_CPU_ISA");
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !(isa && strcmp(isa, "sse2") == 0);
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v;
#else
  return 0;
#endif
}

xent_status xent_cpu_native_ce(const xent_ce_desc* d, xent_op op, const xent_ce_args* a) {
#if defined(XENT_NATIVE_AVX2)
  if (has_avx2()) return xent_cpu_native_ce_avx2(d, op, a);
#endif
  return xent_cpu_native_ce_sse2(d, op, a);
}

xent_status xent_cpu_native_softmax(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* a) {
#if defined(XENT_NATIVE_AVX2)
  if (has_avx2()) return xent_cpu_native_softmax_avx2(d, op, a);
#endif
  return xent_cpu_native_softmax_sse2(d, op, a);
}

int xent_cpu_threads(void) {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const char* omp = getenv("OMP_NUM_THREADS");
  const int asked = omp ? atoi(omp) : 0;
  if (asked > 0 && asked < n) n = asked;
  return n < 1 ? 1 : n;
#endif
}
