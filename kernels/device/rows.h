// The row layout every family shares, and how a thread walks its rows.
#pragma once

#include "target.h"

// The strided shape's 16-byte path (xent_column_walk): the 16-byte loads
// each thread keeps in flight, and the shared memory they are staged in, in
// elements of T for a block of `threads` (per thread, those loads' bytes and
// one element of padding).
#define XENT_COLUMN_LOADS 4
#define XENT_COLUMN_STAGE(threads, T) ((threads) * (16 * XENT_COLUMN_LOADS / (int)sizeof(T) + 1))
// A __shared__ array whose start is 16-byte aligned (16-byte accesses).
#if defined(XENT_EMU)
#define XENT_SHARED_ARRAY16(T, name, n) XENT_SHARED_ARRAY(T, name, n)
#else
#define XENT_SHARED_ARRAY16(T, name, n) __shared__ __align__(16) T name[n]
#endif

// The row layout of every family: a row is one position (o, i) of an
// [outer, C, inner] tensor, and element c of row r is at
// xent_row_base(r, C, inner) + c * inner. A row kernel comes in three
// shapes, its template argument kShape:
//   XENT_ROW (inner == 1, the row is contiguous): `group` threads share a
//     row, a power of two up to the warp (a block holds several rows,
//     reduced with shuffles) or the whole block (one row at a time);
//   XENT_COLUMN (a strided row): one thread per row, neighbouring threads on
//     neighbouring positions, so every load is coalesced;
//   XENT_ON_CHIP (contiguous; the fused cross entropy and the softmax
//     forward, which read the row twice): a cluster of blocks per row, each
//     holding a slice of it in shared memory (xent_slice_walk);
//   XENT_TILE (contiguous short rows; the cross entropy): XENT_ROW's
//     threads, but a block first copies a tile of whole rows (xent_tile_rows)
//     into shared memory as one stream of 16-byte vectors, each row then
//     walked from there (xent_tile_walk), its gradient written back there
//     and stored as one stream too: a row of 20 bytes cannot fill a
//     thread's loads, a block's tile of rows can.
// The spec's tune statement picks the shape by C (xent_row_shape). Blocks
// take tiles of blockDim / group rows (a cluster takes one row) and
// grid-stride over them; every thread of a block runs every tile, so the
// barriers and full-warp shuffles inside a row are always reached by all.
enum { XENT_ROW = 0, XENT_COLUMN = 1, XENT_ON_CHIP = 2, XENT_TILE = 3 };

// The block's row of the grid (blockIdx.y; the strided shape's class slice):
// the same in every block of a cluster, since clusters run along x
// (XENT_LAUNCH_CLUSTER), which xentgen --check's barrier rule knows by name.
XENT_DEVICE unsigned xent_grid_row() { return blockIdx.y; }

struct xent_row_walk {
  int64_t lane;   // this thread's first class; the class loop steps by group
  int64_t group;  // threads sharing a row (in each block of a cluster)
  int64_t slot;   // this thread's row within the block's tile
  int64_t first;  // the block's first tile (its first row); tiles step by step
  int64_t step;
};

template <int kShape>
XENT_DEVICE xent_row_walk xent_rows(int group) {
  xent_row_walk w;
  w.group = kShape == XENT_COLUMN ? 1 : (group > 0 ? (int64_t)group : (int64_t)blockDim.x);
  w.lane = (int64_t)threadIdx.x % w.group;
  w.slot = (int64_t)threadIdx.x / w.group;
  // The grid is whole clusters along x (a cluster is one block but in the
  // on-chip shape), a tile per cluster at a time: the tile loop's bounds are
  // the same in every thread of a cluster, so the barriers inside it are
  // reached by all (xentgen --check's warp-sync rule reads them so).
  const int64_t tile = kShape == XENT_ON_CHIP ? 1 : (int64_t)blockDim.x / w.group;
  w.first = (int64_t)xent_cluster_id() * tile;
  // (The tile shape steps a pass of rows at a time within its tile.)
  w.step = kShape == XENT_TILE ? tile : (int64_t)xent_clusters() * tile;
  return w;
}

// The row of this thread's slot in the tile that starts at row `tile`. A
// slot past the last row still goes through the tile (its group's shuffles
// and the block's barriers need every thread), on the last row and walking
// no classes (width 0); `live` is false and must guard its stores.
struct xent_slot {
  bool live;
  int64_t row;
  int64_t width;  // the classes this thread's row loops walk: C, or 0
};

XENT_DEVICE xent_slot xent_tile_slot(const xent_row_walk& w, int64_t tile, int64_t rows, int64_t C) {
  xent_slot at;
  at.live = tile + w.slot < rows;
  at.row = at.live ? tile + w.slot : rows - 1;
  at.width = at.live ? C : 0;
  return at;
}

// The tile shape's shared memory: a tile of whole rows, at most this many
// bytes and rows (whose per-row inputs are staged beside it: the labels,
// the saved lse). 24 KiB is 6 of a 256-thread block's 16-byte loads a
// thread in flight, and leaves an sm_90 SM (228 KiB) room for several
// blocks, some computing while the others load; an AMD CU has 64 KiB of
// LDS, so 12 KiB there.
#if defined(XENT_TARGET_HIP)
#define XENT_TILE_BYTES 12288
#define XENT_TILE_MAX_ROWS 512
#else
#define XENT_TILE_BYTES 24576
#define XENT_TILE_MAX_ROWS 1024
#endif

// Host and device: the rows of the tile shape's tile for C classes of
// elem_size bytes, `group` threads a row (0: the block) in blocks of
// `threads`: as many passes of the block's rows (threads / group) as fit
// XENT_TILE_BYTES and XENT_TILE_MAX_ROWS, so that every thread owns a row in
// each pass. 0 where one pass does not fit, or a tile's bytes are not whole
// 16-byte vectors (then tiles after the first would start off a vector's
// boundary).
static inline __host__ __device__ int64_t xent_tile_rows(int64_t C, int64_t group, int64_t threads,
                                                         int64_t elem_size) {
  const int64_t slots = group > 0 ? threads / group : 1, pass = slots * C * elem_size;
  if (C <= 0 || slots <= 0 || slots > XENT_TILE_MAX_ROWS || pass > XENT_TILE_BYTES || pass % 16 != 0) return 0;
  const int64_t by_bytes = XENT_TILE_BYTES / pass, by_rows = XENT_TILE_MAX_ROWS / slots;
  return (by_bytes < by_rows ? by_bytes : by_rows) * slots;
}

// With inner == 1 (a compile-time 1 in the contiguous shapes) this is row * C.
XENT_DEVICE int64_t xent_row_base(int64_t row, int64_t C, int64_t inner) {
  return (row / inner) * C * inner + row % inner;
}
