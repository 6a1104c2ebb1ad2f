/* A host stand-in for cuBLASLt (FAKE_CUBLASLT, built against the toolkit's
   cublasLt.h, so each entry point's signature is checked by the compiler)
   or for hipBLASLt (FAKE_HIPBLASLT, against runtime/hipblaslt_abi.h): the
   calls runtime/gemm_cuda.c and runtime/gemm_hip.c make, computed on host
   memory in double, with the libraries' documented column-major semantics:

     D = alpha * op(A) op(B) + beta * C (+ bias[i] on row i of D)

   where each layout is rows x cols with leading dimension ld >= rows, and
   op transposes as TRANSA / TRANSB say. A call whose shapes do not chain
   (op(A) [m, k], op(B) [k, n], C and D [m, n]) fails with an invalid-value
   status, as would a layout with ld < rows: a wrong row-major mapping in
   xent shows up as an error or as wrong numbers in
   tests/gemm_lt_fake_test.c. It is built with the real library's soname,
   so that once the test has loaded it, xent's dlopen finds it.

   Knobs for the test (exported): fake_blaslt_no_algorithm makes the
   heuristic find nothing; fake_blaslt_version is what hipblasLtGetVersion
   reports; fake_blaslt_calls counts successful matmuls;
   fake_blaslt_algorithms is how many algorithms the heuristic offers (the
   i-th numbered i in it), fake_blaslt_last_algorithm the number of the
   last one a matmul ran; fake_blaslt_heuristics counts the heuristic's
   calls; the result numbered fake_blaslt_unfit_algorithm (cuBLASLt's) says
   by its state that it cannot run the GEMM. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/numeric.h"

#ifdef FAKE_CUBLASLT
#include <cublasLt.h>
typedef cublasStatus_t status_t;
typedef cublasLtHandle_t handle_t;
typedef cublasLtMatmulDesc_t desc_t;
typedef cublasLtMatrixLayout_t layout_t;
typedef cublasLtMatmulPreference_t pref_t;
typedef cublasLtMatmulAlgo_t algo_t;
typedef cublasLtMatmulHeuristicResult_t result_t;
typedef cublasComputeType_t compute_t;
typedef cudaDataType_t type_t;
typedef cublasLtMatmulDescAttributes_t desc_attr_t;
typedef cublasLtMatmulPreferenceAttributes_t pref_attr_t;
typedef cudaStream_t stream_t;
#define API(name) cublasLt##name
#define OK CUBLAS_STATUS_SUCCESS
#define INVALID CUBLAS_STATUS_INVALID_VALUE
#define UNSUPPORTED CUBLAS_STATUS_NOT_SUPPORTED
enum {
  T_F32 = CUDA_R_32F,
  T_F64 = CUDA_R_64F,
  T_F16 = CUDA_R_16F,
  T_BF16 = CUDA_R_16BF,
  C_32F = CUBLAS_COMPUTE_32F,
  C_64F = CUBLAS_COMPUTE_64F,
  OP_N = CUBLAS_OP_N,
  OP_T = CUBLAS_OP_T,
  A_TRANSA = CUBLASLT_MATMUL_DESC_TRANSA,
  A_TRANSB = CUBLASLT_MATMUL_DESC_TRANSB,
  A_EPILOGUE = CUBLASLT_MATMUL_DESC_EPILOGUE,
  A_BIAS = CUBLASLT_MATMUL_DESC_BIAS_POINTER,
  A_BIAS_TYPE = CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
  E_DEFAULT = CUBLASLT_EPILOGUE_DEFAULT,
  E_BIAS = CUBLASLT_EPILOGUE_BIAS,
  P_MAX_WS = CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
  P_ALIGN_A = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
  P_ALIGN_B = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
  P_ALIGN_C = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
  P_ALIGN_D = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
};
/* cuBLASLt's alignment rules, as documented: the heuristic assumes each
   operand 256-byte aligned unless told less (the MIN_ALIGNMENT
   preferences), and may return an algorithm that needs it; the workspace
   must be 256-byte aligned. */
