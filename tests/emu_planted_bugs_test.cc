// The emulator's own checks, each shown to fire on the bug it exists for and
// to stay quiet on the corrected kernel: a missing __syncthreads, a divergent
// barrier, a barrier some threads skip, an out-of-range shared index,
// an mbarrier's wait taken for a barrier, a store the tensor cores read
// with no proxy fence, lockstep-reliant warp code (a
// whole warp, and groups of a warp each with
// its own __syncwarp mask), a shuffle with an exited lane, a deadlock
// between a shuffle and a barrier, launch configurations the hardware
// refuses, and in thread-block clusters: distributed shared memory read
// before the cluster sync that orders it, read from a block that has exited,
// and a cluster sync some threads skip; the on-chip pipeline's copy into a
// half still being read and its wait for the wrong phase; in global memory (when asked), an
// in-place overwrite ordered only by shuffles, blocks writing one word, and
// a handoff between the blocks of a cluster with no cluster sync. Also
// checks the semantics of shuffles and votes on 32- and 64-lane warps, and
// the driver's launch rules: shared memory past 48 KiB without the raised
// attribute, an attribute past the opt-in maximum, clusters on a device or
// from code without them.
// Kernels are written as CUDA/HIP code and compiled against xent_emu.h, as
// the generated kernels are.
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "xent_emu.h"
// The device library's on-chip pipeline (kernels/device/pipeline.h), on the
// CUDA target under the emulator.
#define XENT_TARGET_CUDA
#include "device/pipeline.h"

static int checks, failures;

static void expect(bool ok, const std::string& what) {
  checks++;
  if (!ok) {
    failures++;
    printf("FAIL %s\n", what.c_str());
  }
}

// The launch returned an error whose message names the kernel and contains
// every needle.
template <typename Launch>
static void expect_report(const char* test, Launch launch, std::vector<const char*> needles) {
  const int rc = launch();
  const int pending = xent_emu_last_error();
  const std::string msg = xent_emu_last_message();
  expect(rc != 0 && pending, std::string(test) + ": the bug was not reported");
  for (const char* n : needles) {
    expect(msg.find(n) != std::string::npos, std::string(test) + ": message lacks '" + n + "': " + msg);
  }
  printf("  %-28s -> %s\n", test, msg.c_str());
}

template <typename Launch>
static void expect_clean(const char* test, Launch launch) {
  const int rc = launch();
  const int pending = xent_emu_last_error();
  expect(rc == 0 && !pending, std::string(test) + ": reported on a correct kernel: " + xent_emu_last_message());
}

#define LAUNCH(kernel, warp, limit, grid, block, smem, ...) \
  [&]() { return XENT_EMU_LAUNCH(kernel, warp, limit, dim3 grid, dim3 block, smem, nullptr, __VA_ARGS__); }

// ---- __syncthreads_or: the block's vote -------------------------------------

// out[t]: whether any thread's index is `who`; out[n + t]: a second vote in
// which no thread votes yes (the first answer must not stick).
__global__ void block_vote(int* out, int who) {
  const int t = (int)threadIdx.x, n = (int)blockDim.x;
  out[t] = __syncthreads_or(t == who);
  out[n + t] = __syncthreads_or(0);
}

// ---- a missing __syncthreads ------------------------------------------------

__global__ void block_sum(const float* in, float* out, int with_barrier) {
  XENT_SHARED_ARRAY(float, sm, 256);
  sm[threadIdx.x] = in[threadIdx.x];
  if (with_barrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) s += sm[i];
    out[0] = s;
  }
}

// ---- an mbarrier's wait is no barrier -------------------------------------------

// Every thread stores its value, then waits on an mbarrier (as for a tensor
// copy), then thread 0 sums all of them: on a GPU the wait orders no
// thread's stores for another (the sm_90a pass 2's G before its products
// was such a bug), so a race unless a __syncthreads() comes between.
__global__ void stores_then_mbarrier_wait(const float* in, float* out, int with_barrier) {
  XENT_SHARED_ARRAY(float, sm, 64);
  sm[threadIdx.x] = in[threadIdx.x];
  if (with_barrier) __syncthreads();
  xent_emu_mbarrier_wait(__FILE__, __LINE__);
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) s += sm[i];
    out[0] = s;
  }
}

// ---- a store the tensor cores read, with no proxy fence ----------------------

