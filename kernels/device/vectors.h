// 16-byte vectors: loads, stores and the shared-memory stage, and the
// per-element or per-vector call of a walk's function.
#pragma once

#include "target.h"

// A compile-time flag as a type (std::integral_constant without
// <type_traits>), for generic lambdas compiled once per value.
template <bool B>
struct xent_bool {
  static constexpr bool value = B;
};

XENT_DEVICE int64_t xent_min_index(int64_t a, int64_t b) { return a < b ? a : b; }

// 16 bytes of elements of T: the unit of a vector load (ld.global.v4 on
// CUDA, global_load_dwordx4 on AMD).
template <typename T>
struct alignas(16) xent_vec16 {
  T e[16 / sizeof(T)];
};

// A lambda the GPU compiler must inline: clang (HIP) may keep one called
// from two places as a function with a stack frame in scratch memory
// (docs/PERFORMANCE.md, "Why the device code looks as it does"). nvcc
// inlines it anyway, and g++ under the emulator would warn of the attribute.
#if defined(XENT_EMU) || !defined(__clang__)
#define XENT_INLINE_LAMBDA
#else
#define XENT_INLINE_LAMBDA __attribute__((always_inline))
#endif

// One 16-byte load of the vector at p (16-byte aligned). On AMD as four
// 32-bit words, with xent_hold16 where it is used: clang splits a plain copy
// of a struct of 16-bit fields into a load per field (eight
// global_load_ushort where one global_load_dwordx4 does). nvcc keeps the
// copy one ld.global.v4 (LDG.E.128).
// (__AMDGCN__: clang's AMD GPU pass; not its host pass, nor nvcc's compile
// of the HIP rendering through runtime/hip_on_cuda.)
#if defined(__AMDGCN__) && !defined(XENT_EMU)
typedef unsigned int xent_u32x4 __attribute__((ext_vector_type(4)));
#endif
template <typename T>
XENT_DEVICE xent_vec16<T> xent_load16(const xent_vec16<T>* p) {
#if defined(XENT_EMU)
  return XENT_LD(p);
#elif defined(__AMDGCN__)
  const xent_u32x4 w = *(const xent_u32x4*)p;
  xent_vec16<T> v;
  memcpy(&v, &w, 16);
  return v;
#else
  return *p;
#endif
}

// Where a loaded vector is first used, as a whole: on AMD an empty asm takes
// and gives back its 16 bytes, so that the load's one user is not the
// element extracts that the code generator would narrow the load into (a
// global_load_ushort each, LLVM's DAG combine of an extract of a load); the
// load stays one global_load_dwordx4, waited for here, where it is used
// anyway. Nothing on CUDA or under the emulator.
template <typename T>
XENT_DEVICE void xent_hold16(xent_vec16<T>& v) {
#if defined(__AMDGCN__) && !defined(XENT_EMU)
  xent_u32x4 w;
  memcpy(&w, &v, 16);
  asm("" : "+v"(w));
  memcpy(&v, &w, 16);
#endif
  (void)v;
}

// One 16-byte store of v at dst (16-byte aligned). Through uint4: nvcc
// splits a plain copy of a struct of eight 16-bit fields into narrower
// stores.
template <typename T>
XENT_DEVICE void xent_store16(void* dst, const xent_vec16<T>& v) {
#if defined(XENT_EMU)
  xent_emu_global_access(dst, 16, 1, __FILE__, __LINE__);
  memcpy(dst, &v, 16);
#else
  uint4 u;
  memcpy(&u, &v, 16);
  *(uint4*)dst = u;
#endif
}

// Four floats in one 16-byte store at dst (16-byte aligned), as a float4
// built from them: through an xent_vec16<float> and memcpy, clang (HIP)
// split the vector into bytes held in registers across the whole row loop.
XENT_DEVICE void xent_store16f(float* dst, float a, float b, float c, float d) {
#if defined(XENT_EMU)
  const float v[4] = {a, b, c, d};
  xent_emu_global_access(dst, 16, 1, __FILE__, __LINE__);
  memcpy(dst, v, 16);
#else
  *(float4*)dst = make_float4(a, b, c, d);
#endif
}

