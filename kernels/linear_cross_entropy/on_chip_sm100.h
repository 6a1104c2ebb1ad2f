// Pass 1 of the linear cross entropy with the logits on chip on sm_100a
// (on_chip.h's design and records, Blackwell's tensor cores): a block of
// 128 rows of hidden, four warps, against tiles of 256 classes; thread 0
// issues each tile's products (tensor_memory_mma.h: 128 x 256 x 16, four a
// stage of 64 hidden columns) into an accumulator in tensor memory, which
// holds a row in one lane, so each thread loads its own row's 256 logits
// and folds them into its statistics (on_chip.h's xent_lce_chip_row_stats)
// with no shuffles, and writes the row's record. The stages are on_chip.h's
// (tensor copies, or elements), four buffers of 48 KB, the next three
// loading while the tensor cores multiply one; a buffer is refilled once
// its products' commit has arrived. Two accumulators (512 columns, all of
// an SM's tensor memory), so that a tile's products may run while the tile
// before is folded: here only the one stage queued when the fold begins,
// since thread 0 folds too (a warp that only issues is the next step).
// No sm_100 GPU has run it: the emulator runs it against float64
// (tests/lce_on_chip_test.cc) and nvcc compiles it for sm_100a. The
// runtime does not launch it yet (the ON_CHIP plan's steps take sm_90a's).
#pragma once

#include "device/tensor_memory_mma.h"
#include "on_chip.h"

enum {
  XENT_LCE_TM_ROWS = XENT_TM_ROWS,     // a block's rows: the product's M, a lane each
  XENT_LCE_TM_CLASSES = 256,           // a tile's classes: the product's N
  XENT_LCE_TM_THREADS = XENT_TM_ROWS,  // a thread a row
  XENT_LCE_TM_STAGES = 4,
  XENT_LCE_TM_BUFFER = (XENT_LCE_TM_ROWS + XENT_LCE_TM_CLASSES) * XENT_LCE_CHIP_K * 2,
  XENT_LCE_TM_SMEM = XENT_LCE_TM_STAGES * XENT_LCE_TM_BUFFER,
  XENT_LCE_TM_COLUMNS = 2 * XENT_LCE_TM_CLASSES,  // tensor memory: two accumulators
};

#if defined(__CUDA_ARCH__) && !defined(XENT_EMU) && !defined(__CUDA_ARCH_FEAT_SM100_ALL)
#define XENT_LCE_TM_ABSENT 1  // device code for another architecture: the kernel traps (never launched there)
#endif

