// Host: a row kernel's launch shape, the driver's limits, the grid, and the
// two-stage sums' partials.
#pragma once

#include "rows.h"

// One launch shape of a contiguous row, from the spec's tune statement: for
// C <= classes (classes < 0: any C) and at least `rows` rows, `group`
// threads per row (0: the whole block) in blocks of `threads`; with
// on_chip > 0, the row held in shared memory, at most on_chip bytes of it
// per block of a cluster; with tile, the rows staged a tile at a time in
// shared memory (XENT_TILE, kernels/device/rows.h) where the call allows.
struct xent_row_shape {
  int64_t classes;
  int group;
  int threads;
  int64_t on_chip;
  int64_t rows;
  int tile;
};

// Host: how a row of C elements of elem_size bytes is launched: its shape,
// and for an on-chip shape the blocks per cluster and the shared memory per
// block (cluster 0 otherwise).
struct xent_row_launch {
  xent_row_shape shape;
  unsigned cluster;
  size_t smem;
};

// The static shared memory of a row kernel (its reduction scratch), kept
// free below the device's limit.
#define XENT_STATIC_SMEM 2048

// Host: the first shape that serves C classes in `rows` rows and that this
// device and call can run (the spec ends every table with a plain shape that
// serves any call; the generator checks it). An on-chip shape takes the
// fewest blocks, a power of two up to max_cluster (0: on-chip shapes are
// skipped), whose slices of the row's 16-byte vectors fit its bytes and the
// kernel's dynamic shared memory (max_dynamic, xent_kernel_prepare)
// XENT_CHIP_BUFFERS times (CUDA: twice, one row's slice walked while the
// next one's loads; HIP: once, the next one's held in registers,
// XENT_CHIP_HELD vectors a thread at most: xent_slice_pipe, pipeline.h);
// else the next shape. (A tile shape is also a plain one:
// XENT_LAUNCH_ROWS_TILE.)
// With chip_only, plain shapes are passed over too: the first on-chip shape
// that serves C and fits, else the last shape with cluster 0.
template <int N>
static inline xent_row_launch xent_pick_launch(const xent_row_shape (&shapes)[N], int64_t C, int64_t rows,
                                               size_t elem_size, unsigned max_cluster, int64_t max_dynamic,
                                               bool chip_only = false) {
  for (int i = 0; i < N; ++i) {
    const xent_row_shape& s = shapes[i];
    if (i < N - 1 && ((s.classes >= 0 && C > s.classes) || rows < s.rows)) continue;
    if (s.on_chip == 0 && chip_only) continue;
    if (s.on_chip == 0) return {s, 0, 0};
    // At most C / (16 / elem_size) whole vectors (the scalar head and tail
    // around them stay in memory).
    const int64_t vecs = C / (int64_t)(16 / elem_size);
    for (unsigned k = 1; k <= max_cluster; k *= 2) {
      const int64_t slice = (vecs + k - 1) / k, bytes = XENT_CHIP_BUFFERS * slice * 16;
      const bool held = XENT_CHIP_HELD == 0 || slice <= (int64_t)s.threads * XENT_CHIP_HELD;
      if (bytes <= s.on_chip && bytes <= max_dynamic && held) return {s, k, (size_t)bytes};
    }
  }
  return {shapes[N - 1], 0, 0};
}

