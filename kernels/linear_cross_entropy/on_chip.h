// The linear cross entropy with the logits on chip (issue 62,
// docs/LINEAR_CE.md's design), sm_90a: a block of 128 rows of hidden, two
// warpgroups of 64, against tiles of 128 classes, each warpgroup's 64 x
// 128 tile of logits made by the tensor cores (warpgroup_mma.h) into
// registers, never reaching memory.
// Pass 1 (xent_lce_chip_stats) folds the tiles into the rows' softmax
// statistics, a vocabulary-parallel record (vocab_parallel.h) per row and
// slice, so the existing combine gives the loss and lse. Pass 2
// (xent_lce_chip_grads) makes each tile again, turns it into its gradient
// G from the rows' lse, and multiplies G by the weight's rows into
// grad_hidden and by hidden's rows into grad_weight, both f32 sums.
// bf16 and hard labels, with ignore_index, class weights, label smoothing,
// z-loss, the soft cap, the temperature (the call's or each row's), token
// weights, a bias (whose gradient is G's column sums), the per-token
// outputs (pass 1's wide records; dentropy's term in G) and a vocabulary
// split over ranks (weight's rows a rank's classes); the
// steps of steps.h launch both for the ON_CHIP plan of
// runtime/ops/linear_ce.c. The logits' stages are tensor copies
// (tensor_copy.h: two boxes a stage, issued by thread 0) into six
// buffers, the next ones in flight (across pass 1's tiles) while the
// tensor cores multiply one, whose products stay in flight while the last
// one's buffer is refilled; pass 2's operands go into two. Every warp
// multiplies; a producer warp is the next step.
#pragma once

#include "device/reduce.h"
#include "device/convert.h"
#include "device/tensor_copy.h"
#include "device/warpgroup_mma.h"
#include "cross_entropy/vocab_parallel.h"

enum {
  XENT_LCE_CHIP_ROWS = 64,      // a warpgroup's rows: wgmma's M
  XENT_LCE_CHIP_GROUPS = 2,     // warpgroups a block, each its own rows of the same classes
  XENT_LCE_CHIP_BLOCK_ROWS = XENT_LCE_CHIP_GROUPS * XENT_LCE_CHIP_ROWS,
  XENT_LCE_CHIP_CLASSES = 128,  // a tile's classes: wgmma's N
  XENT_LCE_CHIP_K = 64,         // hidden's columns a stage: a 128-byte swizzled line
  XENT_LCE_CHIP_THREADS = 128 * XENT_LCE_CHIP_GROUPS,
  // Shared memory: six buffers, each a stage of K columns of the block's
  // rows and of the classes (the classes' shared by both warpgroups: 32 KB
  // a stage for two products of 64 x 128 x 64, where a warpgroup alone
  // loaded 24 KB for one, the L2's traffic a flop two thirds of it), the
  // next five loading while the tensor cores multiply one: a stage's
  // products are about 280 ns of an SM's tensor cores, a load from memory
  // under load a microsecond or more. Pass 2 then lays the same bytes out
  // anew for G and its products' operands (xent_lce_chip_block). 192 KiB:
  // one block (eight warps) an SM, as the registers allow, so shared
  // memory past four buffers would go unused (the launch raises the
  // kernels' limit past 48 KiB).
  XENT_LCE_CHIP_STAGES = 6,
  XENT_LCE_CHIP_STAGE_ROWS = 0,
  XENT_LCE_CHIP_STAGE_CLASSES = XENT_LCE_CHIP_BLOCK_ROWS * XENT_LCE_CHIP_K * 2,
  XENT_LCE_CHIP_BUFFER = (XENT_LCE_CHIP_BLOCK_ROWS + XENT_LCE_CHIP_CLASSES) * XENT_LCE_CHIP_K * 2,
  XENT_LCE_CHIP_SMEM = XENT_LCE_CHIP_STAGES * XENT_LCE_CHIP_BUFFER,
  // The grids' order: row blocks a group (xent_lce_chip_place_of).
  XENT_LCE_CHIP_GROUP = 8,
};

// Where a block of the passes' 1-D grids works: a row block and a class
// block (pass 1's slice, pass 2's tile). The blocks take `group` row blocks
// at a time, the fastest, with every class block, then the next group's, so
// the blocks in flight (one an SM) share a few row blocks' hidden (and
// grad_hidden's sums) and a few class blocks' weight (and grad_weight's)
// that fit the L2. Row blocks fastest over every row, the blocks in flight
// each re-read their own hidden rows (all of hidden, 128 MiB at 16384 x
// 4096) tile after tile, and pass 2's went to memory (docs/LINEAR_CE.md,
// "The grids' order").
static inline __host__ __device__ int64_t xent_lce_chip_blocks(int64_t n, int64_t size) {
  return (n + size - 1) / size;
}
struct xent_lce_chip_place {
  int64_t row_block, class_block;
};
// In 32 bits (the grid's blocks are under 2^31, so is a group's span): a
// 64-bit division is a call, whose stack spilled sm_100a's pass 2.
XENT_DEVICE xent_lce_chip_place xent_lce_chip_place_of(int64_t row_blocks, int64_t class_blocks, int64_t group) {
  const uint32_t R = (uint32_t)row_blocks, g = group < 1 ? 1u : group < row_blocks ? (uint32_t)group : R;
  const uint32_t b = blockIdx.x, span = g * (uint32_t)class_blocks, first = b / span * g, i = b % span;
  const uint32_t height = R - first < g ? R - first : g;
  return {(int64_t)(first + i % height), (int64_t)(i / height)};
}

// The layouts, all 128-byte swizzled (lines of 64 elements, 8-line atoms of
// 1024 bytes): the stages of the logits' product, K-major (a line is a
// row's, or a class's, 64 hidden columns); pass 2's products' operands,
// MN-major (a line is 64 hidden columns of one class, or of one row); and
// G, a line a row's 64 classes, two blocks of 64 classes, which is
// K-major for G @ W (k a class) and MN-major for G^T @ hidden (m a class).
XENT_DEVICE xent_wg_layout xent_lce_chip_layout(int64_t lines, bool mn_major) {
  return xent_wg_layout{(uint32_t)lines * 128u, 1024u, true, mn_major};
}

// The block's row of thread t's accumulator element i: its warpgroup's 64
// rows, then the fragment's row among them.
XENT_DEVICE int xent_lce_chip_row(int t, int i) { return XENT_LCE_CHIP_ROWS * (t / 128) + xent_wg_row(t, i); }

