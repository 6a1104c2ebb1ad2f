// The tensor-memory product (kernels/device/tensor_memory_mma.h, sm_100a's
// tcgen05) against a float64 product of the same bf16 values: a block of
// four warps stages A (128 x K) and B (N x K, the weight's rows) in shared
// memory in one of the canonical layouts (K- or MN-major, core matrices or
// the 128-byte swizzle); one thread issues K / 16 products, the first half
// into one accumulator committed to one mbarrier, the second into another
// committed to a second; every warp loads its 32 rows of each after its
// wait, and writes their sum. N = 64, 128 and 256, K = 64.
// Built twice: as host C++ under the emulator (tests/BUILD, in the suite:
// the primitive's use and the emulator's model of it, which also reports a
// load before the commit's wait, an operand written while a product reads
// it, a product never waited for, a warp loading another's lanes and a
// block that exits holding tensor memory, a product issued over another
// thread's unordered load), and by nvcc for sm_100a, which
// only compiles it: no sm_100 GPU is lent to the project.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#define XENT_TARGET_CUDA
#include "device/target.h"
#include "device/tensor_memory_mma.h"
#include "tensor_core_test.h"

enum { M = XENT_TM_ROWS, K = 64 };


// mode 0: the product, d = the first half's accumulator + the second's.
// mode 1: the first half's alone, read after its own commit's wait while
// the second's products may still run. Under the emulator, planted bugs:
// mode 2, the first accumulator loaded before its wait; mode 3, an operand
// overwritten (after a barrier) while the products are in flight; mode 4,
// the products never waited for; mode 5, a warp loading the next warp's
// lanes; mode 6, the tensor memory never freed; mode 7, thread 0 issues a
// product into the first accumulator right after its own load of it, the
// other threads' loads not ordered before it by a barrier.
template <int N, bool Swizzle, bool MnA, bool MnB>
__global__ void __launch_bounds__(128) product(const uint16_t* a, const uint16_t* b, float* d, int mode) {
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
#if !defined(XENT_EMU)
  // The swizzle is of address bits: the atoms must be 1024-byte aligned.
  if (Swizzle && (uint32_t)__cvta_generic_to_shared(smem) % 1024u != 0) __trap();
#endif
  XENT_SHARED_ARRAY(uint64_t, bars, 2);
  XENT_SHARED_ARRAY(uint32_t, slot, 1);
  const xent_wg_layout la = tc_layout_of(M, K, Swizzle, MnA), lb = tc_layout_of(N, K, Swizzle, MnB);
  const uint32_t b_start = (uint32_t)M * K * 2u;
  for (int e = (int)threadIdx.x; e < M * K; e += (int)blockDim.x) smem[xent_wg_address(la, 0, e / K, e % K) / 2] = a[e];
  for (int e = (int)threadIdx.x; e < N * K; e += (int)blockDim.x)
    smem[xent_wg_address(lb, b_start, e / K, e % K) / 2] = b[e];
  xent_wg_publish_smem();
  xent_tensor_init(bars, 2);  // (its barrier orders the staging before the products)
  const uint32_t tmem = xent_tm_alloc(slot, 2 * N);
  xent_tm_products q;
  if (threadIdx.x == 0) {
    for (int s = 0; s < K / 16; ++s) {
      const int half = s / (K / 32);
      xent_tm_mma<N, MnA, MnB>(q, xent_tm_address(tmem, 0, half * N), xent_tm_operand_at(smem, s * tc_step_of(la), la),
                               xent_tm_operand_at(smem, b_start + s * tc_step_of(lb), lb), s % (K / 32) > 0);
      if (s % (K / 32) == K / 32 - 1) xent_tm_commit(q, bars, half);
    }
  }
#if defined(XENT_EMU)
  // (On a GPU these are undefined or hang.)
  if (mode == 3) {
    __syncthreads();
    if (threadIdx.x == 0) smem[b_start / 2] = 0;
  }
  if (mode == 4) return;
#endif
  const int row = xent_tm_warp_lane() + (int)(threadIdx.x % 32);
  const int lane = mode == 5 ? (xent_tm_warp_lane() + 32) % M : xent_tm_warp_lane();
  if (mode != 2) xent_tm_wait(q, bars, 0);
  float first[N], r[32];
  for (int c = 0; c < N; c += 32) {
    xent_tm_load32(xent_tm_address(tmem, lane, c), r);
    for (int j = 0; j < 32; ++j) first[c + j] = r[j];
  }
  if (mode == 1)
    for (int c = 0; c < N; ++c) d[row * N + c] = first[c];
#if defined(XENT_EMU)
  if (mode == 7 && threadIdx.x == 0)
    xent_tm_mma<N, MnA, MnB>(q, tmem, xent_tm_operand_at(smem, 0, la), xent_tm_operand_at(smem, b_start, lb), false);
#endif
  xent_tm_wait(q, bars, 1);
  for (int c = 0; c < N; c += 32) {
    xent_tm_load32(xent_tm_address(tmem, lane, N + c), r);
    if (mode != 1)
      for (int j = 0; j < 32; ++j) d[row * N + c + j] = first[c + j] + r[j];
  }
#if defined(XENT_EMU)
  if (mode == 6) return;
#endif
  xent_tm_free(tmem, 2 * N);
}