// Host: what an on-chip kernel may use on the current device, and the
// driver readied for it. CUDA's rules (which the emulator enforces):
// - static plus dynamic shared memory above 48 KiB only once the kernel's
//   cudaFuncAttributeMaxDynamicSharedMemorySize is raised, and that
//   attribute plus the static size at most the device's opt-in maximum.
//   The attribute is raised once per kernel and device, to the opt-in
//   maximum less XENT_STATIC_SMEM (which bounds the static size, checked
//   here), never per call: two threads launching one kernel with different
//   sizes would race, one lowering it between the other's set and launch;
// - clusters only where the device has them and the kernel's own code was
//   built for sm_90 or later (ptxVersion): a build that carries compute_80
//   PTX alone, JIT-compiled for an H100, has the pre-cluster fallback, so
//   each block of a cluster would take itself for the whole row.
// HIP has no clusters; its limit is the device's less the kernel's static
// LDS where that is more than XENT_STATIC_SMEM (HIP-on-CUDA's wavefront
// exchange takes 8 KiB), raised as CUDA's (target_hip.h).
// Asked once per device and kept in `known` (the launch site's), read and
// written with atomics (racing threads all write the same value). Where
// the driver does not answer, no on-chip shape (max_cluster 0). `device`:
// the current device's ordinal, as the driver gave it (for
// xent_resident_clusters; -1 where it did not).
struct xent_kernel_limits {
  unsigned max_cluster;
  int64_t max_dynamic;
  int device;
};
#define XENT_MAX_DEVICES 64
template <typename K>
static inline xent_kernel_limits xent_kernel_prepare(K* kernel, const char* name, int64_t (&known)[XENT_MAX_DEVICES]) {
  int dev = 0, clusters = 0, ptx = 0;
  int64_t optin = 0, static_smem = 0;
  if (xent_drv_device(&dev, &optin, &clusters) != 0 || dev < 0) return {0, 0, -1};
  // known[dev]: max_dynamic * 16 + max_cluster, 0 = not yet asked.
  const int64_t seen = dev < XENT_MAX_DEVICES ? __atomic_load_n(&known[dev], __ATOMIC_RELAXED) : 0;
  if (seen) return {(unsigned)(seen % 16), seen / 16, dev};
  if (xent_drv_kernel(kernel, &static_smem, &ptx) != 0) return {0, 0, dev};
#if defined(XENT_TARGET_CUDA)
  if (static_smem > XENT_STATIC_SMEM) return {0, 0, dev};
  const int64_t reserve = XENT_STATIC_SMEM;
  xent_kernel_limits lim = {clusters && ptx >= 90 ? 8u : 1u, optin - reserve, dev};
#else
  (void)clusters, (void)ptx;
  const int64_t reserve = static_smem > XENT_STATIC_SMEM ? static_smem : XENT_STATIC_SMEM;
  xent_kernel_limits lim = {1u, optin - reserve, dev};
#endif
  if (xent_drv_raise_smem(kernel, name, lim.max_dynamic) != 0) lim.max_dynamic = 48 * 1024 - reserve;
  if (dev < XENT_MAX_DEVICES) __atomic_store_n(&known[dev], lim.max_dynamic * 16 + lim.max_cluster, __ATOMIC_RELAXED);
  return lim;
}

// Host: the clusters of `cluster` blocks of `threads` threads and `smem`
// bytes of dynamic shared memory that the device holds at once (0 where the
// driver does not say), for the on-chip shape's grid: its clusters walk
// their rows in turn, the next row's slices loading while one is walked,
// and clusters past what the device holds would only start their pipelines
// when the first ones end. Asked once per device (`dev`, the ordinal
// xent_kernel_prepare had) and launch shape and kept in `known` (the launch
// site's: key << 20 | clusters, 0 = not yet asked).
template <typename K>
static inline int64_t xent_resident_clusters(K* kernel, int64_t (&known)[XENT_MAX_DEVICES], int dev,
                                             unsigned threads, size_t smem, unsigned cluster) {
  if (dev < 0) return 0;
  const int64_t key = (int64_t)smem * 16 + cluster;
  const int64_t seen = dev < XENT_MAX_DEVICES ? __atomic_load_n(&known[dev], __ATOMIC_RELAXED) : 0;
  if (seen != 0 && seen >> 20 == key) return seen & 0xfffff;
  int n = 0;
  if (xent_drv_resident(kernel, threads, smem, cluster, &n) != 0 || n <= 0) return 0;
  if (n > 0xfffff) n = 0xfffff;
  if (dev < XENT_MAX_DEVICES) __atomic_store_n(&known[dev], key << 20 | n, __ATOMIC_RELAXED);
  return n;
}

// Host: blocks for `tiles` tiles of rows, capped: past the cap the row loops
// grid-stride. On a GPU the cap, 65536, fills any device many times over
// (an H100 holds ~4K resident blocks). Under the emulator it is 3, so every
// test with more than three tiles runs the grid-stride path.
#if defined(XENT_EMU)
#define XENT_MAX_GRID 3
#else
#define XENT_MAX_GRID 65536
#endif
static inline unsigned xent_grid_blocks(int64_t tiles) {
  return (unsigned)(tiles < XENT_MAX_GRID ? tiles : XENT_MAX_GRID);
}

