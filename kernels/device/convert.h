// Conversions between the stored dtypes and the accumulation type.
#pragma once

#include "vectors.h"

// bfloat16 is the top half of a float: widening is exact, narrowing rounds
// to nearest even and keeps NaN a (quiet) NaN.
XENT_DEVICE float xent_load_bf16(uint16_t bits) { return __uint_as_float((uint32_t)bits << 16); }
// The rounded word whose top half is v's bfloat16 (xent_store_bf16 and
// xent_store_bf16x2 off CUDA): v + 0x7fff + the lowest kept bit rounds to
// nearest even; a NaN keeps its top half with the quiet bit set (rounding
// could carry it into the exponent, an infinity). Both computed and one
// selected, no branch (a test and an early return became a branch per
// element on AMD): five instructions on gfx942.
XENT_DEVICE uint32_t xent_bf16_word(float v) {
  const uint32_t u = __float_as_uint(v);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return v != v ? u | 0x00400000u : rounded;
}
XENT_DEVICE uint16_t xent_store_bf16(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(XENT_EMU)
  // One F2F instruction (round to nearest even; NaN stays NaN).
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
  return r;
#endif
  return (uint16_t)(xent_bf16_word(v) >> 16);
}
// Two floats into one word of two bfloat16, lo in its low half, each
// rounded as xent_store_bf16 does. On CUDA one F2FP (cvt.rn.bf16x2.f32),
// where an element at a time took an F2FP and a PRMT to place it; on AMD
// the two rounded words' top halves in one v_perm_b32.
XENT_DEVICE uint32_t xent_store_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(XENT_EMU)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
  return (xent_bf16_word(hi) & 0xffff0000u) | (xent_bf16_word(lo) >> 16);
}
// The same for half precision (cvt.rn.f16x2.f32 on CUDA; round to nearest
// even as __float2half_rn).
XENT_DEVICE uint32_t xent_store_f16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(XENT_EMU)
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
  return (uint32_t)xent_store_f16(lo) | ((uint32_t)xent_store_f16(hi) << 16);
}
XENT_DEVICE float xent_load_f32(float v) { return v; }
XENT_DEVICE float xent_store_f32(float v) { return v; }
XENT_DEVICE double xent_load_f64(double v) { return v; }
XENT_DEVICE double xent_store_f64(double v) { return v; }

// xent_store_<dtype> as a function object (xent_output's and
// xent_row_walk2's conversion): an element, and for the 16-bit types two
// into a 32-bit word (pair), which xent_narrow16 builds a vector from.
struct xent_to_bf16 {
  __device__ __forceinline__ uint16_t operator()(float v) const { return xent_store_bf16(v); }
  __device__ __forceinline__ uint32_t pair(float lo, float hi) const { return xent_store_bf16x2(lo, hi); }
};
struct xent_to_f16 {
  __device__ __forceinline__ uint16_t operator()(float v) const { return xent_store_f16(v); }
  __device__ __forceinline__ uint32_t pair(float lo, float hi) const { return xent_store_f16x2(lo, hi); }
};
struct xent_to_f32 {
  __device__ __forceinline__ float operator()(float v) const { return v; }
};
struct xent_to_f64 {
  __device__ __forceinline__ double operator()(double v) const { return v; }
};

