// The linear cross entropy with the logits on chip
// (kernels/linear_cross_entropy/on_chip.h) against float64 from the same
// bf16 values. Pass 1: each (row, slice) record's max and sum of exp over
// the slice's logits and its label terms, and the row's lse and loss from
// every slice's records. Pass 2, from the float64 lse: grad_hidden = G @ W
// and grad_weight = G^T @ hidden for a mean's G, in both shapes of the
// blocks (128 x 256 and 256 x 128, each with a partial second tile), each
// element held to its own row's bound. 150 rows (a block of
// 128, two warpgroups of 64, then a partial block whose second warpgroup
// has no row), H = 456, 76 and 74 (a partial stage of 64 columns; rows of whole
// 16-byte chunks, copied by tensor maps, or not; the sums' rows of whole
// 16-byte reductions, or not), 300 classes as two slices
// (160 and 140: partial tiles) and as one; labels at both ends of the
// vocabulary and of a slice, ignored rows, and rows of large logits (hidden
// scaled by 64: most exps underflow).
// The grids' order (xent_lce_chip_place_of) by groups of one row block
// (H = 456 and 74: two whole groups) and of eight (76: one group, partial),
// and, under the emulator, every block's place for grids of 1 to 20 row
// blocks in groups of 1 to 9.
// Built twice, as tests/warpgroup_mma_test.cc is: under the emulator in the
// suite, and by nvcc for sm_90a on the GPU machine (bench/gpu/stage.sh).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XENT_TARGET_CUDA
#include "device/target.h"
#include "linear_cross_entropy/on_chip.h"
#include "linear_cross_entropy/on_chip_sm100.h"
#include "tensor_core_test.h"

enum { ROWS = 150, H_MAX = 456, V = 300, IGNORE = -100 };
// hidden's columns: 456 (16-byte rows: the stages copied by tensor maps,
// eight of them, the last partial, so that a tile refills two of its six
// buffers while the products of the stage before are in flight), 76 (element by element;
// pass 2's sums still added four floats at a time) or 74 (an atomic an
// element), main's loop.
static int H = H_MAX;
// The passes' grid order: row blocks a group.
static int64_t group = XENT_LCE_CHIP_GROUP;

static tc_random rng = {0x13198a2e03707344ull};

// The kernels' 128 KiB of shared memory, past the 48 KiB a launch has unless
// the kernel's limit is raised (as steps.h's launch does); 0, or 1 with the
// error printed.
template <typename K>
static int raise_smem(K* kernel, const char* name) {
  if (xent_drv_raise_smem(kernel, name, XENT_LCE_CHIP_SMEM) == 0) return 0;
  printf("FAIL: %s: its dynamic shared memory could not be raised to %d bytes\n", name, (int)XENT_LCE_CHIP_SMEM);
  return 1;
}

// The stages' tensor maps, as steps.h's launch makes them (none where H
// is no multiple of 8); 0, or 1 with the error printed.
template <typename Args>
static int maps(Args& a, int64_t rows, int64_t classes) {
  if (xent_lce_chip_maps(a, rows, classes) == 0 && a.tma == (H % 8 == 0)) return 0;
  printf("FAIL: the tensor maps of H = %d: %s\n", H, a.tma ? "made where none can be" : "not made");
  return 1;
}

// The passes' renderings: sm_90a's (wgmma, two warpgroups a block) and
// sm_100a's (tcgen05, a thread a row), the latter under the emulator only.
static bool sm100 = false;

// Pass 1's options (test_options): none, or the soft cap, a temperature,
// label smoothing with class weights and a bias, with the wide records.
struct options {
  bool on;
  float cap, tau, eps;
  const float* weights;  // [V]
  const uint16_t* bias;  // [V] bf16
};
static options opt = {};