// The logits' options in the chunked path's order (cross_entropy.h): the
// soft cap, then the temperature, z = cap tanh(x / cap) / tau; and dz/dx,
// the factor of the gradient with respect to x.
struct xent_lce_chip_logit {
  float cap;   // 0: none
  float itau;  // 1 / tau
};
// Column col of the tile at class cb: its logit x plus the bias's (bf16).
XENT_DEVICE float xent_lce_chip_biased(const uint16_t* bias, int64_t cb, int col, int64_t width, float x) {
  return bias && col < width ? x + xent_load_bf16(bias[cb + col]) : x;
}
XENT_DEVICE float xent_lce_chip_z(const xent_lce_chip_logit& o, float x, float& dzdx) {
  dzdx = o.itau;
  if (o.cap > 0.0f) {
    const float th = xent_tanh(x / o.cap);
    x = o.cap * th;
    dzdx *= 1.0f - th * th;
  }
  return x * o.itau;
}
// Row row's options: the call's, with its own 1 / tau where the call has a
// temperature per row (NaN where tau is not finite and > 0: a NaN row,
// which the combine reports as a bad label's).
XENT_DEVICE xent_lce_chip_logit xent_lce_chip_row_logit(xent_lce_chip_logit o, const float* tau, int64_t row) {
  if (tau) {
    const float t = tau[row], it = 1.0f / t;
    o.itau = t > 0.0f && t - t == 0.0f && it - it == 0.0f ? it : NAN;
  }
  return o;
}

template <typename L>
struct xent_lce_chip_args {
  // The stages' tensor maps (xent_lce_chip_maps): hidden's rows and
  // weight's classes, in boxes of 64 columns x 128; `tma` false: none.
  xent_tensor_map hidden_map, weight_map;
  bool tma;
  const uint16_t* hidden;  // [rows, H] bf16
  const uint16_t* weight;  // [classes, H] bf16: the classes' rows
  const L* labels;         // [rows] int32 or int64; ignore_index or out of range: a = b = 0 (the combine,
                           // which reads the labels too, says what an out-of-range label's row is)
  float* records;          // [slices][rows][record]: (ref, s, a, b), wide (t, yz, here, v, index) too,
                           // vocab_parallel.h's (xent_shard_record)
  const float* weights;    // [classes] class weights, or NULL (1): a = w[y]
  const uint16_t* bias;    // [classes] bf16, or NULL
  xent_lce_chip_logit logit;
  int64_t rows, hidden_size, classes, slice, ignore_index;  // slice: classes a slice (the grid's y)
  float smoothing;  // eps: a = (1 - eps) w[y] + eps / C sum_c w[c] over the slice, b likewise
  const float* row_temperature;  // [rows] each row's tau, or NULL (logit's)
  // Vocabulary-parallel: weight's rows are classes [class_offset, +classes)
  // of global_classes, which the labels, class weights and eps / C are of.
  int64_t class_offset, global_classes;
  int64_t group;  // the grid's order: row blocks a group (XENT_LCE_CHIP_GROUP)
};

// A lane's argmax over its columns, as an offset in the slice (int32: the
// plan's slices are under 2^31 classes), none if it has seen no value above
// the lowest finite one.
enum { XENT_LCE_CHIP_NO_INDEX = INT32_MAX };

// Pass 1's j-th logit of a thread's row h (h = 0, 1): its accumulator
// element, and that element's column (rising with j).
XENT_DEVICE int xent_lce_chip_elem(int h, int j) { return 4 * (j / 2) + 2 * h + j % 2; }
XENT_DEVICE int xent_lce_chip_col(int t, int h, int j) { return xent_wg_col(t, xent_lce_chip_elem(h, j)); }

// Class col of the tile at class cb: its weight (1 without class weights).
XENT_DEVICE float xent_lce_chip_w(const float* weights, int64_t c) { return weights ? weights[c] : 1.0f; }

// A stage: columns [k0, k0 + 64) of the block's 128 rows and of 128
// classes into a buffer, a line a row (or class): the same bytes serve a
// K-major operand's rows and an MN-major one's k. With tensor maps
// (xent_lce_chip_maps: H a multiple of 8, hidden and weight 16-byte
// aligned) thread 0 copies the stage as two boxes (tensor_copy.h), which
// complete the buffer's mbarrier, with zeros past the maps' rows and
// columns; else every thread stores elements, zeros past `live` rows,
// `width` classes and H columns, for the tensor cores after the wait's
// fence and barrier. The maps end where the launch's rows and classes do:
// a box's rows past `live` (or classes past `width`) within them are a
// slice's (pass 1's classes past its slice) and no product keeps them.
template <typename Smem, typename Bars, int Rows = XENT_LCE_CHIP_BLOCK_ROWS, int Classes = XENT_LCE_CHIP_CLASSES,
          int Threads = XENT_LCE_CHIP_THREADS>
struct xent_lce_chip_loads {
  // A buffer: the rows' lines, then the classes'; the boxes are of 128
  // lines each (the maps'), Rows / 128 and Classes / 128 a stage.
  static constexpr uint32_t kClassesAt = Rows * XENT_LCE_CHIP_K * 2, kBuffer = (Rows + Classes) * XENT_LCE_CHIP_K * 2;
  static_assert(Rows % XENT_LCE_CHIP_BLOCK_ROWS == 0 && Classes % XENT_LCE_CHIP_CLASSES == 0, "the maps' boxes");
  Smem smem;
  Bars bars;  // an mbarrier a buffer (tensor maps only)
  const xent_tensor_map *hidden_map, *weight_map;  // nullptr: element by element
  const uint16_t *hidden, *weight;
  int64_t H;
  xent_tensor_loads tma;

