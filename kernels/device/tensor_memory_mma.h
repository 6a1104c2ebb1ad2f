// A block's matrix product on sm_100a's tensor cores (tcgen05), Blackwell's
// counterpart of warpgroup_mma.h: one thread issues the product of a
// 128 x 16 tile of A by a 16 x N one of B, both bf16 in shared memory in
// wgmma's canonical layouts (warpgroup_mma.h's xent_wg_layout), into a
// 128 x N f32 accumulator in tensor memory (256 KB an SM, 128 lanes of 512
// columns of 32 bits: the accumulator's row r is lane r, column c a column
// of the block's allocation), asynchronously; a commit arrives on an
// mbarrier once the thread's products are done; each warp then loads its
// quarter's rows into registers, a thread a row (tcgen05.ld). The
// registers hold no accumulator while the tensor cores work, and a row's
// values lie in one thread, where wgmma spreads them over four.
// - xent_tm_alloc / xent_tm_free: every thread of the block (warp 0 holds
//   the allocation; the address reaches the others through shared memory).
// - xent_tm_mma, xent_tm_commit: the issuing thread. xent_tm_wait: every
//   thread, each keeping its parity of the mbarrier in xent_tm_products.
// - xent_tm_load32: a warp, its lanes 32 (warp % 4) to 32 (warp % 4) + 31
//   (the hardware's rule), 32 columns, and the wait for them.
// No sm_100 GPU has run this (the project is lent H200s): the layouts are
// the PTX ISA's as read here, and nvcc compiles it for sm_100a in the suite.
// Under the emulator the product is computed from the same shared memory at
// the wait for its commit's mbarrier (the wait is a block barrier there),
// its operands are in flight from the issue to that wait (a write to them
// meanwhile is reported), and its accumulator's columns too (a load of
// them is reported, and columns never allocated, loads of another warp's
// lanes, and a block that exits holding tensor memory).
#pragma once

#include "tensor_copy.h"
#include "warpgroup_mma.h"

enum { XENT_TM_ROWS = 128 };  // M of every product: a lane a row

// The instruction descriptor (kind::f16): f32 D (bits 4-5), bf16 A and B
// (7-9, 10-12), A and B MN-major (15, 16), N / 8 (17-22), M / 16 (24-28).
template <bool MnA, bool MnB, int N>
constexpr uint32_t xent_tm_idesc = 1u << 4 | 1u << 7 | 1u << 10 | (uint32_t)MnA << 15 | (uint32_t)MnB << 16 |
                                   (uint32_t)(N >> 3) << 17 | (uint32_t)(XENT_TM_ROWS >> 4) << 24;

// A tensor-memory address: lane in the high 16 bits, column in the low.
XENT_DEVICE uint32_t xent_tm_address(uint32_t base, int lane, int column) {
  return base + ((uint32_t)lane << 16) + (uint32_t)column;
}
// The first lane this thread's warp may load: 32 (warp % 4).
XENT_DEVICE int xent_tm_warp_lane() { return 32 * (int)((threadIdx.x / 32) % 4); }

#if defined(XENT_EMU)
typedef xent_wg_operand xent_tm_operand;
template <typename Smem>
XENT_DEVICE xent_tm_operand xent_tm_operand_at(const Smem& smem, uint32_t start, xent_wg_layout layout) {
  return xent_wg_operand_at(smem, start, layout);
}