// Every thread stores its value and (with_fence) fences the async proxy,
// a barrier, then thread 0 issues a product over all of them and waits:
// without the fence the tensor cores may read the old bytes.
__global__ void product_of_stores(const float* in, int with_fence) {
  XENT_SHARED_ARRAY(float, sm, 64);
  sm[threadIdx.x] = in[threadIdx.x];
  if (with_fence) xent_emu_proxy_fence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t all[64];
    for (int i = 0; i < 64; ++i) all[i] = i;
    xent_emu_shared_async_n(sm.base(), all, 64, 64, "sm", XENT_EMU_ASYNC_PRODUCT, 1);
    xent_emu_shared_async_n(sm.base(), all, 64, 64, "sm", XENT_EMU_ASYNC_PRODUCT, 0);
  }
}

// ---- the dynamic region through two element types ---------------------------

// Thread 0 writes a float through one view of the dynamic shared memory;
// thread 33 reads its upper half through a uint16_t view declared first
// (the records' units): a race unless a barrier comes between.
__global__ void mixed_views(float* out, int with_barrier) {
  XENT_DYNAMIC_SHARED(uint16_t, halves);
  XENT_DYNAMIC_SHARED(float, words);
  if (threadIdx.x == 0) words[5] = 1.0f;
  if (with_barrier) __syncthreads();
  if (threadIdx.x == 33) out[0] = (float)(uint16_t)halves[11];
}

// ---- divergent and skipped barriers -----------------------------------------

