// xentgen --check's stand-in for cuda_fp16.h (cuda_runtime.h says why).
#pragma once
#include "cuda_runtime.h"
struct __half {
  unsigned short x;
};
__device__ float __half2float(__half h);
__device__ __half __float2half_rn(float f);
__device__ __half __ushort_as_half(unsigned short x);
__device__ unsigned short __half_as_ushort(__half h);
