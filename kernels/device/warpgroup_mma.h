// A warpgroup's matrix product on the tensor cores (sm_90a's wgmma): four
// warps (128 threads) multiply a 64 x 16 tile of A by a 16 x N tile of B,
// both bf16 in shared memory, into a 64 x N f32 accumulator spread over
// their registers, asynchronously. The on-chip linear cross entropy's tile
// of logits (docs/LINEAR_CE.md) is a chain of these. Under the emulator the
// product is computed element by element from the same shared memory, when
// the wait that the GPU needs before the registers are read is reached,
// and a write to its operands between its issue and its wait is reported.
#pragma once

#if defined(XENT_TARGET_HIP)
#error "warpgroup_mma.h is CUDA's (sm_90a); AMD's tiles would be MFMA's (docs/LINEAR_CE.md)"
#endif

// The operands' layout in shared memory: wgmma's canonical layouts, 16
// K-elements of each operand an instruction. Element (r, k) of an operand
// (A: r a row of the product; B: r a column of it) at byte `start`, in
// K-major order (a row's K elements adjacent: B stored as its transpose,
// as the weight's rows are) or MN-major (an element's neighbours in r
// adjacent: G^T as A, or hidden's rows as B), `leading` and `stride` being
// wgmma's leading- and stride-dimension byte offsets:
// - K-major, no swizzle: "core matrices" of 8 rows x 8 elements, each 128
//   contiguous bytes, at (r / 8) * stride + (k / 8) * leading + (r % 8) *
//   16 + (k % 8) * 2 from start;
// - MN-major, no swizzle: core matrices of 8 k x 8 r, at (r / 8) * stride
//   + (k / 8) * leading + (k % 8) * 16 + (r % 8) * 2;
// - with the 128-byte swizzle (swizzle128: what a bulk tensor copy writes
//   with CU_TENSOR_MAP_SWIZZLE_128B, whose reads hit every bank), lines of
//   64 elements (128 bytes), 8 lines an atom of 1024 bytes, and the 16-byte
//   chunks of a line permuted by its line in the atom: byte a lies at
//   a ^ ((a >> 7) % 8) << 4 (from a 1024-byte-aligned base), where a =
//   start + (r / 8) * stride + (r % 8) * 128 + (k / 64) * leading + (k % 64)
//   * 2 (K-major: a line is a row's K; the hardware ignores `leading`,
//   which the staging uses between 64-wide column blocks) or start +
//   (k / 8) * stride + (k % 8) * 128 + (r / 64) * leading + (r % 64) * 2
//   (MN-major: a line is 64 r's of one k).
// A K-step of 16 moves `start` by 32 bytes (K-major, swizzled), 2 *
// leading (K-major, no swizzle) or 2 * stride (MN-major, swizzled).
// Offsets are multiples of 16 below 256 KiB.
struct xent_wg_layout {
  uint32_t leading, stride;
  bool swizzle128, mn_major;
};

// The byte address (from the shared array's start) of element (r, k) of
// the operand at `start` in that layout.
XENT_DEVICE uint32_t xent_wg_address(xent_wg_layout l, uint32_t start, int r, int k) {
  const uint32_t ur = (uint32_t)r, uk = (uint32_t)k;
  if (!l.swizzle128) {
    const uint32_t core = l.mn_major ? (uk % 8) * 16u + (ur % 8) * 2u : (ur % 8) * 16u + (uk % 8) * 2u;
    return start + (ur / 8) * l.stride + (uk / 8) * l.leading + core;
  }
  const uint32_t line = l.mn_major ? uk : ur, along = l.mn_major ? ur : uk;
  const uint32_t a = start + (line / 8) * l.stride + (line % 8) * 128u + (along / 64) * l.leading + (along % 64) * 2u;
  return a ^ ((a >> 7) & 7u) << 4;
}

