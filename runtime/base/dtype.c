/* The dtypes' sizes and names, at the bottom of the runtime beside
   status.c: every layer above uses them. */
#include "runtime/base/internal.h"

size_t xent_dtype_bytes(xent_dtype dtype) {
  switch (dtype) {
    case XENT_F32: return 4;
    case XENT_F64: return 8;
    case XENT_F16:
    case XENT_BF16: return 2;
  }
  return 0;
}

size_t xent_acc_bytes(xent_dtype dtype) { return dtype == XENT_F64 ? 8 : 4; }

const char* xent_dtype_name(xent_dtype dtype) {
  switch (dtype) {
    case XENT_F32: return "f32";
    case XENT_F64: return "f64";
    case XENT_F16: return "f16";
    case XENT_BF16: return "bf16";
  }
  return "?";
}
