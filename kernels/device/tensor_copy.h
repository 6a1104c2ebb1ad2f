// Tiles of a bf16 matrix copied into shared memory by sm_90's tensor memory
// accelerator (cp.async.bulk.tensor): one thread issues a box of 64 columns
// x `box_rows` rows, which lands 128-byte swizzled (a row a 128-byte line,
// the 16-byte chunks of line r permuted by r % 8: warpgroup_mma.h's
// swizzle128 layout) and completes an mbarrier's phase by its bytes, with
// zeros where the box passes the matrix's end. No thread's registers or
// issue slots carry the bytes, and a stage is two instructions.
// - The host describes the matrix once a launch (xent_tensor_map_bf16: the
//   driver's cuTensorMapEncodeTiled), and the kernel takes the map as a
//   __grid_constant__ parameter.
// - A buffer's mbarrier, initialized to one arrival (xent_tensor_init),
//   completes a phase when its issuing thread has said the bytes to expect
//   (xent_tensor_expect) and they have landed; every thread that reads the
//   buffer waits for the phase (xent_tensor_wait), each keeping the parity
//   it waits for in its xent_tensor_loads. A buffer is refilled only after
//   every thread's wait for its last phase and every read of it (a block
//   barrier between), as the tensor cores read it (wgmma, after
//   wgmma.wait_group): no generic-proxy fence, since the copy and the
//   products are both the async proxy's.
// - The emulator: the issuing thread's boxes are in flight from the issue
//   (any access to their bytes is reported, as a cp.async's), land at its
//   wait (the bytes expected checked against the boxes' sum), and every
//   thread leaves the wait together, each checking that the phase it waits
//   for is the last completed (else a GPU would wait forever, or read
//   before the bytes land). The wait orders the boxes' bytes before every
//   thread's reads, and nothing else: a thread's own stores are ordered
//   for another only by a block barrier, as on a GPU.
#pragma once

#include "target.h"

enum { XENT_TENSOR_LINE = 64 };  // a box's columns: one 128-byte line of bf16

#if defined(XENT_EMU)
// The emulator's record of a map (the driver's is 128 opaque bytes, 64-byte
// aligned; this one is not, so that no host ABI note is printed for the
// kernels' arguments that hold it).
struct xent_tensor_map {
  const uint16_t* base;
  int64_t columns, rows, pitch;  // pitch: elements from a row to the next
  int box_rows;
  bool encoded;
};
// The driver's rules for a map (cuTensorMapEncodeTiled's): 0, or 1 where
// the driver would refuse it.
static inline int xent_tensor_map_bf16(xent_tensor_map* m, const void* base, int64_t columns, int64_t rows,
                                       int64_t pitch, int box_rows) {
  *m = xent_tensor_map{};
  if ((uintptr_t)base % 16 || columns < 1 || rows < 1 || columns > (1ll << 32) || rows > (1ll << 32) ||
      pitch * 2 % 16 || pitch < columns || pitch * 2 >= (1ll << 40) || box_rows < 1 || box_rows > 256)
    return 1;
  *m = xent_tensor_map{(const uint16_t*)base, columns, rows, pitch, box_rows, true};
  return 0;
}

template <typename Bars>
XENT_DEVICE void xent_tensor_init(Bars bars, int n) {
  if (threadIdx.x == 0)
    for (int b = 0; b < n; ++b) bars.base()[b] = 0;  // the phases completed
  __syncthreads();
}

