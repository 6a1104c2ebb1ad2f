// The row walks: a row's classes visited with 16-byte loads in flight,
// contiguous, strided (the class axis in place) or a cluster's slice on chip.
#pragma once

#include "rows.h"
#include "vectors.h"

// What a row walk does with f's results (`out`): xent_vec_sink (below)
// reads only; xent_out: f returns the output of element j (a gradient),
// which is stored at out[e], in T (converted by cvt) or, with f32, in float;
// the outputs of a whole vector go out as 16-byte stores when their address
// is 16-byte aligned (one store per 16 bytes instead of one per element).
template <typename T, typename Cvt>
struct xent_out {
  static constexpr bool kReadOnly = false;  // vec stores 16 contiguous bytes
  void* p;
  bool f32;
  Cvt cvt;
  template <typename F>
  __device__ __forceinline__ void one(F& f, int64_t j, int64_t e, T raw) const {
    const auto d = xent_call_one(f, j, raw);
    if (f32) XENT_ST((float*)p + e, (float)d);
    else XENT_ST((T*)p + e, cvt(d));
  }
  // The strided 16-byte path (xent_column_walk): whether the outputs are T
  // (staged, then stored), whether 16-byte stores can take them, and
  // element j's output as T.
  __device__ __forceinline__ bool staged_ok() const { return !f32; }
  __device__ __forceinline__ bool vector_ok() const { return staged_ok() && ((uintptr_t)p & 15) == 0; }
  template <typename F>
  __device__ __forceinline__ T value(F& f, int64_t j, T raw) const {
    return cvt(xent_call_one(f, j, raw));
  }
  // The same for kVec consecutive classes j0 .. j0 + kVec - 1 at once: f's
  // vector form (the label test once) and the pairwise narrow.
  template <typename F>
  __device__ __forceinline__ xent_vec16<T> values(F& f, int64_t j0, const xent_vec16<T>& chunk) const {
    using A = decltype(xent_call_one(f, j0, chunk.e[0]));
    A d[16 / sizeof(T)];
    xent_call_vec(f, j0, chunk, d);
    return xent_narrow16<T>(d, cvt);
  }
  template <typename F>
  __device__ __forceinline__ void vec(F& f, int64_t j0, int64_t e0, const xent_vec16<T>& chunk) const {
    constexpr int64_t kVec = 16 / sizeof(T);
    using A = decltype(xent_call_one(f, j0, chunk.e[0]));
    A d[kVec];
    xent_call_vec(f, j0, chunk, d);
    if (f32) {
      float* o = (float*)p + e0;
      if constexpr (kVec % 4 == 0) {
        if (((uintptr_t)o & 15) == 0) {
          for (int64_t q = 0; q < kVec; q += 4)
            xent_store16f(o + q, (float)d[q], (float)d[q + 1], (float)d[q + 2], (float)d[q + 3]);
          return;
        }
      }
      for (int64_t k = 0; k < kVec; ++k) XENT_ST(o + k, (float)d[k]);
      return;
    }
    T* o = (T*)p + e0;
    if (((uintptr_t)o & 15) == 0) {
      xent_store16(o, xent_narrow16<T>(d, cvt));
      return;
    }
    for (int64_t k = 0; k < kVec; ++k) XENT_ST(o + k, cvt(d[k]));
  }
};

template <typename T, typename Cvt>
XENT_DEVICE xent_out<T, Cvt> xent_output(void* p, bool f32, Cvt cvt) {
  return xent_out<T, Cvt>{p, f32, cvt};
}

// The elements of a contiguous row before its first 16-byte boundary (at
// most C): read as scalars, the rest as 16-byte vectors and a scalar tail.
template <typename T>
XENT_DEVICE int64_t xent_row_head(const T* row, int64_t C) {
  const int64_t head = (int64_t)(((16 - ((uintptr_t)row & 15)) & 15) / sizeof(T));
  return head < C ? head : C;
}

// The largest n of this thread's aligned group of kLanes lanes (every lane of
// the warp takes part; n below 2^53, exact in a double).
template <int kLanes>
XENT_DEVICE int64_t xent_group_max(int64_t n) {
  double v = (double)n;
  for (int d = 1; d < kLanes; d *= 2) {
    const double o = xent_shfl_xor_near(v, d);
    v = o > v ? o : v;
  }
  return (int64_t)v;
}

