/* The fused linear cross entropy's GEMMs on the CUDA backend: cuBLASLt,
   loaded with dlopen on first use (as nccl.c loads NCCL), so that libxent
   neither links against it nor fails to load where it is absent. The types
   and constants are cublasLt.h's (the CUDA toolkit the backend is built
   with); only the entry points are looked up at run time. xent's GEMMs are
   row-major, cuBLASLt's column-major: gemm_layout.h maps one to the other.

   Compiled with XENT_GEMM_FOR_HIP, this file is the HIP backend's GEMM in
   the HIP-on-CUDA build (runtime/hip_on_cuda), where hipBLASLt would itself
   be cuBLASLt: it then defines xent_hip_gemm and xent_hip_gemm_free. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/backend/backend.h"
#include "runtime/backends/cuda/cuda_device.h"
#include "runtime/base/dynlib.h"
#include "runtime/backends/gemm_algos.h"
#include "runtime/backends/gemm_layout.h"

#ifdef XENT_GEMM_FOR_HIP
#define GEMM_ENTRY xent_hip_gemm
#define GEMM_FREE xent_hip_gemm_free
#else
#define GEMM_ENTRY xent_cuda_gemm
#define GEMM_FREE xent_cuda_gemm_free
#endif

typedef struct cublaslt_lib {
  int loaded;
  char why[256];
  __typeof__(cublasLtCreate)* create;
  __typeof__(cublasLtDestroy)* destroy;
  __typeof__(cublasLtGetStatusString)* status_string;
  __typeof__(cublasLtMatmulDescCreate)* desc_create;
  __typeof__(cublasLtMatmulDescDestroy)* desc_destroy;
  __typeof__(cublasLtMatmulDescSetAttribute)* desc_set;
  __typeof__(cublasLtMatrixLayoutCreate)* layout_create;
  __typeof__(cublasLtMatrixLayoutDestroy)* layout_destroy;
  __typeof__(cublasLtMatmulPreferenceCreate)* pref_create;
  __typeof__(cublasLtMatmulPreferenceDestroy)* pref_destroy;
  __typeof__(cublasLtMatmulPreferenceSetAttribute)* pref_set;
  __typeof__(cublasLtMatmulAlgoGetHeuristic)* heuristic;
  __typeof__(cublasLtMatmul)* matmul;
} cublaslt_lib;

static cublaslt_lib lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char* const sonames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  static const xent_dl_entry entries[] = {
      {(void**)&lt.create, "cublasLtCreate"},
      {(void**)&lt.destroy, "cublasLtDestroy"},
      {(void**)&lt.status_string, "cublasLtGetStatusString"},
      {(void**)&lt.desc_create, "cublasLtMatmulDescCreate"},
      {(void**)&lt.desc_destroy, "cublasLtMatmulDescDestroy"},
      {(void**)&lt.desc_set, "cublasLtMatmulDescSetAttribute"},
      {(void**)&lt.layout_create, "cublasLtMatrixLayoutCreate"},
      {(void**)&lt.layout_destroy, "cublasLtMatrixLayoutDestroy"},
      {(void**)&lt.pref_create, "cublasLtMatmulPreferenceCreate"},
      {(void**)&lt.pref_destroy, "cublasLtMatmulPreferenceDestroy"},
      {(void**)&lt.pref_set, "cublasLtMatmulPreferenceSetAttribute"},
      {(void**)&lt.heuristic, "cublasLtMatmulAlgoGetHeuristic"},
      {(void**)&lt.matmul, "cublasLtMatmul"},
  };
  lt.loaded = xent_dl_load("cuBLASLt", sonames, sizeof sonames / sizeof sonames[0],
                           "put the CUDA toolkit's lib64 on the library path", entries,
                           sizeof entries / sizeof entries[0], lt.why, sizeof lt.why);
}

static cudaDataType_t data_type(xent_dtype t) {
  switch (t) {
    case XENT_F16: return CUDA_R_16F;
    case XENT_BF16: return CUDA_R_16BF;
    case XENT_F64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

static xent_status lt_fail(const char* fn, const char* what, cublasStatus_t st) {
  return xent_fail(XENT_ERROR_BLAS, "%s: cuBLASLt %s failed: %s", fn, what, lt.status_string(st));
}

/* The handle's cuBLASLt handle and the algorithms chosen so far
   (gemm_algos.h), made on first use; two threads sharing an xent handle may
   race to make them: one keeps its own, the other's are freed. */
static xent_status lt_state(xent_handle* h, const char* fn, xent_gemm_state** out) {
  pthread_once(&lt_once, load);
  if (!lt.loaded) return xent_fail(XENT_ERROR_BLAS, "%s: %s", fn, lt.why);
  void* have = __atomic_load_n(&h->gemm, __ATOMIC_ACQUIRE);
  if (!have) {
    cublasLtHandle_t made = NULL;
    const cublasStatus_t st = lt.create(&made);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_fail(fn, "cublasLtCreate", st);
    if (!xent_gemm_state_install(&h->gemm, (void*)made, out)) lt.destroy(made);
    if (!*out) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "%s: no memory for cuBLASLt's state", fn);
    return XENT_OK;
  }
  *out = (xent_gemm_state*)have;
  return XENT_OK;
}

void GEMM_FREE(xent_handle* h) {
  void* library = xent_gemm_state_release(&h->gemm);
  if (library && lt.loaded) lt.destroy((cublasLtHandle_t)library);
}

static xent_status gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                         void* stream);

