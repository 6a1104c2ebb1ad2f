/* The GPU backends' GEMM calls (runtime/gemm_cuda.c with GEMM_CUDA,
   runtime/gemm_hip.c otherwise) against a host stand-in of the library
   (tests/fake_blaslt.c), which computes what cuBLASLt and hipBLASLt document
   for the column-major call they are given. The oracle is a row-major
   matrix product in double written here: every transpose combination, the
   four dtypes, padded leading dimensions, beta accumulation and the bias
   epilogue must agree, so a mistake in the row-major to column-major
   mapping (gemm_layout.h) fails this on a machine without a GPU. Then the
   errors: no algorithm, a workspace too small, and (hipBLASLt) a library
   older than the ABI xent declares; and the handle freed. Every case runs
   twice: the second time by the algorithms the first chose, the heuristic
   asked once for each kind of GEMM (gemm_algos.h).

   argv[1]: the stand-in library. It carries the real library's soname, so
   once loaded here (RTLD_GLOBAL), the runtime's dlopen finds it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend/backend.h"
#include "runtime/numeric.h"

#ifdef GEMM_CUDA
#define GEMM xent_cuda_gemm
#define GEMM_FREE xent_cuda_gemm_free
#define SONAME "libcublasLt.so.13"
#else
#define GEMM xent_hip_gemm
#define GEMM_FREE xent_hip_gemm_free
#define SONAME "libhipblaslt.so.1"
#endif

#ifdef GEMM_CUDA
/* The CUDA runtime's current device, stood in (this executable's
   definitions win over libcudart's): the GEMM must run on the handle's
   device (1) and put the caller's (0) back. */
#include <cuda_runtime_api.h>
static int current_device = 0, sets = 0;
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  current_device = device;
  ++sets;
  return cudaSuccess;
}
#endif

static int failures = 0;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);           \
      fputc('\n', stderr);                    \
      ++failures;                             \
    }                                         \
  } while (0)

