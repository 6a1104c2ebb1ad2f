// What a CUDA or HIP kernel sees when it is compiled as host C++ for the SIMT
// emulator (emu.h): the built-in variables, __syncthreads, warp shuffles and
// votes in both vendors' spellings, shared memory with bounds and race
// checks, atomics, half and bfloat16 conversions with correct rounding, and
// the launch macro. The generated xent_device.h includes this instead of
// cuda_runtime.h / hip_runtime.h when XENT_EMU is defined.
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "emu.h"
#include "runtime/numeric.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__

typedef void* cudaStream_t;
typedef void* hipStream_t;

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

#define threadIdx (xent_emu_thread_idx())
#define blockIdx (xent_emu_block_idx())
#define blockDim (xent_emu_block_dim())
#define gridDim (xent_emu_grid_dim())
#define warpSize (xent_emu_warp_size())

#define __syncthreads() xent_emu_syncthreads(__FILE__, __LINE__)
#define __syncthreads_or(p) xent_emu_syncthreads_or((p) != 0, __FILE__, __LINE__)

namespace xent_emu {

template <typename T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  uint64_t u = 0;
  memcpy(&u, &v, sizeof v);
  return u;
}

template <typename T>
inline T from_bits(uint64_t u) {
  T v;
  memcpy(&v, &u, sizeof v);
  return v;
}

template <typename T>
inline T shuffle(xent_emu_warp_kind kind, uint64_t mask, T v, int arg, int width, const char* file, int line) {
  return from_bits<T>(xent_emu_warp_op(kind, mask, to_bits(v), arg, width, file, line));
}

// The maskless forms (HIP's): every lane of the warp takes part.
template <typename T>
inline T shuffle_all(xent_emu_warp_kind kind, T v, int arg, int width, const char* file, int line) {
  return shuffle(kind, XENT_EMU_FULL_MASK, v, arg, width, file, line);
}
inline uint64_t vote_all(xent_emu_warp_kind kind, bool p, const char* file, int line) {
  return xent_emu_warp_op(kind, XENT_EMU_FULL_MASK, p, 0, xent_emu_warp_size(), file, line);
}

// A reference to one shared-memory element: reads and writes go through the
// race detector.
template <typename T>
class shared_ref {
 public:
  shared_ref(T* base, int64_t index, int64_t count, const char* name)
      : base_(base), index_(index), count_(count), name_(name) {}
  operator T() const {
    xent_emu_shared_access(base_, index_, count_, name_, 0);
    return base_[index_];
  }
  shared_ref& operator=(T v) {
    xent_emu_shared_access(base_, index_, count_, name_, 1);
    base_[index_] = v;
    return *this;
  }
  shared_ref& operator=(const shared_ref& other) { return *this = static_cast<T>(other); }
  shared_ref& operator+=(T v) { return *this = static_cast<T>(*this) + v; }
  shared_ref& operator-=(T v) { return *this = static_cast<T>(*this) - v; }
  shared_ref& operator*=(T v) { return *this = static_cast<T>(*this) * v; }

 private:
  T* base_;
  int64_t index_, count_;
  const char* name_;
};

// A __shared__ array of the current block, bounds- and race-checked.
template <typename T>
class shared_array {
 public:
  shared_array(const char* name, const char* file, int line, int64_t count)
      : base_(static_cast<T*>(xent_emu_shared(name, file, line, (size_t)count, sizeof(T)))), count_(count),
        name_(name) {}
  shared_array(T* base, int64_t count, const char* name) : base_(base), count_(count), name_(name) {}
  shared_ref<T> operator[](int64_t i) const { return shared_ref<T>(base_, i, count_, name_); }
  T* base() const { return base_; }
  int64_t count() const { return count_; }
  const char* name() const { return name_; }

 private:
  T* base_;
  int64_t count_;
  const char* name_;
};

// The dynamic shared memory of the launch as an array of T, checked.
template <typename T>
shared_array<T> dynamic_array(const char* name) {
  size_t count = 0;
  T* base = static_cast<T*>(xent_emu_dynamic_shared_checked(name, sizeof(T), &count));
  return shared_array<T>(base, (int64_t)count, name);
}

// Block `rank`'s copy of a shared array of this block (distributed shared
// memory).
template <typename T>
shared_array<T> cluster_view(const shared_array<T>& a, unsigned rank) {
  return shared_array<T>(static_cast<T*>(xent_emu_cluster_shared(a.base(), rank)), a.count(), a.name());
}

// A global load or store at file:line, told to the race detector
// (xent_emu_check_global) before it is made.
template <typename T>
inline T global_load(const T* p, const char* file, int line) {
  xent_emu_global_access(p, sizeof(T), 0, file, line);
  return *p;
}
template <typename T, typename V>
inline void global_store(T* p, V v, const char* file, int line) {
  xent_emu_global_access(p, sizeof(T), 1, file, line);
  *p = v;
}

