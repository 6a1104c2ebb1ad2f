// Softmax and log-softmax along one axis, forward and backward: the row
// kernel a softmax-family variant instantiates (templates/softmax.tmpl
// writes each variant's unit: its traits, the kernel's entry and launcher).
//
//   softmax      y_j = exp(x_j - lse)           dx_j = y_j * (dy_j - sum_c dy_c * y_c)
//   log-softmax  y_j = x_j - lse                dx_j = dy_j - exp(y_j) * sum_c dy_c
//
// with lse = log sum_c exp(x_c); the backward passes are ONNX Runtime's
// SoftmaxGrad and LogSoftmaxGrad. A row is one position (kernels/device/
// rows.h), so any axis is read in place, strided. The output may be the input
// it replaces (y over x, dx over dy): each element is read before the same
// thread writes it, after the row's reduction.
//
// The traits V of a variant (each a compile-time constant):
//   D               the dtype (xent_dtype_<dtype>, kernels/device/convert.h)
//   kLog            log-softmax, else softmax
//   kOp             XENT_FWD or XENT_BWD (kernels/device/variant.h)
//   kRowLoads       16-byte loads a thread keeps in flight in a contiguous
//                   row (half of each row in the backward's two-row walk)
//   kRowThreads     the largest block of the spec's launch shapes (the
//                   launch bounds), kRowMinBlocks the blocks per SM they ask
//   kChipThreads    the same for the on-chip shape, and kChipMinBlocks
//   kColumnThreads  the strided shape's block (one thread a row) and
//   kColumnResident the threads per SM its launch bounds ask room for
#pragma once

// The unit includes the launch contract (xent_softmax_args) before this header:
// xent_launch.h, which xentgen writes beside it.
#include "../xent_device.h"

// The forward of one row: its max m and s = sum exp(x - m) in one pass, then
// the output from a second read of x (or, on chip, of the block's slice).
template <class V, int kShape, class Scratch, class Stage, class Pipe, class Part>
XENT_DEVICE void xent_softmax_fwd_row(const xent_softmax_args& a, const xent_row_walk& walk, int64_t base,
                                      int64_t width, Scratch scratch, Stage stage, const Pipe& pipe, int64_t half,
                                      Part part) {
  typedef typename V::D D;
  typedef typename D::T T;
  typedef typename D::A A;
  constexpr bool kColumn = kShape == XENT_COLUMN;
  constexpr bool kSlice = kShape == XENT_ON_CHIP;
  const T* x = (const T*)a.x;
  const int64_t inner = kColumn ? a.inner : 1, lane = walk.lane, group = walk.group;
  A m = xent_lowest(A(0)), s = 0, unused_a = 0, unused_b = 0;
  // Both passes read x with 16-byte loads, several in flight; the second
  // stores 16 bytes at a time where aligned.
  const auto add = [&](int64_t, T raw) { xent_online_add(m, s, D::load(raw)); };
  const auto add_vec = [&](int64_t, const xent_vec16<T>& c) {
    A xv[D::kVec];
    D::widen(c, xv);
    xent_online_add_n(m, s, xv);
  };
  if constexpr (kSlice)
    xent_slice_walk<V::kRowLoads>(x, base, width, lane, group, pipe.stash, half,
                                  xent_vec_sink<decltype(add_vec)>{add_vec}, add);
  else xent_row_each_vec<V::kRowLoads, kColumn>(x, base, width, inner, stage, lane, group, add, add_vec);
  xent_group_reduce(m, s, unused_a, unused_b, group, scratch);
  if constexpr (kSlice) xent_cluster_reduce(m, s, unused_a, unused_b, part);
  // (x - m) - lr, not x - (m + lr): shift-invariant, as PyTorch's, so
  // logits of 1e4 or 1e8 lose nothing to the rounding of lse. m - m is NaN
  // where m is +inf or NaN: then so is the row, as in PyTorch.
  const A lr = xent_log(s) + (m - m);
  const auto store = xent_output<T>(a.out, false, typename D::to());
  [[maybe_unused]] const A lr2 = V::kLog ? A(0) : xent_exp_shift_of(lr);
  const auto one = [&](int64_t, T raw) -> A {
    if constexpr (V::kLog) return (D::load(raw) - m) - lr;
    else return xent_exp_shifted(D::load(raw) - m, lr2);
  };
  // A whole vector: widened a word at a time, then as one element.
  const auto value = xent_with_vec(one, [&](int64_t, const xent_vec16<T>& c, A(&d)[D::kVec]) {
    D::widen(c, d);
    if constexpr (V::kLog) {
      XENT_UNROLL
      for (int k = 0; k < D::kVec; ++k) d[k] = (d[k] - m) - lr;
    } else {
      xent_exp_shifted_n(d, m, lr2);
    }
  });
  if constexpr (kSlice) xent_slice_walk<V::kRowLoads>(x, base, width, lane, group, pipe.stash, half, store, value);
  else xent_row_walk_io<V::kRowLoads, kColumn>(x, base, width, inner, stage, lane, group, store, value);
}

