/* The SIMT emulator's scheduler: fibers, barriers, warp operations, shared
   memory with bounds and race checks. See emu.h. */
#define _GNU_SOURCE
#include "emu.h"
#include "fiber_switch.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* Enough for the kernels' locals and the C library calls they make (expf,
   logf); ASan's redzones need more. */
#if defined(__SANITIZE_ADDRESS__)
#define FIBER_STACK (256 * 1024)
#else
#define FIBER_STACK (64 * 1024)
#endif
#define MAX_THREADS_PER_BLOCK 1024
#define MAX_SHARED_ALLOCS 32

typedef enum fiber_state { F_RUNNABLE, F_BARRIER, F_CLUSTER, F_WARP, F_DONE } fiber_state;

struct block_state;

/* Under ThreadSanitizer (--config=tsan), each fiber is a TSan fiber too:
   TSan then keeps one shadow stack per fiber, and every switch orders the
   fibers' accesses as the scheduler does (they never run at once). */
#if defined(__SANITIZE_THREAD__)
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#define TSAN_CURRENT() __tsan_get_current_fiber()
#define TSAN_CREATE() __tsan_create_fiber(0)
#define TSAN_DESTROY(f) ((f) ? __tsan_destroy_fiber(f) : (void)0)
#define TSAN_SWITCH(f) __tsan_switch_to_fiber((f), 0)
#else
#define TSAN_CURRENT() NULL
#define TSAN_CREATE() NULL
#define TSAN_DESTROY(f) ((void)(f))
#define TSAN_SWITCH(f) ((void)(f))
#endif

typedef struct fiber {
  fiber_context ctx;
  void* tsan; /* its TSan fiber, or NULL */
  struct block_state* blk;
  xent_emu_dim3 tid;
  int linear, warp, lane;
  int gid; /* rank * threads + linear: unique within the cluster */
  fiber_state state;
  const char* file; /* where it waits */
  int line;
  /* The posted warp operation and its result. */
  xent_emu_warp_kind kind;
  uint64_t mask, value, result;
  int arg, width;
  /* Synchronisation counts, for the race detector: block barriers passed
     (a cluster sync is one too), warp syncs (__syncwarp) passed, and
     cluster syncs passed. */
  uint32_t bar, ws, cbar;
  int unordered; /* waiting at an mbarrier's wait, which orders no thread's accesses */
  uint32_t proxy_fences; /* fence.proxy.async executed (xent_emu_proxy_fence) */
} fiber;

/* Per element of a shared allocation: the last writer and the two most
   recent distinct readers (cluster-wide ids), with their synchronisation
   counts at the time (-1 = none). Two readers, because a writer is usually
   also the last reader of the element it overwrites, which would hide
   everyone else's read. */
typedef struct sync_stamp {
  int32_t who;
  uint32_t bar, ws, cbar;
  uint32_t fences; /* the thread's proxy fences at the access */
} sync_stamp;

/* No thread's access: a record's start, and the writer of bytes the
   hardware put there (a copy landed, a product's result). */
static const sync_stamp NO_STAMP = {-1, 0, 0, 0, 0};

typedef struct access_record {
  sync_stamp writer, reader, reader2;
  int32_t copy_into; /* the thread (gid) whose asynchronous copy into it is in flight; -1: none */
  uint32_t products; /* tensor-core products in flight that read it */
} access_record;

typedef struct shared_alloc {
  const char* name;
  const char* file;
  int line;
  size_t count, elem_size;
  char* base;
  int owned; /* base is malloc'd (the dynamic region is the block's own) */
  access_record* records;
} shared_alloc;

/* One block of the running cluster: its threads, barrier and shared memory. */
typedef struct block_state {
  xent_emu_dim3 idx;
  int rank; /* within the cluster */
  fiber* fibers;
  int barrier_waiting;
  int live; /* threads of the block that have not exited */
  shared_alloc shared[MAX_SHARED_ALLOCS];
  int shared_count;
  size_t shared_used;
  char* dynamic;
  /* Tensor memory (sm_100): its cells (kept across the launch's blocks),
     whether this block has touched them, the 32-column chunks allocated,
     whether the block gave up its permit to allocate, and per column the
     tensor-core products in flight that write it. */
  uint32_t* tensor;
  int tensor_used, tensor_relinquished;
  uint32_t tensor_allocated;
  uint16_t tensor_busy[XENT_EMU_TMEM_COLUMNS];
  /* Per column: the products' last completion (the writer) and the last
     two threads' loads, for the race checks (as shared memory's). */
  access_record tensor_access[XENT_EMU_TMEM_COLUMNS];
} block_state;

typedef struct launch_state {
  const char* kernel;
  int warp_size;
  size_t smem_limit;
  xent_emu_dim3 grid, block;
  size_t dynamic_smem;
  long long max_dynamic; /* the function's cudaFuncAttributeMaxDynamicSharedMemorySize (-1: not set) */
  size_t smem_optin;     /* the device's, when max_dynamic is set */
  size_t static_max;     /* the most static shared memory a block used */
  unsigned cluster; /* blocks per cluster, along x; 1 = no clusters */
  void (*body)(void*);
  void* ctx;
  block_state* blocks; /* the running cluster's, by rank */
  char* stacks;
  int threads; /* per block */
  fiber* current;
  fiber_context scheduler;
  void* tsan_scheduler; /* the launching thread's TSan fiber, or NULL */
  int cluster_waiting; /* threads at a cluster sync */
  int failed;
} launch_state;

/* The emulator's per-host-thread state, read at every intrinsic (BUILD
   compiles this file with TLS descriptors where GCC has them: the general
   model's __tls_get_addr calls took 15% of an emulated test's time). */
static _Thread_local launch_state* L;
static _Thread_local int pending_error;
static _Thread_local char message[2048];

static void format_dim(char* buf, size_t cap, xent_emu_dim3 d) { snprintf(buf, cap, "(%u,%u,%u)", d.x, d.y, d.z); }

/* Records an error; the prefix names the kernel, block and (if any) thread. */
static void record_error(const fiber* f, const char* fmt, va_list ap) {
  char where[256] = "";
  if (L) {
    char b[48], t[48];
    const block_state* blk = f ? f->blk : (L->current ? L->current->blk : L->blocks);
    format_dim(b, sizeof b, blk->idx);
    if (f) {
      format_dim(t, sizeof t, f->tid);
      snprintf(where, sizeof where, "xent_emu: kernel %s, block %s, thread %s: ", L->kernel, b, t);
    } else {
      snprintf(where, sizeof where, "xent_emu: kernel %s, block %s: ", L->kernel, b);
    }
  }
  size_t n = strlen(where);
  memcpy(message, where, n);
  vsnprintf(message + n, sizeof message - n, fmt, ap);
  pending_error = 1;
  if (L) L->failed = 1;
}

static void fail_block(const fiber* f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record_error(f, fmt, ap);
  va_end(ap);
}

void xent_emu_fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record_error(L ? L->current : NULL, fmt, ap);
  va_end(ap);
  if (L && L->current) {
    /* Abandon this fiber: the scheduler sees `failed` and ends the launch. */
    fiber* f = L->current;
    TSAN_SWITCH(L->tsan_scheduler);
    fiber_switch(&f->ctx, &L->scheduler);
  }
  abort(); /* called outside a launch: a bug in the caller */
}

int xent_emu_refuse_launch(const char* kernel, const char* why) {
  snprintf(message, sizeof message, "xent_emu: kernel %s: launch refused: %s", kernel, why);
  pending_error = 0; /* the refusal is the launcher's status, not a pending device error */
  return 1;
}

int xent_emu_last_error(void) {
  int e = pending_error;
  pending_error = 0;
  return e;
}

const char* xent_emu_last_message(void) { return message; }

static fiber* self(const char* what) {
  if (!L || !L->current) {
    fprintf(stderr, "xent_emu: %s called outside a kernel\n", what);
    abort();
  }
  return L->current;
}