// Runs pass 1 over `slices` slices of `slice` classes (the wide records
// where Wide); 0, or 1 with the error printed.
template <bool Wide>
static int run_stats(const uint16_t* hidden, const uint16_t* weight, const int64_t* labels, float* records,
                     int64_t slice, int slices) {
  const dim3 grid((unsigned)(xent_lce_chip_blocks(ROWS, XENT_LCE_CHIP_BLOCK_ROWS) * slices));
  const size_t rec_bytes = (size_t)slices * ROWS * xent_shard_record<float>(Wide) * sizeof(float);
  // The arguments, set by name; the GPU's copies of the pointers below.
  xent_lce_chip_args<int64_t> a = {};
  a.hidden = hidden, a.weight = weight, a.labels = labels, a.records = records;
  a.logit = {0.0f, 1.0f};
  a.rows = ROWS, a.hidden_size = H, a.classes = V, a.slice = slice, a.ignore_index = IGNORE, a.global_classes = V;
  a.group = group;
  if (opt.on) a.logit = {opt.cap, 1.0f / opt.tau}, a.smoothing = opt.eps, a.weights = opt.weights, a.bias = opt.bias;
#if defined(XENT_EMU)
  for (size_t i = 0; i < rec_bytes / 4; ++i) records[i] = NAN;  // a record no thread writes fails
  if (maps(a, ROWS, V)) return 1;
  if (sm100) {
    static_assert((int)XENT_LCE_TM_ROWS == (int)XENT_LCE_CHIP_BLOCK_ROWS, "the grids of both renderings");
    if (xent_drv_raise_smem(xent_lce_chip_stats_sm100<int64_t, Wide>, "xent_lce_chip_stats_sm100",
                            XENT_LCE_TM_SMEM) != 0) {
      printf("FAIL: xent_lce_chip_stats_sm100's shared memory could not be raised\n");
      return 1;
    }
    return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_stats_sm100<int64_t, Wide>), 32, XENT_EMU_SMEM_CUDA, grid,
                                         dim3(XENT_LCE_TM_THREADS), XENT_LCE_TM_SMEM, nullptr, a));
  }
  if (raise_smem(xent_lce_chip_stats<int64_t, Wide>, "xent_lce_chip_stats")) return 1;
  return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_stats<int64_t, Wide>), 32, XENT_EMU_SMEM_CUDA, grid,
                                       dim3(XENT_LCE_CHIP_THREADS), XENT_LCE_CHIP_SMEM, nullptr, a));
#else
  if (raise_smem(xent_lce_chip_stats<int64_t, Wide>, "xent_lce_chip_stats")) return 1;
  a.hidden = (const uint16_t*)tc_device(hidden, (size_t)ROWS * H * 2);
  a.weight = (const uint16_t*)tc_device(weight, (size_t)V * H * 2);
  a.labels = (const int64_t*)tc_device(labels, (size_t)ROWS * 8);
  a.records = (float*)tc_device(nullptr, rec_bytes, 0xff);  // NaNs: a record no thread writes fails
  if (opt.on) {
    a.weights = (const float*)tc_device(opt.weights, (size_t)V * 4);
    a.bias = (const uint16_t*)tc_device(opt.bias, (size_t)V * 2);
  }
  if (maps(a, ROWS, V)) return 1;
  void* args[] = {(void*)&a};
  const cudaError_t e = cudaLaunchKernel((const void*)xent_lce_chip_stats<int64_t, Wide>, grid,
                                         dim3(XENT_LCE_CHIP_THREADS), args, XENT_LCE_CHIP_SMEM, 0);
  return tc_finish(e, {{records, a.records, rec_bytes}},
                   {(void*)a.hidden, (void*)a.weight, (void*)a.labels, a.records, (void*)a.weights, (void*)a.bias});
#endif
}
static int run(const uint16_t* hidden, const uint16_t* weight, const int64_t* labels, float* records, int64_t slice,
               int slices) {
  return run_stats<false>(hidden, weight, labels, records, slice, slices);
}

// sm_90a's pass 2 in blocks of 256 rows x 128 classes (else 128 x 256).
static bool tall = false;

