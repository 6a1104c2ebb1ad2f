/* Stand-in for parsing only (xentgen --check): the runtime API is declared
   in the stand-in cuda_runtime.h. The HIP-on-CUDA headers include this. */
#pragma once
#include "cuda_runtime.h"