static uint64_t rng = 12345;
static double uniform(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Stores v rounded to t and returns the rounded value. */
static double put(xent_dtype t, void* p, size_t i, double v) {
  xent_store(t, p, (int64_t)i, v);
  return xent_load(t, p, (int64_t)i);
}

/* The relative error of rounding one result to t (the stand-in sums in
   double, so the rounding of the output is the only error), twice over. */
static double tolerance(xent_dtype t) {
  switch (t) {
    case XENT_F64: return 1e-13;
    case XENT_F32: return 0x1p-23;
    case XENT_F16: return 0x1p-10;
    default: return 0x1p-7;
  }
}

/* One row-major GEMM: C[m, n] = alpha op(A) op(B) + beta C (+ bias), each
   matrix with `pad` unused elements at the end of every row; the pads of C
   must come back untouched. */
/* shift: the operands start that many elements into 256-byte aligned
   memory, and the workspace 8 bytes in (a chunk's rows start anywhere a row
   does, and the caller's workspace anywhere). */
static void one_case(xent_handle* h, xent_dtype t, xent_dtype ct, int ta, int tb, int64_t m, int64_t n, int64_t k,
                     double alpha, double beta, int with_bias, int pad, int shift) {
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  const size_t e = xent_dtype_bytes(t), ce = xent_dtype_bytes(ct);
  char* mem[3];
  const size_t sizes[3] = {(size_t)(a_rows * lda) * e, (size_t)(b_rows * ldb) * e, (size_t)(m * ldc) * ce};
  for (int i = 0; i < 3; ++i) mem[i] = aligned_alloc(256, (sizes[i] + (size_t)shift * 8 + 255) / 256 * 256);
  void* a = mem[0] + (size_t)shift * e;
  void* b = mem[1] + (size_t)shift * e;
  void* c = mem[2] + (size_t)shift * ce;
  void* bias = malloc((size_t)n * e);
  double *ra = malloc(sizeof(double) * (size_t)(a_rows * lda)), *rb = malloc(sizeof(double) * (size_t)(b_rows * ldb));
  double *rc = malloc(sizeof(double) * (size_t)(m * ldc)), *rbias = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < a_rows * lda; ++i) ra[i] = put(t, a, (size_t)i, uniform());
  for (int64_t i = 0; i < b_rows * ldb; ++i) rb[i] = put(t, b, (size_t)i, uniform());
  for (int64_t i = 0; i < m * ldc; ++i) rc[i] = put(ct, c, (size_t)i, (i % ldc) >= n ? 77.0 : uniform());
  for (int64_t i = 0; i < n; ++i) rbias[i] = put(t, bias, (size_t)i, uniform());
  const xent_gemm g = {.a_dtype = t, .b_dtype = t, .c_dtype = ct, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
                       .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc, .bias = with_bias ? bias : NULL};
  static _Alignas(256) unsigned char workspace[(1 << 16) + 256];
  const xent_status s = GEMM(h, "test", &g, workspace + (shift ? 8 : 0), 1 << 16, NULL);
  CHECK(s == XENT_OK, "%s into %s ta %d tb %d m %lld n %lld k %lld: %s", xent_dtype_name(t), xent_dtype_name(ct), ta,
        tb, (long long)m, (long long)n, (long long)k, xent_last_error());
  if (s == XENT_OK) {
    int bad = 0;
    for (int64_t i = 0; i < m && !bad; ++i) {
      for (int64_t j = 0; j < ldc && !bad; ++j) {
        const double got = xent_load(ct, c, i * ldc + j);
        double want;
        if (j >= n) {
          want = 77.0;
        } else {
          double acc = 0;
          for (int64_t l = 0; l < k; ++l) acc += ra[ta ? l * lda + i : i * lda + l] * rb[tb ? j * ldb + l : l * ldb + j];
          want = alpha * acc + beta * rc[i * ldc + j] + (with_bias ? rbias[j] : 0.0);
        }
        if (fabs(got - want) > tolerance(ct) * fabs(want) + 1e-300) {
          CHECK(0, "%s into %s ta %d tb %d m %lld n %lld k %lld alpha %g beta %g bias %d: C[%lld, %lld] = %.17g, want %.17g",
                xent_dtype_name(t), xent_dtype_name(ct), ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, with_bias,
                (long long)i, (long long)j, got, want);
          bad = 1;
        }
      }
    }
  }
  free(mem[0]), free(mem[1]), free(mem[2]), free(bias), free(ra), free(rb), free(rc), free(rbias);
}

/* Every case of the dtypes types[from] to types[to - 1] once: how many
   GEMMs. */