// Pass 2 into f32 sums that start at zero; 0, or 1 with the error printed.
static int run_grads(const uint16_t* hidden, const uint16_t* weight, const int64_t* labels, const float* lse,
                     float scale, float* grad_hidden, float* grad_weight) {
  // Both renderings' blocks: two tiles, side by side or one above the other.
  const int block_rows = tall ? xent_lce_chip_block<true>::kRows : xent_lce_chip_block<false>::kRows;
  const int block_classes = tall ? xent_lce_chip_block<true>::kClasses : xent_lce_chip_block<false>::kClasses;
  const dim3 grid((unsigned)(xent_lce_chip_blocks(ROWS, block_rows) * xent_lce_chip_blocks(V, block_classes)));
  const size_t gh_bytes = (size_t)ROWS * H * 4, gw_bytes = (size_t)V * H * 4;
  xent_lce_chip_grad_args<int64_t> a = {};
  a.hidden = hidden, a.weight = weight, a.labels = labels, a.lse = lse;
  a.logit = {0.0f, 1.0f};
  a.dloss = &scale, a.dloss_kind = XENT_LCE_CHIP_DLOSS_SCALAR;
  a.grad_hidden = grad_hidden, a.grad_weight = grad_weight;
  a.rows = ROWS, a.hidden_size = H, a.classes = V, a.ignore_index = IGNORE, a.global_classes = V;
  a.row0 = 0, a.row_end = ROWS, a.class0 = 0, a.class_end = V;
  a.ignore_invalid = true;
  a.group = group;
#if defined(XENT_EMU)
  memset(grad_hidden, 0, gh_bytes);
  memset(grad_weight, 0, gw_bytes);
  if (maps(a, ROWS, V)) return 1;
  if (sm100) {
    if (raise_smem(xent_lce_chip_grads_sm100<int64_t, true>, "xent_lce_chip_grads_sm100") ||
        raise_smem(xent_lce_chip_grads_sm100<int64_t, false>, "xent_lce_chip_grads_sm100"))
      return 1;
    if (tall)
      return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_grads_sm100<int64_t, true>), 32, XENT_EMU_SMEM_CUDA, grid,
                                           dim3(XENT_LCE_TM_THREADS), XENT_LCE_CHIP_SMEM, nullptr, a));
    return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_grads_sm100<int64_t, false>), 32, XENT_EMU_SMEM_CUDA, grid,
                                         dim3(XENT_LCE_TM_THREADS), XENT_LCE_CHIP_SMEM, nullptr, a));
  }
  if (raise_smem(xent_lce_chip_grads<int64_t, true>, "xent_lce_chip_grads") ||
      raise_smem(xent_lce_chip_grads<int64_t, false>, "xent_lce_chip_grads"))
    return 1;
  if (tall)
    return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_grads<int64_t, true>), 32, XENT_EMU_SMEM_CUDA, grid,
                                         dim3(XENT_LCE_CHIP_THREADS), XENT_LCE_CHIP_SMEM, nullptr, a));
  return tc_emu_status(XENT_EMU_LAUNCH((xent_lce_chip_grads<int64_t, false>), 32, XENT_EMU_SMEM_CUDA, grid,
                                       dim3(XENT_LCE_CHIP_THREADS), XENT_LCE_CHIP_SMEM, nullptr, a));
#else
  if (raise_smem(xent_lce_chip_grads<int64_t, true>, "xent_lce_chip_grads") ||
      raise_smem(xent_lce_chip_grads<int64_t, false>, "xent_lce_chip_grads"))
    return 1;
  a.hidden = (const uint16_t*)tc_device(hidden, (size_t)ROWS * H * 2);
  a.weight = (const uint16_t*)tc_device(weight, (size_t)V * H * 2);
  a.labels = (const int64_t*)tc_device(labels, (size_t)ROWS * 8);
  a.lse = (const float*)tc_device(lse, (size_t)ROWS * 4);
  a.dloss = tc_device(&scale, 4);
  a.grad_hidden = (float*)tc_device(nullptr, gh_bytes);
  a.grad_weight = (float*)tc_device(nullptr, gw_bytes);
  if (maps(a, ROWS, V)) return 1;
  void* args[] = {(void*)&a};
  const void* kernel =
      tall ? (const void*)xent_lce_chip_grads<int64_t, true> : (const void*)xent_lce_chip_grads<int64_t, false>;
  const cudaError_t e = cudaLaunchKernel(kernel, grid, dim3(XENT_LCE_CHIP_THREADS), args, XENT_LCE_CHIP_SMEM, 0);
  return tc_finish(
      e, {{grad_hidden, a.grad_hidden, gh_bytes}, {grad_weight, a.grad_weight, gw_bytes}},
      {(void*)a.hidden, (void*)a.weight, (void*)a.labels, (void*)a.lse, (void*)a.dloss, a.grad_hidden, a.grad_weight});