// A 16-byte vector's elements in the accumulation type (xent_widen_<dtype>,
// as xent_load_<dtype> on each). The 16-bit types by 32-bit words
// (xent_words16): bf16's even element is its word shifted up, the odd one
// the word's top half masked, one instruction each; widening element by
// element took a PRMT to extract an odd element and a shift to place it
// (1.5 per element on sm_100). On AMD the words come through the four-word
// vector type the load used: through an array of words, or element by
// element, clang took the vector apart into bytes and put each element back
// together (about 20 instructions a vector on gfx942, bf16 and f16 alike,
// where bf16's widening is 8).
#if defined(__AMDGCN__) && !defined(XENT_EMU)
typedef xent_u32x4 xent_words16;
#else
typedef uint32_t xent_words16[4];
#endif
XENT_DEVICE void xent_widen_bf16(const xent_vec16<uint16_t>& c, float (&x)[8]) {
  xent_words16 w;
  memcpy(&w, &c, 16);
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
XENT_DEVICE void xent_widen_f16(const xent_vec16<uint16_t>& c, float (&x)[8]) {
  xent_words16 w;
  memcpy(&w, &c, 16);
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = xent_load_f16((uint16_t)(w[i] & 0xffffu));
    x[2 * i + 1] = xent_load_f16((uint16_t)(w[i] >> 16));
  }
}
XENT_DEVICE void xent_widen_f32(const xent_vec16<float>& c, float (&x)[4]) {
  for (int k = 0; k < 4; ++k) x[k] = c.e[k];
}
XENT_DEVICE void xent_widen_f64(const xent_vec16<double>& c, double (&x)[2]) {
  for (int k = 0; k < 2; ++k) x[k] = c.e[k];
}

// A logits dtype as a family kernel's traits name it (V::D): its storage type
// T, accumulation type A, its conversions, and whether a loss or gradient
// buffer may hold f32 instead (kMixed: f16 and bf16, ONNX Runtime's
// mixed-precision variants).
#define XENT_DTYPE_MEMBERS(name, storage, acc, mixed)                                                                  \
  typedef storage T;                                                                                                   \
  typedef acc A;                                                                                                       \
  typedef xent_to_##name to;                                                                                           \
  static constexpr bool kMixed = mixed;                                                                                \
  static constexpr int kVec = 16 / (int)sizeof(storage);                                                               \
  __device__ __forceinline__ static A load(T v) { return xent_load_##name(v); }                                        \
  __device__ __forceinline__ static T store(A v) { return xent_store_##name(v); }                                      \
  __device__ __forceinline__ static void widen(const xent_vec16<T>& c, A(&x)[kVec]) { xent_widen_##name(c, x); }
struct xent_dtype_bf16 {
  XENT_DTYPE_MEMBERS(bf16, uint16_t, float, true)
};
struct xent_dtype_f16 {
  XENT_DTYPE_MEMBERS(f16, uint16_t, float, true)
};
struct xent_dtype_f32 {
  XENT_DTYPE_MEMBERS(f32, float, float, false)
};
struct xent_dtype_f64 {
  XENT_DTYPE_MEMBERS(f64, double, double, false)
};
#undef XENT_DTYPE_MEMBERS

// One element of storage type T into the accumulation type and back: T is
// the dtype's own, or f32 where a mixed call keeps its loss or gradient so.
template <class D, class T>
XENT_DEVICE typename D::A xent_to_acc(T v) {
  if constexpr (D::kMixed && sizeof(T) == 4) return (typename D::A)v;
  else return D::load(v);
}
template <class D, class T>
XENT_DEVICE T xent_from_acc(typename D::A v) {
  if constexpr (D::kMixed && sizeof(T) == 4) return (T)v;
  else return D::store(v);
}

// An element of a loss or gradient buffer (and of dloss), read into the
// accumulation type or written from it: in the logits dtype, or in f32 where
// the call's flag says so (mixed dtypes only; one uniform branch an access).
template <class D>
XENT_DEVICE typename D::A xent_get(const void* p, int64_t i, bool f32) {
  if constexpr (D::kMixed) {
    if (f32) return xent_to_acc<D>(((const float*)p)[i]);
  }
  return xent_to_acc<D>(((const typename D::T*)p)[i]);
}
template <class D>
XENT_DEVICE void xent_put(void* p, int64_t i, typename D::A v, bool f32) {
  if constexpr (D::kMixed) {
    if (f32) {
      ((float*)p)[i] = xent_from_acc<D, float>(v);
      return;
    }
  }
  ((typename D::T*)p)[i] = xent_from_acc<D, typename D::T>(v);
}