// A strided row's walk with 16-byte loads: xent_row_walk_io's strided path
// where x is 16-byte aligned and inner a multiple of kVec = 16 / sizeof(T).
// Then the kVec threads of a group (block threads kVec*g .. kVec*g + kVec-1,
// rows r .. r + kVec-1 with r a multiple of kVec: xent_rows) hold kVec
// neighbouring positions of one [C, inner] slice, whose elements of a class
// are 16 contiguous, aligned bytes. A step takes kK = XENT_COLUMN_LOADS *
// kVec classes: each thread loads XENT_COLUMN_LOADS of them as whole vectors
// (all issued before any is used: 64 bytes in flight per thread) into the
// group's slice of `stage`; after the group's sync each thread reads its own
// position's classes from there, in class order. A walk that stores writes
// its outputs over its own elements of the stage and, after a second sync,
// stores the vectors it loaded, 16 bytes at a time (each thread its own
// outputs from the stage where `out` is not aligned: the same code computes
// them, so the same bits; f32 outputs straight from f). Only a group's threads share
// data, so the syncs are the group's, and a group walks as many classes as
// its longest row: a thread with C = 0 (past the last row, or a row the
// backward's second pass leaves alone) loads for the others and uses none.
// Rows come in whole groups (rows = outer * inner, a multiple of kVec), so a
// group's positions all exist; a walk that stores is entered with the same C
// by every thread of a group (a row is either live or past the end). A
// group's slice is kK vectors and one of padding, which puts the groups of a
// warp on different banks when each thread reads its own elements.
// The steps of xent_column_walk, kLoads vectors per thread: this thread's
// loads of classes [j0, j0 + n) of the group's positions (from `first`, k =
// sub, sub + kVec, ...), their copy into the group's slice of the stage at
// `at` (class k at at + k * kVec), and the store of the vectors back from
// there to `out`.
// Every load is issued and every vector staged, also past the step's n
// classes: such a load reads the step's last class again (from cache) into a
// slot no thread reads. Loads under `k < n` left each vector undefined on one
// path, which clang (gfx942) carried through the step as 16 separate bytes,
// split and rejoined around the stage's stores, and it waited on each load
// in its branch: one in flight.
template <int64_t kLoads, typename T>
XENT_DEVICE void xent_column_load(const T* x, int64_t first, int64_t j0, int64_t n, int64_t inner, int64_t sub,
                                  xent_vec16<T> (&v)[kLoads]) {
  constexpr int64_t kVec = 16 / sizeof(T);
  // Element offsets stepped by adds (class k + kVec is kVec * inner further
  // on), not multiplied out for each load.
  const int64_t last = first + (j0 + n - 1) * inner, stride = kVec * inner;
  int64_t at = first + (j0 + sub) * inner;
  XENT_UNROLL
  for (int64_t u = 0; u < kLoads; ++u, at += stride)
    v[u] = xent_load16((const xent_vec16<T>*)(x + (sub + u * kVec < n ? at : last)));
}
template <int64_t kLoads, typename T, typename Stage>
XENT_DEVICE void xent_column_put(Stage stage, int64_t at, int64_t sub, const xent_vec16<T> (&v)[kLoads]) {
  constexpr int64_t kVec = 16 / sizeof(T);
  XENT_UNROLL
  for (int64_t u = 0; u < kLoads; ++u) xent_stage_put16<T>(stage, at + (sub + u * kVec) * kVec, v[u]);
}
template <int64_t kLoads, typename T, typename Stage>
XENT_DEVICE void xent_column_store(T* out, int64_t first, int64_t j0, int64_t n, int64_t inner, int64_t sub,
                                   Stage stage, int64_t at) {
  constexpr int64_t kVec = 16 / sizeof(T);
  // Element offsets stepped by adds, as xent_column_load's: multiplied out
  // for each store, nvcc (sm_90) spent 3 to 4 more instructions a vector.
  const int64_t stride = kVec * inner;
  T* o = out + first + (j0 + sub) * inner;
  XENT_UNROLL
  for (int64_t u = 0; u < kLoads; ++u, o += stride) {
    const int64_t k = sub + u * kVec;
    if (k < n) xent_store16(o, xent_stage_get16<T>(stage, at + k * kVec));
  }
}

// use(k) for k in [0, mine): unrolled when the step is full (`full`: mine
// == kK), so that a full step is straight-line code; always a loop with
// kCompact (xent_row_walk_io's).
template <int64_t kK, bool kCompact = false, typename U>
XENT_DEVICE void xent_column_each(int64_t mine, bool full, U use) {
  if (!kCompact && full) {
    XENT_UNROLL
    for (int64_t k = 0; k < kK; ++k) use(k);
  } else {
    for (int64_t k = 0; k < mine; ++k) use(k);
  }
}

