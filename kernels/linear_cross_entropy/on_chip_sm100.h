// The linear cross entropy with the logits on chip on sm_100a (on_chip.h's
// design, records and arguments, Blackwell's tensor cores). Pass 1: a block of
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
// Pass 2 (xent_lce_chip_grads_sm100): below.
// No sm_100 GPU has run them: the emulator runs them against float64
// (tests/lce_on_chip_test.cc, and through the runtime in
// linear_ce_vs_torch_test's test_on_chip_sm100) and nvcc compiles them for
// sm_100a. steps.h launches them where xent_lce_args.chip_tcgen05 says.
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

#if defined(__CUDA_ARCH__) && !defined(XENT_EMU) && !defined(XENT_TM_SM100A)
#define XENT_LCE_TM_ABSENT 1  // device code for another architecture: the kernel traps (never launched there)
#endif

// Grid ceil(rows / 128) x slices (as sm_90a's), blocks of 128 threads, XENT_LCE_TM_SMEM
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
  const xent_lce_chip_place at = xent_lce_chip_place_of(xent_lce_chip_blocks(a.rows, XENT_LCE_TM_ROWS),
                                                        xent_lce_chip_blocks(a.classes, a.slice), a.group);
  const int64_t r0 = at.row_block * XENT_LCE_TM_ROWS;
  const int64_t c0 = at.class_block * a.slice, c1 = xent_min_index(c0 + a.slice, a.classes);
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
  xent_lce_chip_record<Wide>(a, at.class_block, row, st.label, ref, st.s, st.here, st.zy, st.sw, twz, T, cand, nan_at,
                             st.m);
#endif
}

enum {
  // Tensor memory: two tiles' logits (128 columns each); once G is made,
  // two sets of G @ W's and G^T @ hidden's accumulators (64 columns for
  // each 128 rows or classes of the block: 192 a set), at 0 and 256.
  XENT_LCE_TM_GRAD_COLUMNS = 512,
};

// Adds 32 floats v, columns [c, c + 32) of a row, to sum (the row's start)
// where below `cols`: 16-byte reductions where `four` (the row 16-byte
// aligned, cols a multiple of 4), else an atomic an element.
XENT_DEVICE void xent_lce_tm_add_row(float* sum, int c, int cols, bool four, const float (&v)[32]) {
  XENT_UNROLL
  for (int j = 0; j < 32; j += 4) {
    if (c + j >= cols) continue;
    if (four) {
      xent_lce_chip_red4(sum + c + j, v[j], v[j + 1], v[j + 2], v[j + 3]);
    } else {
      XENT_UNROLL
      for (int k = j; k < j + 4; ++k)
        if (c + k < cols) atomicAdd(sum + c + k, v[k]);
    }
  }
}

