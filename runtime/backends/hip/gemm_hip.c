/* The fused linear cross entropy's GEMMs on the HIP backend: hipBLASLt,
   loaded with dlopen on first use (as nccl.c loads RCCL), so that libxent
   neither links against it nor fails to load where it is absent. Debian has
   no hipBLASLt headers: hipblaslt_abi.h declares the part used. The call is
   gemm_cuda.c's, through the same column-major mapping (gemm_layout.h).

   The HIP-on-CUDA build (runtime/hip_on_cuda) does not compile this file:
   there hipBLASLt is cuBLASLt, and gemm_cuda.c serves the HIP backend. */
#include <pthread.h>
#include <stdio.h>

#include "runtime/backend/backend.h"
#include "runtime/base/dynlib.h"
#include "runtime/backends/gemm_algos.h"
#include "runtime/backends/gemm_layout.h"
#include "runtime/backends/hip/hipblaslt_abi.h"

typedef struct hipblaslt_lib {
  int loaded;
  char why[256];
  hipblaslt_create_fn create;
  hipblaslt_destroy_fn destroy;
  hipblaslt_version_fn version;
  hipblaslt_desc_create_fn desc_create;
  hipblaslt_desc_destroy_fn desc_destroy;
  hipblaslt_desc_set_fn desc_set;
  hipblaslt_layout_create_fn layout_create;
  hipblaslt_layout_destroy_fn layout_destroy;
  hipblaslt_pref_create_fn pref_create;
  hipblaslt_pref_destroy_fn pref_destroy;
  hipblaslt_pref_set_fn pref_set;
  hipblaslt_heuristic_fn heuristic;
  hipblaslt_matmul_fn matmul;
} hipblaslt_lib;

static hipblaslt_lib lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char* const sonames[] = {"libhipblaslt.so.1", "libhipblaslt.so.0", "libhipblaslt.so"};
  static const xent_dl_entry entries[] = {
      {(void**)&lt.create, "hipblasLtCreate"},
      {(void**)&lt.destroy, "hipblasLtDestroy"},
      {(void**)&lt.version, "hipblasLtGetVersion"},
      {(void**)&lt.desc_create, "hipblasLtMatmulDescCreate"},
      {(void**)&lt.desc_destroy, "hipblasLtMatmulDescDestroy"},
      {(void**)&lt.desc_set, "hipblasLtMatmulDescSetAttribute"},
      {(void**)&lt.layout_create, "hipblasLtMatrixLayoutCreate"},
      {(void**)&lt.layout_destroy, "hipblasLtMatrixLayoutDestroy"},
      {(void**)&lt.pref_create, "hipblasLtMatmulPreferenceCreate"},
      {(void**)&lt.pref_destroy, "hipblasLtMatmulPreferenceDestroy"},
      {(void**)&lt.pref_set, "hipblasLtMatmulPreferenceSetAttribute"},
      {(void**)&lt.heuristic, "hipblasLtMatmulAlgoGetHeuristic"},
      {(void**)&lt.matmul, "hipblasLtMatmul"},
  };
  lt.loaded = xent_dl_load("hipBLASLt", sonames, sizeof sonames / sizeof sonames[0],
                           "put ROCm's lib directory on the library path", entries,
                           sizeof entries / sizeof entries[0], lt.why, sizeof lt.why);
}

static const char* status_name(hipblaslt_status st) {
  static const char* const names[] = {
      "HIPBLAS_STATUS_SUCCESS",          "HIPBLAS_STATUS_NOT_INITIALIZED", "HIPBLAS_STATUS_ALLOC_FAILED",
      "HIPBLAS_STATUS_INVALID_VALUE",    "HIPBLAS_STATUS_MAPPING_ERROR",   "HIPBLAS_STATUS_EXECUTION_FAILED",
      "HIPBLAS_STATUS_INTERNAL_ERROR",   "HIPBLAS_STATUS_NOT_SUPPORTED",   "HIPBLAS_STATUS_ARCH_MISMATCH",
      "HIPBLAS_STATUS_HANDLE_IS_NULLPTR", "HIPBLAS_STATUS_INVALID_ENUM",   "HIPBLAS_STATUS_UNKNOWN",
  };
  return st >= 0 && (size_t)st < sizeof names / sizeof names[0] ? names[st] : "an unknown hipblasStatus_t";
}