/* The GEMM runs on the handle's device, whatever is current (cuda_device.h). */
xent_status GEMM_ENTRY(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                       void* stream) {
  int prev;
  xent_status s = xent_cuda_enter(h, fn, &prev);
  if (s != XENT_OK) return s;
  s = gemm(h, fn, g, workspace, workspace_bytes, stream);
  xent_cuda_leave(h, prev);
  return s;
}

static xent_status gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                        void* stream) {
  /* cublasLtMatmul's workspace must be 256-byte aligned: the part of the
     caller's that is. */
  const size_t skip = (256 - (uintptr_t)workspace % 256) % 256;
  workspace = skip < workspace_bytes ? (char*)workspace + skip : NULL;
  workspace_bytes = skip < workspace_bytes ? workspace_bytes - skip : 0;
  xent_status s = xent_gemm_check_types(fn, "cuBLASLt", g);
  if (s != XENT_OK) return s;
  xent_gemm_state* state = NULL; /* set by lt_state when it returns XENT_OK */
  s = lt_state(h, fn, &state);
  if (s != XENT_OK) return s;
  cublasLtHandle_t handle = (cublasLtHandle_t)state->library;
  const int f64 = g->b_dtype == XENT_F64;
  const xent_gemm_column_major cm = xent_gemm_to_column_major(g);
  const cublasOperation_t op_first = cm.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = cm.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t st = lt.desc_create(&desc, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, f64 ? CUDA_R_64F : CUDA_R_32F);
  const char* what = "cublasLtMatmulDescCreate";
  if (st == CUBLAS_STATUS_SUCCESS) {
    what = "cublasLtMatmulDescSetAttribute";
    st = lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second);
    if (st == CUBLAS_STATUS_SUCCESS && g->bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = data_type(g->b_dtype);
      st = lt.desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
      if (st == CUBLAS_STATUS_SUCCESS) st = lt.desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = lt.desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    }
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    what = "cublasLtMatrixLayoutCreate";
    st = lt.layout_create(&la, data_type(g->b_dtype), cm.first.rows, cm.first.cols, cm.first.ld);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt.layout_create(&lb, data_type(g->b_dtype), cm.second.rows, cm.second.cols, cm.second.ld);
    /* C and D: the operands' type, or f32 (f32 compute either way). */
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.layout_create(&lc, data_type(g->c_dtype), cm.rows, cm.cols, cm.ld);
  }
  _Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) <= XENT_GEMM_ALGO_BYTES, "gemm_algos.h's room");
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  /* The heuristic is told each operand's alignment: part of the key. */
  const xent_gemm_key key = xent_gemm_key_of(g, workspace_bytes, 1);
  if (st == CUBLAS_STATUS_SUCCESS && xent_gemm_algo_find(state, &key, &best, sizeof best)) found = 1;
  if (st == CUBLAS_STATUS_SUCCESS && !found) {
    what = "cublasLtMatmulAlgoGetHeuristic";
    const uint64_t max_ws = workspace_bytes;
    st = lt.pref_create(&pref);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    const struct {
      cublasLtMatmulPreferenceAttributes_t attr;
      const void* p;
    } operands[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, cm.first.data},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, cm.second.data},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g->c},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g->c}};
    /* Untold, the heuristic assumes 256 bytes and may pick an algorithm
       that faults on a chunk's rows, which start anywhere a row does. */
    for (size_t i = 0; i < sizeof operands / sizeof operands[0] && st == CUBLAS_STATUS_SUCCESS; ++i) {
      const uint32_t align = xent_gemm_alignment(operands[i].p);
      st = lt.pref_set(pref, operands[i].attr, &align, sizeof align);
    }
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.heuristic(handle, desc, la, lb, lc, lc, pref, 1, &best, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found < 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st == CUBLAS_STATUS_SUCCESS) xent_gemm_algo_keep(state, &key, &best, sizeof best);
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    what = "cublasLtMatmul";
    /* alpha and beta in the scale type: f32, or f64 for f64. */
    const float alpha32 = (float)g->alpha, beta32 = (float)g->beta;
    const void* alpha = f64 ? (const void*)&g->alpha : (const void*)&alpha32;
    const void* beta = f64 ? (const void*)&g->beta : (const void*)&beta32;
    st = lt.matmul(handle, desc, alpha, cm.first.data, la, cm.second.data, lb, beta, g->c, lc, g->c, lc, &best.algo,
                   workspace, workspace_bytes, (cudaStream_t)stream);
  }
  if (pref) lt.pref_destroy(pref);
  if (lc) lt.layout_destroy(lc);
  if (lb) lt.layout_destroy(lb);
  if (la) lt.layout_destroy(la);
  if (desc) lt.desc_destroy(desc);
  if (st != CUBLAS_STATUS_SUCCESS) {
    char shape[160];
    snprintf(shape, sizeof shape, "%s (m %lld, n %lld, k %lld, %s into %s)", what, (long long)g->m, (long long)g->n,
             (long long)g->k, xent_dtype_name(g->b_dtype), xent_dtype_name(g->c_dtype));
    return lt_fail(fn, shape, st);
  }
  return XENT_OK;
}

#ifndef XENT_GEMM_FOR_HIP
xent_status xent_cuda_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream) {
  int prev;
  const xent_status s = xent_cuda_enter(h, fn, &prev);
  if (s != XENT_OK) return s;
  const cudaError_t err = cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream);
  xent_cuda_leave(h, prev);
  if (err != cudaSuccess) return xent_fail(XENT_ERROR_DEVICE, "%s: %s", fn, cudaGetErrorString(err));
  return XENT_OK;
}
#endif