xent_emu_dim3 xent_emu_thread_idx(void) { return self("threadIdx")->tid; }
xent_emu_dim3 xent_emu_block_idx(void) { return self("blockIdx")->blk->idx; }
xent_emu_dim3 xent_emu_block_dim(void) { return self("blockDim"), L->block; }
xent_emu_dim3 xent_emu_grid_dim(void) { return self("gridDim"), L->grid; }
int xent_emu_warp_size(void) { return self("warpSize"), L->warp_size; }
unsigned xent_emu_cluster_rank(void) { return (unsigned)self("cluster rank")->blk->rank; }
unsigned xent_emu_cluster_size(void) { return self("cluster size"), L->cluster; }

static void yield_to_scheduler(fiber* f) {
  TSAN_SWITCH(L->tsan_scheduler);
  fiber_switch(&f->ctx, &L->scheduler);
}

/* A barrier's waiting thread keeps its vote in value; the barrier leaves
   the block's OR of them in every thread's result. */
static void block_barrier(fiber* f, int vote, const char* file, int line) {
  f->state = F_BARRIER;
  f->file = file;
  f->line = line;
  f->value = vote != 0;
  f->blk->barrier_waiting++;
  yield_to_scheduler(f);
}

void xent_emu_syncthreads(const char* file, int line) { block_barrier(self("__syncthreads"), 0, file, line); }

/* An mbarrier's wait, every thread of the block at one site: they leave
   together (the model's), but it orders none of their own accesses, as on
   a GPU (only the asynchronous copies and products it waits for). */
void xent_emu_mbarrier_wait(const char* file, int line) {
  fiber* f = self("mbarrier wait");
  f->unordered = 1;
  block_barrier(f, 0, file, line);
}

int xent_emu_syncthreads_or(int p, const char* file, int line) {
  fiber* f = self("__syncthreads_or");
  block_barrier(f, p, file, line);
  return f->result != 0;
}

void xent_emu_cluster_sync(const char* file, int line) {
  fiber* f = self("cluster sync");
  f->state = F_CLUSTER;
  f->file = file;
  f->line = line;
  L->cluster_waiting++;
  yield_to_scheduler(f);
}

/* ---- warp operations ---------------------------------------------------- */

static int lanes_in_warp(int warp) {
  const int first = warp * L->warp_size;
  const int left = L->threads - first;
  return left < L->warp_size ? left : L->warp_size;
}

static uint64_t existing_lanes(int warp) {
  const int n = lanes_in_warp(warp);
  return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
}

static const char* warp_op_name(xent_emu_warp_kind k) {
  switch (k) {
    case XENT_EMU_SHFL_IDX: return "shfl";
    case XENT_EMU_SHFL_UP: return "shfl_up";
    case XENT_EMU_SHFL_DOWN: return "shfl_down";
    case XENT_EMU_SHFL_XOR: return "shfl_xor";
    case XENT_EMU_VOTE_ALL: return "all";
    case XENT_EMU_VOTE_ANY: return "any";
    case XENT_EMU_VOTE_BALLOT: return "ballot";
    case XENT_EMU_SYNCWARP: return "syncwarp";
  }
  return "?";
}

uint64_t xent_emu_warp_op(xent_emu_warp_kind kind, uint64_t mask, uint64_t value, int arg, int width, const char* file,
                          int line) {
  fiber* f = self(warp_op_name(kind));
  const uint64_t lanes = existing_lanes(f->warp);
  if (mask == XENT_EMU_FULL_MASK) mask = lanes;
  if (L->warp_size < 64) mask &= ((uint64_t)1 << L->warp_size) - 1;
  if (!(mask >> f->lane & 1))
    xent_emu_fail("%s at %s:%d: the calling lane %d is not in its mask 0x%llx", warp_op_name(kind), file, line, f->lane,
                  (unsigned long long)mask);
  if (mask & ~lanes)
    xent_emu_fail("%s at %s:%d: mask 0x%llx names lanes that do not exist (this warp has %d threads)",
                  warp_op_name(kind), file, line, (unsigned long long)mask, lanes_in_warp(f->warp));
  if (width <= 0 || width > L->warp_size || (width & (width - 1)))
    xent_emu_fail("%s at %s:%d: width %d is not a power of two up to %d", warp_op_name(kind), file, line, width,
                  L->warp_size);
  f->state = F_WARP;
  f->kind = kind;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  f->file = file;
  f->line = line;
  yield_to_scheduler(f);
  return f->result;
}

/* The lane a shuffle reads, or -1 for "the caller's own value" (a source
   outside the caller's width-segment). */
static int shuffle_source(const fiber* f) {
  const int w = f->width, seg = f->lane & ~(w - 1);
  int src;
  switch (f->kind) {
    case XENT_EMU_SHFL_IDX: return seg + (f->arg & (w - 1));
    case XENT_EMU_SHFL_UP: src = f->lane - f->arg; return src < seg ? -1 : src;
    case XENT_EMU_SHFL_DOWN: src = f->lane + f->arg; return src >= seg + w ? -1 : src;
    case XENT_EMU_SHFL_XOR: src = f->lane ^ f->arg; return (src & ~(w - 1)) != seg ? -1 : src;
    default: return -1;
  }
}

/* Completes the warp operation lane `f` waits in, if every lane of its mask
   has arrived at the same operation. Returns 1 if completed. */
