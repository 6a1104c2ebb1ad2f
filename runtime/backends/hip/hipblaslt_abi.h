/* The part of hipBLASLt's C ABI that gemm_hip.c uses, declared here because
   Debian ships no hipBLASLt headers (the library itself is loaded with
   dlopen). The values are those of ROCm 6.0 and later (hipBLASLt 0.6 and
   later, where the types became hipDataType and hipblasComputeType_t from
   hipblas-common); ROCm 5's hipBLASLt numbered them differently, and
   gemm_hip.c refuses a library older than 0.6 by its version.

   Handles, descriptors and layouts are opaque pointers. The heuristic's
   result struct begins with the algorithm struct, whose size changed
   between releases: gemm_hip.c gives the library room for a far larger
   struct and passes the algorithm by its address, so no size is assumed. */
#ifndef XENT_HIPBLASLT_ABI_H
#define XENT_HIPBLASLT_ABI_H

#include <stddef.h>
#include <stdint.h>

/* hipblasStatus_t: 0 success, then (1..11) not initialized, alloc failed,
   invalid value, mapping error, execution failed, internal error, not
   supported, arch mismatch, handle is nullptr, invalid enum, unknown. */
typedef int hipblaslt_status;
enum { HIPBLASLT_ABI_STATUS_SUCCESS = 0, HIPBLASLT_ABI_STATUS_NOT_SUPPORTED = 7 };

/* hipDataType (hip/library_types.h) */
enum { HIPBLASLT_ABI_R_32F = 0, HIPBLASLT_ABI_R_64F = 1, HIPBLASLT_ABI_R_16F = 2, HIPBLASLT_ABI_R_16BF = 14 };
/* hipblasComputeType_t (hipblas-common.h) */
enum { HIPBLASLT_ABI_COMPUTE_32F = 2, HIPBLASLT_ABI_COMPUTE_64F = 7 };
/* hipblasOperation_t */
enum { HIPBLASLT_ABI_OP_N = 111, HIPBLASLT_ABI_OP_T = 112 };
/* hipblasLtMatmulDescAttributes_t */
enum {
  HIPBLASLT_ABI_DESC_TRANSA = 0,
  HIPBLASLT_ABI_DESC_TRANSB = 1,
  HIPBLASLT_ABI_DESC_EPILOGUE = 2,
  HIPBLASLT_ABI_DESC_BIAS_POINTER = 3,
  HIPBLASLT_ABI_DESC_BIAS_DATA_TYPE = 4,
};
/* hipblasLtEpilogue_t */
enum { HIPBLASLT_ABI_EPILOGUE_DEFAULT = 1, HIPBLASLT_ABI_EPILOGUE_BIAS = 4 };
/* hipblasLtMatmulPreferenceAttributes_t */
enum { HIPBLASLT_ABI_PREF_MAX_WORKSPACE_BYTES = 1 };
/* hipblasLtGetVersion: major * 100000 + minor * 100 + patch */
enum { HIPBLASLT_ABI_MIN_VERSION = 600 };

/* Room for one hipblasLtMatmulHeuristicResult_t of any release (ROCm 6's is
   under 200 bytes); the algorithm is its first member. */
typedef struct hipblaslt_heuristic_room {
  _Alignas(16) unsigned char bytes[1024];
} hipblaslt_heuristic_room;

typedef hipblaslt_status (*hipblaslt_create_fn)(void** handle);
typedef hipblaslt_status (*hipblaslt_destroy_fn)(void* handle);
typedef hipblaslt_status (*hipblaslt_version_fn)(void* handle, int* version);
typedef hipblaslt_status (*hipblaslt_desc_create_fn)(void** desc, int compute_type, int scale_type);
typedef hipblaslt_status (*hipblaslt_desc_destroy_fn)(void* desc);
typedef hipblaslt_status (*hipblaslt_desc_set_fn)(void* desc, int attribute, const void* value, size_t bytes);
typedef hipblaslt_status (*hipblaslt_layout_create_fn)(void** layout, int type, uint64_t rows, uint64_t cols,
                                                       int64_t ld);
typedef hipblaslt_status (*hipblaslt_layout_destroy_fn)(void* layout);
typedef hipblaslt_status (*hipblaslt_pref_create_fn)(void** pref);
typedef hipblaslt_status (*hipblaslt_pref_destroy_fn)(void* pref);
typedef hipblaslt_status (*hipblaslt_pref_set_fn)(void* pref, int attribute, const void* value, size_t bytes);
typedef hipblaslt_status (*hipblaslt_heuristic_fn)(void* handle, void* desc, void* a, void* b, void* c, void* d,
                                                   void* pref, int requested, void* results, int* returned);
typedef hipblaslt_status (*hipblaslt_matmul_fn)(void* handle, void* desc, const void* alpha, const void* a,
                                                void* a_layout, const void* b, void* b_layout, const void* beta,
                                                const void* c, void* c_layout, void* d, void* d_layout,
                                                const void* algo, void* workspace, size_t workspace_bytes,
                                                void* stream);

#endif
