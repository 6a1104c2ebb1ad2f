// The warpgroup product (kernels/device/warpgroup_mma.h) against a float64
// product of the same bf16 values: a block of one warpgroup stages A
// (64 x K) and B (N x K, the weight's rows) in shared memory in one of the
// canonical layouts (K- or MN-major, core matrices or the 128-byte
// swizzle), multiplies
// them in K / 16 steps in two commit groups, and writes its accumulator.
// N = 64 and 128, K = 64. A swizzled K-major A is staged by a tensor copy
// (kernels/device/tensor_copy.h: the box's swizzle against the layout the
// tensor cores read), every other operand element by element.
// Built twice: as host C++ under the emulator (tests/BUILD, in the suite:
// the kernel's use of the primitive and the emulator's model of it, which
// also checks that a wait leaves the newer group in flight, and that a
// product never waited for, an operand written while a product reads it
// and an operand read while its tensor copy is in flight are reported), and by nvcc for sm_90a, run on
// the GPU machine (bench/gpu/stage.sh: the model's layout against the
// hardware's).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XENT_TARGET_CUDA
#include "device/target.h"
#include "device/tensor_copy.h"
#include "device/warpgroup_mma.h"
#include "tensor_core_test.h"

enum { M = 64, K = 64 };


// mode 0: the product. Under the emulator, planted bugs: mode 1, read after
// waiting for the first group only (the first half's product); mode 2, a
// product never waited for; mode 3, an operand overwritten (after a
// barrier) while the products are in flight; mode 4, A's tensor copy
// multiplied before its wait (swizzled K-major A only). ma: A's map there.
template <int N, bool Swizzle, bool MnA, bool MnB>
__global__ void __launch_bounds__(128)
    product(const uint16_t* a, const uint16_t* b, float* d, int mode, const __grid_constant__ xent_tensor_map ma) {
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
#if !defined(XENT_EMU)
  // The swizzle is of address bits: the atoms must be 1024-byte aligned.
  if (Swizzle && (uint32_t)__cvta_generic_to_shared(smem) % 1024u != 0) __trap();
#endif
  const xent_wg_layout la = tc_layout_of(M, K, Swizzle, MnA), lb = tc_layout_of(N, K, Swizzle, MnB);
  const uint32_t b_start = (uint32_t)M * K * 2u;
  constexpr bool kTensor = Swizzle && !MnA;
  XENT_SHARED_ARRAY(uint64_t, bars, 1);
  xent_tensor_loads loads;
  if constexpr (kTensor) {
    xent_tensor_init(bars, 1);
    if (threadIdx.x == 0) {
      xent_tensor_expect(loads, bars, 0, M * K * 2);
      xent_tensor_load(loads, &ma, smem, 0, 0, 0, bars, 0);
    }
  } else {
    for (int e = (int)threadIdx.x; e < M * K; e += (int)blockDim.x)
      smem[xent_wg_address(la, 0, e / K, e % K) / 2] = a[e];
  }
  for (int e = (int)threadIdx.x; e < N * K; e += (int)blockDim.x)
    smem[xent_wg_address(lb, b_start, e / K, e % K) / 2] = b[e];
  xent_wg_publish_smem();
  __syncthreads();
  if (kTensor && mode != 4) xent_tensor_wait(loads, bars, 0);
  xent_wg_acc<N> acc;
  xent_wg_fence();
  for (int s = 0; s < K / 16; ++s) {
    xent_wg_mma<MnA, MnB>(acc, xent_wg_operand_at(smem, s * tc_step_of(la), la),
                          xent_wg_operand_at(smem, b_start + s * tc_step_of(lb), lb), s > 0);
    if (s == K / 32 - 1) xent_wg_commit(acc);
  }
#if defined(XENT_EMU)
  // (On a GPU both are undefined: registers read while a product writes
  // them, a warpgroup exiting with products in flight.)
  if (mode == 2) return;
  xent_wg_commit(acc);
  if (mode == 3) {
    __syncthreads();
    if (threadIdx.x == 0) smem[b_start / 2] = 0;
  }
  if (mode == 1) {
    xent_wg_wait<1>(acc);
    for (int i = 0; i < N / 2; ++i) d[xent_wg_row(threadIdx.x, i) * N + xent_wg_col(threadIdx.x, i)] = acc.d[i];
  }
#else
  (void)mode;
  xent_wg_commit(acc);
#endif
  xent_wg_wait<0>(acc);
  if (mode == 0)
    for (int i = 0; i < N / 2; ++i) d[xent_wg_row(threadIdx.x, i) * N + xent_wg_col(threadIdx.x, i)] = acc.d[i];
}

static tc_random rng = {0x243f6a8885a308d3ull};