// The backward of one row: sum_c dy_c * y_c (log-softmax: sum_c dy_c) in one
// pass over y and dy together, then dx from a second.
template <class V, int kShape, class Scratch, class Stage>
XENT_DEVICE void xent_softmax_bwd_row(const xent_softmax_args& a, const xent_row_walk& walk, int64_t base,
                                      int64_t width, Scratch scratch, Stage stage) {
  typedef typename V::D D;
  typedef typename D::T T;
  typedef typename D::A A;
  constexpr bool kColumn = kShape == XENT_COLUMN;
  const T* y = (const T*)a.y;
  const T* dy = (const T*)a.dy;
  T* out = (T*)a.out;
  const int64_t inner = kColumn ? a.inner : 1, lane = walk.lane, group = walk.group;
  // Both passes read y and dy together, 16-byte vectors of each in flight;
  // the second stores 16 bytes at a time where aligned.
  const auto cvt = typename D::to();
  A sum = 0, unused = 0;
  xent_row_walk2<V::kRowLoads, kColumn, false>(y, dy, out, cvt, base, width, inner, stage, lane, group,
                                               [&](int64_t, T yv, T dv) -> A {
                                                 if constexpr (V::kLog) sum += D::load(dv);
                                                 else sum += D::load(dv) * D::load(yv);
                                                 return sum;
                                               });
  xent_group_sum2(sum, unused, group, scratch);
  xent_row_walk2<V::kRowLoads, kColumn, true>(y, dy, out, cvt, base, width, inner, stage, lane, group,
                                              [&](int64_t, T yv, T dv) -> A {
                                                if constexpr (V::kLog) return D::load(dv) - xent_exp(D::load(yv)) * sum;
                                                else return D::load(yv) * (D::load(dv) - sum);
                                              });
}

// The rows a thread's block takes, one at a time (the shared arrays are the
// caller's: the on-chip shape's pipeline (pipe, kernels/device/pipeline.h)
// brings each row's slice into its stash, part holds its statistics).
template <class V, int kShape, class Scratch, class Stage, class Pipe, class Part>
XENT_DEVICE void xent_softmax_tiles(const xent_softmax_args& a, const xent_row_walk& walk, Scratch scratch, Stage stage,
                                    const Pipe& pipe, Part part) {
  const int64_t inner = kShape == XENT_COLUMN ? a.inner : 1;
  for (int64_t tile = walk.first; tile < a.rows; tile += walk.step) {
    // The on-chip shape: this row's slice from vector `half` on, the next
    // row's on its way.
    [[maybe_unused]] int64_t half = 0;
    if constexpr (kShape == XENT_ON_CHIP) half = pipe.take(tile);
    // A slot past the last row walks no classes (xent_tile_slot).
    const xent_slot at = xent_tile_slot(walk, tile, a.rows, a.classes);
    const int64_t base = xent_row_base(at.row, a.classes, inner);
    if constexpr (V::kOp == XENT_FWD)
      xent_softmax_fwd_row<V, kShape>(a, walk, base, at.width, scratch, stage, pipe, half, part);
    else xent_softmax_bwd_row<V, kShape>(a, walk, base, at.width, scratch, stage);
  }
}

// The row kernel's body: `row_group` threads a row (0 = the block), or one
// thread a row (XENT_COLUMN), or a cluster a row (XENT_ON_CHIP, whose blocks
// each walk their slice of the row from shared memory, copied there while
// the last row was walked: the row's bytes move once in, once out).
template <class V, int kShape>
XENT_DEVICE void xent_softmax_rows(const xent_softmax_args& a, int row_group) {
  typedef typename V::D::T T;
  typedef typename V::D::A A;
  XENT_BLOCK_BEGIN();
  XENT_SHARED_ARRAY(A, scratch, 4 * XENT_MAX_WARPS);
  // The strided shape's 16-byte loads are staged here (xent_column_walk).
  XENT_SHARED_ARRAY16(T, stage, kShape == XENT_COLUMN ? XENT_COLUMN_STAGE(V::kColumnThreads, T) : 1);
  const xent_row_walk walk = xent_rows<kShape>(row_group);
  if constexpr (kShape == XENT_ON_CHIP) {
    XENT_DYNAMIC_SHARED(xent_vec16<T>, stash);
    XENT_SHARED_ARRAY(uint64_t, bars, 2);
    XENT_SHARED_ARRAY(A, part, 4);
    const auto pipe = xent_slice_pipe_of((const T*)a.x, a.classes, walk.first, walk.step, a.rows, stash, bars);
    xent_softmax_tiles<V, kShape>(a, walk, scratch, stage, pipe, part);
  } else {
    xent_softmax_tiles<V, kShape>(a, walk, scratch, stage, nullptr, nullptr);
  }
}
