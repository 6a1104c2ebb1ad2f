// xentgen --check's stand-in for CUDA's cudaTypedefs.h (and the driver
// types of cuda.h it includes): what kernels/device/tensor_copy.h uses to
// encode a tensor map through the driver's entry point. Declarations only
// (gen/check/cuda/cuda_runtime.h says why).
#pragma once
#include "cuda_runtime.h"

typedef unsigned long long cuuint64_t;
typedef unsigned cuuint32_t;
enum CUresult { CUDA_SUCCESS = 0 };
struct __attribute__((aligned(64))) CUtensorMap {
  cuuint64_t opaque[16];
};
enum CUtensorMapDataType { CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9 };
enum CUtensorMapInterleave { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };
enum CUtensorMapSwizzle { CU_TENSOR_MAP_SWIZZLE_128B = 3 };
enum CUtensorMapL2promotion { CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3 };
enum CUtensorMapFloatOOBfill { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 };
typedef CUresult (*PFN_cuTensorMapEncodeTiled_v12000)(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                                      void* address, const cuuint64_t* dims,
                                                      const cuuint64_t* strides, const cuuint32_t* box,
                                                      const cuuint32_t* steps, CUtensorMapInterleave interleave,
                                                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                                      CUtensorMapFloatOOBfill fill);