#endif
}

static int bad = 0;
static void expect_near(const char* what, int slice_count, int row, int slice, double got, double want, double tol) {
  if (fabs(got - want) <= tol) return;
  if (++bad <= 8)
    printf("FAIL %d slice(s), row %d, slice %d: %s = %.9g, want %.9g (tolerance %.3g)\n", slice_count, row, slice, what,
           got, want, tol);
}

static void expect_grad(const char* what, int i, int k, double got, double want, double tol) {
  if (fabs(got - want) <= tol) return;
  if (++bad <= 8) printf("FAIL pass 2: %s[%d][%d] = %.9g, want %.9g (tolerance %.3g)\n", what, i, k, got, want, tol);
}

// Both passes at H columns; returns the failures.
// Pass 1 with its options and the wide records, over two slices: the soft
// cap, a temperature, label smoothing with class weights, and a bias, each
// logit z = cap tanh((x + bias) / cap) / tau in float64 from x's float64
// value; every record field against it. x errs by zerr (f32 sums), z by
// that over tau plus the tanh's error; exp's terms as test()'s.
static int test_options(const uint16_t* hidden, const uint16_t* weight, const int64_t* labels, const double* x,
                        const double* zerr) {
  static float cw[V];
  static uint16_t bias[V];
  for (int c = 0; c < V; ++c) cw[c] = 0.25f + 0.5f * (float)(c % 7), bias[c] = to_bf16(2.0f * rng.uniform());
  const float cap = 20.0f, tau = 0.7f, eps = 0.3f;
  opt = {true, cap, tau, eps, cw, bias};
  enum { REC = 10 };  // xent_shard_record<float>(true)
  static float records[2 * ROWS * REC];
  const int64_t slice = 160;
  const int rc = run_stats<true>(hidden, weight, labels, records, slice, 2);
  opt = {};
  if (rc) return 1;
  bad = 0;
  static double z[V];
  for (int r = 0; r < ROWS; ++r) {
    const double ez = zerr[r] / tau + 1e-5 * cap / tau;
    for (int c = 0; c < V; ++c) z[c] = cap * tanh((x[r * V + c] + from_bf16(bias[c])) / cap) / tau;
    for (int k = 0; k < 2; ++k) {
      const float* rec = records + ((int64_t)k * ROWS + r) * REC;
      const int64_t c0 = k * slice, c1 = c0 + slice < V ? c0 + slice : (int64_t)V;
      double ref = -INFINITY;
      int64_t arg = -1;
      for (int64_t c = c0; c < c1; ++c)
        if (z[c] > ref) ref = z[c], arg = c;
      double S = 0, T = 0, magT = 0, sumw = 0, sumwz = 0, magwz = 0;
      for (int64_t c = c0; c < c1; ++c) {
        const double d = z[c] - rec[0], e = exp(d);
        S += e, T += e * d, magT += e * fabs(d);
        sumw += cw[c], sumwz += cw[c] * d, magwz += cw[c] * fabs(d);
      }
      const int64_t y = labels[r];
      const bool labelled = y != IGNORE, in = labelled && y >= c0 && y < c1;
      const double ec = eps / V;
      const double want_a = labelled ? (1 - eps) * (in ? cw[y] : 0.0) + ec * sumw : 0.0;
      const double want_b = labelled ? (1 - eps) * (in ? cw[y] * (z[y] - rec[0]) : 0.0) + ec * sumwz : 0.0;
      expect_near("ref (options)", 2, r, k, rec[0], ref, ez);
      expect_near("s (options)", 2, r, k, rec[1], S, S * (2 * ez + 1e-5));
      expect_near("a (options)", 2, r, k, rec[2], want_a, 1e-5 * (1 + want_a));
      expect_near("b (options)", 2, r, k, rec[3], want_b,
                  2 * ez * ((1 - eps) * (in ? cw[y] : 0.0) + ec * sumw) + 1e-5 * (fabs(want_b) + ec * magwz) + 1e-6);
      expect_near("T", 2, r, k, rec[4], T, (2 * ez + 1e-5) * (magT + S));
      expect_near("label's z - ref", 2, r, k, rec[5], in ? z[y] - rec[0] : 0.0, 2 * ez + 1e-6);
      expect_near("holds", 2, r, k, rec[6], in ? 1.0 : 0.0, 0);
      expect_near("max", 2, r, k, rec[7], ref, ez);
      int64_t got;
      memcpy(&got, rec + 8, 8);
      // The argmax: the top logit's class, or one within the rounding of it
      // (the capped rows' logits tie in f32 where tanh rounds to 1).
      if (got != arg && !(got >= c0 && got < c1 && z[got] >= ref - 2 * ez))
        expect_near("argmax", 2, r, k, (double)got, (double)arg, 0);
    }
  }
  printf("%s H = %d, 2 slices of 160 classes with the cap, tau, smoothing, class weights and a bias%s: %s\n",
         bad ? "FAIL" : "ok", H, sm100 ? ", sm_100a's pass 1" : "",
         bad ? "wrong" : "every wide record within the bounds of float64");
  return bad != 0;
}