// A thread's products issued and not yet completed, and its parities of
// the mbarriers their commits arrive on.
struct xent_tm_products {
  enum { kMax = 64, kBars = 8 };  // two steps of pass 2 in flight: 64
  struct issued {
    xent_wg_operand a, b;
    uint32_t d;
    int n, bar;  // bar: the mbarrier its commit arrives on, -1 before the commit
    bool accumulate;
  };
  issued pending[kMax];
  int n = 0;
  uint32_t phases = 0;  // bit b: the parity of the next phase of mbarrier b this thread waits for
  bool arrived[kBars] = {};
  ~xent_tm_products() {
    if (n)
      xent_emu_fail("tcgen05.mma: thread %u ends with %d products whose commit's mbarrier it never waited for",
                    threadIdx.x, n);
  }
  static void in_range(int b, const char* what) {
    if (b < 0 || b >= kBars) xent_emu_fail("%s: mbarrier %d, of the model's %d", what, b, (int)kBars);
  }
  // A product's operand elements: A's 128 rows and B's n columns, 16 k
  // each (buffers of one CPU thread: the emulator's fibers do not switch
  // inside these calls).
  static int64_t* elements_a(const issued& p) {
    static thread_local int64_t e[XENT_TM_ROWS * 16];
    for (int r = 0; r < XENT_TM_ROWS; ++r)
      for (int k = 0; k < 16; ++k) e[16 * r + k] = p.a.index(r, k);
    return e;
  }
  static int64_t* elements_b(const issued& p) {
    static thread_local int64_t e[256 * 16];
    for (int c = 0; c < p.n; ++c)
      for (int k = 0; k < 16; ++k) e[16 * c + k] = p.b.index(c, k);
    return e;
  }
  static void in_flight(const issued& p, int begin) {
    const int kind = XENT_EMU_ASYNC_COMMITTED_PRODUCT;
    xent_emu_shared_async_n(p.a.base, elements_a(p), XENT_TM_ROWS * 16, p.a.count, p.a.name, kind, begin);
    xent_emu_shared_async_n(p.b.base, elements_b(p), p.n * 16, p.b.count, p.b.name, kind, begin);
    xent_emu_tensor_product((int)(p.d & 0xFFFFu), p.n, begin ? 1 : -1);
  }
  // D (+)= A B into tensor memory, from the shared memory as it is now.
  static void run(const issued& p) {
    in_flight(p, 0);
    static thread_local float a[XENT_TM_ROWS][16], b[256][16];
    const int64_t* ea = elements_a(p);
    xent_emu_shared_accesses(p.a.base, ea, XENT_TM_ROWS * 16, p.a.count, p.a.name, XENT_EMU_PRODUCT_READ);
    for (int r = 0; r < XENT_TM_ROWS; ++r)
      for (int k = 0; k < 16; ++k) a[r][k] = xent_bf16_to_float(p.a.base[ea[16 * r + k]]);
    const int64_t* eb = elements_b(p);
    xent_emu_shared_accesses(p.b.base, eb, p.n * 16, p.b.count, p.b.name, XENT_EMU_PRODUCT_READ);
    for (int c = 0; c < p.n; ++c)
      for (int k = 0; k < 16; ++k) b[c][k] = xent_bf16_to_float(p.b.base[eb[16 * c + k]]);
    uint32_t* cells = xent_emu_tensor_memory();
    const int column = (int)(p.d & 0xFFFFu);
    for (int r = 0; r < XENT_TM_ROWS; ++r)
      for (int c = 0; c < p.n; ++c) {
        double sum = 0;
        for (int k = 0; k < 16; ++k) sum += (double)a[r][k] * (double)b[c][k];
        uint32_t& cell = cells[r * XENT_EMU_TMEM_COLUMNS + column + c];
        cell = __float_as_uint((p.accumulate ? __uint_as_float(cell) : 0.0f) + (float)sum);
      }
  }
};

template <typename Slot>
XENT_DEVICE uint32_t xent_tm_alloc(Slot slot, int columns) {
  if (threadIdx.x == 0) {
    slot[0] = (uint32_t)xent_emu_tensor_alloc(columns);
    xent_emu_tensor_relinquish();
  }
  __syncthreads();
  return slot[0];
}
// After every thread's last load of the columns (the barrier in it).
XENT_DEVICE void xent_tm_free(uint32_t base, int columns) {
  __syncthreads();
  if (threadIdx.x == 0) xent_emu_tensor_free((int)(base & 0xFFFFu), columns);
}

// D (+)= A B: issued, not done. D at tensor-memory address d (lane 0, the
// accumulator's first column); MnA, MnB: the operands are MN-major.
template <int N, bool MnA = false, bool MnB = false>
XENT_DEVICE void xent_tm_mma(xent_tm_products& q, uint32_t d, const xent_tm_operand& a, const xent_tm_operand& b,
                             bool accumulate) {
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "tcgen05.mma's N with M = 128: a multiple of 16 up to 256");
  if (a.layout.mn_major != MnA || b.layout.mn_major != MnB)
    xent_emu_fail("tcgen05.mma: operands A of %s and B of %s laid out %s and %s, issued as %s and %s", a.name, b.name,
                  a.layout.mn_major ? "MN-major" : "K-major", b.layout.mn_major ? "MN-major" : "K-major",
                  MnA ? "MN-major" : "K-major", MnB ? "MN-major" : "K-major");
  if (d >> 16)
    xent_emu_fail("tcgen05.mma: an accumulator at lane %u: with M = 128 its rows are lanes 0 to 127", d >> 16);
  xent_wg_check(a, "A", "tcgen05.mma");
  xent_wg_check(b, "B", "tcgen05.mma");
  if (q.n == xent_tm_products::kMax)
    xent_emu_fail("tcgen05.mma: more than %d products in flight in the model", (int)xent_tm_products::kMax);
  q.pending[q.n] = {a, b, d, N, -1, accumulate};
  q.in_flight(q.pending[q.n++], 1);
}

