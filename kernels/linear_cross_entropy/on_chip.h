// The linear cross entropy's statistics with the logits on chip (issue 62,
// docs/LINEAR_CE.md: pass 1 of the design), sm_90a: a block of 64 rows of
// hidden against a slice of the vocabulary, each 64 x 128 tile of logits
// made by the tensor cores (warpgroup_mma.h) into registers and folded into
// its rows' softmax statistics there; the logits never reach memory. Each
// (row, slice) leaves a vocabulary-parallel record (vocab_parallel.h), so
// the existing combine gives the loss and lse. Hard labels, bf16, no
// options yet; the operands are staged by the block's loads, one tile at a
// time and nothing in flight while the tensor cores work: the structure
// and its arithmetic, tested, before bulk tensor copies and a pipeline.
#pragma once

#include "device/reduce.h"
#include "device/vectors.h"
#include "device/warpgroup_mma.h"

enum {
  XENT_LCE_CHIP_ROWS = 64,      // a warpgroup's rows: wgmma's M
  XENT_LCE_CHIP_CLASSES = 128,  // a tile's classes: wgmma's N
  XENT_LCE_CHIP_K = 64,         // hidden's columns a stage: a 128-byte swizzled line
  XENT_LCE_CHIP_THREADS = 128,
  // Shared memory: the rows' and the classes' stage of K columns.
  XENT_LCE_CHIP_SMEM = (XENT_LCE_CHIP_ROWS + XENT_LCE_CHIP_CLASSES) * XENT_LCE_CHIP_K * 2,
};

struct xent_lce_chip_args {
  const uint16_t* hidden;                                   // [rows, H] bf16
  const uint16_t* weight;                                   // [classes, H] bf16: the classes' rows
  const int64_t* labels;                                    // [rows]; ignore_index or out of range: no loss
  float* records;                                           // [slices][rows][4]: (ref, s, a, b), vocab_parallel.h's
  int64_t rows, hidden_size, classes, slice, ignore_index;  // slice: classes a slice (the grid's y)
};

// Stages columns [k0, k0 + 64) of `count` rows of src (row r at src + r * H)
// at byte `start` of smem, swizzled; rows past `valid` and columns past H
// are zeros (they add nothing to a product).
template <typename Smem>
XENT_DEVICE void xent_lce_chip_stage(Smem smem, uint32_t start, xent_wg_layout layout, const uint16_t* src,
                                     int64_t count, int64_t valid, int64_t H, int64_t k0) {
  for (int64_t e = threadIdx.x; e < count * XENT_LCE_CHIP_K; e += blockDim.x) {
    const int64_t r = e / XENT_LCE_CHIP_K, k = e % XENT_LCE_CHIP_K;
    const uint16_t v = r < valid && k0 + k < H ? src[r * H + k0 + k] : (uint16_t)0;
    smem[xent_wg_address(layout, start, (int)r, (int)k) / 2] = v;
  }
}