static int try_complete_warp_op(fiber* f) {
  fiber* warp = f->blk->fibers + f->warp * L->warp_size;
  const int n = lanes_in_warp(f->warp);
  for (int i = 0; i < n; ++i) {
    if (!(f->mask >> i & 1)) continue;
    fiber* g = &warp[i];
    if (g->state == F_DONE) {
      fail_block(f, "%s at %s:%d with mask 0x%llx: lane %d has exited (a warp operation with inactive lanes)",
                 warp_op_name(f->kind), f->file, f->line, (unsigned long long)f->mask, i);
      return 0;
    }
    if (g->state != F_WARP) return 0; /* still running, or at a barrier (deadlock is found later) */
    if (g->kind != f->kind || g->mask != f->mask) {
      fail_block(f, "lane %d is at %s (%s:%d, mask 0x%llx) while lane %d is at %s (%s:%d, mask 0x%llx)", f->lane,
                 warp_op_name(f->kind), f->file, f->line, (unsigned long long)f->mask, i, warp_op_name(g->kind), g->file,
                 g->line, (unsigned long long)g->mask);
      return 0;
    }
  }
  uint64_t all = 1, any = 0, ballot = 0;
  for (int i = 0; i < n; ++i) {
    if (!(f->mask >> i & 1)) continue;
    const int pred = warp[i].value != 0;
    all &= (uint64_t)pred;
    any |= (uint64_t)pred;
    ballot |= (uint64_t)pred << i;
  }
  for (int i = 0; i < n; ++i) {
    if (!(f->mask >> i & 1)) continue;
    fiber* g = &warp[i];
    switch (g->kind) {
      case XENT_EMU_VOTE_ALL: g->result = all; break;
      case XENT_EMU_VOTE_ANY: g->result = any; break;
      case XENT_EMU_VOTE_BALLOT: g->result = ballot; break;
      case XENT_EMU_SYNCWARP: g->result = 0; g->ws++; break;
      default: {
        const int src = shuffle_source(g);
        if (src >= 0 && !(g->mask >> src & 1)) {
          fail_block(g, "%s at %s:%d reads lane %d, which is not in the mask 0x%llx", warp_op_name(g->kind), g->file,
                     g->line, src, (unsigned long long)g->mask);
          return 0;
        }
        g->result = src < 0 ? g->value : warp[src].value;
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (f->mask >> i & 1) warp[i].state = F_RUNNABLE;
  }
  return 1;
}

/* ---- barriers ----------------------------------------------------------- */

static void try_complete_barrier(block_state* b) {
  if (b->barrier_waiting == 0 || b->barrier_waiting < b->live) return;
  const fiber* first = NULL;
  for (int i = 0; i < L->threads; ++i) {
    fiber* g = &b->fibers[i];
    if (g->state != F_BARRIER) continue;
    if (!first) {
      first = g;
    } else if (g->line != first->line || strcmp(g->file, first->file) != 0) {
      char t[48];
      format_dim(t, sizeof t, first->tid);
      fail_block(g, "divergent barrier: this thread waits at __syncthreads() %s:%d, thread %s at %s:%d", g->file,
                 g->line, t, first->file, first->line);
      return;
    }
  }
  uint64_t any = 0;
  for (int i = 0; i < L->threads; ++i)
    if (b->fibers[i].state == F_BARRIER) any |= b->fibers[i].value;
  for (int i = 0; i < L->threads; ++i) {
    fiber* g = &b->fibers[i];
    if (g->state == F_BARRIER) {
      g->state = F_RUNNABLE;
      g->result = any;
      if (!g->unordered) g->bar++;
      g->unordered = 0;
    }
  }
  b->barrier_waiting = 0;
}

/* A cluster sync completes when every live thread of every block of the
   cluster waits at it, all at one site. It orders everything before it in
   any block of the cluster before everything after it, so it counts as a
   block barrier too. */
static int cluster_live(void) {
  int n = 0;
  for (unsigned r = 0; r < L->cluster; ++r) n += L->blocks[r].live;
  return n;
}

static void try_complete_cluster_sync(void) {
  if (L->cluster_waiting == 0 || L->cluster_waiting < cluster_live()) return;
  const fiber* first = NULL;
  for (unsigned r = 0; r < L->cluster; ++r) {
    for (int i = 0; i < L->threads; ++i) {
      fiber* g = &L->blocks[r].fibers[i];
      if (g->state != F_CLUSTER) continue;
      if (!first) {
        first = g;
      } else if (g->line != first->line || strcmp(g->file, first->file) != 0) {
        char t[48], b[48];
        format_dim(t, sizeof t, first->tid);
        format_dim(b, sizeof b, first->blk->idx);
        fail_block(g, "divergent cluster sync: this thread waits at %s:%d, thread %s of block %s at %s:%d", g->file,
                   g->line, t, b, first->file, first->line);
        return;
      }
    }
  }
  for (unsigned r = 0; r < L->cluster; ++r) {
    for (int i = 0; i < L->threads; ++i) {
      fiber* g = &L->blocks[r].fibers[i];
      if (g->state == F_CLUSTER) {
        g->state = F_RUNNABLE;
        g->bar++;
        g->cbar++;
      }
    }
  }
  L->cluster_waiting = 0;
}

/* A thread exited: nobody may wait for it. */
static void check_exit(fiber* f) {
  block_state* b = f->blk;
  if (b->barrier_waiting > 0) {
    for (int i = 0; i < L->threads; ++i) {
      const fiber* g = &b->fibers[i];
      if (g->state != F_BARRIER) continue;
      char t[48];
      format_dim(t, sizeof t, g->tid);
      fail_block(f, "barrier not reached by every thread: this thread exited while thread %s (and %d in all) waits at "
                 "__syncthreads() %s:%d", t, b->barrier_waiting, g->file, g->line);
      return;
    }
  }
  if (L->cluster_waiting > 0) {
    for (unsigned r = 0; r < L->cluster; ++r) {
      for (int i = 0; i < L->threads; ++i) {
        const fiber* g = &L->blocks[r].fibers[i];
        if (g->state != F_CLUSTER) continue;
        char t[48], bl[48];
        format_dim(t, sizeof t, g->tid);
        format_dim(bl, sizeof bl, g->blk->idx);
        fail_block(f, "cluster sync not reached by every thread: this thread exited while thread %s of block %s (and "
                   "%d in all) waits at %s:%d", t, bl, L->cluster_waiting, g->file, g->line);
        return;
      }
    }
  }
  fiber* warp = b->fibers + f->warp * L->warp_size;
  for (int i = 0; i < lanes_in_warp(f->warp); ++i) {
    if (warp[i].state == F_WARP && (warp[i].mask >> f->lane & 1)) {
      try_complete_warp_op(&warp[i]); /* reports the inactive lane */
      return;
    }
  }
}

static void report_deadlock(void) {
  for (unsigned r = 0; r < L->cluster; ++r) {
    for (int i = 0; i < L->threads; ++i) {
      fiber* g = &L->blocks[r].fibers[i];
      if (g->state != F_WARP) continue;
      fiber* warp = L->blocks[r].fibers + g->warp * L->warp_size;
      for (int j = 0; j < lanes_in_warp(g->warp); ++j) {
        if ((g->mask >> j & 1) && (warp[j].state == F_BARRIER || warp[j].state == F_CLUSTER)) {
          fail_block(g, "deadlock: %s at %s:%d waits for lane %d, which waits at %s %s:%d", warp_op_name(g->kind),
                     g->file, g->line, j, warp[j].state == F_BARRIER ? "__syncthreads()" : "a cluster sync",
                     warp[j].file, warp[j].line);
          return;
        }
      }
    }
  }
  fail_block(NULL, "deadlock: no thread can make progress (a __syncthreads() and a cluster sync waiting on each "
             "other, or a barrier some threads never reach)");
}

/* ---- shared memory -------------------------------------------------------- */

static void init_records(shared_alloc* a) {
  a->records = malloc((a->count ? a->count : 1) * sizeof *a->records);
  for (size_t i = 0; i < a->count; ++i) a->records[i] = (access_record){NO_STAMP, NO_STAMP, NO_STAMP, -1, 0};
}

/* Block b's allocation `name` at file:line, made on first use. Another
   block of the cluster may reach it first (through xent_emu_cluster_shared):
   on hardware a block's shared memory exists from its start. */
static void* block_shared(block_state* b, const char* name, const char* file, int line, size_t count,
                          size_t elem_size) {
  for (int i = 0; i < b->shared_count; ++i) {
    shared_alloc* a = &b->shared[i];
    if (a->line == line && strcmp(a->file, file) == 0 && strcmp(a->name, name) == 0) return a->base;
  }
  if (b->shared_count == MAX_SHARED_ALLOCS) xent_emu_fail("more than %d shared arrays", MAX_SHARED_ALLOCS);
  const size_t bytes = count * elem_size;
  const size_t static_bytes = b->shared_used + bytes - L->dynamic_smem;
  /* The kernel's static size, for cudaFuncGetAttributes' stand-in: known
     even when the launch is refused for it. */
  if (static_bytes > L->static_max) L->static_max = static_bytes;
  if (L->max_dynamic >= 0 && static_bytes + (size_t)L->max_dynamic > L->smem_optin)
    xent_emu_fail("static shared memory of %zu bytes (%s[%zu] at %s:%d) plus the kernel's "
                  "cudaFuncAttributeMaxDynamicSharedMemorySize of %lld exceed the device's opt-in maximum of %zu: "
                  "the driver refuses that attribute",
                  static_bytes, name, count, file, line, L->max_dynamic, L->smem_optin);
  if (L->max_dynamic < 0 && b->shared_used + bytes > L->smem_limit)
    xent_emu_fail("shared memory per block: %zu bytes (%s[%zu] at %s:%d on top of %zu, %zu of them dynamic) exceed "
                  "the %zu-byte limit (static plus dynamic, without a raised cudaFuncAttributeMaxDynamicSharedMemorySize)",
                  b->shared_used + bytes, name, count, file, line, b->shared_used, L->dynamic_smem, L->smem_limit);
  shared_alloc* a = &b->shared[b->shared_count++];
  a->name = name;
  a->file = file;
  a->line = line;
  a->count = count;
  a->elem_size = elem_size;
  a->owned = 1;
  /* Garbage, as on hardware: a kernel that reads before writing sees it. */
  a->base = malloc(bytes ? bytes : 1);
  memset(a->base, 0xA5, bytes);
  init_records(a);
  b->shared_used += bytes;
  return a->base;
}

void* xent_emu_shared(const char* name, const char* file, int line, size_t count, size_t elem_size) {
  return block_shared(self("shared memory")->blk, name, file, line, count, elem_size);
}

void* xent_emu_dynamic_shared(size_t* bytes) {
  self("dynamic shared memory");
  if (bytes) *bytes = L->dynamic_smem;
  return L->current->blk->dynamic;
}

/* The dynamic region as an allocation of elem_size elements with race
   records (its bytes were counted against the limit at launch). */
static void* block_dynamic_checked(block_state* b, const char* name, size_t elem_size) {
  for (int i = 0; i < b->shared_count; ++i) {
    if (b->shared[i].base == b->dynamic) return b->dynamic;
  }
  if (b->shared_count == MAX_SHARED_ALLOCS) xent_emu_fail("more than %d shared arrays", MAX_SHARED_ALLOCS);
  shared_alloc* a = &b->shared[b->shared_count++];
  a->name = name;
  a->file = "(dynamic)";
  a->line = 0;
  a->count = L->dynamic_smem / elem_size;
  a->elem_size = elem_size;
  a->owned = 0;
  a->base = b->dynamic;
  init_records(a);
  return a->base;
}

void* xent_emu_dynamic_shared_checked(const char* name, size_t elem_size, size_t* count) {
  fiber* f = self("dynamic shared memory");
  if ((uintptr_t)f->blk->dynamic % elem_size != 0 && elem_size <= 16)
    xent_emu_fail("dynamic shared memory is not aligned to %zu bytes", elem_size);
  if (count) *count = L->dynamic_smem / elem_size;
  return block_dynamic_checked(f->blk, name, elem_size);
}

/* The allocation holding `base`, in any block of the cluster, or NULL. */
static shared_alloc* find_alloc(const void* base, block_state** owner) {
  for (unsigned r = 0; r < L->cluster; ++r) {
    block_state* b = &L->blocks[r];
    for (int i = 0; i < b->shared_count; ++i) {
      if (b->shared[i].base == base) {
        if (owner) *owner = b;
        return &b->shared[i];
      }
    }
  }
  return NULL;
}

void* xent_emu_cluster_shared(const void* base, unsigned rank) {
  fiber* f = self("distributed shared memory");
  if (rank >= L->cluster) xent_emu_fail("distributed shared memory: rank %u, but the cluster has %u blocks", rank, L->cluster);
  block_state* mine = NULL;
  shared_alloc* a = find_alloc(base, &mine);
  if (!a || mine != f->blk) xent_emu_fail("distributed shared memory: the address is not this block's shared memory");
  block_state* other = &L->blocks[rank];
  if (other->live == 0) {
    char b[48];
    format_dim(b, sizeof b, other->idx);
    xent_emu_fail("distributed shared memory: block %s (rank %u) has exited and its shared memory is gone (a cluster "
                  "sync missing before the exit?)", b, rank);
  }
  if (a->owned) return block_shared(other, a->name, a->file, a->line, a->count, a->elem_size);
  return block_dynamic_checked(other, a->name, a->elem_size);
}

/* Whether an access by another thread of the running cluster (`thread` of
   this block, or any thread of another block of it), made when its counts
   were bar, ws and cbar, happens before the current thread's: a block
   barrier since (same block), a __syncwarp since (same warp), or a cluster
   sync since (another block). The counts of a block's threads, and of a
   cluster's, move in step. Shared by the shared- and global-memory
   detectors. */
static int synced_since(const fiber* me, int same_block, int thread, uint32_t bar, uint32_t ws, uint32_t cbar) {
  if (!same_block) return me->cbar > cbar;
  if (me->bar > bar) return 1;
  return thread / L->warp_size == me->warp && me->ws > ws;
}

/* Shared memory: `then` is the same thread, or synced since. */
static int ordered(const fiber* me, sync_stamp then) {
  if (then.who < 0 || then.who == me->gid) return 1;
  return synced_since(me, then.who / L->threads == me->blk->rank, then.who % L->threads, then.bar, then.ws, then.cbar);
}

static void check_index(int64_t index, int64_t count, const char* name) {
  if (index < 0 || index >= count)
    xent_emu_fail("shared array '%s' index %lld is out of range [0, %lld)", name, (long long)index, (long long)count);
}

/* The shared allocation at `base` (element `index` named in a report), or
   NULL for unchecked dynamic shared memory. */
static shared_alloc* alloc_of(fiber* me, const void* base, int64_t index, const char* name) {
  block_state* owner = NULL;
  shared_alloc* a = find_alloc(base, &owner);
  if (!a) return NULL; /* unchecked dynamic shared memory: bounds only */
  if (owner != me->blk && owner->live == 0) {
    char b[48];
    format_dim(b, sizeof b, owner->idx);
    xent_emu_fail("distributed shared memory: %s[%lld] of block %s, which has exited (a cluster sync missing before "
                  "the exit?)", name, (long long)index, b);
  }
  return a;
}

/* The records of element `index` of a view of `count` elements of the
   allocation a: the dynamic region may be declared with several element
   types (a kernel's uint16_t and float views of it), whose records are in
   the first view's units. A wider element covers several records, a
   narrower one shares its record with its neighbours. *first and the
   count of records, from it. */
static int view_records(const shared_alloc* a, int64_t index, int64_t count, int64_t* first) {
  *first = index;
  if ((size_t)count == a->count) return 1; /* the records' own view */
  const size_t view = count > 0 ? a->count * a->elem_size / (size_t)count : a->elem_size;
  if (view <= a->elem_size) {
    *first = index * (int64_t)view / (int64_t)a->elem_size;
    return 1;
  }
  *first = index * (int64_t)(view / a->elem_size);
  return (int)(view / a->elem_size);
}

static void check_access(fiber* me, access_record* r, int64_t index, const char* name, int is_write);

void xent_emu_shared_access(const void* base, int64_t index, int64_t count, const char* name, int is_write) {
  fiber* me = self("shared memory");
  check_index(index, count, name);
  shared_alloc* a = alloc_of(me, base, index, name);
  if (!a) return;
  int64_t first;
  const int n = view_records(a, index, count, &first);
  for (int k = 0; k < n; ++k) check_access(me, &a->records[first + k], index, name, is_write);
}

/* One access by `me` to element `index`, whose record is r: a read, a
   write, or the tensor cores' read of an operand (XENT_EMU_PRODUCT_READ:
   checked as a read, not recorded, for the wait for the products' commit
   orders it before every thread's later write). */
static void check_access(fiber* me, access_record* r, int64_t index, const char* name, int is_write) {
  /* Asynchronous accesses in flight: whatever orders this access, the
     copy may land, and the product read, at any time before their wait. */
  if (r->copy_into >= 0) {
    char who[64];
    if (r->copy_into == me->gid) snprintf(who, sizeof who, "its own");
    else snprintf(who, sizeof who, "thread %d's", r->copy_into % L->threads);
    xent_emu_fail("shared memory %s[%lld]: this thread %s it while %s asynchronous copy into it is in flight "
                  "(cp.async or cp.async.bulk.tensor issued, not yet waited for)",
                  name, (long long)index, is_write == 1 ? "writes" : "reads", who);
  }
  if (is_write == 1 && r->products)
    xent_emu_fail("shared memory %s[%lld]: this thread writes it while %u tensor-core product(s) reading it are in "
                  "flight (wgmma or tcgen05.mma issued, not yet waited for)", name, (long long)index, r->products);
  const sync_stamp* bad = NULL;
  const char* did = "wrote";
  if (!ordered(me, r->writer)) bad = &r->writer;
  else if (is_write == 1 && !ordered(me, r->reader)) bad = &r->reader, did = "read";
  else if (is_write == 1 && !ordered(me, r->reader2)) bad = &r->reader2, did = "read";
  if (bad) {
    /* The other thread, and the sync that would have ordered the two. */
    const int other_rank = bad->who / L->threads;
    char who[160];
    if (other_rank == me->blk->rank) {
      snprintf(who, sizeof who, "thread %d", bad->who % L->threads);
    } else {
      char b[48];
      format_dim(b, sizeof b, L->blocks[other_rank].idx);
      snprintf(who, sizeof who, "thread %d of block %s (another block of the cluster)", bad->who % L->threads, b);
    }
    xent_emu_fail("shared memory race on %s[%lld]: this thread %s it, %s %s it with no %s between", name,
                  (long long)index, is_write == 1 ? "writes" : "reads", who, did,
                  other_rank == me->blk->rank ? "__syncthreads() or __syncwarp()" : "cluster sync");
  }
  const sync_stamp now = {me->gid, me->bar, me->ws, me->cbar, me->proxy_fences};
  if (is_write == XENT_EMU_PRODUCT_READ) return;
  if (is_write) {
    r->writer = now;
  } else {
    if (r->reader.who != me->gid) r->reader2 = r->reader;
    r->reader = now;
  }
}

void xent_emu_proxy_fence(void) { self("fence.proxy.async")->proxy_fences++; }

/* A product issued over element `index`, whose record is r: a generic store
   to it must be followed by its thread's fence.proxy.async (and a barrier,
   which check_access asks for) before the tensor cores, which read through
   the async proxy, may see it. A copy's landed bytes need none. */
static void check_published(access_record* r, int64_t index, const char* name) {
  const sync_stamp w = r->writer;
  if (w.who < 0) return;
  const fiber* writer = &L->blocks[w.who / L->threads].fibers[w.who % L->threads];
  if (writer->proxy_fences > w.fences) return;
  xent_emu_fail("shared memory %s[%lld]: a tensor-core product reads it, but thread %d's store to it has no "
                "fence.proxy.async after it (xent_wg_publish_smem, then a barrier): the tensor cores read through "
                "the async proxy and may see the old bytes", name, (long long)index, w.who % L->threads);
}

void xent_emu_shared_async(const void* base, int64_t index, int64_t count, const char* name, int kind, int begin) {
  xent_emu_shared_async_n(base, &index, 1, count, name, kind, begin);
}

void xent_emu_shared_async_n(const void* base, const int64_t* index, int n, int64_t count, const char* name, int kind,
                             int begin) {
  fiber* me = self("shared memory");
  for (int i = 0; i < n; ++i) check_index(index[i], count, name);
  shared_alloc* a = n > 0 ? alloc_of(me, base, index[0], name) : NULL;
  if (!a) return;
  for (int i = 0; i < n; ++i) {
    int64_t first;
    const int m = view_records(a, index[i], count, &first);
    for (int k = 0; k < m; ++k) {
      access_record* r = &a->records[first + k];
      if (begin)
        check_access(me, r, index[i], name,
                     kind == XENT_EMU_ASYNC_COPY ? 1 : kind == XENT_EMU_ASYNC_PRODUCT ? 0 : XENT_EMU_PRODUCT_READ);
      if (begin && kind != XENT_EMU_ASYNC_COPY) check_published(r, index[i], name);
      if (kind == XENT_EMU_ASYNC_COPY) r->copy_into = begin ? me->gid : -1;
      else r->products += begin ? 1u : (uint32_t)-1;
    }
  }
}

void xent_emu_shared_accesses(const void* base, const int64_t* index, int n, int64_t count, const char* name,
                              int is_write) {
  fiber* me = self("shared memory");
  for (int i = 0; i < n; ++i) check_index(index[i], count, name);
  shared_alloc* a = n > 0 ? alloc_of(me, base, index[0], name) : NULL;
  if (!a) return;
  for (int i = 0; i < n; ++i) {
    int64_t first;
    const int m = view_records(a, index[i], count, &first);
    for (int k = 0; k < m; ++k) check_access(me, &a->records[first + k], index[i], name, is_write);
  }
}

void xent_emu_shared_landed(const void* base, const int64_t* index, int n, int64_t count, const char* name) {
  fiber* me = self("shared memory");
  for (int i = 0; i < n; ++i) check_index(index[i], count, name);
  shared_alloc* a = n > 0 ? alloc_of(me, base, index[0], name) : NULL;
  if (!a) return;
  for (int i = 0; i < n; ++i) {
    int64_t first;
    const int m = view_records(a, index[i], count, &first);
    for (int k = 0; k < m; ++k) a->records[first + k].writer = NO_STAMP;
  }
}

/* ---- global-memory races (xent_emu_check_global) ---------------------------

   An open-addressed table from 16-byte chunks of global memory to the
   access records of their eight 2-byte granules (the smallest element a
   kernel stores): the last writer and the two most recent distinct readers,
   as for shared memory, but by grid-wide thread (block of the grid, thread
   of the block) and with the site of each access for the report. A chunk
   a slot, so that a 16-byte vector access costs one probe, not eight.
   Emptied at every launch: a kernel boundary orders everything. */
typedef struct global_stamp {
  int64_t block; /* linear index in the grid; -1: none */
  int32_t thread;
  uint32_t bar, ws, cbar;
  const char* file;
  int line;
} global_stamp;

typedef struct global_record {
  global_stamp writer, reader, reader2;
} global_record;

enum { GRANULES = 8 }; /* 2-byte granules a chunk */

typedef struct global_chunk {
  uintptr_t key; /* address / 16 + 1; 0: an empty slot */
  global_record granule[GRANULES];
} global_chunk;

static _Thread_local int global_checks;
static _Thread_local global_chunk* global_table;
static _Thread_local size_t global_cap, global_used;
static _Thread_local size_t* global_slots; /* the used slots, in the order made */

/* A table of at most this many chunks (8 MiB) is kept from launch to
   launch, its used slots emptied: a fresh calloc'd one cost two page faults
   a page it touched (perf: 11% of an emulated test's time). A larger one
   is freed. */
enum { GLOBAL_KEEP = 1 << 13 };

static void global_free(void) {
  free(global_table);
  free(global_slots);
  global_table = NULL;
  global_slots = NULL;
  global_cap = global_used = 0;
}

static void global_reset(void) {
  if (global_cap > GLOBAL_KEEP) {
    global_free();
    return;
  }
  for (size_t i = 0; i < global_used; ++i) global_table[global_slots[i]].key = 0;
  global_used = 0;
}

int xent_emu_check_global(int on) {
  const int was = global_checks;
  global_checks = on != 0;
  global_free();
  return was;
}

static int64_t block_linear(xent_emu_dim3 b) {
  return ((int64_t)b.z * L->grid.y + b.y) * L->grid.x + b.x;
}

/* The chunk of key, made (no access yet) where absent. Growing the table
   moves every chunk: a pointer from an earlier call is stale after it. */
static global_chunk* global_chunk_of(uintptr_t key) {
  if (2 * (global_used + 1) > global_cap) {
    const size_t cap = global_cap ? 2 * global_cap : GLOBAL_KEEP;
    global_chunk* t = calloc(cap, sizeof *t);
    size_t* slots = malloc(cap / 2 * sizeof *slots);
    if (!t || !slots) xent_emu_fail("out of memory for the global-memory race table (%zu chunks)", cap);
    for (size_t i = 0; i < global_used; ++i) {
      const global_chunk* old = &global_table[global_slots[i]];
      size_t k = (old->key * 0x9E3779B97F4A7C15ull) & (cap - 1);
      while (t[k].key) k = (k + 1) & (cap - 1);
      t[k] = *old;
      slots[i] = k;
    }
    free(global_table);
    free(global_slots);
    global_table = t;
    global_slots = slots;
    global_cap = cap;
  }
  size_t k = (key * 0x9E3779B97F4A7C15ull) & (global_cap - 1);
  while (global_table[k].key && global_table[k].key != key) k = (k + 1) & (global_cap - 1);
  global_chunk* c = &global_table[k];
  if (!c->key) {
    c->key = key;
    for (int i = 0; i < GRANULES; ++i)
      c->granule[i].writer.block = c->granule[i].reader.block = c->granule[i].reader2.block = -1;
    global_slots[global_used++] = k;
  }
  return c;
}

/* Whether `then` happens before the current thread's access: the same
   thread; the same block and a barrier since, or the same warp and a
   __syncwarp since; another block of the running cluster and a cluster sync
   since. Blocks of different clusters are never ordered within a launch. */
static int global_ordered(const fiber* me, int64_t my_block, global_stamp then) {
  if (then.block < 0 || (then.block == my_block && then.thread == me->linear)) return 1;
  const int64_t first = my_block - me->blk->rank;
  if (then.block < first || then.block >= first + (int64_t)L->cluster) return 0;
  return synced_since(me, then.block == my_block, then.thread, then.bar, then.ws, then.cbar);
}

void xent_emu_global_access(const void* p, size_t bytes, int is_write, const char* file, int line) {
  /* A GPU faults on an access off its size's alignment (a 16-byte vector
     at an address that is not a multiple of 16); the host would not. */
  if (L && L->current && bytes <= 16 && (bytes & (bytes - 1)) == 0 && (uintptr_t)p % bytes)
    xent_emu_fail("misaligned global %s at %p (%s:%d): a %zu-byte access must be %zu-byte aligned",
                  is_write ? "store" : "load", p, file, line, bytes, bytes);
  if (!global_checks || !L || !L->current) return;
  fiber* me = L->current;
  const int64_t my_block = block_linear(me->blk->idx);
  const global_stamp now = {my_block, me->linear, me->bar, me->ws, me->cbar, file, line};
  const uintptr_t first = (uintptr_t)p / 2, last = ((uintptr_t)p + (bytes ? bytes : 1) - 1) / 2;
  global_chunk* chunk = NULL;
  for (uintptr_t g = first; g <= last; ++g) {
    if (!chunk || g % GRANULES == 0) chunk = global_chunk_of(g / GRANULES + 1);
    global_record* r = &chunk->granule[g % GRANULES];
    const global_stamp* bad = NULL;
    const char* did = "wrote";
    if (!global_ordered(me, my_block, r->writer)) bad = &r->writer;
    else if (is_write && !global_ordered(me, my_block, r->reader)) bad = &r->reader, did = "read";
    else if (is_write && !global_ordered(me, my_block, r->reader2)) bad = &r->reader2, did = "read";
    if (bad) {
      const int64_t bx = bad->block % L->grid.x, by = bad->block / L->grid.x % L->grid.y,
                    bz = bad->block / L->grid.x / L->grid.y;
      const int64_t cluster_first = my_block - me->blk->rank;
      const int same_cluster = bad->block >= cluster_first && bad->block < cluster_first + (int64_t)L->cluster;
      char who[200];
      const char* missing;
      if (bad->block == my_block) {
        snprintf(who, sizeof who, "thread %d", bad->thread);
        missing = "with no __syncthreads() or __syncwarp() between (shuffles and votes do not order memory)";
      } else {
        snprintf(who, sizeof who, "thread %d of block (%lld,%lld,%lld)", bad->thread, (long long)bx, (long long)by,
                 (long long)bz);
        missing = same_cluster ? "with no cluster sync between"
                               : "in the same launch (blocks of different clusters are ordered only by a kernel "
                                 "boundary)";
      }
      xent_emu_fail("global memory race at %p (a %zu-byte %s at %s:%d): %s %s it at %s:%d %s", (const void*)(g * 2),
                    bytes, is_write ? "store" : "load", file, line, who, did, bad->file, bad->line, missing);
    }
    if (is_write) {
      r->writer = now;
    } else {
      if (!(r->reader.block == my_block && r->reader.thread == me->linear)) r->reader2 = r->reader;
      r->reader = now;
    }
  }
}

static void free_shared(block_state* b) {
  for (int i = 0; i < b->shared_count; ++i) {
    if (b->shared[i].owned) free(b->shared[i].base);
    free(b->shared[i].records);
  }
  b->shared_count = 0;
  b->shared_used = L->dynamic_smem;
  b->tensor_used = b->tensor_relinquished = 0;
  b->tensor_allocated = 0;
  memset(b->tensor_busy, 0, sizeof b->tensor_busy);
  for (int c = 0; c < XENT_EMU_TMEM_COLUMNS; ++c)
    b->tensor_access[c] = (access_record){NO_STAMP, NO_STAMP, NO_STAMP, -1, 0};
}

/* ---- tensor memory (sm_100) ----------------------------------------------- */

uint32_t* xent_emu_tensor_memory(void) {
  block_state* b = self("tensor memory")->blk;
  const size_t cells = (size_t)XENT_EMU_TMEM_LANES * XENT_EMU_TMEM_COLUMNS;
  if (!b->tensor && !(b->tensor = malloc(cells * sizeof *b->tensor)))
    xent_emu_fail("out of memory for the block's tensor memory");
  if (!b->tensor_used) {
    memset(b->tensor, 0xA5, cells * sizeof *b->tensor); /* garbage, as on hardware */
    b->tensor_used = 1;
  }
  return b->tensor;
}

/* The 32-column chunks of [column, column + columns), as a mask. */
static uint32_t tensor_chunks(int column, int columns) {
  uint32_t m = 0;
  for (int c = column / 32; c * 32 < column + columns && c < XENT_EMU_TMEM_COLUMNS / 32; ++c) m |= 1u << c;
  return m;
}

int xent_emu_tensor_alloc(int columns) {
  block_state* b = self("tcgen05.alloc")->blk;
  if (columns < 32 || columns > XENT_EMU_TMEM_COLUMNS || (columns & (columns - 1)))
    xent_emu_fail("tcgen05.alloc of %d columns: a power of two from 32 to %d", columns, XENT_EMU_TMEM_COLUMNS);
  if (b->tensor_relinquished)
    xent_emu_fail("tcgen05.alloc after the block relinquished its permit to allocate "
                  "(tcgen05.relinquish_alloc_permit)");
  xent_emu_tensor_memory();
  for (int c = 0; c + columns <= XENT_EMU_TMEM_COLUMNS; c += 32) {
    const uint32_t m = tensor_chunks(c, columns);
    if (b->tensor_allocated & m) continue;
    b->tensor_allocated |= m;
    return c;
  }
  xent_emu_fail("tcgen05.alloc of %d columns: no free run of them (this block holds chunk mask 0x%08x of 32 columns "
                "each): a GPU would wait for a free that never comes",
                columns, b->tensor_allocated);
}

void xent_emu_tensor_relinquish(void) { self("tcgen05.relinquish_alloc_permit")->blk->tensor_relinquished = 1; }

void xent_emu_tensor_free(int column, int columns) {
  block_state* b = self("tcgen05.dealloc")->blk;
  const uint32_t m = tensor_chunks(column, columns);
  if (column < 0 || column % 32 || columns < 32 || column + columns > XENT_EMU_TMEM_COLUMNS ||
      (b->tensor_allocated & m) != m)
    xent_emu_fail("tcgen05.dealloc of columns [%d, %d): not all allocated (chunk mask 0x%08x of 32 columns each)",
                  column, column + columns, b->tensor_allocated);
  for (int c = column; c < column + columns; ++c)
    if (b->tensor_busy[c])
      xent_emu_fail("tcgen05.dealloc of column %d while %u tensor-core product(s) writing it are in flight", c,
                    (unsigned)b->tensor_busy[c]);
  b->tensor_allocated &= ~m;
}

static void tensor_range(const char* what, int column, int columns) {
  block_state* b = self(what)->blk;
  if (column < 0 || columns < 1 || column + columns > XENT_EMU_TMEM_COLUMNS ||
      (b->tensor_allocated & tensor_chunks(column, columns)) != tensor_chunks(column, columns))
    xent_emu_fail("%s: tensor memory columns [%d, %d) not all allocated (chunk mask 0x%08x of 32 columns each)", what,
                  column, column + columns, b->tensor_allocated);
}

void xent_emu_tensor_product(int column, int columns, int delta) {
  tensor_range("tcgen05.mma", column, columns);
  fiber* me = L->current;
  block_state* b = me->blk;
  for (int c = column; c < column + columns; ++c) {
    access_record* r = &b->tensor_access[c];
    /* Issued: every earlier load of the column ordered before it (the
       tensor cores may write it at once); done (at the wait for its
       commit's mbarrier, which every thread leaves together): its writes,
       ordered before every load after that wait, as a landed copy's. */
    const sync_stamp* bad = delta < 0                    ? NULL
                            : !ordered(me, r->reader)  ? &r->reader
                            : !ordered(me, r->reader2) ? &r->reader2
                                                       : NULL;
    if (bad)
      xent_emu_fail("tcgen05.mma: tensor memory race on column %d: a product that writes it is issued while "
                    "thread %d's load of it is not ordered before (tcgen05.fence::before_thread_sync, __syncthreads(), "
                    "tcgen05.fence::after_thread_sync between)",
                    c, bad->who % L->threads);
    if (delta < 0) r->writer = NO_STAMP;
    b->tensor_busy[c] = (uint16_t)(b->tensor_busy[c] + delta);
  }
}

void xent_emu_tensor_read(int column, int columns, const char* what) {
  tensor_range(what, column, columns);
  fiber* me = L->current;
  block_state* b = me->blk;
  const sync_stamp now = {me->gid, me->bar, me->ws, me->cbar, me->proxy_fences};
  for (int c = column; c < column + columns; ++c) {
    if (b->tensor_busy[c])
      xent_emu_fail("%s: tensor memory column %d read while %u tensor-core product(s) writing it are in flight (the "
                    "mbarrier of their commit not waited for)",
                    what, c, (unsigned)b->tensor_busy[c]);
    access_record* r = &b->tensor_access[c];
    if (!ordered(me, r->writer))
      xent_emu_fail("%s: tensor memory race on column %d: thread %d's products wrote it, and this thread's load is "
                    "not ordered after (the wait for their commit's mbarrier)",
                    what, c, r->writer.who % L->threads);
    if (r->reader.who != me->gid) r->reader2 = r->reader;
    r->reader = now;
  }
}

/* ---- launching ------------------------------------------------------------ */

static void fiber_main(void) {
  fiber* f = L->current;
  L->body(L->ctx);
  f->state = F_DONE;
  yield_to_scheduler(f); /* for good: a done fiber is never resumed */
}

static void init_fiber(block_state* b, fiber* f, int i) {
  const xent_emu_dim3 d = L->block;
  TSAN_DESTROY(f->tsan);
  memset(f, 0, sizeof *f);
  f->tsan = TSAN_CREATE();
  f->blk = b;
  f->linear = i;
  f->gid = b->rank * L->threads + i;
  f->tid = (xent_emu_dim3){(unsigned)i % d.x, (unsigned)(i / d.x) % d.y, (unsigned)(i / (d.x * d.y))};
  f->warp = i / L->warp_size;
  f->lane = i % L->warp_size;
  f->state = F_RUNNABLE;
  fiber_context_init(&f->ctx, L->stacks + (size_t)f->gid * FIBER_STACK, FIBER_STACK, fiber_main);
}

/* Runs the blocks of one cluster (one block without clusters) together, as
   the hardware co-schedules them. */
static int run_cluster(xent_emu_dim3 first) {
  for (unsigned r = 0; r < L->cluster; ++r) {
    block_state* b = &L->blocks[r];
    b->idx = (xent_emu_dim3){first.x + r, first.y, first.z};
    b->rank = (int)r;
    for (int i = 0; i < L->threads; ++i) init_fiber(b, &b->fibers[i], i);
    b->barrier_waiting = 0;
    b->live = L->threads;
    free_shared(b);
    memset(b->dynamic, 0xA5, L->dynamic_smem);
  }
  L->cluster_waiting = 0;
  for (;;) {
    int ran = 0, live = 0;
    for (unsigned r = 0; r < L->cluster && !L->failed; ++r) {
      block_state* b = &L->blocks[r];
      /* Highest thread first: code that assumes lane 0 runs ahead of the
         others (lockstep) reads stale values, and the race detector says so. */
      for (int i = L->threads - 1; i >= 0 && !L->failed; --i) {
        fiber* f = &b->fibers[i];
        if (f->state != F_RUNNABLE) continue;
        L->current = f;
        TSAN_SWITCH(f->tsan);
        fiber_switch(&L->scheduler, &f->ctx);
        L->current = NULL;
        ran = 1;
        if (L->failed) break;
        if (f->state == F_WARP) try_complete_warp_op(f);
        else if (f->state == F_DONE) {
          b->live--;
          check_exit(f);
          if (!L->failed && b->live == 0 && b->tensor_allocated)
            fail_block(f, "the block exits with tensor memory allocated (chunk mask 0x%08x of 32 columns each): "
                       "tcgen05.dealloc before the exit", b->tensor_allocated);
        }
        if (!L->failed) try_complete_barrier(b);
        if (!L->failed) try_complete_cluster_sync();
      }
      live += b->live;
    }
    if (L->failed) return 1;
    if (live == 0) return 0;
    if (!ran) {
      report_deadlock();
      return 1;
    }
  }
}

/* ---- the driver's per-function attributes -------------------------------- */

#define MAX_FUNCS 8192 /* every kernel of both renderings, with room */

typedef struct func_rec {
  const void* func;
  xent_emu_func_record r;
} func_rec;

static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static func_rec funcs[MAX_FUNCS];
static int nfuncs;
static xent_emu_device device = {0, XENT_EMU_SMEM_CUDA_OPTIN, 1, 90};

void xent_emu_set_device(xent_emu_device d) {
  pthread_mutex_lock(&driver_lock);
  device = d;
  pthread_mutex_unlock(&driver_lock);
}

xent_emu_device xent_emu_get_device(void) {
  pthread_mutex_lock(&driver_lock);
  const xent_emu_device d = device;
  pthread_mutex_unlock(&driver_lock);
  return d;
}

/* The record of func on the current device, or NULL; under driver_lock. */
static xent_emu_func_record* func_lookup(const void* func) {
  for (int i = 0; i < nfuncs; ++i)
    if (funcs[i].func == func && funcs[i].r.device == device.ordinal) return &funcs[i].r;
  return NULL;
}

/* The same, made on first use (NULL when the table is full). */
static xent_emu_func_record* func_find(const void* func, const char* name) {
  xent_emu_func_record* have = func_lookup(func);
  if (have) return have;
  if (nfuncs == MAX_FUNCS) return NULL;
  func_rec* f = &funcs[nfuncs++];
  memset(f, 0, sizeof *f);
  f->func = func;
  f->r.name = name;
  f->r.device = device.ordinal;
  f->r.max_dynamic = -1;
  return &f->r;
}

int xent_emu_func_set_max_dynamic_smem(const void* func, const char* name, long long bytes) {
  pthread_mutex_lock(&driver_lock);
  xent_emu_func_record* r = func_find(func, name);
  const char* why = NULL;
  char buf[256];
  if (!r) why = "the emulator's function table is full";
  else if (bytes < 0) why = "a negative size";
  else if (r->static_smem + (size_t)bytes > device.smem_optin) {
    snprintf(buf, sizeof buf, "%lld bytes plus the kernel's %zu of static shared memory exceed the device's opt-in "
             "maximum of %zu", bytes, r->static_smem, device.smem_optin);
    why = buf;
  }
  if (!why) {
    r->max_dynamic = bytes;
    r->sets++;
  }
  pthread_mutex_unlock(&driver_lock);
  if (!why) return 0;
  snprintf(message, sizeof message,
           "xent_emu: cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, %lld): %s", name, bytes,
           why);
  return 1;
}

void xent_emu_func_get(const void* func, size_t* static_smem, long long* max_dynamic, int* ptx_version) {
  pthread_mutex_lock(&driver_lock);
  const xent_emu_func_record* r = func_lookup(func);
  if (static_smem) *static_smem = r ? r->static_smem : 0;
  if (max_dynamic) *max_dynamic = r ? r->max_dynamic : -1;
  if (ptx_version) *ptx_version = device.build_arch;
  pthread_mutex_unlock(&driver_lock);
}

int xent_emu_func_records(xent_emu_func_record* out, int cap) {
  pthread_mutex_lock(&driver_lock);
  for (int i = 0; i < nfuncs && i < cap; ++i) out[i] = funcs[i].r;
  const int n = nfuncs;
  pthread_mutex_unlock(&driver_lock);
  return n;
}

void xent_emu_func_reset(void) {
  pthread_mutex_lock(&driver_lock);
  nfuncs = 0;
  pthread_mutex_unlock(&driver_lock);
}

static int check_config(const char* kernel, xent_emu_dim3 grid, xent_emu_dim3 block, size_t dynamic_smem,
                        size_t smem_limit, long long max_dynamic, const xent_emu_device* dev, unsigned cluster) {
  char g[48], b[48];
  format_dim(g, sizeof g, grid);
  format_dim(b, sizeof b, block);
  const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
  const char* why = NULL;
  char buf[256];
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) why = "a zero dimension";
  else if (threads > MAX_THREADS_PER_BLOCK) {
    snprintf(buf, sizeof buf, "%llu threads per block, the limit is %d", threads, MAX_THREADS_PER_BLOCK);
    why = buf;
  } else if (block.z > 64) why = "blockDim.z above 64";
  else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) why = "a grid dimension above the limit";
  else if (max_dynamic >= 0 && dynamic_smem > (size_t)max_dynamic) {
    snprintf(buf, sizeof buf, "%zu bytes of dynamic shared memory, above the kernel's "
             "cudaFuncAttributeMaxDynamicSharedMemorySize of %lld", dynamic_smem, max_dynamic);
    why = buf;
  } else if (max_dynamic < 0 && dynamic_smem > smem_limit) {
    snprintf(buf, sizeof buf, "%zu bytes of dynamic shared memory, the limit is %zu without a raised "
             "cudaFuncAttributeMaxDynamicSharedMemorySize", dynamic_smem, smem_limit);
    why = buf;
  } else if (cluster == 0 || cluster > XENT_EMU_MAX_CLUSTER) {
    snprintf(buf, sizeof buf, "a cluster of %u blocks, the portable limit is %d", cluster, XENT_EMU_MAX_CLUSTER);
    why = buf;
  } else if (grid.x % cluster != 0) {
    snprintf(buf, sizeof buf, "gridDim.x is not a multiple of the cluster's %u blocks", cluster);
    why = buf;
  } else if (cluster > 1 && !dev->cluster_launch) {
    snprintf(buf, sizeof buf, "clusters of %u blocks on a device without cluster launch", cluster);
    why = buf;
  } else if (cluster > 1 && dev->build_arch < 90) {
    snprintf(buf, sizeof buf, "clusters of %u blocks, but the kernel's code was built for compute_%d, which has no "
             "clusters (its cluster calls are the one-block fallback)", cluster, dev->build_arch);
    why = buf;
  }
  if (!why) return 0;
  snprintf(message, sizeof message, "xent_emu: kernel %s: invalid launch configuration grid %s block %s: %s", kernel, g,
           b, why);
  pending_error = 1;
  return 1;
}