// Pass 2 on sm_100a: on_chip.h's xent_lce_chip_grads (the same blocks of
// two 128 x 128 tiles, side by side or Tall one above the other, grid,
// arguments and shared memory) with blocks of 128 threads. Thread 0 makes
// both tiles' logits in tensor memory (the stages numbered across them,
// six buffers, five ahead); each thread turns its row of each into G
// (xent_lce_chip_grad_row) and stores it in bf16 where both products read
// it; then per 64 hidden columns, the next loading meanwhile, G @ W (a
// product a K-step for each 128 rows) and G^T @ hidden (one for each 128
// classes) into tensor memory, and each thread adds its rows of the first
// into grad_hidden and its classes of the second into grad_weight, 16-byte
// reductions of consecutive columns, while the next columns' products run
// into a second set of accumulators.
// One block an SM (its shared memory's), said to ptxas, which otherwise
// held it to 80 registers and spilled.
template <typename L, bool Tall>
static XENT_GLOBAL void __launch_bounds__(XENT_LCE_TM_THREADS, 1)
    xent_lce_chip_grads_sm100(const __grid_constant__ xent_lce_chip_grad_args<L> a) {
#if defined(XENT_LCE_TM_ABSENT)
  (void)a;
  __trap();
#else
  typedef xent_lce_chip_block<Tall> B;
  static_assert((int)XENT_LCE_TM_ROWS == (int)XENT_LCE_CHIP_BLOCK_ROWS, "sm_90a's tiles, a lane a row");
  constexpr int kTile = XENT_LCE_TM_ROWS, kRows = B::kRows, kClasses = B::kClasses, kStages = XENT_LCE_CHIP_STAGES;
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
  XENT_SHARED_ARRAY(uint64_t, bars, XENT_LCE_CHIP_STAGES);  // the stages' copies landed
  XENT_SHARED_ARRAY(uint64_t, done, XENT_LCE_CHIP_STAGES);  // the stages' products done
  XENT_SHARED_ARRAY(uint64_t, operand_bars, 2);             // the operands' copies landed
  XENT_SHARED_ARRAY(uint32_t, slot, 1);
  const xent_lce_chip_place at = xent_lce_chip_place_of(xent_lce_chip_blocks(a.row_end - a.row0, kRows),
                                                        xent_lce_chip_blocks(a.class_end - a.class0, kClasses), a.group);
  const int64_t H = a.hidden_size, r0 = a.row0 + at.row_block * kRows, cb = a.class0 + at.class_block * kClasses;
  const int64_t live = xent_min_index(a.row_end - r0, (int64_t)kRows);
  const int64_t width = xent_min_index(a.class_end - cb, (int64_t)kClasses);
  const int t = (int)threadIdx.x;
  // Tile q's first row and class, and its rows and classes (xent_lce_chip_block:
  // a second tile with none is not made, its G zeros).
  const auto tile_r0 = [&](int q) { return r0 + B::row_of(q); };
  const auto tile_cb = [&](int q) { return cb + B::class_of(q); };
  const auto tile_rows = [&](int q) { return B::rows_of(q, live); };
  const auto tile_width = [&](int q) { return B::width_of(q, width); };
  const int tiles = tile_rows(1) > 0 && tile_width(1) > 0 ? 2 : 1;
  // The logits' operands K-major; G K-major as A of G @ W (k a class) and
  // MN-major as A of G^T @ hidden (m a class); the operands' lines as the
  // products' MN-major B (n a hidden column).
  const xent_wg_layout la = xent_lce_chip_layout(kTile, false), lb = xent_lce_chip_layout(kTile, false),
                       g_k = xent_lce_chip_layout(kRows, false), g_mn = xent_lce_chip_layout(kRows, true),
                       lw = xent_lce_chip_layout(kClasses, true), lh = xent_lce_chip_layout(kRows, true);
  const bool four = H % 4 == 0 && (uintptr_t)a.grad_hidden % 16 == 0 && (uintptr_t)a.grad_weight % 16 == 0;
  auto loads = xent_lce_chip_loads_of<kTile, kTile, XENT_LCE_TM_THREADS, kStages>(
      smem, bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight, H);
  auto operands = xent_lce_chip_loads_of<kRows, kClasses, XENT_LCE_TM_THREADS, 2>(
      smem, operand_bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight, H);
  xent_tensor_init(done, kStages);
  const uint32_t tmem = xent_tm_alloc(slot, XENT_LCE_TM_GRAD_COLUMNS);
  xent_tm_products q;
  // The tiles' logits: stage g (tile g / stages, 64 hidden columns) in
  // buffer g % 6, five ahead, refilled once its products' commit arrived.
  const int64_t stages = (H + XENT_LCE_CHIP_K - 1) / XENT_LCE_CHIP_K, total = tiles * stages;
  const auto issue = [&](int64_t g) {
    if (g >= total) return;
    const int tq = (int)(g / stages);
    loads.issue((int)(g % kStages), g % stages * XENT_LCE_CHIP_K, tile_r0(tq), tile_rows(tq), tile_cb(tq),
                tile_width(tq));
  };
  for (int64_t g = 0; g < kStages - 1; ++g) issue(g);
  for (int64_t g = 0; g < total; ++g) {
    const int b = (int)(g % kStages);
    const int64_t s = g % stages;
    loads.wait(b);
    if (t == 0) {
      const uint32_t buf = (uint32_t)b * loads.kBuffer, logits = tmem + (uint32_t)(g / stages) * kTile;
      for (int j = 0; j < XENT_LCE_CHIP_K / 16; ++j)
        xent_tm_mma<kTile>(q, logits, xent_tm_operand_at(loads.smem, buf + 32u * j, la),
                           xent_tm_operand_at(loads.smem, buf + loads.kClassesAt + 32u * j, lb), s > 0 || j > 0);
      xent_tm_commit(q, done, b);
    }
    if (g > 0) xent_tm_wait(q, done, (int)((g - 1) % kStages));
    issue(g + kStages - 1);
  }
  if (total > 0) xent_tm_wait(q, done, (int)((total - 1) % kStages));
  // Every stage's copies and products done: the operands' buffers (below
  // G) take hidden's columns [h0, h0 + 64) in buffer (h0 / 64) % 2, the
  // first two loading while G is made.
  const auto issue_operands = [&](int64_t h0) {
    if (h0 < H) operands.issue((int)((h0 / XENT_LCE_CHIP_K) % 2), h0, r0, live, cb, width);
  };
  const bool products = a.grad_hidden || a.grad_weight;
  if (products) issue_operands(0), issue_operands(XENT_LCE_CHIP_K);
  for (int tq = 0; tq < 2; ++tq) {
    xent_lce_chip_grad_row rw;
    rw.start(a, tile_r0(tq), t, tq < tiles ? tile_rows(tq) : 0);
    const int r = t + B::row_of(tq);
    for (int c = 0; c < kTile; c += 32) {
      float v[32];
      if (tq < tiles) xent_tm_load32(xent_tm_address(tmem + (uint32_t)tq * kTile, xent_tm_warp_lane(), c), v);
      XENT_UNROLL
      for (int j = 0; j < 32; ++j) {
        const float g = tq < tiles ? rw.g(a, tile_cb(tq), c + j, tile_width(tq), v[j]) : 0.0f;
        smem[xent_wg_address(g_k, B::kG, r, c + j + B::class_of(tq)) / 2] = xent_store_bf16(g);
      }
    }
  }
  // G for the tensor cores (and grad_bias), every thread's.
  xent_wg_publish_smem();
  xent_tm_fence_before_sync();
  __syncthreads();
  xent_tm_fence_after_sync();
  // grad_bias: G's column sums (as stored), a thread a column, one atomic.
  for (int c = t; c < kClasses && a.grad_bias; c += XENT_LCE_TM_THREADS) {
    float sum = 0.0f;
    for (int r = 0; r < kRows; ++r) sum += xent_load_bf16(smem[xent_wg_address(g_k, B::kG, r, c) / 2]);
    if (c < width) atomicAdd(a.grad_bias + (cb - a.class0 + c), sum);
  }
  // The products of hidden's columns [64 i, 64 i + 64) from buffer i % 2
  // into accumulators i % 2 (the logits' columns, free once G is made, then
  // columns 256 on), committed to done[i % 2]: those of i + 1 issued
  // before i's are added, so the tensor cores run while the sums are sent.
  const int64_t steps = products ? (H + XENT_LCE_CHIP_K - 1) / XENT_LCE_CHIP_K : 0;
  const auto sums_at = [&](int64_t i) { return tmem + (uint32_t)(i % 2) * 2 * kTile; };
  const auto multiply = [&](int64_t i) {
    operands.wait((int)(i % 2));
    if (t != 0) return;
    const uint32_t buf = (uint32_t)(i % 2) * B::kBuffer, dh = sums_at(i);
    const uint32_t dw = dh + (uint32_t)(kRows / kTile) * XENT_LCE_CHIP_K;
    // grad_hidden's rows, 128 a product: k over the block's classes, 16 a
    // step (32 bytes along G's line, a block of 64 on; two lines of W's).
    for (int m = 0; m < kRows / kTile && a.grad_hidden; ++m)
      for (int j = 0; j < kClasses / 16; ++j)
        xent_tm_mma<XENT_LCE_CHIP_K, false, true>(
            q, dh + (uint32_t)m * XENT_LCE_CHIP_K,
            xent_tm_operand_at(smem, B::kG + (uint32_t)m * kTile * 128u + (j / 4) * g_k.leading + 32u * (j % 4), g_k),
            xent_tm_operand_at(smem, buf + operands.kClassesAt + 2048u * j, lw), j > 0);
    // grad_weight's classes, 128 a product: k over the block's rows, 16 a
    // step (two lines of G's and of hidden's).
    for (int m = 0; m < kClasses / kTile && a.grad_weight; ++m)
      for (int j = 0; j < kRows / 16; ++j)
        xent_tm_mma<XENT_LCE_CHIP_K, true, true>(
            q, dw + (uint32_t)m * XENT_LCE_CHIP_K,
            xent_tm_operand_at(smem, B::kG + (uint32_t)(2 * m) * g_mn.leading + 2048u * j, g_mn),
            xent_tm_operand_at(smem, buf + 2048u * j, lh), j > 0);
    xent_tm_commit(q, done, (int)(i % 2));
  };
  if (steps > 0) multiply(0);
  for (int64_t i = 0; i < steps; ++i) {
    // i + 1's products queue behind i's: their accumulators' last loads
    // (i - 1's) are past the barrier that ended the last step.
    if (i + 1 < steps) multiply(i + 1);
    // i's products done: their buffer takes i + 2's operands, which load
    // while i's sums are sent and i + 1 is multiplied.
    xent_tm_wait(q, done, (int)(i % 2));
    issue_operands((i + 2) * XENT_LCE_CHIP_K);
    // Each thread's rows of G @ W and classes of G^T @ hidden (every thread
    // loads: tcgen05.ld is a warp's), added where they are real.
    const int64_t h0 = i * XENT_LCE_CHIP_K;
    const uint32_t dh = sums_at(i), dw = dh + (uint32_t)(kRows / kTile) * XENT_LCE_CHIP_K;
    const int cols = (int)xent_min_index(H - h0, (int64_t)XENT_LCE_CHIP_K);
    for (int c = 0; c < XENT_LCE_CHIP_K; c += 32) {
      float v[32];
      for (int m = 0; m < kRows / kTile && a.grad_hidden; ++m) {
        const int64_t row = r0 + kTile * m + t;
        xent_tm_load32(xent_tm_address(dh + (uint32_t)m * XENT_LCE_CHIP_K, xent_tm_warp_lane(), c), v);
        if (row < r0 + live) xent_lce_tm_add_row(a.grad_hidden + (row - a.row0) * H + h0, c, cols, four, v);
      }
      for (int m = 0; m < kClasses / kTile && a.grad_weight; ++m) {
        const int64_t cls = cb + kTile * m + t;
        xent_tm_load32(xent_tm_address(dw + (uint32_t)m * XENT_LCE_CHIP_K, xent_tm_warp_lane(), c), v);
        if (cls < cb + width) xent_lce_tm_add_row(a.grad_weight + (cls - a.class0) * H + h0, c, cols, four, v);
      }
    }
    // Every thread's loads of i's accumulators done before i + 2's
    // products write them.
    xent_tm_fence_before_sync();
    __syncthreads();
    xent_tm_fence_after_sync();
  }
  xent_tm_free(tmem, XENT_LCE_TM_GRAD_COLUMNS);
#endif
}