// d's elements converted by cvt (an xent_to_<dtype>) into one 16-byte vector
// of T: 16-bit types by 32-bit words, two elements each. Element by element
// into a struct of 16-bit fields, clang (HIP) took the vector apart into
// bytes and put it back together (about 20 instructions a bf16 vector on
// gfx942), and nvcc placed each element with a PRMT.
template <typename T, typename A, int N, typename Cvt>
XENT_DEVICE xent_vec16<T> xent_narrow16(const A (&d)[N], const Cvt& cvt) {
  xent_vec16<T> v;
  if constexpr (sizeof(T) == 2) {
    uint32_t w[4];
    XENT_UNROLL
    for (int i = 0; i < 4; ++i) w[i] = cvt.pair(d[2 * i], d[2 * i + 1]);
    memcpy(&v, w, 16);
  } else {
    XENT_UNROLL
    for (int k = 0; k < N; ++k) v.e[k] = cvt(d[k]);
  }
  return v;
}

// 16 bytes into and out of a staging array in shared memory (a T array from
// XENT_SHARED_ARRAY16; i a multiple of 16 / sizeof(T)). Under the emulator
// element by element, so that the race detector sees each element.
template <typename T, typename Stage>
XENT_DEVICE void xent_stage_put16(Stage stage, int64_t i, const xent_vec16<T>& v) {
#if defined(XENT_EMU)
  for (int64_t k = 0; k < (int64_t)(16 / sizeof(T)); ++k) stage[i + k] = v.e[k];
#else
  uint4 u;
  memcpy(&u, &v, 16);
  *(uint4*)&stage[i] = u;
#endif
}
template <typename T, typename Stage>
XENT_DEVICE xent_vec16<T> xent_stage_get16(Stage stage, int64_t i) {
  xent_vec16<T> v;
#if defined(XENT_EMU)
  for (int64_t k = 0; k < (int64_t)(16 / sizeof(T)); ++k) v.e[k] = stage[i + k];
#else
  const uint4 u = *(const uint4*)&stage[i];
  memcpy(&v, &u, 16);
#endif
  return v;
}

// A walk's f given per element, f.one(j, raw), and for a whole 16-byte
// vector, f.vec(j0, chunk, out) filling out[k] with element j0 + k's result:
// where a vector's results share work that one element at a time would
// repeat (the gradient's label test, once per vector). xent_out takes whole
// vectors through vec, single elements through one; xent_call_one and
// xent_call_vec call either kind of f.
template <typename F1, typename FV>
struct xent_per_vec {
  F1 one;
  FV vec;
};
template <typename F1, typename FV>
XENT_DEVICE xent_per_vec<F1, FV> xent_with_vec(F1 one, FV vec) {
  return xent_per_vec<F1, FV>{one, vec};
}
template <typename F, typename T>
XENT_DEVICE auto xent_call_one(F& f, int64_t j, T raw) {
  return f(j, raw);
}
template <typename F1, typename FV, typename T>
XENT_DEVICE auto xent_call_one(xent_per_vec<F1, FV>& f, int64_t j, T raw) {
  return f.one(j, raw);
}
template <typename F, typename T, typename A, int N>
XENT_DEVICE void xent_call_vec(F& f, int64_t j0, const xent_vec16<T>& chunk, A (&d)[N]) {
  for (int k = 0; k < N; ++k) d[k] = f(j0 + k, chunk.e[k]);
}
template <typename F1, typename FV, typename T, typename A, int N>
XENT_DEVICE void xent_call_vec(xent_per_vec<F1, FV>& f, int64_t j0, const xent_vec16<T>& chunk, A (&d)[N]) {
  f.vec(j0, chunk, d);
}