// Accumulator element i of a thread (t of the warpgroup's 128) holds row
// 16 (t / 32) + 8 ((i / 2) % 2) + (t % 32) / 4 and column
// 8 (i / 4) + 2 (t % 4) + i % 2 of the 64 x N product (the PTX ISA's
// fragment of wgmma's D): each warp owns 16 rows.
XENT_DEVICE int xent_wg_row(int t, int i) { return 16 * ((t % 128) / 32) + 8 * ((i / 2) % 2) + (t % 32) / 4; }
XENT_DEVICE int xent_wg_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

#if defined(XENT_EMU)
// An operand: the shared array it lies in, its start in bytes, its layout.
struct xent_wg_operand {
  uint16_t* base;  // the shared array, seen as 16-bit elements
  int64_t count;
  const char* name;
  uint32_t start;
  xent_wg_layout layout;
  // Element (r, k)'s index in the array.
  int64_t index(int r, int k) const { return xent_wg_address(layout, start, r, k) / 2; }
};
template <typename Smem>
XENT_DEVICE xent_wg_operand xent_wg_operand_at(const Smem& smem, uint32_t start, xent_wg_layout layout) {
  return xent_wg_operand{(uint16_t*)smem.base(), smem.count() * (int64_t)sizeof(*smem.base()) / 2, smem.name(), start,
                         layout};
}

// The accumulator, and the products issued into it and not yet waited for:
// the GPU computes them at some time before the wait, so the emulator does
// at the wait, from the shared memory as it is then (a tile overwritten
// before the wait gives the wrong product there, as on the GPU).
template <int N>
struct xent_wg_acc {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma's N: a multiple of 8 up to 256");
  float d[N / 2];
  struct issued {
    xent_wg_operand a, b;
    bool accumulate;
  };
  xent_emu::async_groups<issued, 16> q;
  ~xent_wg_acc() {
    if (q.n)
      xent_emu_fail("wgmma: thread %u ends with %d products issued and never waited for (wgmma.wait_group)",
                    threadIdx.x, q.n);
  }
  // The shared memory a product reads for this thread's elements (its two
  // rows of A, its N / 4 columns of B) is in flight from the issue to the
  // wait (runtime/emu: a write to it meanwhile is reported).
  // This thread's elements of the operands: its two rows of A and N / 4
  // columns of B (element i takes row (i / 2) % 2 and column 2 (i / 4) +
  // i % 2 of them), 16 k each.
  struct elements {
    int64_t a[2 * 16], b[N / 4 * 16];
  };
  static elements elements_of(const issued& p) {
    const int t = (int)(threadIdx.x % 128);
    elements e;
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 16; ++k) e.a[16 * h + k] = p.a.index(xent_wg_row(t, 2 * h), k);
    for (int j = 0; j < N / 4; ++j)
      for (int k = 0; k < 16; ++k) e.b[16 * j + k] = p.b.index(xent_wg_col(t, 4 * (j / 2) + j % 2), k);
    return e;
  }
  static void in_flight(const issued& p, const elements& e, int begin) {
    xent_emu_shared_async_n(p.a.base, e.a, 2 * 16, p.a.count, p.a.name, XENT_EMU_ASYNC_PRODUCT, begin);
    xent_emu_shared_async_n(p.b.base, e.b, N / 4 * 16, p.b.count, p.b.name, XENT_EMU_ASYNC_PRODUCT, begin);
  }
  void run(const issued& p) {
    const elements e = elements_of(p);
    in_flight(p, e, 0);
    // Each element read (and checked) once.
    xent_emu_shared_accesses(p.a.base, e.a, 2 * 16, p.a.count, p.a.name, 0);
    xent_emu_shared_accesses(p.b.base, e.b, N / 4 * 16, p.b.count, p.b.name, 0);
    float a[2][16], b[N / 4][16];
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 16; ++k) a[h][k] = xent_bf16_to_float(p.a.base[e.a[16 * h + k]]);
    for (int j = 0; j < N / 4; ++j)
      for (int k = 0; k < 16; ++k) b[j][k] = xent_bf16_to_float(p.b.base[e.b[16 * j + k]]);
    for (int i = 0; i < N / 2; ++i) {
      const float *x = a[(i / 2) % 2], *y = b[2 * (i / 4) + i % 2];
      double sum = 0;
      for (int k = 0; k < 16; ++k) sum += (double)x[k] * (double)y[k];
      d[i] = (p.accumulate ? d[i] : 0.0f) + (float)sum;
    }
  }
};