// The issuing thread: mbarrier b (one arrival a phase) completes its phase
// when this thread's products issued so far are done.
template <typename Bars>
XENT_DEVICE void xent_tm_commit(xent_tm_products& q, Bars bars, int b) {
  xent_tm_products::in_range(b, "tcgen05.commit");
  if (q.arrived[b])
    xent_emu_fail("mbarrier %s[%d]: a second commit in one phase (its count is one)", bars.name(), b);
  q.arrived[b] = true;
  for (int i = 0; i < q.n; ++i)
    if (q.pending[i].bar < 0) q.pending[i].bar = b;
}

// Every thread: waits for mbarrier b's next phase; then the products of
// the commits it counted are in tensor memory.
template <typename Bars>
XENT_DEVICE void xent_tm_wait(xent_tm_products& q, Bars bars, int b) {
  xent_tm_products::in_range(b, "mbarrier.try_wait");
  if (q.arrived[b]) {
    int kept = 0;
    for (int i = 0; i < q.n; ++i) {
      if (q.pending[i].bar == b) q.run(q.pending[i]);
      else q.pending[kept++] = q.pending[i];
    }
    q.n = kept;
    q.arrived[b] = false;
    bars.base()[b] += 1;
  }
  // (Every thread leaves together; the wait orders none of their own
  // accesses, as on a GPU.)
  xent_emu_mbarrier_wait(__FILE__, __LINE__);
  xent_mbarrier_passed(bars, b, q.phases);
}

// A warp's load of 32 columns from `address` (lane 32 (warp % 4), the
// column): this thread's lane, 32 consecutive columns.
XENT_DEVICE void xent_tm_load32(uint32_t address, float (&r)[32]) {
  const int lane = (int)(address >> 16), column = (int)(address & 0xFFFFu);
  if (lane != xent_tm_warp_lane())
    xent_emu_fail("tcgen05.ld: warp %u loads lanes %d to %d: a warp loads lanes 32 (warp %% 4) to 32 (warp %% 4) + 31",
                  threadIdx.x / 32, lane, lane + 31);
  xent_emu_tensor_read(column, 32, "tcgen05.ld");
  const uint32_t* cells = xent_emu_tensor_memory() + (size_t)(lane + (int)(threadIdx.x % 32)) * XENT_EMU_TMEM_COLUMNS;
  for (int j = 0; j < 32; ++j) r[j] = __uint_as_float(cells[column + j]);
}
XENT_DEVICE void xent_tm_fence_before_sync() {}
XENT_DEVICE void xent_tm_fence_after_sync() {}
#else
// sm_100a's code, or the family's (sm_100f: sm_100 and sm_103 run it).
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || \
                               (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ == 1000))
#define XENT_TM_SM100A 1
#endif

// tcgen05's 64-bit shared-memory descriptor: wgmma's start, leading and
// stride fields (bits 0-45, warpgroup_mma.h's xent_wg_operand_at), then the
// version 1 (bits 46-47) and the swizzle in bits 61-63 (2 for 128 bytes)
// where wgmma's is in bits 62-63.
typedef uint64_t xent_tm_operand;
template <typename T>
XENT_DEVICE xent_tm_operand xent_tm_operand_at(const T* smem, uint32_t start, xent_wg_layout layout) {
  const uint64_t fields = xent_wg_operand_at(smem, start, layout) & ((1ull << 46) - 1);
  return fields | 1ull << 46 | (uint64_t)(layout.swizzle128 ? 2u : 0u) << 61;
}

struct xent_tm_products {
  uint32_t phases = 0;  // bit b: the parity of the next phase of mbarrier b this thread waits for
};

XENT_DEVICE void xent_tm_fence_before_sync() {
#if defined(XENT_TM_SM100A)
  asm volatile("tcgen05.fence::before_thread_sync;" : : : "memory");
#endif
}
XENT_DEVICE void xent_tm_fence_after_sync() {
#if defined(XENT_TM_SM100A)
  asm volatile("tcgen05.fence::after_thread_sync;" : : : "memory");
#endif
}