template <bool kCompact, typename T, typename Stage, typename Out, typename F>
XENT_DEVICE void xent_column_walk(const T* x, int64_t base, int64_t C, int64_t inner, Stage stage, const Out& out,
                                  F f) {
  constexpr int64_t kVec = 16 / sizeof(T), kLoads = XENT_COLUMN_LOADS, kK = kLoads * kVec;
  const int64_t sub = (int64_t)threadIdx.x % kVec;
  const int64_t first = base - sub;  // the group's first position
  const int64_t at = (int64_t)threadIdx.x / kVec * (kK + 1) * kVec;
  const int64_t walked = xent_group_max<(int)kVec>(C);
  bool staged_out = false, vector_out = false;
  if constexpr (!Out::kReadOnly) {
    staged_out = out.staged_ok();
    vector_out = out.vector_ok();
  }
  for (int64_t j0 = 0; j0 < walked; j0 += kK) {
    const int64_t n = walked - j0 < kK ? walked - j0 : kK;  // classes in this step
    xent_vec16<T> v[kLoads];
    xent_column_load<kLoads>(x, first, j0, n, inner, sub, v);
    xent_column_put<kLoads>(stage, at, sub, v);
    xent_group_sync<(int)kVec>();
    const int64_t mine = C - j0 < n ? (C - j0 < 0 ? 0 : C - j0) : n;  // this thread's classes in the step
    const auto mine_at = [&](int64_t k) -> T { return stage[at + k * kVec + sub]; };
    if constexpr (Out::kReadOnly) {
      // A step is full in every active lane or in none (the groups in the
      // loop are live rows of one C), but for the backward's second pass,
      // whose lanes that leave their row alone may then walk a full step
      // whose statistics they drop: a branch the same in the wavefront.
      if (xent_same_in_wave(mine == kK)) {
        // Whole vectors of consecutive classes (the vector path's branch-free
        // max and sum); their element offsets are not contiguous, which a
        // read-only `out` never uses. (A short step's whole vectors stay off
        // this path: taking them here costs the full step instructions.)
        XENT_UNROLL
        for (int64_t c = 0; c < kLoads; ++c) {
          xent_vec16<T> chunk;
          for (int64_t i = 0; i < kVec; ++i) chunk.e[i] = mine_at(c * kVec + i);
          out.vec(f, j0 + c * kVec, base + (j0 + c * kVec) * inner, chunk);
        }
      } else {
        // A short step (a row of fewer classes than a step, or a row's
        // last): its whole vectors as vectors too, in a loop, so that a short
        // row's statistics take no data-dependent branch per element.
        int64_t k = 0;
        for (; k + kVec <= mine; k += kVec) {
          xent_vec16<T> chunk;
          for (int64_t i = 0; i < kVec; ++i) chunk.e[i] = mine_at(k + i);
          out.vec(f, j0 + k, base + (j0 + k) * inner, chunk);
        }
        for (; k < mine; ++k) out.one(f, j0 + k, base + (j0 + k) * inner, mine_at(k));
      }
    } else {
      // A walk that stores has mine == n in every thread of the loop (its rows
      // are live, all of the same C), so whether its step is full is the same
      // in the whole wave.
      const bool full = xent_same_in_wave(mine == kK);
      if (staged_out) {
        if (!kCompact && full) {
          // A full step kVec consecutive classes at a time, as the contiguous
          // path's vectors (f's vector form, the pairwise narrow), each result
          // back over its element of the stage.
          XENT_UNROLL
          for (int64_t c = 0; c < kLoads; ++c) {
            xent_vec16<T> chunk;
            for (int64_t i = 0; i < kVec; ++i) chunk.e[i] = mine_at(c * kVec + i);
            const xent_vec16<T> r = out.values(f, j0 + c * kVec, chunk);
            for (int64_t i = 0; i < kVec; ++i) stage[at + (c * kVec + i) * kVec + sub] = r.e[i];
          }
        } else {
          // A short step: its whole vectors so too, in a loop (one more copy
          // of f's vector code, not kLoads), then its last classes one by one.
          // (Its vector written as the full step's, not a lambda both share:
          // the lambda cost gfx942's strided backward 2 VALU a vector.)
          int64_t k = 0;
          if constexpr (!kCompact) {
            for (; k + kVec <= mine; k += kVec) {
              xent_vec16<T> chunk;
              for (int64_t i = 0; i < kVec; ++i) chunk.e[i] = mine_at(k + i);
              const xent_vec16<T> r = out.values(f, j0 + k, chunk);
              for (int64_t i = 0; i < kVec; ++i) stage[at + (k + i) * kVec + sub] = r.e[i];
            }
          }
          for (; k < mine; ++k) stage[at + k * kVec + sub] = out.value(f, j0 + k, mine_at(k));
        }
        if (vector_out) {
          xent_group_sync<(int)kVec>();
          xent_column_store<kLoads>((T*)out.p, first, j0, n, inner, sub, stage, at);
        } else {
          // Not aligned: each thread stores its own results from its own
          // slots, computed as the aligned path's (f's vector form and its
          // one-element form can round differently: nvcc fuses a multiply-add
          // in one and not the other).
          for (int64_t k = 0; k < mine; ++k) XENT_ST((T*)out.p + base + (j0 + k) * inner, mine_at(k));
        }
      } else {
        xent_column_each<kK, kCompact>(mine, full,
                                       [&](int64_t k) { out.one(f, j0 + k, base + (j0 + k) * inner, mine_at(k)); });
      }
    }
    xent_group_sync<(int)kVec>();  // the stage is read before the next step writes it
  }
}

// xent_row_walk2's strided path, as xent_column_walk with two rows (y and
// dy, both 16-byte aligned): XENT_COLUMN_LOADS / 2 vectors of each per
// thread and step, staged side by side in the group's slice; with kStore and
// `out` aligned, the results go over y's elements of the stage and out as
// 16-byte stores.
template <bool kStore, typename T, typename Stage, typename Cvt, typename F>
XENT_DEVICE void xent_column_walk2(const T* y, const T* dy, T* out, Cvt cvt, int64_t base, int64_t C, int64_t inner,
                                   Stage stage, F f) {
  constexpr int64_t kVec = 16 / sizeof(T), kLoads = XENT_COLUMN_LOADS / 2, kK = kLoads * kVec;
  const int64_t sub = (int64_t)threadIdx.x % kVec;
  const int64_t first = base - sub;
  const int64_t at = (int64_t)threadIdx.x / kVec * (2 * kK + 1) * kVec, at_dy = at + kK * kVec;
  const int64_t walked = xent_group_max<(int)kVec>(C);
  const bool vector_out = kStore && ((uintptr_t)out & 15) == 0;
  for (int64_t j0 = 0; j0 < walked; j0 += kK) {
    const int64_t n = walked - j0 < kK ? walked - j0 : kK;
    xent_vec16<T> vy[kLoads], vd[kLoads];
    xent_column_load<kLoads>(y, first, j0, n, inner, sub, vy);
    xent_column_load<kLoads>(dy, first, j0, n, inner, sub, vd);
    xent_column_put<kLoads>(stage, at, sub, vy);
    xent_column_put<kLoads>(stage, at_dy, sub, vd);
    xent_group_sync<(int)kVec>();
    const int64_t mine = C - j0 < n ? (C - j0 < 0 ? 0 : C - j0) : n;
    xent_column_each<kK>(mine, mine == kK, [&](int64_t k) {
      const int64_t i = at + k * kVec + sub;
      const auto d = f(j0 + k, (T)stage[i], (T)stage[at_dy + k * kVec + sub]);
      if (!kStore) return;
      if (vector_out) stage[i] = cvt(d);
      else XENT_ST(out + base + (j0 + k) * inner, cvt(d));
    });
    if (vector_out) {
      xent_group_sync<(int)kVec>();
      xent_column_store<kLoads>(out, first, j0, n, inner, sub, stage, at);
    }
    xent_group_sync<(int)kVec>();
  }
}

// Calls f(j, x[base + j * inner]) once for every class j of a row that this
// thread (`lane` of the `group` sharing the row) owns, and does with its
// result what `out` says. A contiguous row (kColumn = false) is read with
// 16-byte loads: scalar up to its first 16-byte boundary, whole vectors
// (consecutive threads on consecutive vectors, so a warp reads 512
// contiguous bytes), a scalar tail. The split depends only on C and the
// row's address, so a thread's order is the same every run on the same
// buffers. x need only be aligned to its element. A strided row (kColumn)
// goes through xent_column_walk and the shared `stage`
// (XENT_COLUMN_STAGE) where x is 16-byte aligned and inner a multiple of
// its vector, else as scalars, several classes in flight.
// kCompact: one copy of f's code where there would be two, for the walks of
// calls that are rare (the optional outputs'):
// every batch of vectors takes the last batch's loop (a clamp per load and a
// test per vector, the same loads in flight), and the strided path's full
// steps the loop of its partial ones. The common walks keep a batch without
// either and a full step unrolled. The rare walks' code as large as theirs
// doubled the 16-bit gradient kernels' compile time.
template <int kInFlight, bool kColumn, bool kCompact = false, typename T, typename Stage, typename Out, typename F>
XENT_DEVICE void xent_row_walk_io(const T* x, int64_t base, int64_t C, int64_t inner, Stage stage, int64_t lane,
                                  int64_t group, const Out& out, F f) {
  if constexpr (kColumn) {
    if (((uintptr_t)x & 15) == 0 && inner % (int64_t)(16 / sizeof(T)) == 0) {
      xent_column_walk<kCompact>(x, base, C, inner, stage, out, f);
      return;
    }
    // Elsewhere a strided row is read one element per load, its classes
    // `inner` elements apart (the warp's neighbouring rows make each load
    // coalesced, 64 bytes a warp for bf16). One load at a time would keep 2
    // or 4 bytes per thread in flight; kLoads classes are read before any is
    // used, 32 bytes per thread (half the 16-byte path's) in a walk that
    // only reads, and are then taken in class order, so the results are
    // those of one at a time. A walk that stores takes 16 bytes: 32 bytes
    // (each element with its own address and store) set the register count
    // of every strided gradient kernel on gfx942 to one wave a SIMD.
    constexpr int64_t kLoads = (Out::kReadOnly ? 32 : 16) / sizeof(T);
    int64_t j = lane;
    if constexpr (Out::kReadOnly) {
      // A walk that only reads (the forward's statistics) takes the loads
      // as vectors of consecutive classes (group is 1 in this shape), so
      // the vector path's branch-free max and sum run on them; its element
      // offsets are not contiguous, which a read-only `out` never uses.
      constexpr int64_t kVec = 16 / sizeof(T);
      if (group == 1) {
        for (; j + kLoads - 1 < C; j += kLoads) {
          xent_vec16<T> chunk[kLoads / kVec];
          XENT_UNROLL
          for (int64_t u = 0; u < kLoads; ++u) chunk[u / kVec].e[u % kVec] = XENT_LD(x + base + (j + u) * inner);
          XENT_UNROLL
          for (int64_t c = 0; c < kLoads / kVec; ++c) out.vec(f, j + c * kVec, base + (j + c * kVec) * inner, chunk[c]);
        }
      }
    }
    for (; j + (kLoads - 1) * group < C; j += kLoads * group) {
      T raw[kLoads];
      XENT_UNROLL
      for (int64_t u = 0; u < kLoads; ++u) raw[u] = XENT_LD(x + base + (j + u * group) * inner);
      XENT_UNROLL
      for (int64_t u = 0; u < kLoads; ++u) out.one(f, j + u * group, base + (j + u * group) * inner, raw[u]);
    }
    for (; j < C; j += group) out.one(f, j, base + j * inner, XENT_LD(x + base + j * inner));
    return;
  }
  constexpr int64_t kVec = 16 / sizeof(T);
  const T* row = x + base;
  const int64_t head = xent_row_head(row, C);
  for (int64_t j = lane; j < head; j += group) out.one(f, j, base + j, XENT_LD(row + j));
  const int64_t vecs = (C - head) / kVec;
  const xent_vec16<T>* v = (const xent_vec16<T>*)(row + head);
  // kInFlight independent 16-byte loads issued before any is used (the spec's
  // tune `loads`: Little's law asks some 31 KB in flight per SM of an H100,
  // 67 KB of a B200), the last batch's too.
  // The elements are then taken in the order of one vector at a time, so
  // the results are the same whatever the batch.
  int64_t i = lane;
  if constexpr (!kCompact) {
    for (; i + (kInFlight - 1) * group < vecs; i += kInFlight * group) {
      xent_vec16<T> chunk[kInFlight];
      XENT_UNROLL
      for (int64_t u = 0; u < kInFlight; ++u) chunk[u] = xent_load16(v + i + u * group);
      XENT_UNROLL
      for (int64_t u = 0; u < kInFlight; ++u) {
        const int64_t k = i + u * group;
        xent_hold16(chunk[u]);
        out.vec(f, head + k * kVec, base + head + k * kVec, chunk[u]);
      }
    }
  }
  if (i < vecs) {
    // This thread's last vectors, fewer than kInFlight: a whole batch is
    // loaded, its indices past the row clamped to this thread's last vector
    // (a second load of bytes in the cache, instead of a predicate per load
    // held in registers; its own, so an in-place gradient reads nothing
    // another thread writes), and only those in the row are used. With
    // kCompact every batch is taken so (below).
    const int64_t last = i + (vecs - 1 - i) / group * group;
    do {
      xent_vec16<T> chunk[kInFlight];
      XENT_UNROLL
      for (int64_t u = 0; u < kInFlight; ++u) chunk[u] = xent_load16(v + xent_min_index(i + u * group, last));
      XENT_UNROLL
      for (int64_t u = 0; u < kInFlight; ++u) {
        const int64_t k = i + u * group;
        xent_hold16(chunk[u]);
        if (k < vecs) out.vec(f, head + k * kVec, base + head + k * kVec, chunk[u]);
      }
    } while (kCompact && (i += kInFlight * group) < vecs);
  }
  for (int64_t j = head + vecs * kVec + lane; j < C; j += group) out.one(f, j, base + j, XENT_LD(row + j));
}

// Two rows of the same layout read together (the softmax backward's y and
// dy): calls f(j, y_j, dy_j) for every class this thread owns and, with
// kStore, stores its result at out[base + j * inner] (out may be y or dy:
// each element is read before its owner writes it). A contiguous row is read
// with 16-byte vectors, kInFlight in flight per thread, half of each row
// (the spec's tune `loads`), where y and dy share their alignment (scalars
// otherwise), and the result
// is stored 16 bytes at a time where out is aligned too; a strided row
// goes through xent_column_walk2 where it can, as xent_row_walk_io's.
// Classes are taken in the same order every run on the same buffers.
template <int kInFlight, bool kColumn, bool kStore, typename T, typename Cvt, typename Stage, typename F>
XENT_DEVICE void xent_row_walk2(const T* y, const T* dy, T* out, Cvt cvt, int64_t base, int64_t C, int64_t inner,
                                Stage stage, int64_t lane, int64_t group, F f) {
  const auto one = [&](int64_t j, int64_t e) {
    const auto d = f(j, XENT_LD(y + e), XENT_LD(dy + e));
    if (kStore) XENT_ST(out + e, cvt(d));
  };
  if constexpr (kColumn) {
    if ((((uintptr_t)y | (uintptr_t)dy) & 15) == 0 && inner % (int64_t)(16 / sizeof(T)) == 0) {
      xent_column_walk2<kStore>(y, dy, out, cvt, base, C, inner, stage, f);
      return;
    }
    constexpr int64_t kLoads = 16 / sizeof(T);
    int64_t j = lane;
    for (; j + (kLoads - 1) * group < C; j += kLoads * group) {
      T ry[kLoads], rd[kLoads];
      XENT_UNROLL
      for (int64_t u = 0; u < kLoads; ++u) {
        ry[u] = XENT_LD(y + base + (j + u * group) * inner);
        rd[u] = XENT_LD(dy + base + (j + u * group) * inner);
      }
      XENT_UNROLL
      for (int64_t u = 0; u < kLoads; ++u) {
        const auto d = f(j + u * group, ry[u], rd[u]);
        if (kStore) XENT_ST(out + base + (j + u * group) * inner, cvt(d));
      }
    }
    for (; j < C; j += group) one(j, base + j * inner);
    return;
  }
  constexpr int64_t kVec = 16 / sizeof(T);
  const T* yr = y + base;
  const T* dr = dy + base;
  if ((((uintptr_t)yr ^ (uintptr_t)dr) & 15) != 0) {
    for (int64_t j = lane; j < C; j += group) one(j, base + j);
    return;
  }
  const int64_t head = xent_row_head(yr, C);
  for (int64_t j = lane; j < head; j += group) one(j, base + j);
  const int64_t vecs = (C - head) / kVec;
  const xent_vec16<T>* vy = (const xent_vec16<T>*)(yr + head);
  const xent_vec16<T>* vd = (const xent_vec16<T>*)(dr + head);
  const auto use = [&](int64_t i, xent_vec16<T> cy, xent_vec16<T> cd) {
    xent_hold16(cy);
    xent_hold16(cd);
    using A = decltype(f(0, cy.e[0], cd.e[0]));
    A d[kVec];
    for (int64_t k = 0; k < kVec; ++k) d[k] = f(head + i * kVec + k, cy.e[k], cd.e[k]);
    if (!kStore) return;
    T* o = out + base + head + i * kVec;
    if (((uintptr_t)o & 15) == 0) {
      xent_store16(o, xent_narrow16<T>(d, cvt));
    } else {
      for (int64_t k = 0; k < kVec; ++k) XENT_ST(o + k, cvt(d[k]));
    }
  };
  // kInFlight / 2 vectors of each row read before any is used, and the last
  // batch too, its indices past the row clamped to this thread's last
  // vector (as xent_row_walk_io's): every load of a batch comes before its
  // stores, and a thread re-reads only its own vectors, so an in-place
  // gradient reads nothing it or another thread has written.
  constexpr int64_t kLoads = kInFlight / 2 > 0 ? kInFlight / 2 : 1;
  int64_t i = lane;
  for (; i + (kLoads - 1) * group < vecs; i += kLoads * group) {
    xent_vec16<T> cy[kLoads], cd[kLoads];
    XENT_UNROLL
    for (int64_t u = 0; u < kLoads; ++u) {
      cy[u] = xent_load16(vy + i + u * group);
      cd[u] = xent_load16(vd + i + u * group);
    }
    XENT_UNROLL
    for (int64_t u = 0; u < kLoads; ++u) use(i + u * group, cy[u], cd[u]);
  }
  if (i < vecs) {
    const int64_t last = i + (vecs - 1 - i) / group * group;
    xent_vec16<T> cy[kLoads], cd[kLoads];
    XENT_UNROLL
    for (int64_t u = 0; u < kLoads; ++u) {
      cy[u] = xent_load16(vy + xent_min_index(i + u * group, last));
      cd[u] = xent_load16(vd + xent_min_index(i + u * group, last));
    }
    XENT_UNROLL
    for (int64_t u = 0; u < kLoads; ++u)
      if (i + u * group < vecs) use(i + u * group, cy[u], cd[u]);
  }
  for (int64_t j = head + vecs * kVec + lane; j < C; j += group) one(j, base + j);
}