__global__ void divergent_barrier(int bug) {
  if (bug && threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

__global__ void early_exit(int bug) {
  if (bug && threadIdx.x == 5) return;
  __syncthreads();
}

// ---- shared memory past its size --------------------------------------------

__global__ void shifted_store(const float* in, int shift) {
  XENT_SHARED_ARRAY(float, sm, 256);
  sm[threadIdx.x + shift] = in[threadIdx.x];
}

__global__ void big_shared(int n) {
  XENT_SHARED_ARRAY(float, big, 16384);  // 64 KiB
  big[threadIdx.x % n] = 1.0f;
}

// ---- scratch reused without a barrier ----------------------------------------

// Two reductions through one scratch word: without the second barrier, lane
// 0 overwrites it while the other threads may still be reading the first.
__global__ void scratch_reuse(float* out, int with_barrier) {
  XENT_SHARED_ARRAY(float, total, 1);
  for (int round = 0; round < 2; ++round) {
    if (threadIdx.x == 0) total[0] = (float)(round + 1);
    __syncthreads();
    out[threadIdx.x] += total[0];
    if (with_barrier) __syncthreads();
  }
}

// ---- lockstep-reliant warp code ---------------------------------------------

// The pre-Volta idiom: warp 0 reduces in shared memory without __syncwarp,
// trusting its lanes to run in lockstep.
__global__ void warp_reduce(const float* in, float* out, int with_syncwarp) {
  XENT_SHARED_ARRAY(float, sm, 64);
  const unsigned t = threadIdx.x;
  sm[t] = in[t];
  __syncthreads();
  if (t < 32) {
    for (unsigned o = 16; o > 0; o /= 2) {
      if (t < o) sm[t] = sm[t] + sm[t + o];
      if (with_syncwarp) __syncwarp();
    }
    if (t == 0) out[0] = sm[0];
  }
}

// ---- groups of a warp, each with its own __syncwarp ----------------------------

// The strided 16-byte path's exchange (xent_column_walk): groups of 8 lanes
// pass values through shared memory, lane l reading what lane 7 - l of its
// group wrote, each group for as many rounds as its index in the warp plus
// one, so that the groups of a warp are at different syncs. The fix:
// __syncwarp of the group's 8 lanes before the read and before the next
// round's write (the other lanes need not be there).
__global__ void group_exchange(const float* in, float* out, int with_sync) {
  XENT_SHARED_ARRAY(float, sm, 64);
  const unsigned t = threadIdx.x, l = t % 8, groups = t % 32 / 8;
  const unsigned mask = 0xffu << (groups * 8);
  float acc = 0;
  for (unsigned r = 0; r <= groups; ++r) {
    sm[t] = in[t] + (float)r;
    if (with_sync) __syncwarp(mask);
    acc += sm[t - l + 7 - l];
    if (with_sync) __syncwarp(mask);
  }
  out[t] = acc;
}

// ---- shuffles ---------------------------------------------------------------

__global__ void shuffle_with_exited_lane(float* out, int bug) {
  if (bug && threadIdx.x % 32 == 3) return;
  float v = (float)threadIdx.x;
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void shuffle_waits_for_barrier(int bug) {
  float v = 1.0f;
  if (bug && threadIdx.x % 32 == 0) __syncthreads();
  v += __shfl_down_sync(0xffffffffu, v, 1);
  if (!bug) __syncthreads();
}

__global__ void shuffles_cuda(int* out) {
  const int lane = (int)threadIdx.x;
  out[0 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane, 5);
  out[1 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane, 3, 16);
  out[2 * 32 + lane] = __shfl_up_sync(0xffffffffu, lane, 2);
  out[3 * 32 + lane] = __shfl_sync(0xffffffffu, lane, 7, 8);
  out[4 * 32 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
  out[5 * 32 + lane] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 31);
}

// Conversions that must round to nearest even, as the hardware does.
__global__ void conversions(float* out) {
  const float x = 1.0f + 1.0f / 2048.0f;  // halfway between two halves: rounds to even (1.0)
  out[0] = __half2float(__float2half_rn(x));
  out[1] = __half2float(__float2half_rn(x + 1.0f / 4096.0f));  // above halfway: rounds up
  out[2] = __bfloat162float(__float2bfloat16_rn(1.0f + 1.0f / 256.0f));  // bf16 halfway: to even (1.0)
  out[3] = __bfloat162float(__float2bfloat16_rn(1.0f + 3.0f / 256.0f));  // halfway, odd below: up
  out[4] = __half2float(__float2half_rn(65520.0f));  // rounds to infinity
}

__global__ void shuffles_hip(long long* out) {
  const int lane = (int)threadIdx.x;
  out[0 * 64 + lane] = __shfl_xor((long long)lane, 33);
  out[1 * 64 + lane] = (long long)__ballot(lane >= 60);
  out[2 * 64 + lane] = __shfl((long long)lane * 10, 63);
}

// ---- thread-block clusters ---------------------------------------------------

// Each block publishes rank + 1 and its dynamic shared memory's first word;
// after a cluster sync each block's thread 0 adds up all ranks' values
// through distributed shared memory, then all sync again so that no block exits while
// another still reads its shared memory. `bug` drops one of the syncs (1:
// the first, 2: the last) or makes one thread skip both (3).
__global__ void cluster_sum(float* out, int bug) {
  XENT_SHARED_ARRAY(float, part, 2);
  XENT_DYNAMIC_SHARED(float, dyn);
  const unsigned rank = xent_emu_cluster_rank(), k = xent_emu_cluster_size();
  if (bug == 3 && threadIdx.x == 7 && rank == 1) return;
  if (threadIdx.x == 0) {
    part[0] = (float)(rank + 1);
    dyn[0] = 10.0f * (float)(rank + 1);
  }
  if (bug != 1) xent_emu_cluster_sync(__FILE__, __LINE__);
  float s = 0, d = 0;
  for (unsigned r = 0; threadIdx.x == 0 && r < k; ++r) {
    s += xent_emu::cluster_view(part, r)[0];
    d += xent_emu::cluster_view(dyn, r)[0];
  }
  if (bug != 2) xent_emu_cluster_sync(__FILE__, __LINE__);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = s;
    out[2 * blockIdx.x + 1] = d;
  }
}

// ---- global memory (xent_emu_check_global) ----------------------------------

#define LD(p) xent_emu::global_load((p), __FILE__, __LINE__)
#define ST(p, v) xent_emu::global_store((p), (v), __FILE__, __LINE__)

// A row of 64 logits shared by a warp, overwritten in place by its gradient
// (the fused kernel's hazard): lane 0 reads the label's logit x[y], owned by
// lane y % 32, the warp reduces its max with shuffles, then every lane
// overwrites its own elements. Shuffles order no memory: without the
// __syncwarp, lane y % 32 may overwrite x[y] before lane 0's read lands.
__global__ void in_place_row(float* x, int y, float* out, int with_syncwarp) {
  const unsigned lane = threadIdx.x;
  float m = fmaxf(LD(x + lane), LD(x + lane + 32));
  const float xy = lane == 0 ? LD(x + y) : 0.0f;
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (with_syncwarp) __syncwarp();
  ST(x + lane, LD(x + lane) - m);
  ST(x + lane + 32, LD(x + lane + 32) - m);
  if (lane == 0) out[0] = m - xy;
}

// Every block adds its part into out[0]: blocks are never ordered within a
// launch (the fix: a slot per block, added up by a second launch).
__global__ void blocks_share_output(const float* in, float* out, int per_block) {
  if (threadIdx.x != 0) return;
  float* o = per_block ? out + blockIdx.x : out;
  ST(o, (per_block ? 0.0f : LD(o)) + LD(in + blockIdx.x));
}

// Rank 0 of a cluster writes a word of global memory that rank 1 then reads:
// ordered only by a cluster sync.
__global__ void cluster_handoff(float* g, int with_sync) {
  const unsigned rank = xent_emu_cluster_rank();
  if (rank == 0 && threadIdx.x == 0) ST(g + blockIdx.x / 2, 1.0f + (float)blockIdx.x);
  if (with_sync) xent_emu_cluster_sync(__FILE__, __LINE__);
  if (rank == 1 && threadIdx.x == 0) ST(g + 8 + blockIdx.x / 2, LD(g + blockIdx.x / 2));
}

// A 16-byte vector loaded at an element offset: a fault on a GPU, where an
// access must be aligned to its size (checks on or off).
__global__ void vector_at(const float* x, float* out, int offset) {
  const xent_vec16<float> v = xent_load16((const xent_vec16<float>*)(x + offset));
  if (threadIdx.x == 0) out[0] = v.e[0] + v.e[3];
}

// ---- the driver's launch rules ------------------------------------------------

// 528 bytes of static shared memory (as the on-chip row kernels' reduction
// scratch) and the launch's dynamic shared memory, both touched.
__global__ void static_and_dynamic(float* out) {
  XENT_SHARED_ARRAY(float, scratch, 132);
  XENT_DYNAMIC_SHARED(float, dyn);
  scratch[threadIdx.x] = 1.0f;
  dyn[threadIdx.x] = 2.0f;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = scratch[5] + dyn[7];
}

// The same kernel, other functions: fresh sets of attributes.
__global__ void static_and_dynamic_b(float* out) { static_and_dynamic(out); }
__global__ void static_and_dynamic_c(float* out) { static_and_dynamic(out); }

// ---- the on-chip pipeline (kernels/device/pipeline.h) -----------------------

// Rows of n 16-byte vectors walked in turn, each block's row copied into one
// half of its stash while it walks the other; out[r] (0 before): the sum of
// row r.
// bug 1: no barrier before the next copy (it overwrites the half the last
// row's walk still reads); bug 2: a wait for the other parity.
__global__ void pipe_rows(const xent_vec16<float>* x, float* out, int rows, int n, int bug) {
  XENT_SHARED_ARRAY(xent_vec16<float>, stash, 2 * n);
  XENT_SHARED_ARRAY(uint64_t, bars, 2);
  xent_bulk_init(bars, 2);
  xent_bulk_copy(stash, 0, x, n, bars, 0);
  for (int r = 0; r < rows; ++r) {
    if (bug != 1) __syncthreads();
    if (r + 1 < rows) xent_bulk_copy(stash, (r + 1) % 2 * n, x + (int64_t)(r + 1) * n, n, bars, (r + 1) % 2);
    const unsigned parity = (unsigned)(r / 2 % 2) ^ (bug == 2 ? 1u : 0u);
    xent_bulk_wait(bars, r % 2, parity, r + 1 < rows);
    for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
      const xent_vec16<float> v = stash[r % 2 * n + i];
      atomicAdd(out + r, v.e[0] + v.e[1] + v.e[2] + v.e[3]);
    }
  }
}

#define LAUNCH_CLUSTER(kernel, grid, block, smem, cluster, ...)                                                     \
  [&]() {                                                                                                            \
    return XENT_EMU_LAUNCH_CLUSTER(kernel, 32, XENT_EMU_SMEM_CUDA_OPTIN, dim3 grid, dim3 block, smem, cluster, nullptr, \
                                   __VA_ARGS__);                                                                     \
  }

int main() {
  std::vector<float> in(256), out(256);
  for (int i = 0; i < 256; ++i) in[i] = (float)(i % 7);
  float expected_sum = 0;
  for (float v : in) expected_sum += v;
  float expected_warp = 0;
  for (int i = 0; i < 32; ++i) expected_warp += in[i];

  printf("planted bugs (each must be reported):\n");
  expect_report("missing __syncthreads", LAUNCH(block_sum, 32, XENT_EMU_SMEM_CUDA, (1), (256), 0, in.data(), out.data(), 0),
                {"kernel block_sum", "block (0,0,0)", "thread (0,0,0)", "shared memory race on sm[", "__syncthreads()"});
  expect_report("stores, then an mbarrier's wait only",
                LAUNCH(stores_then_mbarrier_wait, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 0),
                {"kernel stores_then_mbarrier_wait", "thread (0,0,0)", "shared memory race on sm[", "__syncthreads()"});
  expect_report("a product of stores, no proxy fence",
                LAUNCH(product_of_stores, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), 0),
                {"kernel product_of_stores", "sm[0]", "thread 0's store", "no fence.proxy.async"});
  expect_report("mixed views, no __syncthreads", LAUNCH(mixed_views, 32, XENT_EMU_SMEM_CUDA, (1), (64), 64, out.data(), 0),
                {"race on words[5]", "thread 33 read it"});
  expect_report("divergent barrier", LAUNCH(divergent_barrier, 32, XENT_EMU_SMEM_CUDA, (2), (64), 0, 1),
                {"kernel divergent_barrier", "divergent barrier", "__syncthreads()"});
  expect_report("barrier skipped by a thread", LAUNCH(early_exit, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, 1),
                {"thread (5,0,0)", "barrier not reached by every thread"});
  expect_report("shared index out of range", LAUNCH(shifted_store, 32, XENT_EMU_SMEM_CUDA, (1), (256), 0, in.data(), 1),
                {"kernel shifted_store", "thread (255,0,0)", "shared array 'sm' index 256 is out of range [0, 256)"});
  expect_report("scratch reused, no barrier", LAUNCH(scratch_reuse, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, out.data(), 0),
                {"kernel scratch_reuse", "thread (0,0,0)", "this thread writes it", "read it with no __syncthreads()"});
  expect_report("lockstep-reliant warp code", LAUNCH(warp_reduce, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 0),
                {"kernel warp_reduce", "shared memory race on sm[", "__syncwarp()"});
  expect_report("group exchange, no __syncwarp",
                LAUNCH(group_exchange, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 0),
                {"kernel group_exchange", "shared memory race on sm[", "__syncwarp()"});
  expect_report("shuffle with an exited lane",
                LAUNCH(shuffle_with_exited_lane, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, out.data(), 1),
                {"shfl_xor", "lane 3 has exited", "inactive lanes"});
  expect_report("shuffle waits on a barrier", LAUNCH(shuffle_waits_for_barrier, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, 1),
                {"deadlock", "shfl_down", "waits at __syncthreads()"});
  expect_report("too many threads per block", LAUNCH(early_exit, 32, XENT_EMU_SMEM_CUDA, (1), (2048), 0, 0),
                {"invalid launch configuration", "2048 threads per block, the limit is 1024"});
  expect_report("grid over the limit (y)", LAUNCH(early_exit, 32, XENT_EMU_SMEM_CUDA, (1, 65536), (32), 0, 0),
                {"invalid launch configuration", "a grid dimension above the limit"});
  expect_report("blockDim.z over 64", LAUNCH(early_exit, 32, XENT_EMU_SMEM_CUDA, (1), (1, 1, 65), 0, 0),
                {"invalid launch configuration", "blockDim.z above 64"});
  expect_report("shared memory over 48 KiB (CUDA)", LAUNCH(big_shared, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, 64),
                {"shared memory per block: 65536 bytes", "49152-byte limit"});
  expect_report("dynamic shared over the limit", LAUNCH(early_exit, 64, XENT_EMU_SMEM_HIP, (1), (64), 70000, 0),
                {"70000 bytes of dynamic shared memory, the limit is 65536"});
  expect_report("partial warp, full mask", LAUNCH(shuffle_with_exited_lane, 32, XENT_EMU_SMEM_CUDA, (1), (48), 0, out.data(), 0),
                {"names lanes that do not exist (this warp has 16 threads)"});

  printf("the same kernels, corrected (nothing may be reported):\n");
  expect_clean("with __syncthreads", LAUNCH(block_sum, 32, XENT_EMU_SMEM_CUDA, (1), (256), 0, in.data(), out.data(), 1));
  expect(out[0] == expected_sum, "block_sum computes the sum");
  std::fill(out.begin(), out.end(), 0.0f);
  expect_clean("scratch reused after a barrier",
               LAUNCH(scratch_reuse, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, out.data(), 1));
  expect(out[0] == 3.0f && out[63] == 3.0f, "scratch_reuse adds 1 + 2");
  expect_clean("stores, a __syncthreads, then an mbarrier's wait",
               LAUNCH(stores_then_mbarrier_wait, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 1));
  expect_clean("a product of stores, each fenced",
               LAUNCH(product_of_stores, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), 1));
  expect_clean("mixed views, with __syncthreads",
               LAUNCH(mixed_views, 32, XENT_EMU_SMEM_CUDA, (1), (64), 64, out.data(), 1));
  expect_clean("uniform barrier", LAUNCH(divergent_barrier, 32, XENT_EMU_SMEM_CUDA, (2), (64), 0, 0));
  expect_clean("every thread at the barrier", LAUNCH(early_exit, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, 0));
  expect_clean("store in range", LAUNCH(shifted_store, 32, XENT_EMU_SMEM_CUDA, (1), (256), 0, in.data(), 0));
  expect_clean("with __syncwarp", LAUNCH(warp_reduce, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 1));
  expect(out[0] == expected_warp, "warp_reduce with __syncwarp computes the sum");
  expect_clean("group exchange, each group's __syncwarp",
               LAUNCH(group_exchange, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, in.data(), out.data(), 1));
  {
    bool exchanged = true;
    for (int t = 0; t < 64; ++t) {
      const int groups = t % 32 / 8, partner = t - t % 8 + 7 - t % 8;
      float want = 0;
      for (int r = 0; r <= groups; ++r) want += in[partner] + (float)r;
      exchanged = exchanged && out[t] == want;
    }
    expect(exchanged, "group_exchange: each lane sums its partner's values over its group's rounds");
  }
  expect_clean("every lane shuffles", LAUNCH(shuffle_with_exited_lane, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, out.data(), 0));
  expect(out[3] == 3.0f + 2.0f && out[40] == 40.0f + 41.0f, "shfl_xor pairs lanes");
  expect_clean("no deadlock", LAUNCH(shuffle_waits_for_barrier, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, 0));
  expect_clean("64 KiB fits AMD's LDS", LAUNCH(big_shared, 64, XENT_EMU_SMEM_HIP, (1), (64), 0, 64));

  printf("shuffle and vote semantics:\n");
  std::vector<int> r(6 * 32);
  expect_clean("CUDA intrinsics", LAUNCH(shuffles_cuda, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, r.data()));
  for (int l = 0; l < 32; ++l) {
    const int seg16 = l & ~15, seg8 = l & ~7;
    expect(r[l] == (l ^ 5), "shfl_xor lane " + std::to_string(l));
    expect(r[32 + l] == (l + 3 < seg16 + 16 ? l + 3 : l), "shfl_down width 16 lane " + std::to_string(l));
    expect(r[64 + l] == (l >= 2 ? l - 2 : l), "shfl_up lane " + std::to_string(l));
    expect(r[96 + l] == seg8 + 7, "shfl width 8 lane " + std::to_string(l));
    expect((unsigned)r[128 + l] == 0x49249249u, "ballot lane " + std::to_string(l));
    expect(r[160 + l] == 3, "all/any lane " + std::to_string(l));
  }
  std::vector<long long> h(3 * 64);
  expect_clean("HIP intrinsics, 64 lanes", LAUNCH(shuffles_hip, 64, XENT_EMU_SMEM_HIP, (1), (64), 0, h.data()));
  for (int l = 0; l < 64; ++l) {
    expect(h[l] == (l ^ 33), "64-lane shfl_xor lane " + std::to_string(l));
    expect((unsigned long long)h[64 + l] == 0xF000000000000000ull, "64-lane ballot lane " + std::to_string(l));
    expect(h[128 + l] == 630, "64-lane shfl lane " + std::to_string(l));
  }

  std::vector<int> votes(2 * 96, -1);
  expect_clean("__syncthreads_or", LAUNCH(block_vote, 32, XENT_EMU_SMEM_CUDA, (1), (96), 0, votes.data(), 70));
  for (int t = 0; t < 96; ++t) {
    expect(votes[t] == 1, "__syncthreads_or: thread " + std::to_string(t) + " sees thread 70's yes");
    expect(votes[96 + t] == 0, "__syncthreads_or: thread " + std::to_string(t) + " sees a later all-no vote");
  }
  expect_clean("__syncthreads_or, no one", LAUNCH(block_vote, 64, XENT_EMU_SMEM_HIP, (1), (96), 0, votes.data(), -1));
  for (int t = 0; t < 96; ++t) expect(votes[t] == 0, "__syncthreads_or: no yes, thread " + std::to_string(t));

  std::vector<float> conv(5);
  expect_clean("half and bfloat16 conversions", LAUNCH(conversions, 32, XENT_EMU_SMEM_CUDA, (1), (1), 0, conv.data()));
  expect(conv[0] == 1.0f, "f16 halfway rounds to even");
  expect(conv[1] == 1.0f + 1.0f / 1024.0f, "f16 above halfway rounds up");
  expect(conv[2] == 1.0f, "bf16 halfway rounds to even");
  expect(conv[3] == 1.0f + 4.0f / 256.0f, "bf16 halfway from odd rounds up");
  expect(isinf(conv[4]), "f16 65520 rounds to infinity");

  {
    const int rows = 5, n = 48;
    std::vector<xent_vec16<float>> px(rows * n);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < 4; ++k) px[r * n + i].e[k] = (float)(r + 1);
    std::vector<float> sums(rows, 0.0f);
    expect_clean("pipeline: rows in turn", LAUNCH(pipe_rows, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0, px.data(),
                                                  sums.data(), rows, n, 0));
    for (int r = 0; r < rows; ++r) expect(sums[r] == (float)(4 * n * (r + 1)), "pipe_rows: row " + std::to_string(r));
    expect_report("pipeline: copy over a half in use", LAUNCH(pipe_rows, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0,
                                                               px.data(), sums.data(), rows, n, 1),
                  {"pipe_rows", "shared memory race on stash[", "this thread writes it"});
    expect_report("pipeline: wait for the wrong phase", LAUNCH(pipe_rows, 32, XENT_EMU_SMEM_CUDA, (1), (64), 0,
                                                                px.data(), sums.data(), rows, n, 2),
                  {"pipe_rows", "mbarrier bars[0]", "parity 1", "1 phases have completed"});
  }

  std::vector<float> cl(16, -1.0f);
  expect_clean("cluster sum", LAUNCH_CLUSTER(cluster_sum, (8), (64), 100000, 4, cl.data(), 0));
  for (int b = 0; b < 8; ++b) {
    expect(cl[2 * b] == 10.0f && cl[2 * b + 1] == 100.0f, "block " + std::to_string(b) + " sums its cluster's ranks");
  }
  expect_report("cluster: DSMEM before the sync", LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 4, cl.data(), 1),
                {"cluster_sum", "race on part[0]", "of block (0,0,0) (another block of the cluster)", "no cluster sync"});
  expect_report("cluster: exit before the sync", LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 4, cl.data(), 2),
                {"cluster_sum", "has exited"});
  expect_report("cluster: a thread skips the sync", LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 4, cl.data(), 3),
                {"cluster_sum", "cluster sync not reached"});
  expect_report("cluster: grid not whole clusters", LAUNCH_CLUSTER(cluster_sum, (6), (64), 64, 4, cl.data(), 0),
                {"cluster_sum", "not a multiple"});
  expect_report("cluster: over 8 blocks", LAUNCH_CLUSTER(cluster_sum, (16), (64), 64, 16, cl.data(), 0),
                {"cluster_sum", "portable limit"});

  printf("the driver's launch rules (CUDA):\n");
  const void* sd = xent_emu::func_id(&static_and_dynamic);
  const void* sdb = xent_emu::func_id(&static_and_dynamic_b);
  const void* sdc = xent_emu::func_id(&static_and_dynamic_c);
  const size_t optin = xent_emu_get_device().smem_optin;
  expect_report("48 KiB: static + dynamic, attribute not raised",
                LAUNCH(static_and_dynamic, 32, XENT_EMU_SMEM_CUDA, (1), (64), 49152, out.data()),
                {"kernel static_and_dynamic", "49680 bytes", "49152-byte limit",
                 "without a raised cudaFuncAttributeMaxDynamicSharedMemorySize"});
  expect_report("dynamic alone over 48 KiB, attribute not raised",
                LAUNCH(static_and_dynamic, 32, XENT_EMU_SMEM_CUDA, (1), (64), 60000, out.data()),
                {"60000 bytes of dynamic shared memory, the limit is 49152"});
  expect_report("attribute at the opt-in maximum, leaving no room for static",
                [&]() {
                  expect(xent_emu_func_set_max_dynamic_smem(sdc, "static_and_dynamic_c", (long long)optin) == 0,
                         "the attribute is taken while the static size is unknown");
                  return XENT_EMU_LAUNCH(static_and_dynamic_c, 32, XENT_EMU_SMEM_CUDA, dim3(1), dim3(64), 49152,
                                         nullptr, out.data());
                },
                {"static shared memory of 528 bytes", "exceed the device's opt-in maximum", "refuses that attribute"});
  expect(xent_emu_func_set_max_dynamic_smem(sd, "static_and_dynamic", (long long)optin) != 0 &&
             strstr(xent_emu_last_message(), "plus the kernel's 528 of static shared memory exceed") != nullptr,
         "once the static size is known, an attribute past the opt-in maximum is refused: " +
             std::string(xent_emu_last_message()));
  expect(xent_emu_func_set_max_dynamic_smem(sdb, "static_and_dynamic_b", (long long)optin - 2048) == 0,
         "the attribute at the opt-in maximum less a reserve for static memory is taken");
  expect_clean("attribute raised, 48 KiB + static",
               LAUNCH(static_and_dynamic_b, 32, XENT_EMU_SMEM_CUDA, (1), (64), 49152, out.data()));
  expect(out[0] == 3.0f, "static_and_dynamic reads both");
  expect_clean("attribute raised, the most it allows",
               LAUNCH(static_and_dynamic_b, 32, XENT_EMU_SMEM_CUDA, (1), (64), optin - 2048, out.data()));
  expect_report("dynamic above the raised attribute",
                LAUNCH(static_and_dynamic_b, 32, XENT_EMU_SMEM_CUDA, (1), (64), optin - 1024, out.data()),
                {"above the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize"});
  {
    long long attr = 0;
    size_t st = 0;
    int ptx = 0;
    xent_emu_func_get(sdb, &st, &attr, &ptx);
    expect(attr == (long long)optin - 2048 && st == 528 && ptx == 90,
           "cudaFuncGetAttributes' stand-in: the attribute, the static size seen, the code version");
  }
  const xent_emu_device h100 = xent_emu_get_device();
  xent_emu_device no_clusters = h100;
  no_clusters.ordinal = 1;
  no_clusters.cluster_launch = 0;
  xent_emu_set_device(no_clusters);
  std::vector<float> cl0(16);
  expect_report("cluster launch on a device without clusters",
                LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 2, cl0.data(), 0), {"cluster_sum", "without cluster launch"});
  xent_emu_device built_80 = h100;
  built_80.ordinal = 2;
  built_80.build_arch = 80;
  xent_emu_set_device(built_80);
  expect_report("cluster launch of code built for compute_80",
                LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 2, cl0.data(), 0),
                {"cluster_sum", "built for compute_80", "no clusters"});
  expect_clean("a one-block launch of that code", LAUNCH_CLUSTER(cluster_sum, (4), (64), 64, 1, cl0.data(), 0));
  xent_emu_set_device(h100);
  {
    xent_emu_func_record recs[64];
    const int n = xent_emu_func_records(recs, 64);
    int found = 0;
    for (int i = 0; i < n && i < 64; ++i)
      if (strcmp(recs[i].name, "static_and_dynamic_b") == 0 && recs[i].sets == 1 && recs[i].launches == 2) found++;
    expect(found == 1, "the stand-in records one set and two launches that ran of static_and_dynamic_b");
  }

  printf("global memory (xent_emu_check_global):\n");
  std::vector<float> row(64), g(16);
  for (int i = 0; i < 64; ++i) row[i] = (float)(i % 11);
  expect_clean("global checks off by default",
               LAUNCH(in_place_row, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, row.data(), 37, out.data(), 0));
  expect(xent_emu_check_global(1) == 0, "xent_emu_check_global returns the previous setting");
  for (int i = 0; i < 64; ++i) row[i] = (float)(i % 11);
  expect_report("in place, shuffles only",
                LAUNCH(in_place_row, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, row.data(), 37, out.data(), 0),
                {"kernel in_place_row", "thread (5,0,0)", "global memory race", "store at", "thread 0 read it at",
                 "no __syncthreads() or __syncwarp() between", "shuffles and votes do not order memory"});
  for (int i = 0; i < 64; ++i) row[i] = (float)(i % 11);
  expect_clean("in place, __syncwarp before the stores",
               LAUNCH(in_place_row, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, row.data(), 37, out.data(), 1));
  expect(out[0] == 10.0f - 4.0f && row[37] == 4.0f - 10.0f, "in_place_row computes m - x[y] and x - m");
  expect_report("blocks add into one word",
                LAUNCH(blocks_share_output, 32, XENT_EMU_SMEM_CUDA, (3), (32), 0, in.data(), out.data(), 0),
                {"kernel blocks_share_output", "block (1,0,0)", "global memory race", "of block (0,0,0)",
                 "in the same launch", "kernel boundary"});
  expect_clean("a word per block", LAUNCH(blocks_share_output, 32, XENT_EMU_SMEM_CUDA, (3), (32), 0, in.data(), out.data(), 1));
  expect_report("cluster: global handoff, no sync",
                LAUNCH_CLUSTER(cluster_handoff, (4), (32), 0, 2, g.data(), 0),
                {"kernel cluster_handoff", "block (1,0,0)", "global memory race", "load at",
                 "of block (0,0,0) wrote it", "no cluster sync"});
  expect_clean("cluster: global handoff after a cluster sync",
               LAUNCH_CLUSTER(cluster_handoff, (4), (32), 0, 2, g.data(), 1));
  expect(g[8] == 1.0f && g[9] == 3.0f, "cluster_handoff passes rank 0's word to rank 1");
  expect(xent_emu_check_global(0) == 1, "xent_emu_check_global(0) turns the checks off");
  alignas(16) float vec[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  expect_clean("a 16-byte load at 16 bytes", LAUNCH(vector_at, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, vec, out.data(), 4));
  expect(out[0] == 5.0f + 8.0f, "vector_at loads the vector");
  expect_report("a 16-byte load off 16 bytes", LAUNCH(vector_at, 32, XENT_EMU_SMEM_CUDA, (1), (32), 0, vec, out.data(), 1),
                {"kernel vector_at", "misaligned global load", "a 16-byte access must be 16-byte aligned"});

  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