static int data_type(xent_dtype t) {
  switch (t) {
    case XENT_F16: return HIPBLASLT_ABI_R_16F;
    case XENT_BF16: return HIPBLASLT_ABI_R_16BF;
    case XENT_F64: return HIPBLASLT_ABI_R_64F;
    default: return HIPBLASLT_ABI_R_32F;
  }
}

static xent_status lt_fail(const char* fn, const char* what, hipblaslt_status st) {
  return xent_fail(XENT_ERROR_BLAS, "%s: hipBLASLt %s failed: %s (%d)", fn, what, status_name(st), st);
}

/* The handle's hipBLASLt handle and the algorithms chosen so far
   (gemm_algos.h), made on first use (a race between two threads sharing an
   xent handle keeps one and frees the other). The library's version is
   checked once per handle: hipblaslt_abi.h holds the ABI of 0.6 and later. */
static xent_status lt_state(xent_handle* h, const char* fn, xent_gemm_state** out) {
  pthread_once(&lt_once, load);
  if (!lt.loaded) return xent_fail(XENT_ERROR_BLAS, "%s: %s", fn, lt.why);
  void* have = __atomic_load_n(&h->gemm, __ATOMIC_ACQUIRE);
  if (!have) {
    void* made = NULL;
    hipblaslt_status st = lt.create(&made);
    if (st != HIPBLASLT_ABI_STATUS_SUCCESS) return lt_fail(fn, "hipblasLtCreate", st);
    int version = 0;
    st = lt.version(made, &version);
    if (st != HIPBLASLT_ABI_STATUS_SUCCESS || version < HIPBLASLT_ABI_MIN_VERSION) {
      lt.destroy(made);
      if (st != HIPBLASLT_ABI_STATUS_SUCCESS) return lt_fail(fn, "hipblasLtGetVersion", st);
      return xent_fail(XENT_ERROR_BLAS, "%s: hipBLASLt %d.%d.%d is older than 0.6 (ROCm 6.0), whose ABI xent uses", fn,
                       version / 100000, version / 100 % 1000, version % 100);
    }
    if (!xent_gemm_state_install(&h->gemm, made, out)) lt.destroy(made);
    if (!*out) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "%s: no memory for hipBLASLt's state", fn);
    return XENT_OK;
  }
  *out = (xent_gemm_state*)have;
  return XENT_OK;
}

void xent_hip_gemm_free(xent_handle* h) {
  void* library = xent_gemm_state_release(&h->gemm);
  if (library && lt.loaded) lt.destroy(library);
}