#define FAKE_ALIGNMENT_RULES 1
#else
#include "runtime/backends/hip/hipblaslt_abi.h"
typedef hipblaslt_status status_t;
typedef void* handle_t;
typedef void* desc_t;
typedef void* layout_t;
typedef void* pref_t;
typedef void algo_t;
typedef hipblaslt_heuristic_room result_t;
typedef int compute_t;
typedef int type_t;
typedef int desc_attr_t;
typedef int pref_attr_t;
typedef void* stream_t;
#define API(name) hipblasLt##name
#define OK HIPBLASLT_ABI_STATUS_SUCCESS
#define INVALID 3 /* HIPBLAS_STATUS_INVALID_VALUE */
#define UNSUPPORTED HIPBLASLT_ABI_STATUS_NOT_SUPPORTED
enum {
  T_F32 = HIPBLASLT_ABI_R_32F,
  T_F64 = HIPBLASLT_ABI_R_64F,
  T_F16 = HIPBLASLT_ABI_R_16F,
  T_BF16 = HIPBLASLT_ABI_R_16BF,
  C_32F = HIPBLASLT_ABI_COMPUTE_32F,
  C_64F = HIPBLASLT_ABI_COMPUTE_64F,
  OP_N = HIPBLASLT_ABI_OP_N,
  OP_T = HIPBLASLT_ABI_OP_T,
  A_TRANSA = HIPBLASLT_ABI_DESC_TRANSA,
  A_TRANSB = HIPBLASLT_ABI_DESC_TRANSB,
  A_EPILOGUE = HIPBLASLT_ABI_DESC_EPILOGUE,
  A_BIAS = HIPBLASLT_ABI_DESC_BIAS_POINTER,
  A_BIAS_TYPE = HIPBLASLT_ABI_DESC_BIAS_DATA_TYPE,
  E_DEFAULT = HIPBLASLT_ABI_EPILOGUE_DEFAULT,
  E_BIAS = HIPBLASLT_ABI_EPILOGUE_BIAS,
  P_MAX_WS = HIPBLASLT_ABI_PREF_MAX_WORKSPACE_BYTES,
};
#endif

#define EXPORT __attribute__((visibility("default")))

EXPORT int fake_blaslt_no_algorithm = 0;
EXPORT int fake_blaslt_version = 100200; /* hipBLASLt 1.2.0 */
EXPORT int fake_blaslt_calls = 0;
EXPORT int fake_blaslt_algorithms = 1;
EXPORT int fake_blaslt_last_algorithm = -1;
EXPORT int fake_blaslt_heuristics = 0;
EXPORT int fake_blaslt_unfit_algorithm = -1;

/* What the handles point to. */
typedef struct fake_desc {
  int compute, scale, op_a, op_b, epilogue, bias_type;
  const void* bias;
} fake_desc;
typedef struct fake_layout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
} fake_layout;
typedef struct fake_pref {
  uint64_t max_workspace;
  uint32_t min_align[4]; /* A, B, C, D; 0: not told (256) */
} fake_pref;

static const uint32_t ALGO_MAGIC = 0x78656e74u;     /* written into the algorithm */
static const size_t ALGO_WORKSPACE = 4096;          /* what the algorithm asks for */
static int handles_live = 0;

EXPORT status_t API(Create)(handle_t* handle) {
  *handle = (handle_t)malloc(1);
  ++handles_live;
  return OK;
}
EXPORT status_t API(Destroy)(handle_t handle) {
  if (!handle) return INVALID;
  free((void*)handle);
  --handles_live;
  return OK;
}
EXPORT int fake_blaslt_handles_live(void) { return handles_live; }

#ifdef FAKE_CUBLASLT
EXPORT const char* API(GetStatusString)(cublasStatus_t st) { return st == OK ? "SUCCESS" : "FAKE_FAILURE"; }
#else
EXPORT status_t API(GetVersion)(handle_t handle, int* version) {
  if (!handle) return INVALID;
  *version = fake_blaslt_version;
  return OK;
}
#endif

EXPORT status_t API(MatmulDescCreate)(desc_t* desc, compute_t compute, type_t scale) {
  fake_desc* d = calloc(1, sizeof *d);
  d->compute = (int)compute, d->scale = (int)scale, d->op_a = OP_N, d->op_b = OP_N, d->epilogue = E_DEFAULT;
  d->bias_type = -1;
  *desc = (desc_t)(void*)d;
  return OK;
}
EXPORT status_t API(MatmulDescDestroy)(desc_t desc) {
  free((void*)desc);
  return OK;
}
EXPORT status_t API(MatmulDescSetAttribute)(desc_t desc, desc_attr_t attr, const void* buf, size_t bytes) {
  fake_desc* d = (fake_desc*)(void*)desc;
  int32_t v32 = 0;
  if (bytes == 4) memcpy(&v32, buf, 4);
  switch ((int)attr) {
    case A_TRANSA:
      if (bytes != 4 || (v32 != OP_N && v32 != OP_T)) return INVALID;
      d->op_a = v32;
      return OK;
    case A_TRANSB:
      if (bytes != 4 || (v32 != OP_N && v32 != OP_T)) return INVALID;
      d->op_b = v32;
      return OK;
    case A_EPILOGUE:
      if (bytes != 4 || (v32 != E_DEFAULT && v32 != E_BIAS)) return INVALID;
      d->epilogue = v32;
      return OK;
    case A_BIAS:
      if (bytes != sizeof(void*)) return INVALID;
      memcpy(&d->bias, buf, sizeof(void*));
      return OK;
    case A_BIAS_TYPE:
      if (bytes != 4) return INVALID;
      d->bias_type = v32;
      return OK;
    default: return UNSUPPORTED;
  }
}