  // Stage columns [k0, k0 + 64) of rows [r0, r0 + live) and classes [cb,
  // cb + width) into buffer b (uniform: every thread calls it).
  __device__ __forceinline__ void issue(int b, int64_t k0, int64_t r0, int64_t live, int64_t cb, int64_t width) {
    const uint32_t buf = (uint32_t)b * kBuffer;
    if (hidden_map) {
      if (threadIdx.x == 0) {
        xent_tensor_expect(tma, bars, b, kBuffer);
        for (int q = 0; q < Rows / XENT_LCE_CHIP_BLOCK_ROWS; ++q)
          xent_tensor_load(tma, hidden_map, smem, buf + (uint32_t)q * XENT_LCE_CHIP_BLOCK_ROWS * 128u, (int32_t)k0,
                           (int32_t)(r0 + q * XENT_LCE_CHIP_BLOCK_ROWS), bars, b);
        for (int q = 0; q < Classes / XENT_LCE_CHIP_CLASSES; ++q)
          xent_tensor_load(tma, weight_map, smem, buf + kClassesAt + (uint32_t)q * XENT_LCE_CHIP_CLASSES * 128u,
                           (int32_t)k0, (int32_t)(cb + q * XENT_LCE_CHIP_CLASSES), bars, b);
      }
      return;
    }
    stage(buf, hidden + r0 * H, Rows, live, k0);
    stage(buf + kClassesAt, weight + cb * H, Classes, width, k0);
  }
  // Buffer b's last issued stage, landed for the tensor cores (uniform).
  __device__ __forceinline__ void wait(int b) {
    if (hidden_map) {
      xent_tensor_wait(tma, bars, b);
    } else {
      xent_wg_publish_smem();
      __syncthreads();
    }
  }
  // `count` lines of src (line r at src + r * H), those past `valid` and
  // columns past H zeros, at byte `start`.
  __device__ __forceinline__ void stage(uint32_t start, const uint16_t* src, int count, int64_t valid, int64_t k0) {
    const xent_wg_layout layout = xent_lce_chip_layout(count, false);
    for (int e = (int)threadIdx.x; e < count * XENT_LCE_CHIP_K; e += Threads) {
      const int line = e / XENT_LCE_CHIP_K, k = e % XENT_LCE_CHIP_K;
      smem[xent_wg_address(layout, start, line, k) / 2] =
          line < valid && k0 + k < H ? src[(int64_t)line * H + k0 + k] : (uint16_t)0;
    }
  }
};
template <int Rows = XENT_LCE_CHIP_BLOCK_ROWS, int Classes = XENT_LCE_CHIP_CLASSES, int Threads = XENT_LCE_CHIP_THREADS,
          int Stages = XENT_LCE_CHIP_STAGES, typename Smem, typename Bars>
XENT_DEVICE xent_lce_chip_loads<Smem, Bars, Rows, Classes, Threads> xent_lce_chip_loads_of(
    Smem smem, Bars bars, const xent_tensor_map* hm, const xent_tensor_map* wm, bool tma, const uint16_t* hidden,
    const uint16_t* weight, int64_t H) {
  if (tma) xent_tensor_init(bars, Stages);
  return xent_lce_chip_loads<Smem, Bars, Rows, Classes, Threads>{
      smem, bars, tma ? hm : nullptr, tma ? wm : nullptr, hidden, weight, H, {}};
}

// Tile `tile` (from 0) of the block's tiles of classes [c0, c1), 128
// classes each: its 128 x 128 logits of rows [r0, r0 + live) into each
// warpgroup's acc, its own 64 rows'. K-major stages of 64 hidden columns,
// four products each, numbered across the tiles (stage g: tile g / stages,
// columns 64 (g % stages) on, buffer g % 4), so that the next tile's first
// stages load while this one's last are multiplied and its logits folded:
// the next stages' copies in flight while the tensor cores work on this
// one's, and this one's products in flight while the last one's are
// waited for and its buffer refilled (so the tensor cores need not idle
// through the barrier and the copies' issue). Tile 0 issues the first
// stages; the caller keeps `loads` from tile to tile and leaves the
// buffers alone between them. The caller's earlier readers of the buffers
// are past a barrier; every thread is past its products when it returns (a
// barrier).
template <typename Loads>
XENT_DEVICE void xent_lce_chip_logits(Loads& loads, int64_t r0, int64_t live, int64_t c0, int64_t c1, int64_t tile,
                                      xent_wg_acc<XENT_LCE_CHIP_CLASSES>& acc) {
  const xent_wg_layout la = xent_lce_chip_layout(XENT_LCE_CHIP_ROWS, false),
                       lb = xent_lce_chip_layout(XENT_LCE_CHIP_CLASSES, false);
  // This warpgroup's rows: 64 lines (eight whole atoms) on in the stage.
  const uint32_t rows_at = XENT_LCE_CHIP_STAGE_ROWS + threadIdx.x / 128 * XENT_LCE_CHIP_ROWS * 128u;
  const int64_t stages = (loads.H + XENT_LCE_CHIP_K - 1) / XENT_LCE_CHIP_K;
  const int64_t total = (c1 - c0 + XENT_LCE_CHIP_CLASSES - 1) / XENT_LCE_CHIP_CLASSES * stages;
  constexpr int kAhead = XENT_LCE_CHIP_STAGES - 1;
  const auto issue = [&](int64_t g) {
    if (g >= total) return;
    const int64_t cb = c0 + g / stages * XENT_LCE_CHIP_CLASSES;
    loads.issue((int)(g % XENT_LCE_CHIP_STAGES), g % stages * XENT_LCE_CHIP_K, r0, live, cb,
                xent_min_index(c1 - cb, (int64_t)XENT_LCE_CHIP_CLASSES));
  };
  const int64_t first = tile * stages;
  if (tile == 0)
    for (int64_t n = 0; n < kAhead; ++n) issue(n);
  for (int64_t s = 0; s < stages; ++s) {
    // Stage s landed, for every thread.
    const int b = (int)((first + s) % XENT_LCE_CHIP_STAGES);
    loads.wait(b);
    const uint32_t buf = (uint32_t)b * XENT_LCE_CHIP_BUFFER;
    xent_wg_fence();
    for (int j = 0; j < XENT_LCE_CHIP_K / 16; ++j)
      xent_wg_mma(acc, xent_wg_operand_at(loads.smem, buf + rows_at + 32u * j, la),
                  xent_wg_operand_at(loads.smem, buf + XENT_LCE_CHIP_STAGE_CLASSES + 32u * j, lb), s > 0 || j > 0);
    xent_wg_commit(acc);
    // Stage s - 1's products done (stage s's run on), for every thread:
    // its buffer takes stage s + kAhead.
    xent_wg_wait<1>(acc);
    __syncthreads();
    issue(first + s + kAhead);
  }
  xent_wg_wait<0>(acc);
  __syncthreads();
}

// Pass 1's statistics of one row over a thread's columns of its tiles:
// max, sum of exp, the label's logit if it met it. Smoothing: also the sum
// of w[c] over its columns and of w[c] (z - m) relative to its running max
// m, moved as m grows. Wide: the entropy's t (token_stats.h) and the
// argmax, the lowest column of the thread's max (its columns rise with the
// tiles and within each fold, so the first new max found is it) and of its
// first NaN. Both renderings of pass 1 keep these: sm_90a's four threads a
// row (then merged by shuffles), sm_100a's one.
struct xent_lce_chip_row_stats {
  int64_t label;  // in the slice's classes
  float m, s, zy, sw, swz, te;
  int32_t bi, bn;
  bool here;
  xent_lce_chip_logit logit;