static const xent_dtype types[] = {XENT_F32, XENT_F64, XENT_BF16, XENT_F16};
static int all_cases(xent_handle* h, int from, int to) {
  int cases = 0;
  for (int ti = from; ti < to; ++ti) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        /* m, n, k all different: a swapped operand or dimension does not
           chain and the library refuses it; the square case catches a
           transpose lost where the shapes would still chain. */
        const xent_dtype t = types[ti];
        one_case(h, t, t, ta, tb, 5, 7, 3, 1.0, 0.0, 0, 0, 0);
        one_case(h, t, t, ta, tb, 6, 4, 9, 1.0, 0.0, 1, 3, 0);
        one_case(h, t, t, ta, tb, 4, 4, 4, 0.5, 1.0, 0, 2, 0);
        one_case(h, t, t, ta, tb, 1, 9, 2, 1.0, 1.0, 1, 1, 0);
        /* Operands one element off 256-byte alignment (cuBLASLt's stand-in
           refuses them unless the heuristic was told, and refuses an
           algorithm chosen for aligned ones), the workspace 8 bytes off. */
        one_case(h, t, t, ta, tb, 6, 4, 9, 1.0, 1.0, 1, 3, 1);
        cases += 5;
        if (t == XENT_BF16 || t == XENT_F16) {
          /* f16/bf16 operands into f32 (the linear cross entropy's f32
             gradients and grad_weight's f32 sum): C read and written f32. */
          one_case(h, t, XENT_F32, ta, tb, 6, 4, 9, 1.0, 1.0, 0, 3, 0);
          one_case(h, t, XENT_F32, ta, tb, 5, 7, 3, 1.0, 0.0, 0, 0, 1);
          cases += 2;
        }
      }
    }
  }
  return cases;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBFAKE.so\n", argv[0]);
    return 2;
  }
  void* fake = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!fake) {
    fprintf(stderr, "FAIL: cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  /* The runtime's dlopen by soname must find the stand-in, not a real
     library that may be installed. */
  CHECK(dlopen(SONAME, RTLD_NOW | RTLD_NOLOAD) == fake, "dlopen(%s) does not find the stand-in", SONAME);
  int* no_algorithm = dlsym(fake, "fake_blaslt_no_algorithm");
  int* version = dlsym(fake, "fake_blaslt_version");
  int* calls = dlsym(fake, "fake_blaslt_calls");
  int* heuristics = dlsym(fake, "fake_blaslt_heuristics");
  int (*handles_live)(void) = (int (*)(void))dlsym(fake, "fake_blaslt_handles_live");
  if (!no_algorithm || !version || !calls || !heuristics || !handles_live) {
    fprintf(stderr, "FAIL: the stand-in lacks its knobs\n");
    return 1;
  }

  xent_handle h;
  memset(&h, 0, sizeof h); /* the GEMM reads the handle's device and GEMM library handle only */
#ifdef GEMM_CUDA
  h.device = 1;
#endif
  const int cases = all_cases(&h, 0, 4);
  CHECK(*calls == cases, "the stand-in ran %d GEMMs, the test %d", *calls, cases);
#ifdef GEMM_CUDA
  CHECK(sets == 2 * cases && current_device == 0,
        "each GEMM makes the handle's device current and puts the caller's back: %d sets for %d GEMMs, device %d "
        "current after", sets, cases, current_device);
  /* Each case is a kind of GEMM of its own, the shifted ones by their
     alignments, which cuBLASLt's heuristic is told. */
  const int kinds = cases;
#else
  /* hipBLASLt is told no alignments: a shifted case is its unshifted
     twin's kind (one of each transpose pair and dtype). */
  const int kinds = cases - 16;
#endif
  CHECK(*heuristics == kinds, "the heuristic asked %d times for %d kinds of GEMM", *heuristics, kinds);
  /* The f16 cases again (the last 24 or 28 kinds: all kept), each by the
     algorithm chosen the first time: the same products, no heuristic. */
  const int f16 = all_cases(&h, 3, 4);
  CHECK(*calls == cases + f16 && *heuristics == kinds, "f16 again: %d GEMMs run, the heuristic asked %d times, not %d",
        *calls, *heuristics, kinds);
  /* The f32 cases again: their kinds were replaced (a handle keeps 32), so
     asked anew, once each. */
  const int f32 = all_cases(&h, 0, 1);
#ifdef GEMM_CUDA
  const int f32_kinds = f32;
#else
  const int f32_kinds = f32 - 4;
#endif
  CHECK(*heuristics == kinds + f32_kinds, "f32 again: the heuristic asked %d times, not %d", *heuristics,
        kinds + f32_kinds);

  /* One kind of GEMM, then the same with its operands one element off
     256-byte alignment and the same workspace: cuBLASLt's heuristic is
     asked again (its stand-in's first algorithm needs the alignment it was
     told), hipBLASLt's is not told alignments. */
  {
    static _Alignas(256) float am[3 * 2 + 1], bm[2 * 2 + 1], cm[3 * 2 + 1];
    static _Alignas(256) unsigned char ws[1 << 16];
    const int asked = *heuristics;
    for (int shift = 0; shift < 2; ++shift) {
      const xent_gemm one = {.a_dtype = XENT_F32, .b_dtype = XENT_F32, .c_dtype = XENT_F32, .m = 3, .n = 2, .k = 2,
                             .alpha = 1.0, .a = am + shift, .lda = 2, .b = bm + shift, .ldb = 2, .c = cm + shift,
                             .ldc = 2};
      const xent_status st = GEMM(&h, "test", &one, ws, sizeof ws, NULL);
      CHECK(st == XENT_OK, "the GEMM shifted by %d: %s", shift, xent_last_error());
    }
#ifdef GEMM_CUDA
    CHECK(*heuristics == asked + 2, "aligned, then not: the heuristic asked %d times, not 2", *heuristics - asked);
#else
    CHECK(*heuristics == asked + 1, "aligned, then not: the heuristic asked %d times, not 1", *heuristics - asked);
#endif
  }

  /* No algorithm: an XENT_ERROR_BLAS naming the call and the shape. */
  static unsigned char workspace[1 << 16];
  float a[6] = {0}, b[6] = {0}, c[4] = {0};
  const xent_gemm g = {.a_dtype = XENT_F32, .b_dtype = XENT_F32, .c_dtype = XENT_F32, .m = 2, .n = 2, .k = 3, .alpha = 1.0, .a = a, .lda = 3, .b = b, .ldb = 2,
                       .c = c, .ldc = 2};
  *no_algorithm = 1;
  xent_status s = GEMM(&h, "xent_linear_ce_run", &g, workspace, sizeof workspace, NULL);
  CHECK(s == XENT_ERROR_BLAS && strstr(xent_last_error(), "xent_linear_ce_run") &&
            strstr(xent_last_error(), "GetHeuristic") && strstr(xent_last_error(), "(m 2, n 2, k 3, f32 into f32)"),
        "no algorithm: status %d, '%s'", (int)s, xent_last_error());
  *no_algorithm = 0;
  /* A workspace smaller than every algorithm asks for: none is found. */
  s = GEMM(&h, "xent_linear_ce_run", &g, workspace, 1024, NULL);
  CHECK(s == XENT_ERROR_BLAS && strstr(xent_last_error(), "GetHeuristic"), "small workspace: status %d, '%s'",
        (int)s, xent_last_error());

  /* A and B in different dtypes, or f16 into bf16: refused by name before
     the library sees them. */
  {
    const int before = *calls;
    xent_gemm mixed = g;
    mixed.a_dtype = XENT_BF16;
    s = GEMM(&h, "xent_linear_ce_run", &mixed, workspace, sizeof workspace, NULL);
    CHECK(s == XENT_ERROR_INVALID_ARGUMENT && strstr(xent_last_error(), "bf16, f32 and f32 operands"),
          "bf16 A with f32 B: status %d, '%s'", (int)s, xent_last_error());
    mixed.a_dtype = mixed.b_dtype = XENT_F16;
    mixed.c_dtype = XENT_BF16;
    s = GEMM(&h, "xent_linear_ce_run", &mixed, workspace, sizeof workspace, NULL);
    CHECK(s == XENT_ERROR_INVALID_ARGUMENT && strstr(xent_last_error(), "f16, f16 and bf16 operands"),
          "f16 into bf16: status %d, '%s'", (int)s, xent_last_error());
    CHECK(*calls == before, "a refused GEMM reached the library");
  }
  CHECK(handles_live() == 1, "%d library handles for one xent handle", handles_live());
  GEMM_FREE(&h);
  CHECK(handles_live() == 0 && h.gemm == NULL, "xent's free left %d library handles", handles_live());

#ifndef GEMM_CUDA
  /* hipBLASLt before 0.6 (ROCm 5) numbered its types differently. */
  *version = 400;
  s = GEMM(&h, "xent_linear_ce_run", &g, workspace, sizeof workspace, NULL);
  CHECK(s == XENT_ERROR_BLAS && strstr(xent_last_error(), "hipBLASLt 0.4.0 is older than 0.6"),
        "old hipBLASLt: status %d, '%s'", (int)s, xent_last_error());
  CHECK(handles_live() == 0 && h.gemm == NULL, "a refused library left its handle");
  *version = 600;
  s = GEMM(&h, "xent_linear_ce_run", &g, workspace, sizeof workspace, NULL);
  CHECK(s == XENT_OK, "hipBLASLt 0.6.0: %s", xent_last_error());
  GEMM_FREE(&h);
#else
  (void)version;
#endif

  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("OK: %d GEMMs (4 dtypes, f16/bf16 into f32, every transpose, padded rows, beta, bias), %d again by the "
         "algorithms kept, and the error paths\n", cases, f16 + f32);
  return 0;
}