struct xent_tensor_loads {
  enum { kBars = 8, kBoxes = 16 };
  uint32_t phases = 0;  // bit b: the parity of the next phase of mbarrier b this thread waits for
  struct box {
    const xent_tensor_map* map;
    uint16_t* base;  // the shared array, as 16-bit elements
    int64_t count;
    const char* name;
    uint32_t at;  // the box's first byte in it
    int32_t column, row;
    int bar;
  };
  box pending[kBoxes];
  int n = 0;
  int64_t expected[kBars] = {}, sent[kBars] = {};  // this phase's bytes said and issued, by mbarrier
  bool arrived[kBars] = {};
  ~xent_tensor_loads() {
    if (n)
      xent_emu_fail("cp.async.bulk.tensor: thread %u ends with %d boxes whose mbarrier it never waited for",
                    threadIdx.x, n);
  }
  static void in_range(int b, const char* what) {
    if (b < 0 || b >= kBars) xent_emu_fail("%s: mbarrier %d, of the model's %d", what, b, (int)kBars);
  }
  // Line r of a box at byte `at`: its elements' indices (the 16-byte
  // chunks permuted by r % 8, from a 1024-byte-aligned start).
  static void line_of(uint32_t at, int r, int64_t (&index)[XENT_TENSOR_LINE]) {
    for (int k = 0; k < XENT_TENSOR_LINE; ++k) {
      const uint32_t a = (uint32_t)r * 128u + (uint32_t)k * 2u;
      index[k] = (at + (a ^ ((a >> 7) & 7u) << 4)) / 2;
    }
  }
  static void land(const box& b) {
    const xent_tensor_map& m = *b.map;
    for (int r = 0; r < m.box_rows; ++r) {
      int64_t index[XENT_TENSOR_LINE];
      line_of(b.at, r, index);
      xent_emu_shared_async_n(b.base, index, XENT_TENSOR_LINE, b.count, b.name, XENT_EMU_ASYNC_COPY, 0);
      xent_emu_shared_landed(b.base, index, XENT_TENSOR_LINE, b.count, b.name);
      const int64_t row = (int64_t)b.row + r;
      for (int k = 0; k < XENT_TENSOR_LINE; ++k) {
        const int64_t column = (int64_t)b.column + k;
        uint16_t v = 0;
        if (row < m.rows && column < m.columns) {
          const uint16_t* p = m.base + row * m.pitch + column;
          xent_emu_global_access(p, 2, 0, __FILE__, __LINE__);
          v = *p;
        }
        b.base[index[k]] = v;
      }
    }
  }
};

// After a wait's block barrier: the phase of mbarrier b this thread waits
// for (bit b of `phases`: its parity) must be the last completed (else a
// GPU would wait for what never arrives, or pass before it does); then the
// bit flips.
template <typename Bars>
XENT_DEVICE void xent_mbarrier_passed(Bars bars, int b, uint32_t& phases) {
  // (The model's state of the mbarrier, an object of the hardware's that
  // synchronizes: read and written unchecked by the race detector.)
  const uint64_t done = bars.base()[b];
  const unsigned parity = (phases >> b) & 1u;
  if (done == 0 || ((done - 1) & 1u) != parity)
    xent_emu_fail("mbarrier %s[%d]: a wait for the phase of parity %u, but %llu phases have completed (on a GPU it "
                  "would wait for what never arrives, or pass before it does)",
                  bars.name(), b, parity, (unsigned long long)done);
  phases ^= 1u << b;
}

template <typename Bars>
XENT_DEVICE void xent_tensor_expect(xent_tensor_loads& l, Bars bars, int b, uint32_t bytes) {
  (void)bars;
  xent_tensor_loads::in_range(b, "mbarrier.arrive.expect_tx");
  if (l.arrived[b])
    xent_emu_fail("mbarrier %s[%d]: a second arrival in one phase (its count is one: the next phase would "
                  "complete without its bytes)", bars.name(), b);
  l.arrived[b] = true;
  l.expected[b] += bytes;
}

// Box (column, row) of map, rows of 64 columns, to byte `at` of smem (a
// multiple of 1024), completing mbarrier b's phase by its bytes.
template <typename Smem, typename Bars>
XENT_DEVICE void xent_tensor_load(xent_tensor_loads& l, const xent_tensor_map* m, Smem smem, uint32_t at,
                                  int32_t column, int32_t row, Bars bars, int b) {
  const int64_t count = smem.count() * (int64_t)sizeof(*smem.base()) / 2;
  xent_tensor_loads::in_range(b, "cp.async.bulk.tensor");
  if (!m->encoded) xent_emu_fail("cp.async.bulk.tensor: a map never encoded (xent_tensor_map_bf16)");
  if (at % 1024 || (int64_t)at / 2 + (int64_t)m->box_rows * XENT_TENSOR_LINE > count)
    xent_emu_fail("cp.async.bulk.tensor: a box of %d x 64 to byte %u of %s (%lld bytes): it must start at a "
                  "multiple of 1024 (the swizzle's atoms) and fit", m->box_rows, at, smem.name(),
                  (long long)count * 2);
  if (column < 0 || row < 0 || column % 8)
    xent_emu_fail("cp.async.bulk.tensor: a box at column %d, row %d (16-byte columns from 0)", column, row);
  if (!l.arrived[b])
    xent_emu_fail("cp.async.bulk.tensor into %s: mbarrier %s[%d]'s bytes never said (mbarrier.arrive.expect_tx "
                  "first)", smem.name(), bars.name(), b);
  if (l.n == xent_tensor_loads::kBoxes)
    xent_emu_fail("cp.async.bulk.tensor: more than %d boxes in flight in the model", (int)xent_tensor_loads::kBoxes);
  // In flight from now until the wait: any access meanwhile is reported.
  for (int r = 0; r < m->box_rows; ++r) {
    int64_t index[XENT_TENSOR_LINE];
    xent_tensor_loads::line_of(at, r, index);
    xent_emu_shared_async_n(smem.base(), index, XENT_TENSOR_LINE, count, smem.name(), XENT_EMU_ASYNC_COPY, 1);
  }
  l.pending[l.n++] = {m, (uint16_t*)smem.base(), count, smem.name(), at, column, row, b};
  l.sent[b] += (int64_t)m->box_rows * XENT_TENSOR_LINE * 2;
}