// An operand's descriptor's rules (wgmma's and tcgen05.mma's alike).
XENT_DEVICE void xent_wg_check(const xent_wg_operand& o, const char* which, const char* op = "wgmma") {
  if (o.start % 16 || o.layout.leading % 16 || o.layout.stride % 16 || o.layout.leading >= (1u << 18) ||
      o.layout.stride >= (1u << 18))
    xent_emu_fail(
        "%s: operand %s of %s: start %u, leading %u and stride %u bytes must be multiples of 16 "
        "below 256 KiB (the descriptor drops their low 4 bits)",
        op, which, o.name, o.start, o.layout.leading, o.layout.stride);
  if (o.layout.swizzle128 && (o.start >> 7) % 8 != 0)
    xent_emu_fail(
        "%s: operand %s of %s at byte %u: a 128-byte-swizzled operand starts in the first line of a "
        "1024-byte atom (the descriptor's base offset is 0)",
        op, which, o.name, o.start);
}

// D (+)= A B: issued, not done (the fence before it, the commit and the
// wait after it are the caller's, as on the GPU). MnA, MnB: the operands'
// layouts are MN-major (wgmma's transpose immediates).
template <bool MnA = false, bool MnB = false, int N>
XENT_DEVICE void xent_wg_mma(xent_wg_acc<N>& acc, const xent_wg_operand& a, const xent_wg_operand& b, bool accumulate) {
  if (a.layout.mn_major != MnA || b.layout.mn_major != MnB)
    xent_emu_fail("wgmma: operands A of %s and B of %s laid out %s and %s, issued as %s and %s", a.name, b.name,
                  a.layout.mn_major ? "MN-major" : "K-major", b.layout.mn_major ? "MN-major" : "K-major",
                  MnA ? "MN-major" : "K-major", MnB ? "MN-major" : "K-major");
  if (blockDim.x % 128 != 0)
    xent_emu_fail("wgmma: blocks of %u threads: a warpgroup is 128 threads, and a block whole warpgroups", blockDim.x);
  xent_wg_check(a, "A");
  xent_wg_check(b, "B");
  acc.q.issue({a, b, accumulate}, "wgmma products");
  const auto& p = acc.q.pending[acc.q.n - 1];
  acc.in_flight(p, acc.elements_of(p), 1);
}
XENT_DEVICE void xent_wg_fence() {}
template <int N>
XENT_DEVICE void xent_wg_commit(xent_wg_acc<N>& acc) {
  acc.q.commit();
}
// Waits until at most `newer` commit groups are in flight: the older ones'
// products are in the registers.
template <int Newer, int N>
XENT_DEVICE void xent_wg_wait(xent_wg_acc<N>& acc) {
  acc.q.wait(Newer, [&](const typename xent_wg_acc<N>::issued& p) { acc.run(p); });
}
#else
// The descriptor of an operand at smem + start bytes (wgmma's 64-bit
// matrix descriptor: start, leading and stride offsets in 16-byte units,
// the swizzle in bits 62-63, 1 for 128 bytes; a swizzled K-major operand's
// leading offset is unused, 1 by convention).
typedef uint64_t xent_wg_operand;
template <typename T>
XENT_DEVICE xent_wg_operand xent_wg_operand_at(const T* smem, uint32_t start, xent_wg_layout layout) {
  const uint32_t at = (uint32_t)__cvta_generic_to_shared(smem) + start;
  const uint32_t leading = layout.swizzle128 && !layout.mn_major ? 1u : (layout.leading & 0x3FFFFu) >> 4;
  return (uint64_t)((at & 0x3FFFFu) >> 4) | (uint64_t)leading << 16 |
         (uint64_t)((layout.stride & 0x3FFFFu) >> 4) << 32 | (uint64_t)(layout.swizzle128 ? 1u : 0u) << 62;
}