static tc_random rng = {0x13198a2e03707344ull};

// Runs the kernel; returns 0, or 1 with the error printed.
template <int N, bool Swizzle, bool MnA, bool MnB>
static int run(const uint16_t* a, const uint16_t* b, float* d, int mode) {
  const size_t smem = (size_t)(M + N) * K * 2;
  auto kernel = product<N, Swizzle, MnA, MnB>;
#if defined(XENT_EMU)
  for (int i = 0; i < M * N; ++i) d[i] = NAN;  // an element no thread writes fails
  if (xent_emu_func_set_max_dynamic_smem(xent_emu::func_id(kernel), "product", (long long)smem)) return 1;
  return tc_emu_status(XENT_EMU_LAUNCH((product<N, Swizzle, MnA, MnB>), 32, XENT_EMU_SMEM_CUDA, dim3(1), dim3(128),
                                       smem, nullptr, a, b, d, mode),
                       mode >= 2);
#else
  const uint16_t* da = (const uint16_t*)tc_device(a, (size_t)M * K * 2);
  const uint16_t* db = (const uint16_t*)tc_device(b, (size_t)N * K * 2);
  float* dd = (float*)tc_device(nullptr, (size_t)M * N * 4, 0xff);  // NaNs: an element no thread writes fails
  void* args[] = {&da, &db, &dd, &mode};
  cudaError_t e = cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e == cudaSuccess) e = cudaLaunchKernel((const void*)kernel, dim3(1), dim3(128), args, smem, 0);
  return tc_finish(e, {{d, dd, (size_t)M * N * 4}}, {(void*)da, (void*)db, dd});
#endif
}

// d against the float64 product over k in [0, k_end): f32 sums of K terms
// and one more addition, each erring by at most 2^-23 of a running sum
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
      const double got = d[r * N + c], tol = (k_end + 1) * ldexp(mag, -22) + 1e-30;
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
  if (run<N, Swizzle, MnA, MnB>(a, b, d, 1)) return 1;
  failures += check<N>("the first commit's accumulator", a, b, d, K / 2) != 0;
#if defined(XENT_EMU)
  // Each planted bug reported with what it did.
  const struct {
    int mode;
    const char* what;
  } planted[] = {{2, "read while 2 tensor-core product(s) writing it are in flight|a product that writes it is issued "
                     "while thread 1's load of it is not ordered before"},
                 {3, "tensor-core product(s) reading it are in flight"},
                 {4, "never waited for"},
                 {5, "a warp loads lanes 32 (warp % 4)"},
                 {6, "exits with tensor memory allocated"},
                 {7, "tensor memory race on column 0: a product that writes it is issued while thread"}};
  // (what: the report, or either of two separated by '|': mode 2's loads
  // race the products' issue, or follow it, as the threads happen to run.)
  const auto reported = [](const char* what) {
    const char* bar = strchr(what, '|');
    if (!bar) return strstr(xent_emu_last_message(), what) != NULL;
    const std::string first(what, bar);
    return strstr(xent_emu_last_message(), first.c_str()) != NULL || strstr(xent_emu_last_message(), bar + 1) != NULL;
  };
  for (const auto& p : planted) {
    if (run<N, Swizzle, MnA, MnB>(a, b, d, p.mode) == 0 || !reported(p.what)) {
      printf("FAIL N=%d: mode %d was not reported as \"%s\": %s\n", N, p.mode, p.what, xent_emu_last_message());
      failures++;
    } else {
      printf("  reported, as it should be: %s\n", xent_emu_last_message());
    }
  }
#endif
  printf("%s m128n%dk16 x %d, %s, A %s, B %s: %s\n", failures ? "FAIL" : "ok", N, K / 16,
         Swizzle ? "128-byte swizzle" : "core matrices", MnA ? "MN-major" : "K-major", MnB ? "MN-major" : "K-major",
         failures ? "wrong" : "matches float64");
  return failures;
}

int main() {
#if !defined(XENT_EMU)
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 10 || p.minor != 0) {
    printf("FAIL: needs an sm_100 GPU (B200): the code is sm_100a's\n");
    return 1;
  }
#endif
  // Every layout pair of A and B, in the three widths.
  const int failures = test<64, false, false, false>() + test<128, true, false, false>() +
                       test<256, true, false, false>() + test<64, false, false, true>() +
                       test<128, true, false, true>() + test<256, false, true, false>() +
                       test<64, true, true, false>() + test<128, false, true, true>() + test<256, true, true, true>();
  return failures != 0;
}