// Grid (ceil(rows / 128), slices), blocks of 128 threads, XENT_LCE_TM_SMEM
// bytes of dynamic shared memory (1024-byte aligned), the maps'
// (xent_lce_chip_maps) boxes as sm_90a's. Wide: the per-token outputs'
// records too.
template <typename L, bool Wide>
static XENT_GLOBAL void __launch_bounds__(XENT_LCE_TM_THREADS)
    xent_lce_chip_stats_sm100(const __grid_constant__ xent_lce_chip_args<L> a) {
#if defined(XENT_LCE_TM_ABSENT)
  (void)a;
  __trap();
#else
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
  XENT_SHARED_ARRAY(uint64_t, bars, XENT_LCE_TM_STAGES);  // the stages' copies landed
  XENT_SHARED_ARRAY(uint64_t, done, XENT_LCE_TM_STAGES);  // the stages' products done
  XENT_SHARED_ARRAY(uint32_t, slot, 1);
  const int64_t r0 = (int64_t)blockIdx.x * XENT_LCE_TM_ROWS;
  const int64_t c0 = (int64_t)blockIdx.y * a.slice, c1 = xent_min_index(c0 + a.slice, a.classes);
  const int64_t live = xent_min_index(a.rows - r0, (int64_t)XENT_LCE_TM_ROWS);
  const int64_t row = r0 + threadIdx.x;
  xent_lce_chip_row_stats st;
  st.start(a, row);
  auto loads = xent_lce_chip_loads_of<XENT_LCE_TM_ROWS, XENT_LCE_TM_CLASSES, XENT_LCE_TM_THREADS, XENT_LCE_TM_STAGES>(
      smem, bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight, a.hidden_size);
  xent_tensor_init(done, XENT_LCE_TM_STAGES);
  const uint32_t tmem = xent_tm_alloc(slot, XENT_LCE_TM_COLUMNS);
  xent_tm_products q;
  const xent_wg_layout la = xent_lce_chip_layout(XENT_LCE_TM_ROWS, false),
                       lb = xent_lce_chip_layout(XENT_LCE_TM_CLASSES, false);
  // The stages, numbered across the block's tiles (stage g: tile g /
  // stages, columns 64 (g % stages) on, buffer g % 4).
  const int64_t stages = (a.hidden_size + XENT_LCE_CHIP_K - 1) / XENT_LCE_CHIP_K;
  const int64_t tiles = (c1 - c0 + XENT_LCE_TM_CLASSES - 1) / XENT_LCE_TM_CLASSES, total = tiles * stages;
  const auto issue = [&](int64_t g) {
    if (g >= total) return;
    const int64_t cb = c0 + g / stages * XENT_LCE_TM_CLASSES;
    loads.issue((int)(g % XENT_LCE_TM_STAGES), g % stages * XENT_LCE_CHIP_K, r0, live, cb,
                xent_min_index(c1 - cb, (int64_t)XENT_LCE_TM_CLASSES));
  };
  // Tile k's logits, from accumulator k % 2 once its products are done:
  // each thread's row, 32 columns at a time from its warp's lanes; then a
  // barrier, so that every thread's loads precede tile k + 2's products.
  const auto fold_tile = [&](int64_t k) {
    const int64_t cb = c0 + k * XENT_LCE_TM_CLASSES;
    const int64_t width = xent_min_index(c1 - cb, (int64_t)XENT_LCE_TM_CLASSES);
    const int at = (int)(k % 2) * XENT_LCE_TM_CLASSES;
    for (int c = 0; c < XENT_LCE_TM_CLASSES && c < width; c += 32) {
      float v[32];
      xent_tm_load32(xent_tm_address(tmem, xent_tm_warp_lane(), at + c), v);
      st.template fold<Wide>(a, v, [&](int j) { return c + j; }, cb, c0, width);
    }
    xent_tm_fence_before_sync();
    __syncthreads();
    xent_tm_fence_after_sync();
  };
  for (int64_t g = 0; g < XENT_LCE_TM_STAGES - 1; ++g) issue(g);
  // Tile n's products into accumulator n % 2; tile n - 1's folded after
  // tile n's first three stages are issued, the third's products running
  // meanwhile.
  for (int64_t n = 0; n < tiles; ++n) {
    const uint32_t acc = xent_tm_address(tmem, 0, (int)(n % 2) * XENT_LCE_TM_CLASSES);
    for (int64_t s = 0; s < stages; ++s) {
      const int64_t g = n * stages + s;
      const int b = (int)(g % XENT_LCE_TM_STAGES);
      loads.wait(b);
      if (threadIdx.x == 0) {
        const uint32_t buf = (uint32_t)b * XENT_LCE_TM_BUFFER;
        for (int j = 0; j < XENT_LCE_CHIP_K / 16; ++j)
          xent_tm_mma<XENT_LCE_TM_CLASSES>(q, acc, xent_tm_operand_at(loads.smem, buf + 32u * j, la),
                                           xent_tm_operand_at(loads.smem, buf + loads.kClassesAt + 32u * j, lb),
                                           s > 0 || j > 0);
        xent_tm_commit(q, done, b);
      }
      // Stage g - 1's products done (stage g's run on): its buffer takes
      // stage g + 3; at a tile's first stage, the tile before is complete.
      if (g > 0) xent_tm_wait(q, done, (int)((g - 1) % XENT_LCE_TM_STAGES));
      issue(g + XENT_LCE_TM_STAGES - 1);
      if (n > 0 && s == xent_min_index(stages, (int64_t)XENT_LCE_TM_STAGES - 1) - 1) fold_tile(n - 1);
    }
  }
  if (total > 0) {
    xent_tm_wait(q, done, (int)((total - 1) % XENT_LCE_TM_STAGES));
    fold_tile(tiles - 1);
  }
  xent_tm_free(tmem, XENT_LCE_TM_COLUMNS);
  if (row >= a.rows) return;
  // The row's record: one thread's statistics are the row's.
  const float ref = st.s > 0.0f ? st.m : 0.0f;
  const float twz = st.sw != 0.0f ? st.swz + st.sw * (st.m - ref) : 0.0f;
  float T = 0.0f;
  int64_t cand = XENT_NO_INDEX, nan_at = XENT_NO_INDEX;
  if constexpr (Wide) {
    T = xent_entropy_share(st.m, st.s, st.te, st.m);
    if (st.bi != XENT_LCE_CHIP_NO_INDEX) cand = a.class_offset + c0 + st.bi;
    if (st.bn != XENT_LCE_CHIP_NO_INDEX) nan_at = a.class_offset + c0 + st.bn;
  }
  xent_lce_chip_record<Wide>(a, row, st.label, ref, st.s, st.here, st.zy, st.sw, twz, T, cand, nan_at, st.m);
#endif
}