  template <typename L>
  __device__ __forceinline__ void start(const xent_lce_chip_args<L>& a, int64_t row) {
    label = (row < a.rows ? (int64_t)a.labels[row] : a.ignore_index) - a.class_offset;
    logit = row < a.rows ? xent_lce_chip_row_logit(a.logit, a.row_temperature, row) : a.logit;
    m = xent_lowest(0.0f), s = 0.0f, zy = 0.0f, here = false, sw = 0.0f, swz = 0.0f;
    te = 0.0f, bi = bn = XENT_LCE_CHIP_NO_INDEX;
  }
  // N logits of the tile at class cb (the slice's from c0; `width` of its
  // columns in the slice): v[j] the product's value at column col(j),
  // rising with j. Columns past the slice's end are -inf (no exp), and the
  // label's logit is kept by the thread holding its column.
  template <bool Wide, int N, typename L, typename Col>
  __device__ __forceinline__ void fold(const xent_lce_chip_args<L>& a, const float (&v)[N], Col col, int64_t cb,
                                       int64_t c0, int64_t width) {
    float x[N];
    XENT_UNROLL
    for (int j = 0; j < N; ++j) {
      const int c = col(j);
      float unused;
      const float z = xent_lce_chip_z(logit, xent_lce_chip_biased(a.bias, cb, c, width, v[j]), unused);
      x[j] = c < width ? z : -INFINITY;
      if (cb + c == label && c < width) zy = z, here = true;
    }
    const float before = m;
    if constexpr (Wide) {
      xent_online_add_n_t(m, s, te, x, 1.0f);
      const int32_t at = (int32_t)(cb - c0);
      if (m > before || bi == XENT_LCE_CHIP_NO_INDEX) {
        XENT_UNROLL
        for (int j = N - 1; j >= 0; --j)
          if (x[j] == m) bi = at + col(j);
      }
      if (s != s && bn == XENT_LCE_CHIP_NO_INDEX) {
        XENT_UNROLL
        for (int j = N - 1; j >= 0; --j)
          if (x[j] != x[j]) bn = at + col(j);
      }
    } else {
      xent_online_add_n(m, s, x);
    }
    if (a.smoothing != 0.0f) {
      const float* slice_weights = a.weights ? a.weights + a.class_offset : nullptr;  // by the slice's classes
      float tw = 0.0f, twz = 0.0f;
      XENT_UNROLL
      for (int j = 0; j < N; ++j) {
        const int c = col(j);
        if (c >= width) continue;
        const float w = xent_lce_chip_w(slice_weights, cb + c);
        tw += w, twz += w * (x[j] - m);
      }
      if (sw != 0.0f) swz += sw * (before - m);
      sw += tw, swz += twz;
    }
  }
};

// Row `row`'s record of slice `slice` from its merged statistics: ref
// (its max, 0 where s is 0), s, whether the label's logit was met (`in`)
// and that logit z, smoothing's sums relative to ref; Wide: T, the argmax
// candidate and first NaN (global classes), and the max m.
template <bool Wide, typename L>
XENT_DEVICE void xent_lce_chip_record(const xent_lce_chip_args<L>& a, int64_t slice, int64_t row, int64_t label,
                                      float ref, float s, bool in, float z, float tw, float twz, float T, int64_t cand,
                                      int64_t nan_at, float m) {
  const int64_t y = label + a.class_offset;
  const bool labelled = y != a.ignore_index && y >= 0 && y < a.global_classes;
  const bool counted = in && labelled;
  const float w = counted ? xent_lce_chip_w(a.weights, y) : 0.0f;
  float ra = w, rb = counted ? w * (z - ref) : 0.0f;
  if (a.smoothing != 0.0f && labelled) {
    const float e = a.smoothing, ec = e / (float)a.global_classes;
    ra = (1.0f - e) * ra + ec * tw;
    rb = (1.0f - e) * rb + ec * twz;
  }
  float* rec = a.records + (slice * a.rows + row) * xent_shard_record<float>(Wide);
  rec[0] = ref;
  rec[1] = s;
  rec[2] = ra;
  rec[3] = rb;
  if constexpr (Wide) {
    const bool holds = labelled && in, nan = nan_at != XENT_NO_INDEX;
    rec[4] = T;
    rec[5] = holds ? z - ref : 0.0f;
    rec[6] = holds ? 1.0f : 0.0f;
    rec[7] = nan ? NAN : m;
    *(int64_t*)(rec + 8) = nan ? nan_at : cand;
  }
}

// Grid ceil(rows / 128) x slices (xent_lce_chip_place_of's order), blocks
// of 256 threads, XENT_LCE_CHIP_SMEM
// bytes of dynamic shared memory (1024-byte aligned: the swizzle's atoms).
// Wide: the per-token outputs' records too (a call with entropy,
// label_logprob, argmax or dentropy), compiled apart so that the plain
// pass keeps its registers.
template <typename L, bool Wide>
static XENT_GLOBAL void __launch_bounds__(XENT_LCE_CHIP_THREADS)
    xent_lce_chip_stats(const __grid_constant__ xent_lce_chip_args<L> a) {
#if defined(XENT_WG_ABSENT)
  (void)a;
  __trap();
#else
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
  const xent_lce_chip_place at = xent_lce_chip_place_of(xent_lce_chip_blocks(a.rows, XENT_LCE_CHIP_BLOCK_ROWS),
                                                        xent_lce_chip_blocks(a.classes, a.slice), a.group);
  const int64_t r0 = at.row_block * XENT_LCE_CHIP_BLOCK_ROWS;
  const int64_t c0 = at.class_block * a.slice, c1 = xent_min_index(c0 + a.slice, a.classes);
  const int64_t live = xent_min_index(a.rows - r0, (int64_t)XENT_LCE_CHIP_BLOCK_ROWS);
  const int t = (int)threadIdx.x;
  // This thread's two rows of the tile (its accumulator's elements i with
  // i % 4 < 2, and the rest), each its statistics over its own columns.
  xent_lce_chip_row_stats st[2];
  for (int h = 0; h < 2; ++h) st[h].start(a, r0 + xent_lce_chip_row(t, 2 * h));
  xent_wg_acc<XENT_LCE_CHIP_CLASSES> acc;
  XENT_SHARED_ARRAY(uint64_t, bars, XENT_LCE_CHIP_STAGES);
  auto loads = xent_lce_chip_loads_of(smem, bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight,
                                      a.hidden_size);
  for (int64_t cb = c0; cb < c1; cb += XENT_LCE_CHIP_CLASSES) {
    const int64_t width = xent_min_index(c1 - cb, (int64_t)XENT_LCE_CHIP_CLASSES);
    xent_lce_chip_logits(loads, r0, live, c0, c1, (cb - c0) / XENT_LCE_CHIP_CLASSES, acc);
    XENT_UNROLL
    for (int h = 0; h < 2; ++h) {
      float v[XENT_LCE_CHIP_CLASSES / 4];
      XENT_UNROLL
      for (int j = 0; j < XENT_LCE_CHIP_CLASSES / 4; ++j) v[j] = acc.d[xent_lce_chip_elem(h, j)];
      st[h].template fold<Wide>(a, v, [&](int j) { return xent_lce_chip_col(t, h, j); }, cb, c0, width);
    }
  }
  // A row's four threads (lanes 4j to 4j + 3) merge theirs; the first
  // writes the record.
  for (int h = 0; h < 2; ++h) {
    float& m = st[h].m;
    float& s = st[h].s;
    const float own = m, own_s = s;
    float z = st[h].zy, in = st[h].here ? 1.0f : 0.0f;
    for (int offset = 1; offset < 4; offset *= 2) {
      const float m2 = xent_shfl_xor(m, offset), s2 = xent_shfl_xor(s, offset);
      xent_online_merge(m, s, m2, s2);
      z += xent_shfl_xor(z, offset);
      in += xent_shfl_xor(in, offset);
    }
    const float ref = s > 0.0f ? m : 0.0f;
    // Smoothing's sums, each lane's moved from its own max to ref, merged.
    const bool smooth = a.smoothing != 0.0f;
    float tw = st[h].sw, twz = st[h].sw != 0.0f ? st[h].swz + st[h].sw * (own - ref) : 0.0f;
    for (int offset = 1; offset < 4 && smooth; offset *= 2) {
      tw += xent_shfl_xor(tw, offset);
      twz += xent_shfl_xor(twz, offset);
    }
    // Wide: the row's T (each lane's t moved to the row's max), its argmax
    // (the lowest column holding the max, or the lowest NaN's) as a global
    // class, none where the slice has no value above the lowest and no NaN.
    float T = 0.0f;
    int64_t cand = XENT_NO_INDEX, nan_at = XENT_NO_INDEX;
    if constexpr (Wide) {
      T = xent_entropy_share(own, own_s, st[h].te, m);
      for (int offset = 1; offset < 4; offset *= 2) T += xent_shfl_xor(T, offset);
      if (st[h].bi != XENT_LCE_CHIP_NO_INDEX && own == m) cand = a.class_offset + c0 + st[h].bi;
      if (st[h].bn != XENT_LCE_CHIP_NO_INDEX) nan_at = a.class_offset + c0 + st[h].bn;
      xent_lanes_min2(cand, nan_at, 4);
    }
    const int64_t row = r0 + xent_lce_chip_row(t, 2 * h);
    if (t % 4 != 0 || row >= a.rows) continue;
    xent_lce_chip_record<Wide>(a, at.class_block, row, st[h].label, ref, s, in > 0.0f, z, tw, twz, T, cand, nan_at, m);
  }
#endif
}

