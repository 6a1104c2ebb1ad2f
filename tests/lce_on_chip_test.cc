// The on-chip statistics of the linear cross entropy
// (kernels/linear_cross_entropy/on_chip.h) against float64 from the same
// bf16 values: each (row, slice) record's max and sum of exp over the
// slice's logits and its label terms, and the row's lse and loss from every
// slice's records. 100 rows (a partial block), H = 80 (a partial stage of
// 64 columns), 300 classes as two slices (160 and 140: partial tiles) and
// as one; labels at both ends of the vocabulary and of a slice, ignored
// rows, and rows of large logits (hidden scaled by 64: most exps underflow).
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

enum { ROWS = 100, H = 80, V = 300, IGNORE = -100 };

static float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint64_t state = 0x13198a2e03707344ull;
static float uniform() {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

// Runs the kernel over `slices` slices of `slice` classes; 0, or 1 with the
// error printed.
static int run(const uint16_t* hidden, const uint16_t* weight, const int64_t* labels, float* records, int64_t slice,
               int slices) {
  const dim3 grid((ROWS + XENT_LCE_CHIP_ROWS - 1) / XENT_LCE_CHIP_ROWS, slices);
  const size_t rec_bytes = (size_t)slices * ROWS * 4 * sizeof(float);
#if defined(XENT_EMU)
  for (size_t i = 0; i < rec_bytes / 4; ++i) records[i] = NAN;  // a record no thread writes fails
  const xent_lce_chip_args a = {hidden, weight, labels, records, ROWS, H, V, slice, IGNORE};
  const int rc = XENT_EMU_LAUNCH(xent_lce_chip_stats, 32, XENT_EMU_SMEM_CUDA, grid, dim3(XENT_LCE_CHIP_THREADS),
                                 XENT_LCE_CHIP_SMEM, nullptr, a);
  const int pending = xent_emu_last_error();
  if (rc || pending) {
    printf("FAIL: %s\n", xent_emu_last_message());
    return 1;
  }
#else
  uint16_t *dh, *dw;
  int64_t* dl;
  float* dr;
  cudaMalloc(&dh, (size_t)ROWS * H * 2);
  cudaMalloc(&dw, (size_t)V * H * 2);
  cudaMalloc(&dl, (size_t)ROWS * 8);
  cudaMalloc(&dr, rec_bytes);
  cudaMemcpy(dh, hidden, (size_t)ROWS * H * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, weight, (size_t)V * H * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dl, labels, (size_t)ROWS * 8, cudaMemcpyHostToDevice);
  cudaMemset(dr, 0xff, rec_bytes);  // NaNs: a record no thread writes fails
  const xent_lce_chip_args a = {dh, dw, dl, dr, ROWS, H, V, slice, IGNORE};
  void* args[] = {(void*)&a};
  cudaError_t e = cudaLaunchKernel((const void*)xent_lce_chip_stats, grid, dim3(XENT_LCE_CHIP_THREADS), args,
                                   XENT_LCE_CHIP_SMEM, 0);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(records, dr, rec_bytes, cudaMemcpyDeviceToHost);
  cudaFree(dh), cudaFree(dw), cudaFree(dl), cudaFree(dr);
  if (e != cudaSuccess) {
    printf("FAIL: CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
#endif
  return 0;
}

static int bad = 0;
static void expect_near(const char* what, int slice_count, int row, int slice, double got, double want, double tol) {
  if (fabs(got - want) <= tol) return;
  if (++bad <= 8)
    printf("FAIL %d slice(s), row %d, slice %d: %s = %.9g, want %.9g (tolerance %.3g)\n", slice_count, row, slice, what,
           got, want, tol);
}

int main() {
#if !defined(XENT_EMU)
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9 || p.minor != 0) {
    printf("FAIL: needs an sm_90 GPU (H100, H200): the code is sm_90a's\n");
    return 1;
  }
#endif
  static uint16_t hidden[ROWS * H], weight[V * H];
  static int64_t labels[ROWS];
  static float records[2 * ROWS * 4];
  for (int r = 0; r < ROWS; ++r)
    for (int k = 0; k < H; ++k) hidden[r * H + k] = to_bf16(uniform() * (r >= 10 && r < 14 ? 64.0f : 1.0f));
  for (int i = 0; i < V * H; ++i) weight[i] = to_bf16(uniform());
  for (int r = 0; r < ROWS; ++r) labels[r] = (int64_t)((uniform() + 1.0f) * 0.5f * V) % V;
  labels[0] = 0, labels[1] = V - 1, labels[2] = 159, labels[3] = 160, labels[4] = IGNORE, labels[99] = IGNORE;
  labels[63] = 127, labels[64] = 128;
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
    printf("%s %d slice(s) of %lld classes: %s\n", bad ? "FAIL" : "ok", slices, (long long)slice,
           bad ? "wrong" : "every record, lse and loss within the bounds of float64");
    failures += bad != 0;
  }
  return failures != 0;
}
