// The backward of a fused call that wrote its gradient with dloss = 1
// (xent_ce_scale_grad: the package's inplace_backward, Liger-Kernel's
// in-place mode): grad *= dloss in place, in the accumulation type. Where a
// factor is exactly 1 its elements are neither read nor written, decided on
// the device: the usual loss.backward() costs a launch and a load a thread,
// and nothing waits for the host. grad is [outer, C, inner] (inner = 1: the
// class axis last); element (o, c, i)'s factor is dloss[o * inner + i]
// ('none') or dloss[0]. A call that does scale moves the gradient's bytes
// twice, as any scaling must.
#pragma once

// Blocks of 256 at most: one wave of an H100 or MI300X, enough to stream the
// gradient grid-stride, few enough that a skipped call is a single wave.
enum { XENT_RESCALE_THREADS = 256, XENT_RESCALE_BLOCKS = 1024 };

template <class V>
static XENT_GLOBAL void __launch_bounds__(XENT_RESCALE_THREADS) xent_ce_rescale(const xent_ce_args a) {
  typedef typename V::D D;
  typedef typename D::A A;
  const int64_t C = a.classes, total = a.rows * C;
  const int64_t thread = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, threads = (int64_t)gridDim.x * blockDim.x;
  if constexpr (V::kReduction != XENT_REDUCE_NONE) {
    const A s = xent_get<D>(a.dloss, 0, a.loss_f32);
    if (s == A(1)) return;
    for (int64_t e = thread; e < total; e += threads)
      xent_put<D>(a.grad, e, xent_get<D>(a.grad, e, a.grad_f32) * s, a.grad_f32);
  } else if (a.inner == 1) {
    // A warp a row: its lanes read the row's factor (one address) and skip
    // the row together.
    const int lane = (int)(threadIdx.x % XENT_WARP);
    const int64_t warps = threads / XENT_WARP;
    for (int64_t r = thread / XENT_WARP; r < a.rows; r += warps) {
      const A s = xent_get<D>(a.dloss, r, a.loss_f32);
      if (s == A(1)) continue;
      for (int64_t c = lane; c < C; c += XENT_WARP)
        xent_put<D>(a.grad, r * C + c, xent_get<D>(a.grad, r * C + c, a.grad_f32) * s, a.grad_f32);
    }
  } else {
    // The class axis strided: consecutive threads take consecutive
    // positions i of one (o, c), whose factors are consecutive too.
    const int64_t plane = C * a.inner;
    for (int64_t e = thread; e < total; e += threads) {
      const int64_t o = e / plane, i = e % a.inner;
      const A s = xent_get<D>(a.dloss, o * a.inner + i, a.loss_f32);
      if (s != A(1)) xent_put<D>(a.grad, e, xent_get<D>(a.grad, e, a.grad_f32) * s, a.grad_f32);
    }
  }
}

// The launch: none without a dloss (1) or elements.
template <class V>
static int xent_ce_launch_rescale(const xent_ce_args& a, xent_stream_t stream) {
  const int64_t total = a.rows * a.classes;
  if (!a.dloss || total == 0) return 0;
  const int64_t items = V::kReduction == XENT_REDUCE_NONE && a.inner == 1 ? a.rows * XENT_WARP : total;
  int64_t blocks = (items + XENT_RESCALE_THREADS - 1) / XENT_RESCALE_THREADS;
  if (blocks > XENT_RESCALE_BLOCKS) blocks = XENT_RESCALE_BLOCKS;
  XENT_LAUNCH(xent_ce_rescale<V>, dim3(xent_grid_blocks(blocks)), dim3(XENT_RESCALE_THREADS), 0, stream, a);
  return XENT_LAST_ERROR();
}