// How pass 2 scales a row's gradient: by the reduced loss's dloss (the
// chain's dloss / divisor for a mean: one f32), or each row's own (reduction
// none: the rows' dloss in the loss dtype, f32 or bf16), or 1.
enum {
  XENT_LCE_CHIP_DLOSS_ONE,
  XENT_LCE_CHIP_DLOSS_SCALAR,
  XENT_LCE_CHIP_DLOSS_ROWS_F32,
  XENT_LCE_CHIP_DLOSS_ROWS_BF16
};

template <typename L>
struct xent_lce_chip_grad_args {
  xent_tensor_map hidden_map, weight_map;  // as xent_lce_chip_args's, ending at row_end and class_end
  bool tma;
  const uint16_t* hidden;  // [rows, H] bf16
  const uint16_t* weight;  // [classes, H] bf16
  const L* labels;         // [rows]
  const float* lse;        // [rows]: pass 1's, from the combine
  const float* weights;    // [classes] class weights, or NULL (1)
  const uint16_t* bias;    // [classes] bf16, or NULL
  xent_lce_chip_logit logit;
  float z_loss;       // each counted row's z * lse^2 adds 2 z lse p to its gradient
  const void* dloss;  // dloss_kind's (XENT_LCE_CHIP_DLOSS_*)
  int dloss_kind;
  // Rows [row0, row_end) against classes [class0, class_end): the grid's
  // blocks. Either sum may be NULL (that product is skipped).
  float* grad_hidden;  // [row_end - row0, H] f32 from row0, added to
  float* grad_weight;  // [class_end - class0, H] f32 from class0, added to
  float* grad_bias;    // [class_end - class0] f32 from class0, added to, or NULL
  int64_t rows, hidden_size, classes, ignore_index;
  int64_t row0, row_end, class0, class_end;
  bool ignore_invalid;  // a label out of range: the row is ignored (else its lse, from the combine, is NaN)
  float smoothing;      // eps
  const float* sum_a;   // smoothing: [rows] the combine's (1 - eps) w[y] + eps / C sum_c w[c]
  const float* row_temperature;  // [rows] each row's tau, or NULL (logit's)
  const float* token_weight;     // [rows] each row's u (0: as ignored), or NULL (1)
  const float* dentropy;         // [rows] the entropy's upstream gradient, or NULL: G -= dent p (H + z - lse)
  const float* entropy;          // dentropy: [rows] each row's H, from the combine
  int64_t class_offset, global_classes;  // vocabulary-parallel, as xent_lce_chip_args's
  int64_t group;                         // the grid's order: row blocks a group (XENT_LCE_CHIP_GROUP)
};

// Four floats added to at[0..4) (16-byte aligned): sm_90's 16-byte
// reduction, one atomic where the code is older.
XENT_DEVICE void xent_lce_chip_red4(float* at, float v0, float v1, float v2, float v3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(XENT_EMU)
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"
               :
               : "l"(at), "f"(v0), "f"(v1), "f"(v2), "f"(v3)
               : "memory");
#else
#if defined(XENT_EMU)
  if ((uintptr_t)at % 16 != 0)
    xent_emu_fail("misaligned 16-byte reduction at %p (%s:%d)", (void*)at, __FILE__, __LINE__);
#endif
  atomicAdd(at, v0), atomicAdd(at + 1, v1), atomicAdd(at + 2, v2), atomicAdd(at + 3, v3);
#endif
}

