/* HIP-on-CUDA: HIP's half type and conversions are CUDA's (cuda_fp16.h). */
#ifndef XENT_HIP_ON_CUDA_FP16_H
#define XENT_HIP_ON_CUDA_FP16_H
#include <cuda_fp16.h>
#endif