/* Launches by cluster size, of every thread: counted atomically, since host
   threads may launch at once. */
static unsigned long long cluster_launches[XENT_EMU_MAX_CLUSTER + 1];

void xent_emu_cluster_launch_counts(unsigned long long counts[XENT_EMU_MAX_CLUSTER + 1]) {
  for (int i = 0; i <= XENT_EMU_MAX_CLUSTER; ++i) counts[i] = __atomic_load_n(&cluster_launches[i], __ATOMIC_RELAXED);
}

static int launch(const char* kernel, const void* func, int warp_size, size_t smem_limit, xent_emu_dim3 grid,
                  xent_emu_dim3 block, size_t dynamic_smem, unsigned cluster, void (*body)(void*), void* ctx);

int xent_emu_launch_cluster(const char* kernel, const void* func, int warp_size, size_t smem_limit,
                            xent_emu_dim3 grid, xent_emu_dim3 block, size_t dynamic_smem, unsigned cluster,
                            void (*body)(void*), void* ctx) {
  const int rc = launch(kernel, func, warp_size, smem_limit, grid, block, dynamic_smem, cluster, body, ctx);
  if (rc == 0 && cluster <= XENT_EMU_MAX_CLUSTER) __atomic_fetch_add(&cluster_launches[cluster], 1, __ATOMIC_RELAXED);
  return rc;
}