// Two-stage sums over n items (the mean's totals, the per-row losses):
// stage 1 runs xent_partial_blocks(n) blocks of XENT_PARTIAL_THREADS, block b
// adding its run of items (xent_partial_range) into partial b; stage 2, one
// block, adds the partials in order. A single block over 8M positions would
// take milliseconds; this takes a few microseconds, and the split depends on
// n only: the same result on every run and every device. Under the emulator
// a block takes 512 items, so that the tests' row counts run several, and
// at most 4 blocks run (as XENT_MAX_GRID): each runs a fiber per thread.
#define XENT_PARTIAL_THREADS 256
#if defined(XENT_EMU)
#define XENT_PARTIAL_ITEMS 512
#define XENT_PARTIAL_BLOCKS 4
#else
#define XENT_PARTIAL_ITEMS 8192
#define XENT_PARTIAL_BLOCKS 1024  // the workspace holds XENT_MAX_PARTIALS (xent_launch.h)
#endif
static inline __host__ __device__ unsigned xent_partial_blocks(int64_t n) {
  const int64_t b = (n + XENT_PARTIAL_ITEMS - 1) / XENT_PARTIAL_ITEMS;
  return (unsigned)(b < 1 ? 1 : b > XENT_PARTIAL_BLOCKS ? XENT_PARTIAL_BLOCKS : b);
}
// Items [lo, hi) of this block of stage 1 (gridDim.x blocks over n).
XENT_DEVICE void xent_partial_range(int64_t n, int64_t& lo, int64_t& hi) {
  const int64_t blocks = (int64_t)gridDim.x, chunk = (n + blocks - 1) / blocks;
  lo = (int64_t)blockIdx.x * chunk;
  if (lo > n) lo = n;
  hi = lo + chunk < n ? lo + chunk : n;
}

// Host: the caller's launch shape (args.row_shape, xent_set_row_shape)
// where it asked for one, else the table's. Refused (false): a block
// larger than the table's largest (the kernel's __launch_bounds__ is that
// largest block: a GPU would not launch it, and the emulator, which has no
// launch bounds, must not run what a GPU would not), a block that is not
// whole warps, or more threads a row than a warp (a row's shuffles stay in
// its warp), or the row on chip (group XENT_ROW_ON_CHIP) of a kernel or
// call that has no on-chip shape for it.
#define XENT_ROW_ON_CHIP (-1)
#define XENT_REFUSED_SHAPE_WHY                                                                                         \
  "the launch shape asked for (xent_set_row_shape) has a block past the kernel's launch bounds or "                    \
  "not whole warps, or more threads a row than a warp, or is the row on chip where no on-chip shape serves the call"
template <int N>
static inline bool xent_asked_shape(const xent_row_shape (&shapes)[N], int group, int threads, xent_row_shape* shape) {
  if (group == XENT_ROW_ON_CHIP) return false;
  if (threads <= 0) return true;
  int largest = 0;
  for (int i = 0; i < N; ++i) largest = shapes[i].threads > largest ? shapes[i].threads : largest;
  if (threads > largest || threads % XENT_WARP != 0 || group > XENT_WARP) return false;
  *shape = {-1, group, threads, 0, 0, 0};
  return true;
}

// The strided launch's grid along y: one row of blocks per class slice of
// a family whose arguments say so (the cross entropy's column_slices,
// kernels/cross_entropy/cross_entropy.h), one elsewhere.
template <class Args>
static inline unsigned xent_column_grid_y(const Args&) {
  return 1;
}