template <typename F>
void run_body(void* ctx) {
  (*static_cast<F*>(ctx))();
}

// A kernel function's identity for the driver's per-function attributes.
template <typename K>
inline const void* func_id(K* kernel) {
  return reinterpret_cast<const void*>(kernel);
}

// A kernel function's static shared memory, as the driver's attributes say.
template <typename K>
inline int64_t static_smem(K* kernel) {
  size_t s = 0;
  xent_emu_func_get(func_id(kernel), &s, nullptr, nullptr);
  return (int64_t)s;
}

// The clusters (blocks, a cluster of one) the emulated device holds at once
// in either rendering: two, so that the tests' on-chip calls of three rows
// or more walk rows in turn (kernels/device/pipeline.h).
constexpr int kResident = 2;

template <typename F>
int launch(const char* kernel, const void* func, int warp, size_t smem_limit, dim3 grid, dim3 block, size_t smem,
           F body) {
  return xent_emu_launch(kernel, func, warp, smem_limit, xent_emu_dim3{grid.x, grid.y, grid.z},
                         xent_emu_dim3{block.x, block.y, block.z}, smem, &run_body<F>, &body);
}

template <typename F>
int launch_cluster(const char* kernel, const void* func, int warp, size_t smem_limit, dim3 grid, dim3 block,
                   size_t smem, unsigned cluster, F body) {
  return xent_emu_launch_cluster(kernel, func, warp, smem_limit, xent_emu_dim3{grid.x, grid.y, grid.z},
                                 xent_emu_dim3{block.x, block.y, block.z}, smem, cluster, &run_body<F>, &body);
}

// A thread's asynchronous operations (cp.async's copies, wgmma's products)
// issued and not yet waited for, in commit groups: the emulator performs
// each at the wait that covers its group (as late as the GPU may).
template <typename Op, int kMax>
struct async_groups {
  Op pending[kMax];
  int group[kMax];  // each one's commit group, -1 while uncommitted
  int n = 0, groups = 0;
  void issue(const Op& op, const char* what) {
    if (n == kMax) xent_emu_fail("%s: more than %d in flight in a thread", what, kMax);
    pending[n] = op;
    group[n++] = -1;
  }
  void commit() {
    for (int i = 0; i < n; ++i)
      if (group[i] < 0) group[i] = groups;
    groups++;
  }
  // Until at most `newer` commit groups are in flight: run(op) for the
  // older groups' operations, in issue order.
  template <typename Run>
  void wait(int newer, Run run) {
    int kept = 0;
    for (int i = 0; i < n; ++i) {
      if (group[i] >= 0 && group[i] < groups - newer) {
        run(pending[i]);
      } else {
        pending[kept] = pending[i];
        group[kept++] = group[i];
      }
    }
    n = kept;
  }
};

}  // namespace xent_emu

#define XENT_SHARED_ARRAY(T, name, n) const xent_emu::shared_array<T> name(#name, __FILE__, __LINE__, (n))
// extern __shared__ T name[]: the launch's dynamic shared memory.
#define XENT_DYNAMIC_SHARED(T, name) const xent_emu::shared_array<T> name = xent_emu::dynamic_array<T>(#name)

// The launch runs to completion before it returns (the stream is ignored:
// emulated launches are synchronous, which any stream order allows).
#define XENT_EMU_LAUNCH(kernel, warp, smem_limit, grid, block, smem, stream, ...)                             \
  ((void)(stream), xent_emu::launch(#kernel, xent_emu::func_id(&kernel), (warp), (smem_limit), (grid), (block), \
                                    (smem), [&]() { kernel(__VA_ARGS__); }))

// A launch in clusters of `cluster` blocks along x (cudaLaunchKernelEx with
// a cluster dimension), co-scheduled.
#define XENT_EMU_LAUNCH_CLUSTER(kernel, warp, smem_limit, grid, block, smem, cluster, stream, ...)              \
  ((void)(stream), xent_emu::launch_cluster(#kernel, xent_emu::func_id(&kernel), (warp), (smem_limit), (grid),     \
                                            (block), (smem), (cluster), [&]() { kernel(__VA_ARGS__); }))

