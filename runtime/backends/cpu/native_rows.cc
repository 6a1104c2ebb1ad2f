// The cpu backend's own cross entropy and softmax (native.h), compiled once
// per instruction set: plain x86-64 (SSE2) here, and AVX2 with FMA in
// native_avx2.cc, which includes this file; native.c picks one at run time.
// Every row is read once into a buffer of the accumulation type (z: the
// capped logits over the temperature), and every pass over it is a
// contiguous loop that keeps eight partial results, which GCC turns into
// vector instructions; the exponential is a polynomial those loops inline.
// The formulas are the reference's (runtime/reference.c) and the kernels'
// (docs/API.md, "Semantics"); the float64 tests hold this path to them.
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/backends/cpu/native.h"
#include "runtime/numeric.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

// The instruction set's suffix of the entry points (native.h).
#ifndef XENT_NATIVE_ISA
#define XENT_NATIVE_ISA sse2
#endif
#define XENT_NATIVE_CAT2(f, isa) f##_##isa
#define XENT_NATIVE_CAT(f, isa) XENT_NATIVE_CAT2(f, isa)
#define XENT_NATIVE_NAME(f) XENT_NATIVE_CAT(f, XENT_NATIVE_ISA)

namespace {

// exp(x) for x <= 0 and NaN (every exponent here is a logit less the row's
// max, or a log-probability): Cephes' expf, range-reduced by ln 2 and a
// polynomial on [-ln2/2, ln2/2], about 1 ulp; 0 below 2^-126 (the rest is
// nothing beside a row's sum of at least 1). Branch-free, so it vectorizes.
inline float exp_of(float x) {
  // c: x in [-88, 0+], a NaN taken as 0 (its integer conversion below would
  // be undefined); the NaN itself is returned at the end.
  const float c = x < -88.0f ? -88.0f : (x != x ? 0.0f : x);
  // k = round(c / ln 2): adding and taking away 1.5 * 2^23 rounds (|c| / ln 2
  // is far below 2^22), in vector instructions where floor() is a call.
  const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (c - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float e = p * scale;
  return x < -87.0f ? 0.0f : (x != x ? x : e);
}
inline double exp_of(double x) { return std::exp(x); }

// sum over i < n of f(i), in eight running sums (vector lanes).
template <typename A, typename F>
inline A sum8(int64_t n, F f) {
  A acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += f(i + k);
  for (int k = 0; i < n; ++i, ++k) acc[k] += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The row's max. A NaN is not looked for here: it makes the exponentials'
// sum NaN, and with it lr, lse and every output, as the reference's NaN
// max does; only a row whose max is not finite (no sum is taken) is
// scanned for one (row_stats).
template <typename A>
inline A row_max(const A* z, int64_t n) {
  A m[8];
  for (int k = 0; k < 8; ++k) m[k] = -INFINITY;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) m[k] = z[i + k] > m[k] ? z[i + k] : m[k];
  for (int k = 0; i < n; ++i, ++k) m[k] = z[i] > m[k] ? z[i] : m[k];
  A best = -INFINITY;
  for (int k = 0; k < 8; ++k) best = m[k] > best ? m[k] : best;
  return best;
}

// A row's statistics as the reference keeps them: the max m, lr = log sum
// exp(z - m) (NaN where m is not finite: a NaN, or a max of +-inf), and
// lse (+-inf where the max is).
template <typename A>
struct Stats {
  A m, lr, lse;
};
template <typename A>
inline Stats<A> stats_of(A m, A s) {
  const bool finite = std::isfinite(m);
  const A lr = finite ? std::log(s) : A(NAN);
  return {m, lr, finite ? m + lr : m};
}
template <typename A>
inline Stats<A> row_stats(const A* z, int64_t n) {
  const A m = row_max(z, n);
  if (!std::isfinite(m)) {
    for (int64_t c = 0; c < n; ++c)
      if (z[c] != z[c]) return stats_of(A(NAN), A(0));
    return stats_of(m, A(0));
  }
  return stats_of(m, sum8<A>(n, [&](int64_t c) { return exp_of(z[c] - m); }));
}

// Elements in memory: the row of positions first + c * stride, c < n.
template <typename A>
void gather(xent_dtype dt, const void* base, int64_t first, int64_t stride, int64_t n, A* out) {
  switch (dt) {
    case XENT_F32: {
      const float* p = (const float*)base + first;
      for (int64_t c = 0; c < n; ++c) out[c] = (A)p[c * stride];
      break;
    }
    case XENT_F64: {
      const double* p = (const double*)base + first;
      for (int64_t c = 0; c < n; ++c) out[c] = (A)p[c * stride];
      break;
    }
    case XENT_BF16: {
      const uint16_t* p = (const uint16_t*)base + first;
      for (int64_t c = 0; c < n; ++c) {
        const uint32_t u = (uint32_t)p[c * stride] << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        out[c] = (A)f;
      }
      break;
    }
    case XENT_F16: {
      const uint16_t* p = (const uint16_t*)base + first;
      for (int64_t c = 0; c < n; ++c) out[c] = (A)xent_f16_to_float(p[c * stride]);
      break;
    }
  }
}

template <typename A>
void scatter(xent_dtype dt, void* base, int64_t first, int64_t stride, int64_t n, const A* v) {
  switch (dt) {
    case XENT_F32: {
      float* p = (float*)base + first;
      for (int64_t c = 0; c < n; ++c) p[c * stride] = (float)v[c];
      break;
    }
    case XENT_F64: {
      double* p = (double*)base + first;
      for (int64_t c = 0; c < n; ++c) p[c * stride] = (double)v[c];
      break;
    }
    case XENT_BF16: {
      uint16_t* p = (uint16_t*)base + first;
      for (int64_t c = 0; c < n; ++c) p[c * stride] = xent_float_to_bf16((float)v[c]);
      break;
    }
    case XENT_F16: {
      uint16_t* p = (uint16_t*)base + first;
      for (int64_t c = 0; c < n; ++c) p[c * stride] = xent_float_to_f16((float)v[c]);
      break;
    }
  }
}

// Rows [0, rows) split into contiguous runs, one per thread: at most one
// thread per 32K elements, so that a small call does not pay for threads.
// With OpenMP the threads are its pool's, which PyTorch's CPU ops share
// where both use the system's libgomp (Debian's torch): a loss between two
// PyTorch ops then finds its threads spinning, not busy. fn(r0, r1) may
// throw std::bad_alloc.
template <typename F>
xent_status for_rows(int64_t rows, int64_t per_row, F fn) {
  const int64_t work = rows * (per_row > 0 ? per_row : 1);
  int64_t n = xent_cpu_threads();
  if (n > work / 32768) n = work / 32768;
  if (n > rows) n = rows;
  if (n < 1) n = 1;
  std::vector<char> failed((size_t)n, 0);
  auto run = [&](int64_t t) {
    try {
      fn(rows * t / n, rows * (t + 1) / n);
    } catch (const std::bad_alloc&) {
      failed[(size_t)t] = 1;
    }
  };
#if defined(_OPENMP)
#pragma omp parallel for num_threads((int)n) schedule(static, 1)
  for (int64_t t = 0; t < n; ++t) run(t);
#else
  std::vector<std::thread> others;
  try {
    for (int64_t t = 1; t < n; ++t) others.emplace_back(run, t);
  } catch (const std::exception&) {
    // Threads the system would not start: their rows run here.
    for (int64_t t = (int64_t)others.size() + 1; t < n; ++t) run(t);
  }
  run(0);
  for (auto& th : others) th.join();
#endif
  for (char f : failed)
    if (f) return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "cpu backend: out of memory for a row's buffers");
  return XENT_OK;
}

// Row r's first element: rows are positions of [outer, C, inner], the
// class axis inner apart.
inline int64_t row_first(int64_t r, int64_t C, int64_t inner) { return (r / inner) * C * inner + r % inner; }

// The lowest bad row of a run, into the call's word.
void record_bad(unsigned long long* word, unsigned long long row) {
  if (!word || row == XENT_NO_BAD_ROW) return;
  unsigned long long seen = __atomic_load_n(word, __ATOMIC_RELAXED);
  while (row < seen && !__atomic_compare_exchange_n(word, &seen, row, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
}

// One cross-entropy call in accumulation type A.
template <typename A>
struct CrossEntropy {
  const xent_ce_desc* d;
  xent_op op;
  const xent_ce_args* a;
  xent_dtype dt, acc, loss_dt, grad_dt;
  int64_t C, inner;
  bool soft, reduced, forward, backward, weighted;
  A eps, inv_t, cap, zl;
  A denominator = 1, sum_w;

  CrossEntropy(const xent_ce_desc* desc, xent_op o, const xent_ce_args* args) : d(desc), op(o), a(args) { setup(); }

  std::vector<A> w;  // the class weights, or none
  A weight(int64_t c) const { return weighted ? w[(size_t)c] : A(1); }
  int64_t first(int64_t r) const { return row_first(r, C, inner); }
  // Whether hard label y counts as ignored; out of range and not ignored is
  // a bad label (a NaN row, recorded).
  bool ignored(int64_t y) const {
    if (a->ignore_index != XENT_NO_IGNORE_INDEX && y == a->ignore_index) return true;
    return a->ignore_invalid_labels && (y < 0 || y >= C);
  }

  void setup() {
    dt = d->dtype;
    acc = xent_acc_dtype(dt);
    loss_dt = a->loss_f32 ? XENT_F32 : dt;
    grad_dt = a->grad_f32 ? XENT_F32 : dt;
    C = a->classes;
    inner = a->inner < 1 ? 1 : a->inner;
    soft = d->label_type == XENT_PROB;
    reduced = d->reduction != XENT_REDUCTION_NONE;
    forward = op != XENT_OP_BACKWARD;
    backward = op != XENT_OP_FORWARD;
    weighted = a->weights != nullptr;
    eps = (A)a->label_smoothing;
    inv_t = (A)a->inv_temperature;
    cap = (A)a->softcap;
    zl = (A)a->z_loss;
    if (weighted) {
      w.resize((size_t)C);
      for (int64_t c = 0; c < C; ++c) w[(size_t)c] = (A)xent_load(acc, a->weights, c);
    }
    sum_w = 0;
    for (int64_t c = 0; c < C && (backward || eps != 0); ++c) sum_w += weight(c);
    if (d->reduction == XENT_REDUCTION_MEAN) {
      // The token weights in the mean's divisor, unless the call asks for
      // the count (xent_token_weight_mean).
      const bool u_in = a->token_weight && !a->token_weight_count;
      if (soft && !u_in) {
        denominator = (A)a->rows;
      } else {
        double total = 0;
        for (int64_t r = 0; r < a->rows; ++r) {
          const double u = u_in ? (double)token_weight(r) : 1.0;
          if (soft) {
            total += u;
          } else {
            const int64_t y = xent_load_label(d->label_type, a->labels, r);
            if (!ignored(y) && y >= 0 && y < C) total += (double)weight(y) * u;
          }
        }
        denominator = (A)total;
      }
    }
  }

  A token_weight(int64_t r) const { return a->token_weight ? (A)xent_load(acc, a->token_weight, r) : A(1); }

  // 1 / tau of row r: the call's, or its own, NaN where that is not finite
  // and > 0 (then the row is recorded as a bad label's is).
  A row_inv_t(int64_t r, unsigned long long* bad) const {
    if (!a->row_temperature) return inv_t;
    const A tau = (A)xent_load(acc, a->row_temperature, r), it = A(1) / tau;
    if (tau > 0 && std::isfinite(tau) && std::isfinite(it)) return it;
    if ((unsigned long long)r < *bad) *bad = (unsigned long long)r;
    return A(NAN);
  }

  // Rows [r0, r1): their losses (into row_loss for a reduction), outputs and
  // gradients.
  void rows(int64_t r0, int64_t r1, A* row_loss, unsigned long long* bad) const {
    std::vector<A> zb((size_t)C), tb(soft ? (size_t)C : 0), th(cap > 0 && backward ? (size_t)C : 0), out((size_t)C);
    A* z = zb.data();
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = first(r);
      gather(dt, a->logits, at, inner, C, z);
      if (cap > 0) {
        for (int64_t c = 0; c < C; ++c) {
          const A t = std::tanh(z[c] / cap);
          if (!th.empty()) th[(size_t)c] = t;
          z[c] = cap * t;
        }
      }
      const A it = row_inv_t(r, bad);
      if (it != A(1))
        for (int64_t c = 0; c < C; ++c) z[c] *= it;
      // The row's statistics: computed, or for a backward the saved lse
      // (m = lse, lr = 0), as the kernels take them: a saved lse beyond +-64
      // lost the logits' precision in its rounding, and the entropy's
      // gradient needs more than the lse, so those rows are read again.
      Stats<A> st;
      const A saved = op == XENT_OP_BACKWARD && a->lse_in ? (A)xent_load(acc, a->lse_in, r) : A(0);
      if (op == XENT_OP_BACKWARD && a->lse_in && !(saved > A(64) || saved < A(-64) || a->dentropy))
        st = stats_of(saved, A(1));
      else st = row_stats(z, C);
      const A m = st.m, lr = st.lr;
      if (soft) {
        gather(dt, a->labels, at, inner, C, tb.data());
        for (int64_t c = 0; c < C; ++c) tb[(size_t)c] = (1 - eps) * tb[(size_t)c] + eps / (A)C;
      }
      int64_t y = -1;
      bool counted = true, bad_row = false;
      if (!soft) {
        y = xent_load_label(d->label_type, a->labels, r);
        if (ignored(y)) counted = false;
        else if (y < 0 || y >= C) counted = false, bad_row = true;
      }
      if (bad_row && (unsigned long long)r < *bad) *bad = (unsigned long long)r;
      const bool stats = (forward && a->entropy) || (backward && a->dentropy);
      // H = sum p (lse - z) = (sum e (m - z)) / s + lr, e = exp(z - m); a
      // masked class (e = 0) adds nothing.
      A entropy = 0;
      if (stats && (counted || bad_row)) {
        const A s = sum8<A>(C, [&](int64_t c) { return exp_of(z[c] - m); });
        const A t = sum8<A>(C, [&](int64_t c) {
          const A e = exp_of(z[c] - m);
          return e > 0 ? e * (m - z[c]) : A(0);
        });
        entropy = std::isfinite(m) ? t / s + lr : A(NAN);
      }
      if (forward) forward_row(r, at, z, tb.data(), st, y, counted, bad_row, entropy, row_loss);
      if (backward) backward_row(r, at, z, tb.data(), th.data(), st, y, counted, bad_row, entropy, it, out.data());
    }
  }

  void forward_row(int64_t r, int64_t at, const A* z, const A* t, Stats<A> st, int64_t y, bool counted, bool bad_row,
                   A entropy, A* row_loss) const {
    const A m = st.m, lr = st.lr, lse = st.lse;
    A loss;
    if (soft) {
      loss = sum8<A>(C, [&](int64_t c) { return weight(c) * t[c] * ((m - z[c]) + lr); }) + zl * lse * lse;
    } else if (bad_row) {
      loss = A(NAN);
    } else if (!counted) {
      loss = 0;
    } else {
      loss = (1 - eps) * weight(y) * ((m - z[y]) + lr);
      if (eps != 0) {
        const A smooth = weighted ? sum8<A>(C, [&](int64_t c) { return weight(c) * ((m - z[c]) + lr); })
                                  : sum8<A>(C, [&](int64_t c) { return (m - z[c]) + lr; });
        loss += eps / (A)C * smooth;
      }
      loss += zl * lse * lse;
    }
    if (!bad_row && (soft || counted)) {
      const A u = token_weight(r);
      loss = u == 0 ? A(0) : loss * u;
    }
    if (reduced) row_loss[r] = loss;
    else if (a->loss) xent_store(loss_dt, a->loss, r, (double)loss);
    if (a->lse_out) xent_store(acc, a->lse_out, r, (double)lse);
    if (a->entropy) xent_store(acc, a->entropy, r, (double)(counted || bad_row ? entropy : A(0)));
    if (!soft && a->label_logprob)
      xent_store(acc, a->label_logprob, r, (double)(bad_row ? A(NAN) : counted ? (z[y] - m) - lr : A(0)));
    if (!soft && a->argmax) {
      int64_t best = 0;
      for (int64_t c = 0; c < C; ++c) {
        if (z[c] != z[c]) {
          best = c;
          break;
        }
        if (z[c] > z[best]) best = c;
      }
      a->argmax[r] = best;
    }
    if (a->log_prob || a->softmax) {
      std::vector<A> out((size_t)C);
      for (int64_t c = 0; c < C; ++c) out[(size_t)c] = (z[c] - m) - lr;
      if (a->log_prob) scatter(dt, a->log_prob, at, inner, C, out.data());
      if (a->softmax) {
        for (int64_t c = 0; c < C; ++c) out[(size_t)c] = exp_of(out[(size_t)c]);
        scatter(dt, a->softmax, at, inner, C, out.data());
      }
    }
  }

  void backward_row(int64_t r, int64_t at, const A* z, const A* t, const A* th, Stats<A> st, int64_t y, bool counted,
                    bool bad_row, A entropy, A it, A* out) const {
    const A m = st.m, lr = st.lr, lse = st.lse;
    const A upstream = a->dloss ? (A)xent_load(loss_dt, a->dloss, d->reduction == XENT_REDUCTION_NONE ? r : 0) : A(1);
    // The token weight scales the loss's gradient (not the entropy's); a
    // row it weighs out gets none of it.
    const A u = token_weight(r);
    const bool weighed_out = u == 0;
    const A scale = weighed_out ? A(0) : upstream / denominator * u;
    const A de = a->dentropy && (counted || soft) ? (A)xent_load(acc, a->dentropy, r) : A(0);
    if (bad_row) {
      for (int64_t c = 0; c < C; ++c) out[c] = A(NAN);
    } else if (!counted) {
      for (int64_t c = 0; c < C; ++c) out[c] = 0;
    } else {
      if (weighed_out) {
        for (int64_t c = 0; c < C; ++c) out[c] = 0;
      } else {
        A coef = 2 * zl * lse;
        if (soft) coef += sum8<A>(C, [&](int64_t c) { return weight(c) * t[c]; });
        else coef += (1 - eps) * weight(y) + eps / (A)C * sum_w;
        // dz_c = scale * (p_c * coef - the label's part of c) + the entropy's
        // part, a loop each so that each vectorizes (the difference before
        // the scale, as the kernels take it: 0 where it is 0).
        const A smooth = eps / (A)C;
        for (int64_t c = 0; c < C; ++c) out[c] = exp_of((z[c] - m) - lr) * coef;
        if (soft) {
          for (int64_t c = 0; c < C; ++c) out[c] -= weight(c) * t[c];
        } else {
          if (smooth != 0)
            for (int64_t c = 0; c < C; ++c) out[c] -= smooth * weight(c);
          out[y] -= (1 - eps) * weight(y);
        }
        for (int64_t c = 0; c < C; ++c) out[c] *= scale;
      }
      if (de != 0) {
        for (int64_t c = 0; c < C; ++c) {
          const A lp = (z[c] - m) - lr, p = exp_of(lp);
          out[c] += p > 0 ? -de * p * (lp + entropy) : A(0);
        }
      }
      // Through z = cap * tanh(x / cap) / tau.
      if (it != A(1))
        for (int64_t c = 0; c < C; ++c) out[c] *= it;
      if (cap > 0)
        for (int64_t c = 0; c < C; ++c) out[c] *= 1 - th[c] * th[c];
    }
    if (a->grad_bias) {
      std::vector<A> b((size_t)C);
      gather(grad_dt, a->grad_bias, at, inner, C, b.data());
      for (int64_t c = 0; c < C; ++c) out[c] += b[(size_t)c];
    }
    scatter(grad_dt, a->grad, at, inner, C, out);
    if (soft && a->grad_labels) {
      for (int64_t c = 0; c < C; ++c) out[c] = scale * (1 - eps) * weight(c) * ((m - z[c]) + lr);
      scatter(dt, a->grad_labels, at, inner, C, out);
    }
  }

  xent_status run() {
    const int64_t rows = a->rows;
    std::vector<A> losses(forward && reduced ? (size_t)rows : 0);
    A* row_loss = losses.data();
    unsigned long long* word = a->bad_label_row;
    const xent_status s = for_rows(rows, C, [&](int64_t r0, int64_t r1) {
      unsigned long long bad = XENT_NO_BAD_ROW;
      this->rows(r0, r1, row_loss, &bad);
      record_bad(word, bad);
    });
    if (s != XENT_OK || !forward || !reduced) return s;
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += (double)row_loss[r];
    if (d->reduction == XENT_REDUCTION_MEAN)
      total = denominator == 0 && a->all_ignored_zero ? 0.0 : total / (double)denominator;
    if (a->loss) xent_store(loss_dt, a->loss, 0, total);
    return XENT_OK;
  }
};

template <typename A>
xent_status softmax_rows(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* a) {
  const int64_t C = a->classes, inner = a->inner < 1 ? 1 : a->inner;
  const bool log = d->kind == XENT_LOG_SOFTMAX;
  return for_rows(a->rows, C, [&](int64_t r0, int64_t r1) {
    std::vector<A> xb((size_t)C), gb(op == XENT_OP_BACKWARD ? (size_t)C : 0);
    A* x = xb.data();
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = row_first(r, C, inner);
      if (op == XENT_OP_FORWARD) {
        gather(d->dtype, a->x, at, inner, C, x);
        const Stats<A> st = row_stats(x, C);
        for (int64_t c = 0; c < C; ++c) {
          const A lp = (x[c] - st.m) - st.lr;
          x[c] = log ? lp : exp_of(lp);
        }
      } else {
        A* g = gb.data();
        gather(d->dtype, a->y, at, inner, C, x);
        gather(d->dtype, a->dy, at, inner, C, g);
        const A sum =
            log ? sum8<A>(C, [&](int64_t c) { return g[c]; }) : sum8<A>(C, [&](int64_t c) { return g[c] * x[c]; });
        for (int64_t c = 0; c < C; ++c) x[c] = log ? g[c] - exp_of(x[c]) * sum : x[c] * (g[c] - sum);
      }
      scatter(d->dtype, a->out, at, inner, C, x);
    }
  });
}

// xent_ce_scale_grad: grad *= dloss in A, row by row; a row whose factor is
// exactly 1 is not touched (the generated kernels' rescale.h).
template <typename A>
xent_status rescale(const xent_ce_desc* d, const xent_ce_args* a) {
  if (!a->dloss) return XENT_OK;
  const int64_t C = a->classes, inner = a->inner;
  const int none = d->reduction == XENT_REDUCTION_NONE;
  return for_rows(a->rows, C, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const A s = (A)xent_load(d->loss_dtype, a->dloss, none ? r : 0);
      if (s == A(1)) continue;
      const int64_t at = row_first(r, C, inner);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t e = at + c * inner;
        xent_store(d->grad_dtype, a->grad, e, (double)((A)xent_load(d->grad_dtype, a->grad, e) * s));
      }
    }
  });
}

}  // namespace

extern "C" xent_status XENT_NATIVE_NAME(xent_cpu_native_ce)(const xent_ce_desc* d, xent_op op, const xent_ce_args* a) {
  if (a->rescale) return d->dtype == XENT_F64 ? rescale<double>(d, a) : rescale<float>(d, a);
  try {
    if (d->dtype == XENT_F64) {
      CrossEntropy<double> ce(d, op, a);
      return ce.run();
    }
    CrossEntropy<float> ce(d, op, a);
    return ce.run();
  } catch (const std::bad_alloc&) {
    return xent_fail(XENT_ERROR_OUT_OF_MEMORY, "cpu backend: out of memory for the rows' losses");
  }
}

extern "C" xent_status XENT_NATIVE_NAME(xent_cpu_native_softmax)(const xent_softmax_desc* d, xent_op op,
                                                                 const xent_softmax_args* a) {
  return d->dtype == XENT_F64 ? softmax_rows<double>(d, op, a) : softmax_rows<float>(d, op, a);
}