EXPORT status_t API(MatrixLayoutCreate)(layout_t* layout, type_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (ld < 0 || (uint64_t)ld < rows || rows == 0 || cols == 0) return INVALID;
  fake_layout* l = malloc(sizeof *l);
  l->type = (int)type, l->rows = rows, l->cols = cols, l->ld = ld;
  *layout = (layout_t)(void*)l;
  return OK;
}
EXPORT status_t API(MatrixLayoutDestroy)(layout_t layout) {
  free((void*)layout);
  return OK;
}

EXPORT status_t API(MatmulPreferenceCreate)(pref_t* pref) {
  *pref = (pref_t)calloc(1, sizeof(fake_pref));
  return OK;
}
EXPORT status_t API(MatmulPreferenceDestroy)(pref_t pref) {
  free((void*)pref);
  return OK;
}
EXPORT status_t API(MatmulPreferenceSetAttribute)(pref_t pref, pref_attr_t attr, const void* buf, size_t bytes) {
  fake_pref* p = (fake_pref*)(void*)pref;
#ifdef FAKE_ALIGNMENT_RULES
  const int aligns[4] = {P_ALIGN_A, P_ALIGN_B, P_ALIGN_C, P_ALIGN_D};
  for (int i = 0; i < 4; ++i) {
    if ((int)attr != aligns[i]) continue;
    if (bytes != 4) return INVALID;
    memcpy(&p->min_align[i], buf, 4);
    return OK;
  }
#endif
  if ((int)attr != P_MAX_WS || bytes != 8) return UNSUPPORTED;
  memcpy(&p->max_workspace, buf, 8);
  return OK;
}

/* The alignment the heuristic's algorithm needs of every operand: the
   least it was told of any, 256 where untold. */
static uint32_t algo_alignment(const fake_pref* p) {
  uint32_t need = 256;
  for (int i = 0; i < 4; ++i) {
    const uint32_t told = p->min_align[i] ? p->min_align[i] : 256;
    if (told < need) need = told;
  }
  return need;
}

static int type_ok(int t) { return t == T_F32 || t == T_F64 || t == T_F16 || t == T_BF16; }

/* The shapes chain, the types agree (A and B one type, C and D one type:
   theirs, or f32 for f16/bf16 A and B), the compute and scale types are the
   ones the libraries accept for the element type. */
static status_t check(const fake_desc* d, const fake_layout* a, const fake_layout* b, const fake_layout* c,
                      const fake_layout* dl) {
  const uint64_t m = d->op_a == OP_N ? a->rows : a->cols, k = d->op_a == OP_N ? a->cols : a->rows;
  const uint64_t kb = d->op_b == OP_N ? b->rows : b->cols, n = d->op_b == OP_N ? b->cols : b->rows;
  if (k != kb || c->rows != m || c->cols != n || dl->rows != m || dl->cols != n) return INVALID;
  const int half = a->type == T_F16 || a->type == T_BF16;
  if (!type_ok(a->type) || a->type != b->type || c->type != dl->type) return UNSUPPORTED;
  if (c->type != a->type && !(half && c->type == T_F32)) return UNSUPPORTED;
  const int f64 = a->type == T_F64;
  if (d->compute != (f64 ? C_64F : C_32F) || d->scale != (f64 ? T_F64 : T_F32)) return UNSUPPORTED;
  if (d->epilogue == E_BIAS && (!d->bias || (d->bias_type != a->type && d->bias_type != d->scale))) return INVALID;
  return OK;
}