// Warp 0 allocates (and gives up the block's permit to allocate more, so
// that another block on the SM may); the address reaches every thread
// through `slot` (a shared uint32_t).
XENT_DEVICE uint32_t xent_tm_alloc(uint32_t* slot, int columns) {
#if defined(XENT_TM_SM100A)
  if (threadIdx.x / 32 == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
                 :
                 : "r"((uint32_t)__cvta_generic_to_shared(slot)), "r"(columns)
                 : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" : : : "memory");
  }
#else
  (void)columns;
  __trap();  // launched only where the device is sm_100 and the code sm_100a's
#endif
  xent_tm_fence_before_sync();
  __syncthreads();
  xent_tm_fence_after_sync();
  return *(volatile uint32_t*)slot;
}
XENT_DEVICE void xent_tm_free(uint32_t base, int columns) {
  xent_tm_fence_before_sync();
  __syncthreads();
  xent_tm_fence_after_sync();
#if defined(XENT_TM_SM100A)
  if (threadIdx.x / 32 == 0)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" : : "r"(base), "r"(columns) : "memory");
#else
  (void)base, (void)columns;
#endif
}

template <int N, bool MnA = false, bool MnB = false>
XENT_DEVICE void xent_tm_mma(xent_tm_products&, uint32_t d, xent_tm_operand a, xent_tm_operand b, bool accumulate) {
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "tcgen05.mma's N with M = 128: a multiple of 16 up to 256");
#if defined(XENT_TM_SM100A)
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
      " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}"
      :
      : "r"(d), "l"(a), "l"(b), "n"(xent_tm_idesc<MnA, MnB, N>), "r"(accumulate ? 1 : 0)
      : "memory");
#else
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap();
#endif
}

XENT_DEVICE void xent_tm_commit(xent_tm_products&, uint64_t* bars, int b) {
#if defined(XENT_TM_SM100A)
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :
               : "r"(xent_tensor_smem(bars + b))
               : "memory");
#else
  (void)bars, (void)b;
  __trap();
#endif
}

XENT_DEVICE void xent_tm_wait(xent_tm_products& q, uint64_t* bars, int b) {
  xent_mbarrier_wait(bars, b, (q.phases >> b) & 1u);
  q.phases ^= 1u << b;
  xent_tm_fence_after_sync();
}

#define XENT_TM_R8(i)                                                                                                  \
  "=r"(u[i]), "=r"(u[i + 1]), "=r"(u[i + 2]), "=r"(u[i + 3]), "=r"(u[i + 4]), "=r"(u[i + 5]), "=r"(u[i + 6]),          \
      "=r"(u[i + 7])
XENT_DEVICE void xent_tm_load32(uint32_t address, float (&r)[32]) {
#if defined(XENT_TM_SM100A)
  uint32_t u[32];
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : XENT_TM_R8(0), XENT_TM_R8(8), XENT_TM_R8(16), XENT_TM_R8(24)
      : "r"(address)
      : "memory");
  // The registers are the wait's operands: no use of them moves above it.
  asm volatile("tcgen05.wait::ld.sync.aligned;" : "+r"(u[0]), "+r"(u[1]), "+r"(u[2]), "+r"(u[3]), "+r"(u[4]),
               "+r"(u[5]), "+r"(u[6]), "+r"(u[7]), "+r"(u[8]), "+r"(u[9]), "+r"(u[10]), "+r"(u[11]), "+r"(u[12]),
               "+r"(u[13]), "+r"(u[14]), "+r"(u[15]), "+r"(u[16]), "+r"(u[17]), "+r"(u[18]), "+r"(u[19]),
               "+r"(u[20]), "+r"(u[21]), "+r"(u[22]), "+r"(u[23]), "+r"(u[24]), "+r"(u[25]), "+r"(u[26]),
               "+r"(u[27]), "+r"(u[28]), "+r"(u[29]), "+r"(u[30]), "+r"(u[31]) : : "memory");
  XENT_UNROLL
  for (int j = 0; j < 32; ++j) r[j] = __uint_as_float(u[j]);
#else
  (void)address;
  XENT_UNROLL
  for (int j = 0; j < 32; ++j) r[j] = 0.0f;
  __trap();
#endif
}
#undef XENT_TM_R8
#endif