// Launches kernel<XENT_ROW>(args, group) in the shape `shapes` picks for C
// (or the caller's, above) when the class axis is contiguous, else
// kernel<XENT_COLUMN>(args, 1) with a thread per row in blocks of
// column_threads (and xent_column_grid_y rows of them); nothing for no
// rows. The table's on-chip shapes are
// skipped. A refused shape returns XENT_REFUSED_SHAPE from the launcher.
// (clang-format would misread these two macros' arithmetic as casts.)
// clang-format off
#define XENT_LAUNCH_ROWS(kernel, args, shapes, column_threads, stream)                                              \
  do {                                                                                                            \
    if ((args).rows > 0 && (args).inner == 1) {                                                                   \
      xent_row_shape shape_ = xent_pick_launch((shapes), (args).classes, (args).rows, 1, 0, 0).shape;             \
      if (!xent_asked_shape((shapes), (args).row_shape.group, (args).row_shape.threads, &shape_))                 \
        return XENT_REFUSED_SHAPE(#kernel);                                                                       \
      const int64_t tile_ = shape_.group > 0 ? shape_.threads / shape_.group : 1;                                 \
      XENT_LAUNCH(kernel<XENT_ROW>, dim3(xent_grid_blocks(((args).rows + tile_ - 1) / tile_)),                     \
                  dim3(shape_.threads), 0, (stream), (args), shape_.group);                                       \
    } else if ((args).rows > 0) {                                                                                 \
      XENT_LAUNCH(kernel<XENT_COLUMN>, dim3(xent_grid_blocks(((args).rows + (column_threads) - 1) / (column_threads)), \
                                           xent_column_grid_y(args)),                                             \
                  dim3(column_threads), 0, (stream), (args), 1);                                                  \
    }                                                                                                             \
  } while (0)

// The tile shape: kernel<XENT_TILE>(args, group) where the table's shape for
// the call is a tile shape whose tile holds a pass of its rows
// (xent_tile_rows), the caller chose no shape of its own and `allowed` (the
// family's rule for the call's buffers and options); then the lambda it is
// in returns 0. Elsewhere nothing, and the launch goes on to the next
// macro, which runs the same shape from memory: the same threads on the
// same elements in the same order, so the same bits.
#define XENT_LAUNCH_ROWS_TILE(kernel, T, args, shapes, allowed, stream)                                             \
  do {                                                                                                            \
    if ((args).rows > 0 && (args).inner == 1 && (args).row_shape.threads <= 0 &&                                  \
        (args).row_shape.group != XENT_ROW_ON_CHIP && (allowed)) {                                               \
      const xent_row_shape shape_ = xent_pick_launch((shapes), (args).classes, (args).rows, 1, 0, 0).shape;       \
      const int64_t per_ = shape_.tile ? xent_tile_rows((args).classes, shape_.group, shape_.threads, sizeof(T)) : 0; \
      if (per_ > 0) {                                                                                             \
        XENT_LAUNCH(kernel<XENT_TILE>, dim3(xent_grid_blocks(((args).rows + per_ - 1) / per_)),                    \
                    dim3(shape_.threads), 0, (stream), (args), shape_.group);                                     \
        return 0;                                                                                                 \
      }                                                                                                           \
    }                                                                                                             \
  } while (0)

// The same for a kernel that also has the on-chip shape (elements of T):
// kernel<XENT_ON_CHIP>(args, 0) in clusters, a row per cluster at a time
// and no more clusters than the device holds at once, where the table and
// the device allow and the caller chose no shape of its own, or where the
// caller asked for the row on chip (XENT_ROW_ON_CHIP: the table's first
// on-chip shape serving C that fits, whatever the rows; else refused).
#define XENT_LAUNCH_ROWS_ON_CHIP(kernel, T, args, shapes, column_threads, stream)                                  \
  do {                                                                                                            \
    if ((args).rows > 0 && (args).inner == 1 && (args).row_shape.threads <= 0) {                                 \
      static int64_t known_[XENT_MAX_DEVICES];                                                                    \
      const xent_kernel_limits lim_ = xent_kernel_prepare(&kernel<XENT_ON_CHIP>, #kernel, known_);                \
      const bool chip_ = (args).row_shape.group == XENT_ROW_ON_CHIP;                                              \
      const xent_row_launch at_ = xent_pick_launch((shapes), (args).classes, chip_ ? INT64_MAX : (args).rows,     \
                                                   sizeof(T), lim_.max_cluster, lim_.max_dynamic, chip_);         \
      if (at_.cluster > 0) {                                                                                      \
        static int64_t resident_[XENT_MAX_DEVICES];                                                               \
        const int64_t held_ = xent_resident_clusters(&kernel<XENT_ON_CHIP>, resident_, lim_.device,              \
                                                     at_.shape.threads, at_.smem, at_.cluster);                   \
        const unsigned clusters_ = xent_grid_blocks(held_ > 0 && held_ < (args).rows ? held_ : (args).rows);      \
        XENT_LAUNCH_CLUSTER(kernel<XENT_ON_CHIP>, dim3(clusters_ * at_.cluster), dim3(at_.shape.threads),         \
                            at_.smem, at_.cluster, (stream), (args), 0);                                          \
        break;                                                                                                    \
      }                                                                                                           \
    }                                                                                                             \
    XENT_LAUNCH_ROWS(kernel, args, shapes, column_threads, stream);                                               \
  } while (0)
// clang-format on

// A row kernel's __launch_bounds__ for shape kShape, from its variant's
// traits V: the largest block of the spec's shapes (kRowThreads) and the
// blocks per SM they ask room for (kRowMinBlocks); the on-chip shape's own
// (kChipThreads, kChipMinBlocks: gen/lua/context.lua says why); or the
// strided shape's block (kColumnThreads) and the threads per SM it asks
// room for (kColumnResident; its loads in flight are per thread).
#define XENT_ROWS_THREADS(V, kShape)                                                                                   \
  ((kShape) == XENT_COLUMN ? V::kColumnThreads : (kShape) == XENT_ON_CHIP ? V::kChipThreads : V::kRowThreads)
#define XENT_ROWS_MIN_BLOCKS(V, kShape)                                                                                \
  ((kShape) == XENT_COLUMN    ? XENT_COLUMN_MIN_BLOCKS(V::kColumnThreads, V::kColumnResident)                           \
   : (kShape) == XENT_ON_CHIP ? V::kChipMinBlocks                                                                      \
                              : V::kRowMinBlocks)
