// A thread's asynchronous 16-byte copies from global to shared memory
// (sm_80's cp.async): issued, committed in groups, and waited for by
// group, so that the next stage of a tile loads while this one is worked
// on, in no register. Under the emulator a copy lands at the wait, and
// from its issue to its wait its destination is in flight (runtime/emu:
// any access to it is reported, as is a copy never waited for). After its wait a thread sees
// its own copies; other threads see them after a barrier, and the tensor
// cores after xent_wg_publish_smem.
#pragma once

#include "vectors.h"

#if defined(XENT_EMU)
struct xent_async_copies {
  struct copy {
    uint16_t* base;  // the shared array as 16-bit elements
    int64_t count;
    const char* name;
    uint32_t at;      // the destination's byte offset in it
    const void* src;  // nullptr: zeros
  };
  xent_emu::async_groups<copy, 64> q;
  ~xent_async_copies() {
    if (q.n)
      xent_emu_fail("cp.async: thread %u ends with %d copies never waited for (cp.async.wait_group)", threadIdx.x, q.n);
  }
  static void land(const copy& c) {
    uint16_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c.src) {
      xent_emu_global_access(c.src, 16, 0, __FILE__, __LINE__);
      memcpy(v, c.src, 16);
    }
    const xent_emu::shared_array<uint16_t> dst(c.base, c.count, c.name);
    for (int k = 0; k < 8; ++k) {
      xent_emu_shared_async(c.base, c.at / 2 + k, c.count, c.name, XENT_EMU_ASYNC_COPY, 0);
      dst[c.at / 2 + k] = v[k];
    }
  }
};

// 16 bytes from src (global memory, 16-byte aligned), or zeros where not
// `valid` (src is then not read, but must still be a global address), to
// byte `at` of the shared array smem (16-byte aligned).
template <typename Smem>
XENT_DEVICE void xent_async_copy16(xent_async_copies& c, Smem smem, uint32_t at, const void* src, bool valid) {
  if (at % 16 || (valid && (uintptr_t)src % 16))
    xent_emu_fail("cp.async: a 16-byte copy from %p to byte %u of %s: both must be 16-byte aligned", src, at,
                  smem.name());
  // The bytes may land at any time until the wait: the destination is in
  // flight from now on (emu.h: any other access to it is reported).
  const int64_t count = smem.count() * (int64_t)sizeof(*smem.base()) / 2;
  for (int k = 0; k < 8; ++k)
    xent_emu_shared_async(smem.base(), at / 2 + k, count, smem.name(), XENT_EMU_ASYNC_COPY, 1);
  c.q.issue({(uint16_t*)smem.base(), count, smem.name(), at, valid ? src : nullptr}, "cp.async copies");
}
XENT_DEVICE void xent_async_commit(xent_async_copies& c) { c.q.commit(); }
// Waits until at most `Newer` commit groups are in flight.
template <int Newer>
XENT_DEVICE void xent_async_wait(xent_async_copies& c) {
  c.q.wait(Newer, xent_async_copies::land);
}
#else
struct xent_async_copies {};
template <typename T>
XENT_DEVICE void xent_async_copy16(xent_async_copies&, T* smem, uint32_t at, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // A source size of 0 fills the 16 bytes with zeros and reads nothing.
  const uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem) + at;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" : : "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
#else
  *(xent_vec16<uint32_t>*)((char*)smem + at) =
      valid ? xent_load16((const xent_vec16<uint32_t>*)src) : xent_vec16<uint32_t>{};
#endif
}
XENT_DEVICE void xent_async_commit(xent_async_copies&) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" : : : "memory");
#endif
}
template <int Newer>
XENT_DEVICE void xent_async_wait(xent_async_copies&) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" : : "n"(Newer) : "memory");
#endif
}
#endif