// A read-only walk that hands whole 16-byte vectors to fv(j0, vector) and
// the scalars around them to f(j, x_j) (xent_online_add_n's callers).
template <typename FV>
struct xent_vec_sink {
  static constexpr bool kReadOnly = true;  // stores nothing: vec may take classes from strided elements
  FV fv;
  template <typename F, typename T>
  __device__ __forceinline__ void one(F& f, int64_t j, int64_t e, T raw) const {
    (void)e;
    f(j, raw);
  }
  template <typename F, typename T>
  __device__ __forceinline__ void vec(F&, int64_t j0, int64_t e0, const xent_vec16<T>& chunk) const {
    (void)e0;
    fv(j0, chunk);
  }
};

template <int kLoads, bool kColumn, typename T, typename Stage, typename F, typename FV>
XENT_DEVICE void xent_row_each_vec(const T* x, int64_t base, int64_t C, int64_t inner, Stage stage, int64_t lane,
                                   int64_t group, F f, FV fv) {
  xent_row_walk_io<kLoads, kColumn>(x, base, C, inner, stage, lane, group, xent_vec_sink<FV>{fv}, f);
}

// The on-chip shape's row walk: calls f(j, x_j) for the classes this thread
// owns in its block's slice of the row, and does with its result what
// `out` says, as xent_row_walk_io does for a whole row. The row's 16-byte
// vectors are split into one run per block of the cluster ([rank * per,
// (rank + 1) * per)); the scalar head goes to rank 0 and the scalar tail to
// the last rank. The block's run is in `stash` from vector `half` on, where
// the pipeline put it (xent_slice_pipe, pipeline.h); the scalars are read
// from memory (fewer than 16 bytes each side). kInFlight vectors are read
// before any is used, the last batch's too (its indices past the slice
// clamped to this thread's last), as xent_row_walk_io's. Each element has
// one owner, the same in every walk, so a gradient written in place is
// safe.
template <int kInFlight, typename T, typename Stash, typename Out, typename F>
XENT_DEVICE void xent_slice_walk(const T* x, int64_t base, int64_t C, int64_t lane, int64_t group, Stash stash,
                                 int64_t half, const Out& out, F f) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const T* row = x + base;
  const int64_t rank = (int64_t)xent_cluster_rank(), k = (int64_t)xent_cluster_size();
  const int64_t head = xent_row_head(row, C);
  const int64_t vecs = (C - head) / kVec, per = (vecs + k - 1) / k;
  const int64_t lo = rank * per, hi = lo + per < vecs ? lo + per : vecs;
  if (rank == 0)
    for (int64_t j = lane; j < head; j += group) out.one(f, j, base + j, XENT_LD(row + j));
  const int64_t off = half - lo;  // the stash's index of vector `at` is at + off
  int64_t i = lo + lane;
  for (; i + (kInFlight - 1) * group < hi; i += kInFlight * group) {
    xent_vec16<T> chunk[kInFlight];
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) chunk[u] = stash[i + u * group + off];
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) {
      const int64_t at = i + u * group;
      out.vec(f, head + at * kVec, base + head + at * kVec, chunk[u]);
    }
  }
  if (i < hi) {
    const int64_t last = i + (hi - 1 - i) / group * group;
    xent_vec16<T> chunk[kInFlight];
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) chunk[u] = stash[xent_min_index(i + u * group, last) + off];
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) {
      const int64_t at = i + u * group;
      if (at < hi) out.vec(f, head + at * kVec, base + head + at * kVec, chunk[u]);
    }
  }
  if (rank == k - 1)
    for (int64_t j = head + vecs * kVec + lane; j < C; j += group) out.one(f, j, base + j, XENT_LD(row + j));
}

// The tile shape (XENT_TILE): `count` elements of a contiguous tensor from
// x (16-byte aligned) into the block's tile, as 16-byte vectors and a scalar
// tail, every thread of the block on consecutive vectors. On sm_80 and later
// cp.async (16 bytes a copy, L2 only), the whole tile in flight in no register,
// waited for by xent_tile_wait; elsewhere kInFlight loads a thread before
// their stores. The caller's barrier then makes the tile whole for every
// thread.
template <int kInFlight, typename T, typename Tile>
XENT_DEVICE void xent_tile_load(const T* x, int64_t count, Tile tile) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t vecs = count / kVec, threads = (int64_t)blockDim.x;
  const xent_vec16<T>* v = (const xent_vec16<T>*)x;
  int64_t i = (int64_t)threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(XENT_EMU)
  for (; i < vecs; i += threads) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(&tile[i * kVec]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" : : "r"(dst), "l"(v + i) : "memory");
  }
