#include "numeric.h"

#include <math.h>
#include <string.h>

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float xent_f16_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  /* Zero or subnormal: man * 2^-24, exact in float. */
  const float v = (float)man * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

uint16_t xent_float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (abs < 0x38800000u) {
    /* Below the smallest normal half (2^-14): round to a multiple of 2^-24. */
    const float scaled = bits_float(abs) * 16777216.0f; /* exact: times 2^24 */
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled)); /* FE_TONEAREST: ties to even */
  }
  /* Normal: drop 13 mantissa bits with round-to-nearest-even; a carry into
     the exponent is the correct result. */
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

float xent_bf16_to_float(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

uint16_t xent_float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

double xent_load(xent_dtype dtype, const void* base, int64_t i) {
  switch (dtype) {
    case XENT_F32: return ((const float*)base)[i];
    case XENT_F64: return ((const double*)base)[i];
    case XENT_F16: return xent_f16_to_float(((const uint16_t*)base)[i]);
    case XENT_BF16: return xent_bf16_to_float(((const uint16_t*)base)[i]);
  }
  return NAN;
}

void xent_store(xent_dtype dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case XENT_F32: ((float*)base)[i] = (float)v; break;
    case XENT_F64: ((double*)base)[i] = v; break;
    case XENT_F16: ((uint16_t*)base)[i] = xent_float_to_f16((float)v); break;
    case XENT_BF16: ((uint16_t*)base)[i] = xent_float_to_bf16((float)v); break;
  }
}

xent_dtype xent_acc_dtype(xent_dtype dtype) { return dtype == XENT_F64 ? XENT_F64 : XENT_F32; }

int64_t xent_load_label(xent_label_type type, const void* base, int64_t i) {
  return type == XENT_I32 ? (int64_t)((const int32_t*)base)[i] : ((const int64_t*)base)[i];
}