template <int N>
struct xent_wg_acc {
  static_assert(N == 64 || N == 128, "wgmma shapes written: m64n64k16, m64n128k16");
  float d[N / 2];
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define XENT_WG_SM90A 1
#elif defined(__CUDA_ARCH__)
// Device code for another architecture (a fat binary's sm_80, sm_100...):
// a kernel built on these products traps there (its body left out, so it
// takes no registers or stack), and the runtime launches it on sm_90 alone.
#define XENT_WG_ABSENT 1
#endif

// Orders this thread's earlier writes to the accumulator's registers (and
// generic-proxy writes to shared memory made visible by a barrier) before
// the products that follow (wgmma.fence).
XENT_DEVICE void xent_wg_fence() {
#if defined(XENT_WG_SM90A)
  asm volatile("wgmma.fence.sync.aligned;" : : : "memory");
#endif
}

#define XENT_WG_D8(i)                                                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),          \
      "+f"(d[i + 7])
template <bool MnA = false, bool MnB = false, int N>
XENT_DEVICE void xent_wg_mma(xent_wg_acc<N>& acc, xent_wg_operand a, xent_wg_operand b, bool accumulate) {
#if defined(XENT_WG_SM90A)
  float* d = acc.d;
  const int scale_d = accumulate ? 1 : 0;
  if constexpr (N == 64) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, %35, %36;\n}"
        : XENT_WG_D8(0), XENT_WG_D8(8), XENT_WG_D8(16), XENT_WG_D8(24)
        : "l"(a), "l"(b), "r"(scale_d), "n"(MnA ? 1 : 0), "n"(MnB ? 1 : 0));
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, %67, %68;\n}"
        : XENT_WG_D8(0), XENT_WG_D8(8), XENT_WG_D8(16), XENT_WG_D8(24), XENT_WG_D8(32), XENT_WG_D8(40), XENT_WG_D8(48),
          XENT_WG_D8(56)
        : "l"(a), "l"(b), "r"(scale_d), "n"(MnA ? 1 : 0), "n"(MnB ? 1 : 0));
  }
#else
  (void)acc, (void)a, (void)b, (void)accumulate;
  __trap();  // launched only where the device is sm_90 and the code sm_90a's
#endif
}
#undef XENT_WG_D8

template <int N>
XENT_DEVICE void xent_wg_commit(xent_wg_acc<N>&) {
#if defined(XENT_WG_SM90A)
  asm volatile("wgmma.commit_group.sync.aligned;" : : : "memory");
#endif
}
template <int Newer, int N>
XENT_DEVICE void xent_wg_wait(xent_wg_acc<N>& acc) {
#if defined(XENT_WG_SM90A)
  // The accumulator's registers as operands: the compiler keeps their reads
  // after the wait.
  float* d = acc.d;
  XENT_UNROLL
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d[i]) : : "memory");
  asm volatile("wgmma.wait_group.sync.aligned %0;" : : "n"(Newer) : "memory");
  XENT_UNROLL
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d[i]) : : "memory");
#else
  (void)acc;
#endif
}
#endif

// Makes this thread's generic-proxy writes to shared memory (st.shared)
// visible to the tensor cores' reads (the async proxy); a barrier after it
// makes every thread's visible (fence.proxy.async). Not needed for bytes a
// bulk copy wrote.
XENT_DEVICE void xent_wg_publish_smem() {
#if defined(XENT_EMU)
  xent_emu_proxy_fence();  // (a product that reads a store with none after it is reported)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" : : : "memory");
#endif
}