// Runs the kernel; returns 0, or 1 with the error printed.
template <int N, bool Swizzle, bool MnA, bool MnB>
static int run(const uint16_t* a, const uint16_t* b, float* d, int mode) {
  const size_t smem = (size_t)(M + N) * K * 2;
#if defined(XENT_EMU)
  for (int i = 0; i < M * N; ++i) d[i] = NAN;  // an element no thread writes fails
  xent_tensor_map ma{};
  if (Swizzle && !MnA && xent_tensor_map_bf16(&ma, a, K, M, K, M) != 0) {
    printf("FAIL: A's tensor map was refused\n");
    return 1;
  }
  return tc_emu_status(XENT_EMU_LAUNCH((product<N, Swizzle, MnA, MnB>), 32, XENT_EMU_SMEM_CUDA, dim3(1), dim3(128),
                                       smem, nullptr, a, b, d, mode, ma),
                       mode >= 2);
#else
  // (cudaLaunchKernel, not the chevrons: a .cc file, formatted as C++.)
  const uint16_t* da = (const uint16_t*)tc_device(a, (size_t)M * K * 2);
  const uint16_t* db = (const uint16_t*)tc_device(b, (size_t)N * K * 2);
  float* dd = (float*)tc_device(nullptr, (size_t)M * N * 4, 0xff);  // NaNs: an element no thread writes fails
  xent_tensor_map ma{};
  if (Swizzle && !MnA && xent_tensor_map_bf16(&ma, da, K, M, K, M) != 0) {
    printf("FAIL: A's tensor map was refused by the driver\n");
    return 1;
  }
  void* args[] = {&da, &db, &dd, &mode, &ma};
  const cudaError_t e = cudaLaunchKernel((const void*)product<N, Swizzle, MnA, MnB>, dim3(1), dim3(128), args, smem, 0);
  return tc_finish(e, {{d, dd, (size_t)M * N * 4}}, {(void*)da, (void*)db, dd});
#endif
}

// d against the float64 product over k in [0, k_end). f32 accumulation:
// each of the K sums' additions errs by at most 2^-23 of the running sum
// (2^-22 if the tensor cores truncate), bounded by the sum of |a b|.
template <int N>
static int check(const char* what, const uint16_t* a, const uint16_t* b, const float* d, int k_end) {
  int bad = 0;
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      double want = 0, mag = 0;
      for (int k = 0; k < k_end; ++k) {
        const double p = (double)from_bf16(a[r * K + k]) * (double)from_bf16(b[c * K + k]);
        want += p;
        mag += fabs(p);
      }
      const double got = d[r * N + c], tol = k_end * ldexp(mag, -22) + 1e-30;
      if (!(fabs(got - want) <= tol) && ++bad <= 5)
        printf("FAIL %s N=%d: D[%d][%d] = %.9g, want %.9g (tolerance %.3g)\n", what, N, r, c, got, want, tol);
    }
  return bad;
}

template <int N, bool Swizzle, bool MnA, bool MnB>
static int test() {
  static uint16_t a[M * K], b[N * K];
  static float d[M * N];
  for (int i = 0; i < M * K; ++i) a[i] = to_bf16(rng.uniform());
  for (int i = 0; i < N * K; ++i) b[i] = to_bf16(rng.uniform());
  int failures = 0;
  if (run<N, Swizzle, MnA, MnB>(a, b, d, 0)) return 1;
  failures += check<N>("the product", a, b, d, K) != 0;
#if defined(XENT_EMU)
  if (run<N, Swizzle, MnA, MnB>(a, b, d, 1)) return 1;
  failures += check<N>("after the first group's wait", a, b, d, K / 2) != 0;
  if (run<N, Swizzle, MnA, MnB>(a, b, d, 2) == 0 || strstr(xent_emu_last_message(), "never waited") == NULL) {
    printf("FAIL N=%d: a product never waited for was not reported\n", N);
    failures++;
  } else {
    printf("  reported, as it should be: %s\n", xent_emu_last_message());
  }
  // The operands in flight: each planted bug reported with what it did.
  const struct {
    int mode;
    const char* what;
  } planted[] = {{3, "tensor-core product(s) reading it are in flight"}, {4, "asynchronous copy into it is in flight"}};
  for (const auto& p : planted) {
    if (p.mode == 4 && !(Swizzle && !MnA)) continue;
    if (run<N, Swizzle, MnA, MnB>(a, b, d, p.mode) == 0 || strstr(xent_emu_last_message(), p.what) == NULL) {
      printf("FAIL N=%d: mode %d was not reported as \"%s\": %s\n", N, p.mode, p.what, xent_emu_last_message());
      failures++;
    } else {
      printf("  reported, as it should be: %s\n", xent_emu_last_message());
    }
  }
#endif
  printf("%s m64n%dk16 x %d, %s, A %s, B %s: %s\n", failures ? "FAIL" : "ok", N, K / 16,
         Swizzle ? "128-byte swizzle" : "core matrices", MnA ? "MN-major" : "K-major", MnB ? "MN-major" : "K-major",
         failures ? "wrong" : "matches float64");
  return failures;
}

int main() {
#if !defined(XENT_EMU)
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9 || p.minor != 0) {
    printf("FAIL: needs an sm_90 GPU (H100, H200): the code is sm_90a's\n");
    return 1;
  }
#endif
  // Every layout pair of A and B, in both shapes.
  const int failures = test<64, false, false, false>() + test<128, false, false, false>() +
                       test<64, true, false, false>() + test<128, true, false, false>() +
                       test<64, false, false, true>() + test<128, true, false, true>() +
                       test<64, false, true, false>() + test<128, true, true, false>() + test<64, true, true, true>() +
                       test<128, false, true, true>();
  return failures != 0;
}