EXPORT status_t API(MatmulAlgoGetHeuristic)(handle_t handle, desc_t desc, layout_t a, layout_t b, layout_t c,
                                           layout_t dl, pref_t pref, int requested, result_t results[],
                                           int* returned) {
  if (!handle || requested < 1) return INVALID;
  ++fake_blaslt_heuristics;
  const status_t st = check((fake_desc*)(void*)desc, (fake_layout*)(void*)a, (fake_layout*)(void*)b,
                            (fake_layout*)(void*)c, (fake_layout*)(void*)dl);
  if (st != OK) return st;
  *returned = 0;
  if (fake_blaslt_no_algorithm || ((fake_pref*)(void*)pref)->max_workspace < ALGO_WORKSPACE) return OK;
  /* The algorithm is the result's first member in both libraries: the
     magic, the alignment it needs, its number. */
  const uint32_t need = algo_alignment((fake_pref*)(void*)pref);
  const int offered = fake_blaslt_algorithms < requested ? fake_blaslt_algorithms : requested;
  for (int i = 0; i < offered; ++i) {
    const uint32_t number = (uint32_t)i;
    memset(&results[i], 0xa5, sizeof results[i]);
    memcpy(&results[i], &ALGO_MAGIC, sizeof ALGO_MAGIC);
    memcpy((char*)&results[i] + sizeof ALGO_MAGIC, &need, sizeof need);
    memcpy((char*)&results[i] + 2 * sizeof ALGO_MAGIC, &number, sizeof number);
#ifdef FAKE_CUBLASLT
    results[i].workspaceSize = ALGO_WORKSPACE;
    results[i].state = i == fake_blaslt_unfit_algorithm ? UNSUPPORTED : OK; /* OK: the other fields are valid */
    results[i].wavesCount = 1.0f;
#endif
  }
  *returned = offered;
  return OK;
}

/* The library's element type as xent's, for numeric.h's load and store
   (f16/bf16 rounded through float, as the libraries' epilogues do). */
static xent_dtype dtype_of(int type) {
  return type == T_F64 ? XENT_F64 : type == T_F16 ? XENT_F16 : type == T_BF16 ? XENT_BF16 : XENT_F32;
}
static double load(int type, const void* p, uint64_t i) { return xent_load(dtype_of(type), p, (int64_t)i); }
static void store(int type, void* p, uint64_t i, double v) { xent_store(dtype_of(type), p, (int64_t)i, v); }

EXPORT status_t API(Matmul)(handle_t handle, desc_t desc, const void* alpha, const void* A, layout_t a_layout,
                            const void* B, layout_t b_layout, const void* beta, const void* C, layout_t c_layout,
                            void* D, layout_t d_layout, const algo_t* algo, void* workspace, size_t workspace_bytes,
                            stream_t stream) {
  (void)stream;
  const fake_desc* d = (fake_desc*)(void*)desc;
  const fake_layout *la = (fake_layout*)(void*)a_layout, *lb = (fake_layout*)(void*)b_layout;
  const fake_layout *lc = (fake_layout*)(void*)c_layout, *ld = (fake_layout*)(void*)d_layout;
  if (!handle) return INVALID;
  const status_t st = check(d, la, lb, lc, ld);
  if (st != OK) return st;
  uint32_t magic, need, number;
  memcpy(&magic, algo, sizeof magic);
  memcpy(&need, (const char*)algo + sizeof magic, sizeof need);
  memcpy(&number, (const char*)algo + 2 * sizeof magic, sizeof number);
  if (magic != ALGO_MAGIC || number >= (uint32_t)fake_blaslt_algorithms || workspace_bytes < ALGO_WORKSPACE ||
      !workspace)
    return INVALID;
#ifdef FAKE_ALIGNMENT_RULES
  if ((uintptr_t)A % need || (uintptr_t)B % need || (uintptr_t)C % need || (uintptr_t)D % need ||
      (uintptr_t)workspace % 256)
    return INVALID;
#endif
  const int f64 = la->type == T_F64;
  const double al = f64 ? *(const double*)alpha : *(const float*)alpha;
  const double be = f64 ? *(const double*)beta : *(const float*)beta;
  const uint64_t m = ld->rows, n = ld->cols, k = d->op_a == OP_N ? la->cols : la->rows;
  /* Every output first, then the stores: C and D may be the same memory. */
  double* out = malloc(sizeof(double) * m * n);
  for (uint64_t j = 0; j < n; ++j) {
    for (uint64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (uint64_t l = 0; l < k; ++l) {
        const uint64_t ia = d->op_a == OP_N ? i + l * (uint64_t)la->ld : l + i * (uint64_t)la->ld;
        const uint64_t ib = d->op_b == OP_N ? l + j * (uint64_t)lb->ld : j + l * (uint64_t)lb->ld;
        acc += load(la->type, A, ia) * load(lb->type, B, ib);
      }
      double v = al * acc;
      if (be != 0) v += be * load(lc->type, C, i + j * (uint64_t)lc->ld);
      if (d->epilogue == E_BIAS) v += load(d->bias_type, d->bias, i);
      out[i + j * m] = v;
    }
  }
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) store(ld->type, D, i + j * (uint64_t)ld->ld, out[i + j * m]);
  free(out);
  ++fake_blaslt_calls;
  fake_blaslt_last_algorithm = (int)number;
  return OK;
}