// CUDA's warp intrinsics (every lane of `mask` must take part).
// The optional width argument, defaulting to the warp size.
#define XENT_EMU_WIDTH(...) XENT_EMU_WIDTH_(0, ##__VA_ARGS__, xent_emu_warp_size())
#define XENT_EMU_WIDTH_(zero, width, ...) (width)
#define __shfl_sync(mask, v, lane, ...) \
  xent_emu::shuffle(XENT_EMU_SHFL_IDX, (mask), (v), (lane), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_up_sync(mask, v, delta, ...) \
  xent_emu::shuffle(XENT_EMU_SHFL_UP, (mask), (v), (delta), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_down_sync(mask, v, delta, ...) \
  xent_emu::shuffle(XENT_EMU_SHFL_DOWN, (mask), (v), (delta), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_xor_sync(mask, v, lane_mask, ...) \
  xent_emu::shuffle(XENT_EMU_SHFL_XOR, (mask), (v), (lane_mask), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __all_sync(mask, p) ((int)xent_emu_warp_op(XENT_EMU_VOTE_ALL, (mask), (p) != 0, 0, xent_emu_warp_size(), __FILE__, __LINE__))
#define __any_sync(mask, p) ((int)xent_emu_warp_op(XENT_EMU_VOTE_ANY, (mask), (p) != 0, 0, xent_emu_warp_size(), __FILE__, __LINE__))
#define __ballot_sync(mask, p) \
  ((unsigned)xent_emu_warp_op(XENT_EMU_VOTE_BALLOT, (mask), (p) != 0, 0, xent_emu_warp_size(), __FILE__, __LINE__))
#define __syncwarp(...) \
  ((void)xent_emu_warp_op(XENT_EMU_SYNCWARP, XENT_EMU_SYNCWARP_MASK(__VA_ARGS__), 0, 0, xent_emu_warp_size(), __FILE__, __LINE__))
#define XENT_EMU_SYNCWARP_MASK(...) XENT_EMU_SYNCWARP_MASK_(0, ##__VA_ARGS__, 0xffffffffu)
#define XENT_EMU_SYNCWARP_MASK_(zero, m, ...) (m)

// HIP's warp intrinsics: no mask, every lane of the wavefront takes part
// (shuffle_all and vote_all name all the lanes there are).
#define __shfl(v, lane, ...) \
  xent_emu::shuffle_all(XENT_EMU_SHFL_IDX, (v), (lane), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_up(v, delta, ...) \
  xent_emu::shuffle_all(XENT_EMU_SHFL_UP, (v), (delta), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_down(v, delta, ...) \
  xent_emu::shuffle_all(XENT_EMU_SHFL_DOWN, (v), (delta), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_xor(v, lane_mask, ...) \
  xent_emu::shuffle_all(XENT_EMU_SHFL_XOR, (v), (lane_mask), XENT_EMU_WIDTH(__VA_ARGS__), __FILE__, __LINE__)
#define __all(p) ((int)xent_emu::vote_all(XENT_EMU_VOTE_ALL, (p) != 0, __FILE__, __LINE__))
#define __any(p) ((int)xent_emu::vote_all(XENT_EMU_VOTE_ANY, (p) != 0, __FILE__, __LINE__))
#define __ballot(p) xent_emu::vote_all(XENT_EMU_VOTE_BALLOT, (p) != 0, __FILE__, __LINE__)

// Atomics. The fibers of one launch never preempt one another, but host
// threads running launches at once (a handle shared by threads, whose
// bad-label record every launch may update) do: each read-modify-write is
// a real atomic, a compare-and-swap loop on the value's bytes.
template <typename T, typename F>
inline T xent_emu_atomic_update(T* p, F next) {
  T old;
  __atomic_load(p, &old, __ATOMIC_SEQ_CST);
  for (;;) {
    T want = next(old);
    if (__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old;
  }
}
template <typename T>
inline T atomicAdd(T* p, T v) {
  return xent_emu_atomic_update(p, [v](T old) { return (T)(old + v); });
}
template <typename T>
inline T atomicMax(T* p, T v) {
  return xent_emu_atomic_update(p, [v](T old) { return v > old ? v : old; });
}
template <typename T>
inline T atomicMin(T* p, T v) {
  return xent_emu_atomic_update(p, [v](T old) { return v < old ? v : old; });
}
template <typename T>
inline T atomicExch(T* p, T v) {
  return xent_emu_atomic_update(p, [v](T) { return v; });
}
template <typename T>
inline T atomicCAS(T* p, T compare, T v) {
  return xent_emu_atomic_update(p, [compare, v](T old) { return old == compare ? v : old; });
}

// Bit casts.
inline float __uint_as_float(uint32_t u) { return xent_emu::from_bits<float>(u); }
inline uint32_t __float_as_uint(float f) { return (uint32_t)xent_emu::to_bits(f); }
inline float __int_as_float(int32_t i) { return xent_emu::from_bits<float>((uint32_t)i); }
inline int32_t __float_as_int(float f) { return (int32_t)xent_emu::to_bits(f); }

// half: IEEE binary16 storage, converted with round-to-nearest-even by the
// same code the runtime uses on the host (runtime/numeric.c).
struct __half {
  uint16_t x;
};
inline float __half2float(__half h) { return xent_f16_to_float(h.x); }
inline __half __float2half_rn(float f) { return __half{xent_float_to_f16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }

// bfloat16 (CUDA's __nv_bfloat16), rounded to nearest even like the device.
struct __nv_bfloat16 {
  uint16_t x;
};
inline float __bfloat162float(__nv_bfloat16 b) { return xent_bf16_to_float(b.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{xent_float_to_bf16(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }
