// exp, log, tanh and the soft cap in the accumulation type.
#pragma once

#include "target.h"

// exp and log in the accumulation type. exp2 with log2(e) folded in is one
// hardware instruction plus a multiply on both vendors. The argument is
// always a difference taken first (x - m), never folded into one FMA as
// x*log2(e) - m*log2(e): that would cost the rounding of m*log2(e), |m| ulps,
// and with it the shift invariance. On CUDA, ex2.approx.ftz: without the
// fix-up for results below 2^-126 (a probability that small is 0 here). On
// AMD, v_exp_f32 alone (__builtin_amdgcn_exp2f): exp2f adds that fix-up, a
// compare, two selects and a multiply per element. xent_exp2 is that
// instruction.
// log2(e) in float, the one constant every float exp here multiplies by
// (a macro, not a constexpr variable: a device function may not take the
// address of a host variable, which a reference parameter would).
#define XENT_LOG2E 1.4426950408889634f
#if defined(__CUDA_ARCH__) && !defined(XENT_EMU)
XENT_DEVICE float xent_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#elif defined(__AMDGCN__) && !defined(XENT_EMU)
// (Nested: a compiler without __has_builtin, which only clang's AMD device
// pass never is, must not meet it in an #elif.) clang-15 has no builtin.
#if __has_builtin(__builtin_amdgcn_exp2f)
XENT_DEVICE float xent_exp2(float x) { return __builtin_amdgcn_exp2f(x); }
#else
XENT_DEVICE float xent_exp2(float x) { return exp2f(x); }
#endif
#else
XENT_DEVICE float xent_exp2(float x) { return exp2f(x); }
#endif
XENT_DEVICE float xent_exp(float x) { return xent_exp2(x * XENT_LOG2E); }
XENT_DEVICE double xent_exp(double x) { return exp(x); }
// exp(d - lr) for d = x - m (taken first, exact near the max) and a row's
// lr: d * log2(e) - lr * log2(e) in one FFMA into the ex2, with lr * log2(e)
// (xent_exp_shift_of(lr)) rounded once per row. That rounding is |lr|
// 2^-24 (lr is at most log C, under 50), under the rounding of d - lr it
// replaces, and the same for every element of the row: an FADD less per
// element than xent_exp((x - m) - lr). f64 keeps exp(d - lr).
XENT_DEVICE float xent_exp_shift_of(float lr) { return lr * XENT_LOG2E; }
XENT_DEVICE double xent_exp_shift_of(double lr) { return lr; }
XENT_DEVICE float xent_exp_shifted(float d, float lr2) { return xent_exp2(fmaf(d, XENT_LOG2E, -lr2)); }

// Pairs of f32 operations (xent_f2). On sm_100 and later (Blackwell) each is
// one packed instruction, fma/add/mul.rn.f32x2 (FFMA2, FADD2, FMUL2, a
// broadcast operand free), which nvcc never forms from scalar code; on
// older GPUs, AMD and the emulator, two scalar operations. Each half is the
// same round-to-nearest operation either way. The row walks' per-element
// math goes through them a pair of elements at a time, halving its issue
// slots on sm_100.
struct xent_f2 {
  float a, b;
};
XENT_DEVICE xent_f2 xent_f2_splat(float v) { return xent_f2{v, v}; }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && !defined(XENT_EMU)
XENT_DEVICE xent_f2 xent_fma2(xent_f2 x, xent_f2 y, xent_f2 z) {
  xent_f2 r;
  asm("{.reg .b64 x, y, z, r;\n\tmov.b64 x, {%2, %3};\n\tmov.b64 y, {%4, %5};\n\tmov.b64 z, {%6, %7};\n\t"
      "fma.rn.f32x2 r, x, y, z;\n\tmov.b64 {%0, %1}, r;}"
      : "=f"(r.a), "=f"(r.b)
      : "f"(x.a), "f"(x.b), "f"(y.a), "f"(y.b), "f"(z.a), "f"(z.b));
  return r;
}
XENT_DEVICE xent_f2 xent_add2(xent_f2 x, xent_f2 y) {
  xent_f2 r;
  asm("{.reg .b64 x, y, r;\n\tmov.b64 x, {%2, %3};\n\tmov.b64 y, {%4, %5};\n\t"
      "add.rn.f32x2 r, x, y;\n\tmov.b64 {%0, %1}, r;}"
      : "=f"(r.a), "=f"(r.b)
      : "f"(x.a), "f"(x.b), "f"(y.a), "f"(y.b));
  return r;
}
XENT_DEVICE xent_f2 xent_mul2(xent_f2 x, xent_f2 y) {
  xent_f2 r;
  asm("{.reg .b64 x, y, r;\n\tmov.b64 x, {%2, %3};\n\tmov.b64 y, {%4, %5};\n\t"
      "mul.rn.f32x2 r, x, y;\n\tmov.b64 {%0, %1}, r;}"
      : "=f"(r.a), "=f"(r.b)
      : "f"(x.a), "f"(x.b), "f"(y.a), "f"(y.b));
  return r;
}
#else
XENT_DEVICE xent_f2 xent_fma2(xent_f2 x, xent_f2 y, xent_f2 z) {
  return xent_f2{fmaf(x.a, y.a, z.a), fmaf(x.b, y.b, z.b)};
}
XENT_DEVICE xent_f2 xent_add2(xent_f2 x, xent_f2 y) { return xent_f2{x.a + y.a, x.b + y.b}; }
XENT_DEVICE xent_f2 xent_mul2(xent_f2 x, xent_f2 y) { return xent_f2{x.a * y.a, x.b * y.b}; }
#endif
XENT_DEVICE xent_f2 xent_exp2_2(xent_f2 x) { return xent_f2{xent_exp2(x.a), xent_exp2(x.b)}; }
XENT_DEVICE double xent_exp_shifted(double d, double lr) { return exp(d - lr); }

// In place, a vector's x_j -> exp(x_j - m - lr) (lr2 = xent_exp_shift_of(lr)):
// the softmax's output and the gradient's probabilities. float in pairs
// (xent_f2).
template <typename A, int N>
XENT_DEVICE void xent_exp_shifted_n(A (&x)[N], A m, A lr2) {
  XENT_UNROLL
  for (int k = 0; k < N; ++k) x[k] = xent_exp_shifted(x[k] - m, lr2);
}
template <int N>
XENT_DEVICE void xent_exp_shifted_n(float (&x)[N], float m, float lr2) {
  static_assert(N % 2 == 0, "16-byte vectors hold an even number of floats");
  const xent_f2 neg = xent_f2_splat(-m), log2e = xent_f2_splat(XENT_LOG2E), shift = xent_f2_splat(-lr2);
  XENT_UNROLL
  for (int k = 0; k < N; k += 2) {
    const xent_f2 q = xent_exp2_2(xent_fma2(xent_add2(xent_f2{x[k], x[k + 1]}, neg), log2e, shift));
    x[k] = q.a;
    x[k + 1] = q.b;
  }
}

// A vector's plain gradient terms: p_j = exp(x_j - m - lr) and d_j = coef *
// p_j.
template <typename A, int N>
XENT_DEVICE void xent_scaled_probs_n(const A (&x)[N], A m, A lr2, A coef, A (&p)[N], A (&d)[N]) {
  for (int k = 0; k < N; ++k) p[k] = x[k];
  xent_exp_shifted_n(p, m, lr2);
  XENT_UNROLL
  for (int k = 0; k < N; ++k) d[k] = coef * p[k];
}
template <int N>
XENT_DEVICE void xent_scaled_probs_n(const float (&x)[N], float m, float lr2, float coef, float (&p)[N],
                                     float (&d)[N]) {
  for (int k = 0; k < N; ++k) p[k] = x[k];
  xent_exp_shifted_n(p, m, lr2);
  const xent_f2 c = xent_f2_splat(coef);
  XENT_UNROLL
  for (int k = 0; k < N; k += 2) {
    const xent_f2 g = xent_mul2(c, xent_f2{p[k], p[k + 1]});
    d[k] = g.a;
    d[k + 1] = g.b;
  }
}
XENT_DEVICE float xent_log(float x) { return logf(x); }
XENT_DEVICE double xent_log(double x) { return log(x); }
XENT_DEVICE float xent_tanh(float x) { return tanhf(x); }
XENT_DEVICE double xent_tanh(double x) { return tanh(x); }

// Logit soft-capping (Gemma-2): cap * tanh(x / cap).
template <typename A>
XENT_DEVICE A xent_softcap(A x, A cap) {
  return cap * xent_tanh(x / cap);
}

// The running maximum starts at the lowest finite value, not -inf: then an
// element of -inf adds exp(-inf) = 0 instead of exp(-inf - -inf) = NaN, and a
// NaN logit still reaches the sum (x > m is false, exp(NaN) is NaN).
XENT_DEVICE float xent_lowest(float) { return -FLT_MAX; }
XENT_DEVICE double xent_lowest(double) { return -DBL_MAX; }