#else
  for (; i < vecs; i += kInFlight * threads) {
    // The last batch's indices past the tile clamped to this thread's last
    // vector (a second load from cache; xent_row_walk_io's), stored once.
    const int64_t last = i + (vecs - 1 - i) / threads * threads;
    xent_vec16<T> chunk[kInFlight];
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) chunk[u] = xent_load16(v + xent_min_index(i + u * threads, last));
    XENT_UNROLL
    for (int64_t u = 0; u < kInFlight; ++u) {
      xent_hold16(chunk[u]);
      if (i + u * threads < vecs) xent_stage_put16<T>(tile, (i + u * threads) * kVec, chunk[u]);
    }
  }
#endif
  for (int64_t j = vecs * kVec + (int64_t)threadIdx.x; j < count; j += threads) tile[j] = XENT_LD(x + j);
}

// The tile's first `count` elements back to out (16-byte aligned), as
// xent_tile_load took them, after the caller's barrier.
template <typename T, typename Tile>
XENT_DEVICE void xent_tile_store(T* out, int64_t count, Tile tile) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t vecs = count / kVec, threads = (int64_t)blockDim.x;
  for (int64_t i = (int64_t)threadIdx.x; i < vecs; i += threads)
    xent_store16(out + i * kVec, xent_stage_get16<T>(tile, i * kVec));
  for (int64_t j = vecs * kVec + (int64_t)threadIdx.x; j < count; j += threads) XENT_ST(out + j, (T)tile[j]);
}

// A row of the tile shape, at element `base` of the tile: calls f(j, x_j)
// for the classes this thread (`lane` of `group`) owns, as xent_row_walk_io
// does for a row in memory: scalars up to the row's first 16-byte boundary
// in the tile, whole vectors (read from shared memory 16 bytes at a time),
// a scalar tail. A read-only `out` gets the elements as xent_row_walk_io
// gives them; an `out` that stores (xent_out) has its results written over
// the row's own elements of the tile, in T, for xent_tile_store.
template <typename T, typename Tile, typename Out, typename F>
XENT_DEVICE void xent_tile_walk(Tile tile, int64_t base, int64_t C, int64_t lane, int64_t group, const Out& out,
                                F f) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t off = base % kVec, head = xent_min_index(off == 0 ? 0 : kVec - off, C);
  const auto one = [&](int64_t j) {
    const T raw = tile[base + j];
    if constexpr (Out::kReadOnly) out.one(f, j, base + j, raw);
    else tile[base + j] = out.value(f, j, raw);
  };
  for (int64_t j = lane; j < head; j += group) one(j);
  const int64_t vecs = (C - head) / kVec;
  for (int64_t i = lane; i < vecs; i += group) {
    const int64_t j0 = head + i * kVec;
    const xent_vec16<T> chunk = xent_stage_get16<T>(tile, base + j0);
    if constexpr (Out::kReadOnly) out.vec(f, j0, base + j0, chunk);
    else xent_stage_put16<T>(tile, base + j0, out.values(f, j0, chunk));
  }
  for (int64_t j = head + vecs * kVec + lane; j < C; j += group) one(j);
}

// The wait for this thread's copies of xent_tile_load.
XENT_DEVICE void xent_tile_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(XENT_EMU)
  asm volatile("cp.async.wait_all;" : : : "memory");
#endif
}

// The tile shape's steps: the next pass of rows in the tile (`pass` rows
// on, while below tile_end), else the block's next tile (`jump` rows after
// this one's first); and between two tiles, after a barrier for the last
// pass's readers, the last tile's `done` rows' results stored from it where
// kStore (its gradient), with a barrier after, and the next tile's n rows'
// copies issued: the caller stages the rows' other inputs while they are in
// flight, then waits (xent_tile_wait) and holds a barrier. Every argument
// is the block's, so every thread reaches them.
XENT_DEVICE int64_t xent_tile_next(int64_t tile, int64_t pass, int64_t tile_first, int64_t tile_end, int64_t jump) {
  return tile + pass < tile_end ? tile + pass : tile_first + jump;
}
template <bool kStore, int kInFlight, typename T, typename Tile>
XENT_DEVICE void xent_tile_next_rows(const T* x, T* out, int64_t C, int64_t done_first, int64_t done, int64_t first,
                                     int64_t n, Tile tile) {
  __syncthreads();
  if (kStore && done > 0) {
    xent_tile_store(out + done_first * C, done * C, tile);
    __syncthreads();
  }
  xent_tile_load<kInFlight>(x + first * C, n * C, tile);
}
template <typename T, typename Tile>
XENT_DEVICE void xent_tile_last_rows(T* out, int64_t C, int64_t done_first, int64_t done, Tile tile) {
  if (done > 0) {
    __syncthreads();
    xent_tile_store(out + done_first * C, done * C, tile);
  }
}
