// What the tensor-core tests (warpgroup_mma_test.cc, tensor_memory_mma_test.cc,
// lce_on_chip_test.cc) share, in both of their builds: the products' operand
// layouts, bfloat16 conversions of their own (the oracle does not use the
// library's), a seeded generator, and the launch's status (the emulator's
// report) or the device buffers and the CUDA status (nvcc's build, on the
// GPU machine).
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <initializer_list>

// bfloat16 and back (round to nearest even; finite values).
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

// An operand of `rows` rows (its M or N) by k in one of the layouts
// (warpgroup_mma.h's, which tcgen05 reads too), and how far a K-step of 16
// moves its start (the products' tests; a device/ header included first).
// K-major: core matrices a row's along k 128 bytes apart, 8-row groups
// k * 16; swizzled, 8-row atoms of 1024 bytes (k = 64: one line a row).
// MN-major: core matrices 8 rows' apart 128 bytes, 8-k groups rows * 16;
// swizzled, a line of 64 rows a k, 8-k atoms of 1024 bytes, 64-row blocks
// k * 128 bytes apart.
XENT_DEVICE xent_wg_layout tc_layout_of(uint32_t rows, uint32_t k, bool swizzle, bool mn_major) {
  if (!mn_major)
    return swizzle ? xent_wg_layout{rows * 128u, 1024u, true, false} : xent_wg_layout{128u, k * 16u, false, false};
  return swizzle ? xent_wg_layout{k * 128u, 1024u, true, true} : xent_wg_layout{rows * 16u, 128u, false, true};
}
XENT_DEVICE uint32_t tc_step_of(xent_wg_layout l) {
  return l.mn_major ? 2u * (l.swizzle128 ? l.stride : l.leading) : l.swizzle128 ? 32u : 2u * l.leading;
}

// Uniform in [-1, 1) from a 64-bit LCG of the test's seed.
struct tc_random {
  uint64_t state;
  float uniform() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  }
};

#if defined(XENT_EMU)
// An emulated launch's status: 0, or 1 with the emulator's report printed
// (unless quiet: a planted bug the caller checks). The pending error is
// taken either way: it would fail the next launch.
static int tc_emu_status(int rc, bool quiet = false) {
  const int pending = xent_emu_last_error();
  if (!rc && !pending) return 0;
  if (!quiet) printf("FAIL: %s\n", xent_emu_last_message());
  return 1;
}
#else
// A device buffer of n bytes: a copy of host, or where host is null every
// byte `fill`.
static void* tc_device(const void* host, size_t n, int fill = 0) {
  void* d = nullptr;
  cudaMalloc(&d, n);
  if (host) cudaMemcpy(d, host, n, cudaMemcpyHostToDevice);
  else cudaMemset(d, fill, n);
  return d;
}
// After the launch whose status is e: synchronized, each device buffer of
// `back` copied to its host one, every buffer freed; 0, or 1 with the CUDA
// error printed.
struct tc_back {
  void* host;
  const void* device;
  size_t n;
};
static int tc_finish(cudaError_t e, std::initializer_list<tc_back> back, std::initializer_list<void*> buffers) {
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  for (const tc_back& b : back)
    if (e == cudaSuccess) e = cudaMemcpy(b.host, b.device, b.n, cudaMemcpyDeviceToHost);
  for (void* d : buffers) cudaFree(d);
  if (e == cudaSuccess) return 0;
  printf("FAIL: CUDA error: %s\n", cudaGetErrorString(e));
  return 1;
}
#endif