/* The fibers' stacks, kept from launch to launch by each host thread: a
   fresh 64 MiB for every launch of 1024 threads cost a page fault per page
   each fiber touched, and the kernels' tests make thousands of launches.
   Freed when the thread exits (a pthread key's destructor). */
static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;
static _Thread_local char* stack_cache;
static _Thread_local size_t stack_cache_bytes;

static void free_stacks(void* p) { free(p); }
static void make_stack_key(void) { pthread_key_create(&stack_key, free_stacks); }

static char* fiber_stacks(size_t bytes) {
  if (bytes <= stack_cache_bytes) {
#if defined(__SANITIZE_ADDRESS__)
    /* A fiber abandoned mid-call (a reported bug) leaves its frames'
       redzones poisoned: clear them for the next launch's fibers. */
    __asan_unpoison_memory_region(stack_cache, stack_cache_bytes);
#endif
    return stack_cache;
  }
  free(stack_cache);
  stack_cache = malloc(bytes);
  stack_cache_bytes = stack_cache ? bytes : 0;
  pthread_once(&stack_key_once, make_stack_key);
  pthread_setspecific(stack_key, stack_cache);
  return stack_cache;
}

static int launch(const char* kernel, const void* func, int warp_size, size_t smem_limit, xent_emu_dim3 grid,
                  xent_emu_dim3 block, size_t dynamic_smem, unsigned cluster, void (*body)(void*), void* ctx) {
  if (pending_error) return 1; /* sticky until collected */
  if (L) {
    fprintf(stderr, "xent_emu: launch of %s from inside a kernel\n", kernel);
    abort();
  }
  pthread_mutex_lock(&driver_lock);
  const xent_emu_device dev = device;
  xent_emu_func_record* rec = func ? func_find(func, kernel) : NULL;
  const long long max_dynamic = rec ? rec->max_dynamic : -1;
  pthread_mutex_unlock(&driver_lock);
  if (check_config(kernel, grid, block, dynamic_smem, smem_limit, max_dynamic, &dev, cluster)) return 1;
  launch_state state;
  memset(&state, 0, sizeof state);
  state.kernel = kernel;
  state.warp_size = warp_size;
  state.smem_limit = smem_limit;
  state.max_dynamic = max_dynamic;
  state.smem_optin = dev.smem_optin;
  state.grid = grid;
  state.block = block;
  state.dynamic_smem = dynamic_smem;
  state.cluster = cluster;
  state.body = body;
  state.ctx = ctx;
  state.threads = (int)(block.x * block.y * block.z);
  state.blocks = calloc(cluster, sizeof *state.blocks);
  state.stacks = fiber_stacks((size_t)cluster * (size_t)state.threads * FIBER_STACK);
  int rc = 0;
  if (!state.blocks || !state.stacks) rc = 1;
  for (unsigned r = 0; r < cluster && !rc; ++r) {
    block_state* b = &state.blocks[r];
    b->fibers = calloc((size_t)state.threads, sizeof *b->fibers);
    /* 16-byte aligned, like the hardware's dynamic shared memory. */
    b->dynamic = aligned_alloc(16, (dynamic_smem + 15) / 16 * 16 + 16);
    if (!b->fibers || !b->dynamic) rc = 1;
  }
  if (rc) {
    snprintf(message, sizeof message, "xent_emu: kernel %s: out of memory for %u x %d fibers", kernel, cluster,
             state.threads);
    pending_error = 1;
  }
  L = &state;
  state.tsan_scheduler = TSAN_CURRENT();
  if (global_checks) global_reset();
  for (unsigned z = 0; z < grid.z && !rc; ++z) {
    for (unsigned y = 0; y < grid.y && !rc; ++y) {
      for (unsigned x = 0; x < grid.x && !rc; x += cluster) rc = run_cluster((xent_emu_dim3){x, y, z});
    }
  }
  for (unsigned r = 0; state.blocks && r < cluster; ++r) {
    free_shared(&state.blocks[r]);
    for (int i = 0; state.blocks[r].fibers && i < state.threads; ++i) TSAN_DESTROY(state.blocks[r].fibers[i].tsan);
    free(state.blocks[r].fibers);
    free(state.blocks[r].dynamic);
    free(state.blocks[r].tensor);
  }
  free(state.blocks);
  L = NULL;
  if (rec) {
    pthread_mutex_lock(&driver_lock);
    if (state.static_max > rec->static_smem) rec->static_smem = state.static_max;
    rec->launches++;
    rec->last_block = block.x;
    pthread_mutex_unlock(&driver_lock);
  }
  return rc;
}

int xent_emu_launch(const char* kernel, const void* func, int warp_size, size_t smem_limit, xent_emu_dim3 grid,
                    xent_emu_dim3 block, size_t dynamic_smem, void (*body)(void*), void* ctx) {
  return launch(kernel, func, warp_size, smem_limit, grid, block, dynamic_smem, 1, body, ctx);
}