// Adds a warpgroup's 64 x 64 f32 product into an f32 sum, d(i) the
// thread's accumulator element i (as xent_wg_acc's d[i]), the product's
// element (r, c) at sum[r * ld + c] for r < rows and c < cols: by
// sm_90a's 16-byte reductions where `four` (ld a multiple of 4, sum 16-byte
// aligned), four columns of a row each, a quarter of the atomics (pass 2's
// likely bound); else an atomic an element. Lanes 2j and 2j + 1 hold
// columns [0, 2) and [2, 4) of an 8-column group of the same two rows: each
// trades a pair with its neighbour, the even lane keeping the upper row's
// four, the odd the lower's. Every lane of the warpgroup calls it.
template <typename Get>
XENT_DEVICE void xent_lce_chip_add(float* sum, int64_t ld, int rows, int cols, bool four, Get d) {
  const int t = (int)threadIdx.x;
  if (!four) {
    XENT_UNROLL
    for (int i = 0; i < XENT_LCE_CHIP_K / 2; ++i) {
      const int r = xent_wg_row(t, i), c = xent_wg_col(t, i);
      if (r < rows && c < cols) atomicAdd(sum + r * ld + c, d(i));
    }
    return;
  }
  const bool odd = t % 2 != 0;
  const int r = xent_wg_row(t, odd ? 2 : 0);
  XENT_UNROLL
  for (int j = 0; j < XENT_LCE_CHIP_K / 8; ++j) {
    const float e[4] = {d(4 * j), d(4 * j + 1), d(4 * j + 2), d(4 * j + 3)};
    const float n0 = xent_shfl_xor(odd ? e[0] : e[2], 1), n1 = xent_shfl_xor(odd ? e[1] : e[3], 1);
    const int c = 8 * j + 4 * ((t % 4) / 2);
    if (r >= rows || c >= cols) continue;
    const float v0 = odd ? n0 : e[0], v1 = odd ? n1 : e[1], v2 = odd ? e[2] : n0, v3 = odd ? e[3] : n1;
    xent_lce_chip_red4(sum + r * ld + c, v0, v1, v2, v3);
  }
}

template <typename L>
XENT_DEVICE float xent_lce_chip_scale(const xent_lce_chip_grad_args<L>& a, int64_t row) {
  switch (a.dloss_kind) {
    case XENT_LCE_CHIP_DLOSS_SCALAR:
      return *(const float*)a.dloss;
    case XENT_LCE_CHIP_DLOSS_ROWS_F32:
      return ((const float*)a.dloss)[row];
    case XENT_LCE_CHIP_DLOSS_ROWS_BF16:
      return xent_load_bf16(((const uint16_t*)a.dloss)[row]);
    default:
      return 1.0f;
  }
}

// What pass 2's G needs of one row, loaded once: dx = (u scale ((A + 2 z
// lse) p - (1 - eps) w[y] [col = y] - eps / C w[col]) - dent p (H + z -
// lse)) dz/dx, of z (the cap's and the temperature's) and its lse, A the
// row's coefficient of p (w[y], or smoothed the combine's), H its entropy.
// A label out of range that the call does not ignore makes its row NaN, as
// the chunked path's fused kernel does; a token weight of 0 leaves only
// the entropy's term, an ignored row nothing. Both renderings of pass 2
// use it: sm_90a's two rows a thread, sm_100a's one.
struct xent_lce_chip_grad_row {
  xent_lce_chip_logit logit;
  int64_t label;  // in the slice's classes
  float lse, coef, at_label, scale, dent, H;
  bool nan, live;

  // Row r of the block at r0 (`live` of its rows real).
  template <typename L>
  __device__ __forceinline__ void start(const xent_lce_chip_grad_args<L>& a, int64_t r0, int r, int64_t live_rows) {
    const int64_t row = r0 + r, y = r < live_rows ? (int64_t)a.labels[row] : a.ignore_index;
    const bool in_range = y >= 0 && y < a.global_classes;
    const bool ignored = r >= live_rows || y == a.ignore_index || (a.ignore_invalid && !in_range);
    const float u = r < live_rows && a.token_weight ? a.token_weight[row] : 1.0f;
    logit = r < live_rows ? xent_lce_chip_row_logit(a.logit, a.row_temperature, row) : a.logit;
    label = y - a.class_offset;
    const bool counted = !ignored && u != 0.0f;
    nan = counted && !in_range;
    dent = !ignored && a.dentropy ? a.dentropy[row] : 0.0f;
    live = (counted && in_range) || dent != 0.0f;
    lse = live ? a.lse[row] : 0.0f;
    H = dent != 0.0f ? a.entropy[row] : 0.0f;
    const bool loss = counted && in_range;  // the loss's term (else the entropy's alone)
    scale = loss ? u * xent_lce_chip_scale(a, row) : 0.0f;
    const float w = loss ? xent_lce_chip_w(a.weights, y) : 0.0f;
    coef = (a.smoothing != 0.0f && loss ? a.sum_a[row] : w) + 2.0f * a.z_loss * lse;
    at_label = (1.0f - a.smoothing) * w;
  }
  // G at column col of the tile at class cb (`width` of its columns in the
  // slice), from the product's value v there.
  template <typename L>
  __device__ __forceinline__ float g(const xent_lce_chip_grad_args<L>& a, int64_t cb, int col, int64_t width,
                                     float v) const {
    if (col >= width) return 0.0f;
    if (nan) return NAN;
    if (!live) return 0.0f;
    float dzdx;
    const float x = xent_lce_chip_biased(a.bias, cb, col, width, v);
    const float lp = xent_lce_chip_z(logit, x, dzdx) - lse, p = xent_exp(lp);
    const float ec = a.smoothing / (float)a.global_classes;
    const float* slice_weights = a.weights ? a.weights + a.class_offset : nullptr;  // by the slice's classes
    const float off = a.smoothing != 0.0f ? ec * xent_lce_chip_w(slice_weights, cb + col) : 0.0f;
    const float d = scale * (coef * p - (cb + col == label ? at_label : 0.0f) - off);
    return (d - dent * p * (H + lp)) * dzdx;
  }
};

// Pass 2's blocks, both renderings': two tiles of 128 x 128 logits, side
// by side (128 rows x 256 classes) or, Tall, one above the other (256 x
// 128), so that a block's sums are (128 + 256) x H adds for 2 x 128 x 128
// logits where a tile alone added (128 + 128) x H: pass 2's sums, likely
// its bound (docs/LINEAR_CE.md), are three quarters, and a launch that
// adds one sum only (grad_hidden's sweep wide, grad_weight's tall) half.
// 192 KiB of shared memory as pass 1: the logits' stages, then two
// buffers of the products' operands (hidden's rows and weight's classes,
// 48 KB each), G (64 KB, bf16) and sm_90a's parked products (32 KB).
template <bool Tall>
struct xent_lce_chip_block {
  static constexpr int kRows = (Tall ? 2 : 1) * XENT_LCE_CHIP_BLOCK_ROWS;
  static constexpr int kClasses = (Tall ? 1 : 2) * XENT_LCE_CHIP_CLASSES;
  static constexpr uint32_t kBuffer = (uint32_t)(kRows + kClasses) * XENT_LCE_CHIP_K * 2;
  static constexpr uint32_t kG = 2 * kBuffer;  // G's first byte, past the operands' two buffers
  // sm_90a's products, each parked once done (a thread's 32 floats, 16
  // bytes of every thread's in turn) while the next is made.
  static constexpr uint32_t kParked = kG + (uint32_t)kRows * kClasses * 2;
  static_assert(kParked + XENT_LCE_CHIP_THREADS * XENT_LCE_CHIP_K / 2 * 4 <= XENT_LCE_CHIP_SMEM,
                "the operands' buffers, G and the parked products");
  // Tile q's (0 or 1) first row and class in the block, and its rows and
  // classes of the block's `live` and `width` (none or fewer past them).
  static __device__ __forceinline__ int row_of(int q) { return Tall ? 128 * q : 0; }
  static __device__ __forceinline__ int class_of(int q) { return Tall ? 0 : 128 * q; }
  static __device__ __forceinline__ int64_t rows_of(int q, int64_t live) {
    return xent_min_index(live - row_of(q), (int64_t)128);
  }
  static __device__ __forceinline__ int64_t width_of(int q, int64_t width) {
    return xent_min_index(width - class_of(q), (int64_t)128);
  }
};