static int test() {
  static uint16_t hidden[ROWS * H_MAX], weight[V * H_MAX];
  static int64_t labels[ROWS];
  static float records[2 * ROWS * 4];
  for (int r = 0; r < ROWS; ++r)
    for (int k = 0; k < H; ++k)
      hidden[r * H + k] = to_bf16(rng.uniform() * ((r >= 10 && r < 14) || (r >= 130 && r < 134) ? 64.0f : 1.0f));
  for (int i = 0; i < V * H; ++i) weight[i] = to_bf16(rng.uniform());
  for (int r = 0; r < ROWS; ++r) labels[r] = (int64_t)((rng.uniform() + 1.0f) * 0.5f * V) % V;
  labels[0] = 0, labels[1] = V - 1, labels[2] = 159, labels[3] = 160, labels[4] = IGNORE, labels[99] = IGNORE;
  labels[63] = 127, labels[64] = 128, labels[127] = V - 1, labels[128] = 0, labels[ROWS - 1] = IGNORE;
  // The logits in float64, and the bound on an f32 accumulation's error:
  // each of H additions errs by at most 2^-22 of the running sum (2^-23
  // rounding, or truncation), below the sum of |h w|.
  static double z[ROWS * V], zerr[ROWS];
  for (int r = 0; r < ROWS; ++r) {
    double worst = 0;
    for (int c = 0; c < V; ++c) {
      double sum = 0, mag = 0;
      for (int k = 0; k < H; ++k) {
        const double prod = (double)from_bf16(hidden[r * H + k]) * from_bf16(weight[c * H + k]);
        sum += prod;
        mag += fabs(prod);
      }
      z[r * V + c] = sum;
      worst = fmax(worst, mag);
    }
    zerr[r] = H * ldexp(worst, -22);
  }
  int failures = 0;
  const int64_t slice_widths[] = {160, V};
  for (int64_t slice : slice_widths) {
    const int slices = (int)((V + slice - 1) / slice);
    bad = 0;
    if (run(hidden, weight, labels, records, slice, slices)) return 1;
    for (int r = 0; r < ROWS; ++r) {
      const double e = zerr[r];
      double m = -INFINITY;
      for (int c = 0; c < V; ++c) m = fmax(m, z[r * V + c]);
      double S = 0, got_m = -INFINITY;
      for (int k = 0; k < slices; ++k) {
        const float* rec = records + ((int64_t)k * ROWS + r) * 4;
        const int64_t c0 = k * slice, c1 = c0 + slice < V ? c0 + slice : (int64_t)V;
        double want_ref = -INFINITY, want_s = 0;
        for (int64_t c = c0; c < c1; ++c) want_ref = fmax(want_ref, z[r * V + c]);
        // s about the record's own ref: exp's relative error from the
        // logits' (2e, the logit and the ref) and ex2.approx's (2^-22).
        for (int64_t c = c0; c < c1; ++c) want_s += exp(z[r * V + c] - rec[0]);
        expect_near("ref", slices, r, k, rec[0], want_ref, e);
        expect_near("s", slices, r, k, rec[1], want_s, want_s * (2 * e + 1e-5));
        const bool counted = labels[r] >= c0 && labels[r] < c1;
        expect_near("a", slices, r, k, rec[2], counted ? 1.0 : 0.0, 0);
        expect_near("b", slices, r, k, rec[3], counted ? z[r * V + labels[r]] - rec[0] : 0.0, 2 * e + 1e-6);
        got_m = fmax(got_m, rec[0]);
      }
      // The row's lse and loss from the slices' records (the combine of
      // vocab_parallel.h, in float64).
      for (int k = 0; k < slices; ++k)
        S += records[((int64_t)k * ROWS + r) * 4 + 1] * exp(records[((int64_t)k * ROWS + r) * 4] - got_m);
      const double lse = got_m + log(S);
      double want_lse = 0;
      for (int c = 0; c < V; ++c) want_lse += exp(z[r * V + c] - m);
      want_lse = m + log(want_lse);
      expect_near("lse", slices, r, -1, lse, want_lse, 2 * e + 1e-5 * (1 + fabs(want_lse)));
      double loss = 0;
      for (int k = 0; k < slices; ++k) {
        const float* rec = records + ((int64_t)k * ROWS + r) * 4;
        loss += rec[2] * (lse - rec[0]) - rec[3];
      }
      const double want_loss = labels[r] == IGNORE ? 0.0 : want_lse - z[r * V + labels[r]];
      expect_near("loss", slices, r, -1, loss, want_loss, 3 * e + 1e-5 * (1 + fabs(want_lse)));
    }
    printf("%s H = %d, %d slice(s) of %lld classes, row blocks in groups of %lld%s: %s\n", bad ? "FAIL" : "ok", H,
           slices, (long long)slice, (long long)group, sm100 ? ", sm_100a's pass 1" : "",
           bad ? "wrong" : "every record, lse and loss within the bounds of float64");
    failures += bad != 0;
  }
  failures += test_options(hidden, weight, labels, z, zerr);
  // Pass 2: a mean over the counted rows, from the float64 lse (rounded to
  // f32, as the combine leaves it). Each element of G errs by its bf16
  // rounding (2^-9; 2^-8 allowed) and by p's error: its logit's
  // accumulation bound e_r, twice in z - lse, so a factor exp(2 e_r) - 1 of
  // scale p (and exp's 2^-22); E holds that bound, row by row (the rows of
  // large logits have a loose one, the rest a tight one), and a sum's
  // tolerance is its terms' E times |the other factor| (f32 sums in 2^-8).
  static float lse32[ROWS], grad_hidden[ROWS * H_MAX], grad_weight[V * H_MAX];
  static double G[ROWS * V], E[ROWS * V];
  int counted = 0;
  for (int r = 0; r < ROWS; ++r) counted += labels[r] != IGNORE;
  const float scale = 1.0f / (float)counted;
  for (int r = 0; r < ROWS; ++r) {
    double m = -INFINITY, S = 0;
    for (int c = 0; c < V; ++c) m = fmax(m, z[r * V + c]);
    for (int c = 0; c < V; ++c) S += exp(z[r * V + c] - m);
    lse32[r] = (float)(m + log(S));
    const double ep = expm1(2 * zerr[r]) + 1e-6;
    for (int c = 0; c < V; ++c) {
      const double p = labels[r] == IGNORE ? 0.0 : scale * exp(z[r * V + c] - lse32[r]);
      G[r * V + c] = p - (labels[r] != IGNORE && c == labels[r] ? scale : 0.0);
      E[r * V + c] = ldexp(fabs(G[r * V + c]), -8) + p * ep;
    }
  }
  // The blocks' tiles side by side, then one above the other.
  for (int shape = 0; shape < 2; ++shape) {
    tall = shape == 1;
    if (run_grads(hidden, weight, labels, lse32, scale, grad_hidden, grad_weight)) return 1;
    bad = 0;
    for (int r = 0; r < ROWS; ++r)
      for (int k = 0; k < H; ++k) {
        double want = 0, tol = 1e-9;
        for (int c = 0; c < V; ++c) {
          const double x = from_bf16(weight[c * H + k]);
          want += G[r * V + c] * x, tol += E[r * V + c] * fabs(x);
        }
        expect_grad("grad_hidden", r, k, grad_hidden[r * H + k], want, tol);
      }
    for (int c = 0; c < V; ++c)
      for (int k = 0; k < H; ++k) {
        double want = 0, tol = 1e-9;
        for (int r = 0; r < ROWS; ++r) {
          const double x = from_bf16(hidden[r * H + k]);
          want += G[r * V + c] * x, tol += E[r * V + c] * fabs(x);
        }
        expect_grad("grad_weight", c, k, grad_weight[c * H + k], want, tol);
      }
    printf("%s H = %d, pass 2, row blocks in groups of %lld%s%s: %s\n", bad ? "FAIL" : "ok", H, (long long)group,
           tall ? ", 256 x 128 blocks" : ", 128 x 256 blocks", sm100 ? " (sm_100a's)" : "",
           bad ? "wrong" : "grad_hidden and grad_weight within the bounds of float64 (bf16 G)");
    failures += bad != 0;
  }
  tall = false;
  return failures;
}