// Every thread: waits for mbarrier b's next phase; then the boxes that
// completed it are in the buffer, for the tensor cores and every thread.
template <typename Bars>
XENT_DEVICE void xent_tensor_wait(xent_tensor_loads& l, Bars bars, int b) {
  xent_tensor_loads::in_range(b, "mbarrier.try_wait");
  if (l.arrived[b]) {
    if (l.sent[b] != l.expected[b])
      xent_emu_fail("mbarrier %s[%d]: %lld bytes expected and %lld copied (on a GPU the phase would %s)", bars.name(),
                    b, (long long)l.expected[b], (long long)l.sent[b],
                    l.sent[b] < l.expected[b] ? "never complete" : "complete before every byte landed");
    int kept = 0;
    for (int i = 0; i < l.n; ++i) {
      if (l.pending[i].bar == b) l.land(l.pending[i]);
      else l.pending[kept++] = l.pending[i];
    }
    l.n = kept;
    l.arrived[b] = false, l.expected[b] = l.sent[b] = 0;
    bars.base()[b] += 1;
  }
  xent_emu_mbarrier_wait(__FILE__, __LINE__);
  xent_mbarrier_passed(bars, b, l.phases);
}
#else
#include <cudaTypedefs.h>
typedef CUtensorMap xent_tensor_map;
// The map of a bf16 matrix of `rows` rows of `columns` elements, `pitch`
// elements apart, in boxes of 64 x box_rows, 128-byte swizzled, zeros past
// its end; 0, or 1 where the driver refuses it (or has no such call).
static inline int xent_tensor_map_bf16(xent_tensor_map* m, const void* base, int64_t columns, int64_t rows,
                                       int64_t pitch, int box_rows) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return (PFN_cuTensorMapEncodeTiled_v12000)fn;
  }();
  if (!encode) return 1;
  const cuuint64_t dims[2] = {(cuuint64_t)columns, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)pitch * 2};
  const cuuint32_t box[2] = {XENT_TENSOR_LINE, (cuuint32_t)box_rows}, steps[2] = {1, 1};
  return encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, steps,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
             ? 0
             : 1;
}

struct xent_tensor_loads {
  uint32_t phases = 0;  // bit b: the parity of the next phase of mbarrier b this thread waits for
};

XENT_DEVICE uint32_t xent_tensor_smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

XENT_DEVICE void xent_tensor_init(uint64_t* bars, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int b = 0; b < n; ++b)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" : : "r"(xent_tensor_smem(bars + b)) : "memory");
    // The copy engine sees the initialized barriers (the async proxy).
    asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
  }
#else
  (void)bars, (void)n;
#endif
  __syncthreads();
}

// The issuing thread's arrival, with the bytes its boxes will bring.
XENT_DEVICE void xent_tensor_expect(xent_tensor_loads&, uint64_t* bars, int b, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :
               : "r"(xent_tensor_smem(bars + b)), "r"(bytes)
               : "memory");
#else
  (void)bars, (void)b, (void)bytes;
  __trap();  // launched only on sm_90 and later
#endif
}

template <typename T>
XENT_DEVICE void xent_tensor_load(xent_tensor_loads&, const xent_tensor_map* m, T* smem, uint32_t at, int32_t column,
                                  int32_t row, uint64_t* bars, int b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      :
      : "r"(xent_tensor_smem(smem) + at), "l"((uint64_t)m), "r"(column), "r"(row), "r"(xent_tensor_smem(bars + b))
      : "memory");
#else
  (void)m, (void)smem, (void)at, (void)column, (void)row, (void)bars, (void)b;
  __trap();
#endif
}

// Waits until mbarrier b has completed the phase of that parity (also the
// tensor cores' commits' wait: tensor_memory_mma.h).
XENT_DEVICE void xent_mbarrier_wait(uint64_t* bars, int b, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar = xent_tensor_smem(bars + b);
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
#else
  (void)bars, (void)b, (void)parity;
  __trap();
#endif
}

XENT_DEVICE void xent_tensor_wait(xent_tensor_loads& l, uint64_t* bars, int b) {
  xent_mbarrier_wait(bars, b, (l.phases >> b) & 1u);
  l.phases ^= 1u << b;
}
#endif