xent_status xent_hip_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                          void* stream) {
  xent_status s = xent_gemm_check_types(fn, "hipBLASLt", g);
  if (s != XENT_OK) return s;
  xent_gemm_state* state = NULL; /* set by lt_state when it returns XENT_OK */
  s = lt_state(h, fn, &state);
  if (s != XENT_OK) return s;
  void* handle = state->library;
  const int f64 = g->b_dtype == XENT_F64, type = data_type(g->b_dtype);
  const xent_gemm_column_major cm = xent_gemm_to_column_major(g);
  const int32_t op_first = cm.first.transposed ? HIPBLASLT_ABI_OP_T : HIPBLASLT_ABI_OP_N;
  const int32_t op_second = cm.second.transposed ? HIPBLASLT_ABI_OP_T : HIPBLASLT_ABI_OP_N;
  void *desc = NULL, *la = NULL, *lb = NULL, *lc = NULL, *pref = NULL;
  const char* what = "hipblasLtMatmulDescCreate";
  hipblaslt_status st = lt.desc_create(&desc, f64 ? HIPBLASLT_ABI_COMPUTE_64F : HIPBLASLT_ABI_COMPUTE_32F,
                                       f64 ? HIPBLASLT_ABI_R_64F : HIPBLASLT_ABI_R_32F);
  if (st == HIPBLASLT_ABI_STATUS_SUCCESS) {
    what = "hipblasLtMatmulDescSetAttribute";
    st = lt.desc_set(desc, HIPBLASLT_ABI_DESC_TRANSA, &op_first, sizeof op_first);
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS) st = lt.desc_set(desc, HIPBLASLT_ABI_DESC_TRANSB, &op_second, sizeof op_second);
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS && g->bias) {
      const uint32_t epilogue = HIPBLASLT_ABI_EPILOGUE_BIAS;
      const int32_t bias_type = type;
      st = lt.desc_set(desc, HIPBLASLT_ABI_DESC_EPILOGUE, &epilogue, sizeof epilogue);
      if (st == HIPBLASLT_ABI_STATUS_SUCCESS)
        st = lt.desc_set(desc, HIPBLASLT_ABI_DESC_BIAS_POINTER, &g->bias, sizeof g->bias);
      if (st == HIPBLASLT_ABI_STATUS_SUCCESS)
        st = lt.desc_set(desc, HIPBLASLT_ABI_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    }
  }
  if (st == HIPBLASLT_ABI_STATUS_SUCCESS) {
    what = "hipblasLtMatrixLayoutCreate";
    st = lt.layout_create(&la, type, cm.first.rows, cm.first.cols, cm.first.ld);
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS) st = lt.layout_create(&lb, type, cm.second.rows, cm.second.cols, cm.second.ld);
    /* C and D: the operands' type, or f32 (f32 compute either way). */
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS) st = lt.layout_create(&lc, data_type(g->c_dtype), cm.rows, cm.cols, cm.ld);
  }
  _Static_assert(sizeof(hipblaslt_heuristic_room) <= XENT_GEMM_ALGO_BYTES, "gemm_algos.h's room");
  hipblaslt_heuristic_room best;
  int found = 0;
  /* hipBLASLt is not told the operands' alignments: not part of the key. */
  const xent_gemm_key key = xent_gemm_key_of(g, workspace_bytes, 0);
  if (st == HIPBLASLT_ABI_STATUS_SUCCESS && xent_gemm_algo_find(state, &key, &best, sizeof best)) found = 1;
  if (st == HIPBLASLT_ABI_STATUS_SUCCESS && !found) {
    what = "hipblasLtMatmulAlgoGetHeuristic";
    const uint64_t max_ws = workspace_bytes;
    st = lt.pref_create(&pref);
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS)
      st = lt.pref_set(pref, HIPBLASLT_ABI_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS) st = lt.heuristic(handle, desc, la, lb, lc, lc, pref, 1, &best, &found);
    /* No algorithm for this shape and type (f64 on some devices). */
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS && found < 1) st = HIPBLASLT_ABI_STATUS_NOT_SUPPORTED;
    if (st == HIPBLASLT_ABI_STATUS_SUCCESS) xent_gemm_algo_keep(state, &key, &best, sizeof best);
  }
  if (st == HIPBLASLT_ABI_STATUS_SUCCESS) {
    what = "hipblasLtMatmul";
    /* alpha and beta in the scale type: f32, or f64 for f64. */
    const float alpha32 = (float)g->alpha, beta32 = (float)g->beta;
    const void* alpha = f64 ? (const void*)&g->alpha : (const void*)&alpha32;
    const void* beta = f64 ? (const void*)&g->beta : (const void*)&beta32;
    st = lt.matmul(handle, desc, alpha, cm.first.data, la, cm.second.data, lb, beta, g->c, lc, g->c, lc, best.bytes,
                   workspace, workspace_bytes, stream);
  }
  if (pref) lt.pref_destroy(pref);
  if (lc) lt.layout_destroy(lc);
  if (lb) lt.layout_destroy(lb);
  if (la) lt.layout_destroy(la);
  if (desc) lt.desc_destroy(desc);
  if (st != HIPBLASLT_ABI_STATUS_SUCCESS) {
    char shape[160];
    snprintf(shape, sizeof shape, "%s (m %lld, n %lld, k %lld, %s into %s)", what, (long long)g->m, (long long)g->n,
             (long long)g->k, xent_dtype_name(g->b_dtype), xent_dtype_name(g->c_dtype));
    return lt_fail(fn, shape, st);
  }
  return XENT_OK;
}