#if defined(XENT_EMU)
// Each block's place in the grids' order, written where the block's number
// says.
static XENT_GLOBAL void places(int64_t* out, int64_t row_blocks, int64_t class_blocks, int64_t g) {
  const xent_lce_chip_place p = xent_lce_chip_place_of(row_blocks, class_blocks, g);
  out[blockIdx.x] = p.row_block * class_blocks + p.class_block;
}

// Every (row block, class block) of grids of 1 to 20 row blocks and 1 to 5
// class blocks, in groups of 1 to 9, placed once, groups in turn: each
// group's row blocks the fastest, its class blocks rising.
static int test_order() {
  static int64_t out[20 * 5];
  int wrong = 0;
  for (int64_t R = 1; R <= 20; ++R)
    for (int64_t C = 1; C <= 5; ++C)
      for (int64_t g = 1; g <= 9; ++g) {
        for (int64_t b = 0; b < R * C; ++b) out[b] = -1;
        if (tc_emu_status(XENT_EMU_LAUNCH(places, 32, XENT_EMU_SMEM_CUDA, dim3((unsigned)(R * C)), dim3(1), 0, nullptr,
                                          out, R, C, g)))
          return 1;
        // The order by its definition: groups, then classes, then rows.
        int64_t b = 0;
        for (int64_t first = 0; first < R; first += g)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = first; r < first + g && r < R; ++r, ++b) {
              const int64_t want = r * C + c;
              if (out[b] != want && ++wrong <= 4)
                printf("FAIL order: %lld x %lld blocks in groups of %lld: block %lld at %lld, want %lld\n",
                       (long long)R, (long long)C, (long long)g, (long long)b, (long long)out[b], (long long)want);
            }
      }
  printf("%s the grids' order: %s\n", wrong ? "FAIL" : "ok",
         wrong ? "wrong" : "every block of 1-20 x 1-5 in groups of 1-9 where its group puts it");
  return wrong != 0;
}
#endif