// Pass 2. Grid ceil((row_end - row0) / kRows) x ceil((class_end - class0) /
// kClasses) (xent_lce_chip_block, xent_lce_chip_place_of's order), blocks
// of 256 threads, XENT_LCE_CHIP_SMEM bytes of dynamic shared memory
// (1024-byte aligned). Each tile's logits in registers, then its G = scale
// (softmax - onehot), rounded to bf16 (the tensor cores' operand, as the
// chunked path's G in the logits' dtype): the first tile's kept in
// registers (bf16 pairs) while the second's logits are made, then both
// in shared memory. Then per 64 hidden columns: grad_hidden's rows += G @
// W and grad_weight's classes += G^T @ hidden, by f32 atomics (the blocks
// of a row, and of a class, add in no fixed order).
template <typename L, bool Tall>
static XENT_GLOBAL void __launch_bounds__(XENT_LCE_CHIP_THREADS)
    xent_lce_chip_grads(const __grid_constant__ xent_lce_chip_grad_args<L> a) {
#if defined(XENT_WG_ABSENT)
  (void)a;
  __trap();
#else
  typedef xent_lce_chip_block<Tall> B;
  constexpr int kRows = B::kRows, kClasses = B::kClasses;
  XENT_DYNAMIC_SHARED_1024(uint16_t, smem);
  const xent_lce_chip_place at = xent_lce_chip_place_of(xent_lce_chip_blocks(a.row_end - a.row0, kRows),
                                                        xent_lce_chip_blocks(a.class_end - a.class0, kClasses), a.group);
  const int64_t H = a.hidden_size, r0 = a.row0 + at.row_block * kRows, cb = a.class0 + at.class_block * kClasses;
  const int64_t live = xent_min_index(a.row_end - r0, (int64_t)kRows);
  const int64_t width = xent_min_index(a.class_end - cb, (int64_t)kClasses);
  const int t = (int)threadIdx.x, group = t / 128;
  // G: a line a row, blocks of 64 classes; K-major as A of G @ W (k a
  // class), MN-major as A of G^T @ hidden (k a row). The operands' lines
  // are a row's (or class's) 64 hidden columns, MN-major (n a column).
  const xent_wg_layout g_k = xent_lce_chip_layout(kRows, false), g_mn = xent_lce_chip_layout(kRows, true),
                       lw = xent_lce_chip_layout(kClasses, true), lh = xent_lce_chip_layout(kRows, true);
  // The sums' 16-byte reductions: rows of a multiple of 4 floats from
  // 16-byte aligned starts.
  const bool four = H % 4 == 0 && (uintptr_t)a.grad_hidden % 16 == 0 && (uintptr_t)a.grad_weight % 16 == 0;
  XENT_SHARED_ARRAY(uint64_t, bars, XENT_LCE_CHIP_STAGES);
  XENT_SHARED_ARRAY(uint64_t, operand_bars, 2);
  auto loads = xent_lce_chip_loads_of(smem, bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight, H);
  // The products' operands of hidden's columns [h0, h0 + 64) go to buffer
  // (h0 / 64) % 2, the next loading while these are multiplied.
  auto operands = xent_lce_chip_loads_of<kRows, kClasses, XENT_LCE_CHIP_THREADS, 2>(
      smem, operand_bars, &a.hidden_map, &a.weight_map, a.tma, a.hidden, a.weight, H);
  const auto buffer = [](int64_t h0) { return (int)((h0 / XENT_LCE_CHIP_K) % 2); };
  const auto issue = [&](int64_t h0) {
    if (h0 < H) operands.issue(buffer(h0), h0, r0, live, cb, width);
  };
  const bool products = a.grad_hidden || a.grad_weight;
  {
    // Tile q's element (r, col) of G.
    const auto g_at = [&](int q, int r, int col) {
      return xent_wg_address(g_k, B::kG, r + B::row_of(q), col + B::class_of(q)) / 2;
    };
    // Tile q's G, bf16 pairs (elements 2j, 2j + 1), into shared memory.
    const auto store = [&](int q, const uint32_t(&g2)[XENT_LCE_CHIP_CLASSES / 4]) {
      XENT_UNROLL
      for (int j = 0; j < XENT_LCE_CHIP_CLASSES / 4; ++j) {
        const int r = xent_lce_chip_row(t, 2 * j), col = xent_wg_col(t, 2 * j);
        smem[g_at(q, r, col)] = (uint16_t)(g2[j] & 0xffffu);
        smem[g_at(q, r, col + 1)] = (uint16_t)(g2[j] >> 16);
      }
    };
    uint32_t kept[XENT_LCE_CHIP_CLASSES / 4];  // the first tile's G
    XENT_UNROLL
    for (int q = 0; q < 2; ++q) {
      const int64_t rows = B::rows_of(q, live), cols = B::width_of(q, width);
      const int64_t tr0 = r0 + B::row_of(q), tcb = cb + B::class_of(q);
      xent_wg_acc<XENT_LCE_CHIP_CLASSES> acc;
      // A tile with no row or class: G is zeros (the products read it).
      if (rows > 0 && cols > 0) {
        // Side by side, the second tile's stages follow the first's (the
        // logits' pipeline runs on); one above the other, they start again.
        if (Tall) xent_lce_chip_logits(loads, tr0, rows, tcb, tcb + cols, 0, acc);
        else xent_lce_chip_logits(loads, r0, live, cb, cb + width, q, acc);
      }
      // What G needs of the thread's two rows (its elements i with (i / 2) %
      // 2 == h), loaded once a tile.
      xent_lce_chip_grad_row rw[2];
      XENT_UNROLL
      for (int h = 0; h < 2; ++h) rw[h].start(a, tr0, xent_lce_chip_row(t, 2 * h), rows > 0 && cols > 0 ? rows : 0);
      uint32_t g2[XENT_LCE_CHIP_CLASSES / 4];
      XENT_UNROLL
      for (int j = 0; j < XENT_LCE_CHIP_CLASSES / 4; ++j) {
        float g[2];
        XENT_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int i = 2 * j + e;
          g[e] = rows > 0 && cols > 0 ? rw[(i / 2) % 2].g(a, tcb, xent_wg_col(t, i), cols, acc.d[i]) : 0.0f;
        }
        g2[j] = xent_store_bf16x2(g[0], g[1]);
      }
      // Both tiles' logits made: the operands' first columns load while G
      // is stored (the buffers lie below G, past the stages' last reads).
      if (q == 0) {
        XENT_UNROLL
        for (int j = 0; j < XENT_LCE_CHIP_CLASSES / 4; ++j) kept[j] = g2[j];
        continue;
      }
      if (products) issue(0), issue(XENT_LCE_CHIP_K);
      store(0, kept);
      store(1, g2);
    }
    // G for the tensor cores (and grad_bias), every thread's: a barrier of
    // its own, for the operands' wait below is an mbarrier's, which orders
    // no thread's stores before another's products.
    xent_wg_publish_smem();
    __syncthreads();
    // grad_bias: G's column sums (as stored, the products' operand), a
    // thread a column over the block's rows, one atomic a column.
    if (a.grad_bias) {
      for (int c = t; c < kClasses; c += XENT_LCE_CHIP_THREADS) {
        float sum = 0.0f;
        for (int r = 0; r < kRows; ++r) sum += xent_load_bf16(smem[xent_wg_address(g_k, B::kG, r, c) / 2]);
        if (c < width) atomicAdd(a.grad_bias + (cb - a.class0 + c), sum);
      }
    }
  }
  // Each 64 hidden columns' products, this warpgroup's: G @ W's 64 rows of
  // each 128 of the block (one M-tile, two when tall), then G^T @ hidden's
  // 64 classes of each 128 (two when side by side), those of step i (h0 =
  // 64 i) from buffer i % 2. One accumulator: each product's values are
  // parked in shared memory once done (registers would spill) and the next
  // product issued before they are added, so the tensor cores run while
  // the sums are sent.
  XENT_DYNAMIC_SHARED_1024(float, parked);
  const auto slot = [&](int e) {
    return (int64_t)(B::kParked / 4) + ((int64_t)(e / 4) * XENT_LCE_CHIP_THREADS + t) * 4 + e % 4;
  };
  const auto get = [&](int e) { return (float)parked[slot(e)]; };
  const int n_hidden = a.grad_hidden ? kRows / 128 : 0, n = n_hidden + (a.grad_weight ? kClasses / 128 : 0);
  const int64_t steps = products ? (H + XENT_LCE_CHIP_K - 1) / XENT_LCE_CHIP_K : 0;
  xent_wg_acc<XENT_LCE_CHIP_K> acc;
  const auto multiply = [&](int64_t i, int p) {
    const uint32_t buf = (uint32_t)(i % 2) * B::kBuffer;
    xent_wg_fence();
    if (p < n_hidden) {
      // k over the block's classes, 16 a step (32 bytes along G's line, a
      // block of 64 on; two lines of W's).
      const uint32_t rows_at = B::kG + (uint32_t)(128 * p + XENT_LCE_CHIP_ROWS * group) * 128u;
      for (int j = 0; j < kClasses / 16; ++j)
        xent_wg_mma<false, true>(acc, xent_wg_operand_at(smem, rows_at + (j / 4) * g_k.leading + 32u * (j % 4), g_k),
                                 xent_wg_operand_at(smem, buf + (uint32_t)kRows * 128u + 2048u * j, lw), j > 0);
    } else {
      // k over the block's rows (two lines of G's and of hidden's).
      const int c64 = 128 * (p - n_hidden) + 64 * group;
      for (int j = 0; j < kRows / 16; ++j)
        xent_wg_mma<true, true>(acc, xent_wg_operand_at(smem, B::kG + (c64 / 64) * g_mn.leading + 2048u * j, g_mn),
                                xent_wg_operand_at(smem, buf + 2048u * j, lh), j > 0);
    }
    xent_wg_commit(acc);
  };
  if (steps > 0) {
    operands.wait(0);
    multiply(0, 0);
  }
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t h0 = i * XENT_LCE_CHIP_K;
    const int cols = (int)xent_min_index(H - h0, (int64_t)XENT_LCE_CHIP_K);
    for (int p = 0; p < n; ++p) {
      xent_wg_wait<0>(acc);
      XENT_UNROLL
      for (int e = 0; e < XENT_LCE_CHIP_K / 2; ++e) parked[slot(e)] = acc.d[e];
      if (p + 1 < n) {
        multiply(i, p + 1);
      } else if (i + 1 < steps) {
        // Every warpgroup's products of step i done: its buffer takes step
        // i + 2's operands, loading while i + 1's are multiplied.
        __syncthreads();
        issue(h0 + 2 * XENT_LCE_CHIP_K);
        operands.wait((int)((i + 1) % 2));
        multiply(i + 1, 0);
      }
      if (p < n_hidden) {
        const int64_t first = r0 + 128 * p + XENT_LCE_CHIP_ROWS * group;
        xent_lce_chip_add(a.grad_hidden + (first - a.row0) * H + h0, H, (int)(r0 + live - first), cols, four, get);
      } else {
        const int c64 = 128 * (p - n_hidden) + 64 * group;
        xent_lce_chip_add(a.grad_weight + (cb - a.class0 + c64) * H + h0, H, (int)width - c64, cols, four, get);
      }
    }
  }
#endif
}

// The launch's tensor maps (host code): hidden's rows [0, rows) and
// weight's classes [0, classes), H columns each, the box a stage's 64
// columns of a block's rows or a tile's classes. None (a.tma false: the
// stages go element by element) where a map cannot describe them: H not
// a multiple of 8 (rows of whole 16-byte chunks), a matrix not 16-byte
// aligned, or coordinates past int32's. 0, or 1 where the driver refused a
// map it could describe.
template <typename Args>
static inline int xent_lce_chip_maps(Args& a, int64_t rows, int64_t classes) {
  const int64_t H = a.hidden_size;
  a.tma = false;
  if (H % 8 != 0 || (uintptr_t)a.hidden % 16 != 0 || (uintptr_t)a.weight % 16 != 0 || H > INT32_MAX ||
      rows > INT32_MAX || classes > INT32_MAX)
    return 0;
  if (xent_tensor_map_bf16(&a.hidden_map, a.hidden, H, rows, H, XENT_LCE_CHIP_BLOCK_ROWS) != 0 ||
      xent_tensor_map_bf16(&a.weight_map, a.weight, H, classes, H, XENT_LCE_CHIP_CLASSES) != 0)
    return 1;
  a.tma = true;
  return 0;
}