// Grid (ceil(rows / 64), slices), blocks of 128 threads, XENT_LCE_CHIP_SMEM
// bytes of dynamic shared memory (1024-byte aligned: the swizzle's atoms).
static XENT_GLOBAL void __launch_bounds__(XENT_LCE_CHIP_THREADS) xent_lce_chip_stats(const xent_lce_chip_args a) {
  XENT_DYNAMIC_SHARED(uint16_t, smem);
  const int64_t r0 = (int64_t)blockIdx.x * XENT_LCE_CHIP_ROWS;
  const int64_t c0 = (int64_t)blockIdx.y * a.slice, c1 = xent_min_index(c0 + a.slice, a.classes);
  const int64_t live = xent_min_index(a.rows - r0, (int64_t)XENT_LCE_CHIP_ROWS);
  const uint32_t b_start = XENT_LCE_CHIP_ROWS * XENT_LCE_CHIP_K * 2;
  const xent_wg_layout la = {XENT_LCE_CHIP_ROWS * 128u, 1024u, true}, lb = {XENT_LCE_CHIP_CLASSES * 128u, 1024u, true};
  const int t = (int)threadIdx.x;
  // This thread's two rows of the tile (its accumulator's elements i with
  // i % 4 < 2, and the rest), their labels, and its running statistics
  // over its own columns: max, sum of exp, the label's logit if it met it.
  int64_t label[2];
  float m[2], s[2], zy[2];
  bool here[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t row = r0 + xent_wg_row(t, 2 * h);
    label[h] = row < a.rows ? a.labels[row] : a.ignore_index;
    m[h] = xent_lowest(0.0f), s[h] = 0.0f, zy[h] = 0.0f, here[h] = false;
  }
  xent_wg_acc<XENT_LCE_CHIP_CLASSES> acc;
  for (int64_t cb = c0; cb < c1; cb += XENT_LCE_CHIP_CLASSES) {
    const int64_t width = xent_min_index(c1 - cb, (int64_t)XENT_LCE_CHIP_CLASSES);
    for (int64_t k0 = 0; k0 < a.hidden_size; k0 += XENT_LCE_CHIP_K) {
      // Every thread past the last stage's wait: its tiles are free.
      __syncthreads();
      xent_lce_chip_stage(smem, 0, la, a.hidden + r0 * a.hidden_size, XENT_LCE_CHIP_ROWS, live, a.hidden_size, k0);
      xent_lce_chip_stage(smem, b_start, lb, a.weight + cb * a.hidden_size, XENT_LCE_CHIP_CLASSES, width, a.hidden_size,
                          k0);
      xent_wg_publish_smem();
      __syncthreads();
      xent_wg_fence();
      for (int j = 0; j < XENT_LCE_CHIP_K / 16; ++j)
        xent_wg_mma(acc, xent_wg_operand_at(smem, 32u * j, la), xent_wg_operand_at(smem, b_start + 32u * j, lb),
                    k0 > 0 || j > 0);
      xent_wg_commit(acc);
      xent_wg_wait<0>(acc);
    }
    // The tile's logits, folded into each row's statistics: columns past
    // the slice's end are -inf (no exp), and the label's logit is kept by
    // the thread holding its column.
    for (int h = 0; h < 2; ++h) {
      float x[XENT_LCE_CHIP_CLASSES / 4];
      for (int q = 0; q < XENT_LCE_CHIP_CLASSES / 8; ++q)
        for (int u = 0; u < 2; ++u) {
          const int i = 4 * q + 2 * h + u, col = xent_wg_col(t, i);
          x[2 * q + u] = col < width ? acc.d[i] : -INFINITY;
          if (cb + col == label[h] && col < width) zy[h] = acc.d[i], here[h] = true;
        }
      xent_online_add_n(m[h], s[h], x);
    }
  }
  // A row's four threads (lanes 4j to 4j + 3) merge theirs; the first
  // writes the record.
  for (int h = 0; h < 2; ++h) {
    float z = zy[h], in = here[h] ? 1.0f : 0.0f;
    for (int offset = 1; offset < 4; offset *= 2) {
      const float m2 = xent_shfl_xor(m[h], offset), s2 = xent_shfl_xor(s[h], offset);
      xent_online_merge(m[h], s[h], m2, s2);
      z += xent_shfl_xor(z, offset);
      in += xent_shfl_xor(in, offset);
    }
    const int64_t row = r0 + xent_wg_row(t, 2 * h);
    if (t % 4 != 0 || row >= a.rows) continue;
    const float ref = s[h] > 0.0f ? m[h] : 0.0f;
    const bool counted = in > 0.0f && label[h] != a.ignore_index;
    float* rec = a.records + ((int64_t)blockIdx.y * a.rows + row) * 4;
    rec[0] = ref;
    rec[1] = s[h];
    rec[2] = counted ? 1.0f : 0.0f;
    rec[3] = counted ? z - ref : 0.0f;
  }
}