#if !defined(XENT_EMU)
// sm_100a's pass 1, instantiated for nvcc's sm_100a build (tests/BUILD),
// which only compiles it: no sm_100 GPU is lent.
const void* const sm100_kernels[] = {(const void*)xent_lce_chip_stats_sm100<int64_t, false>,
                                     (const void*)xent_lce_chip_stats_sm100<int64_t, true>,
                                     (const void*)xent_lce_chip_grads_sm100<int64_t, false>,
                                     (const void*)xent_lce_chip_grads_sm100<int64_t, true>};
#endif

int main() {
#if !defined(XENT_EMU)
  (void)sm100_kernels;
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9 || p.minor != 0) {
    printf("FAIL: needs an sm_90 GPU (H100, H200): the code is sm_90a's\n");
    return 1;
  }
#endif
  int failures = 0;
#if defined(XENT_EMU)
  failures += test_order();
#endif
  const struct {
    int h;
    int64_t group;
  } cases[] = {{H_MAX, 1}, {76, XENT_LCE_CHIP_GROUP}, {74, 1}};
  for (const auto& c : cases) {
    H = c.h, group = c.group;
    sm100 = false;
    failures += test();
#if defined(XENT_EMU)
    sm100 = true;
    failures += test();
#endif
  }
  return failures != 0;
}
