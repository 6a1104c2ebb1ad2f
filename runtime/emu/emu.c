/* The SIMT emulator's scheduler: fibers, barriers, warp operations, shared
   memory with bounds and race checks. See emu.h. */
#define _GNU_SOURCE
#include "emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

/* Enough for the kernels' locals and the C library calls they make (expf,
   logf); ASan's redzones need more. */
#if defined(__SANITIZE_ADDRESS__)
#define FIBER_STACK (256 * 1024)
#else
#define FIBER_STACK (64 * 1024)
#endif
#define MAX_THREADS_PER_BLOCK 1024
#define MAX_SHARED_ALLOCS 32

typedef enum fiber_state { F_RUNNABLE, F_BARRIER, F_WARP, F_DONE } fiber_state;

typedef struct fiber {
  ucontext_t ctx;
  xent_emu_dim3 tid;
  int linear, warp, lane;
  fiber_state state;
  const char* file; /* where it waits */
  int line;
  /* The posted warp operation and its result. */
  xent_emu_warp_kind kind;
  uint64_t mask, value, result;
  int arg, width;
  /* Synchronisation counts, for the race detector: block barriers passed,
     and warp syncs (__syncwarp) passed. */
  uint32_t bar, ws;
} fiber;

/* Per element of a shared allocation: the last writer and the two most
   recent distinct readers, with their synchronisation counts at the time
   (-1 = none). Two readers, because a writer is usually also the last reader
   of the element it overwrites, which would hide everyone else's read. */
typedef struct access_record {
  int32_t writer, reader, reader2;
  uint32_t wbar, wws, rbar, rws, r2bar, r2ws;
} access_record;

typedef struct shared_alloc {
  const char* name;
  const char* file;
  int line;
  size_t count, elem_size;
  char* base;
  access_record* records;
} shared_alloc;

typedef struct launch_state {
  const char* kernel;
  int warp_size;
  size_t smem_limit;
  xent_emu_dim3 grid, block, block_idx;
  size_t dynamic_smem;
  void (*body)(void*);
  void* ctx;
  fiber* fibers;
  char* stacks;
  int threads;
  fiber* current;
  ucontext_t scheduler;
  int barrier_waiting;
  int live; /* threads of the block that have not exited */
  shared_alloc shared[MAX_SHARED_ALLOCS];
  int shared_count;
  size_t shared_used;
  char* dynamic;
  int failed;
} launch_state;

static _Thread_local launch_state* L;
static _Thread_local int pending_error;
static _Thread_local char message[2048];

static void format_dim(char* buf, size_t cap, xent_emu_dim3 d) { snprintf(buf, cap, "(%u,%u,%u)", d.x, d.y, d.z); }

/* Records an error; the prefix names the kernel, block and (if any) thread. */
static void record_error(const fiber* f, const char* fmt, va_list ap) {
  char where[256] = "";
  if (L) {
    char b[48], t[48];
    format_dim(b, sizeof b, L->block_idx);
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
    swapcontext(&f->ctx, &L->scheduler);
  }
  abort(); /* called outside a launch: a bug in the caller */
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
xent_emu_dim3 xent_emu_block_idx(void) { return self("blockIdx"), L->block_idx; }
xent_emu_dim3 xent_emu_block_dim(void) { return self("blockDim"), L->block; }
xent_emu_dim3 xent_emu_grid_dim(void) { return self("gridDim"), L->grid; }
int xent_emu_warp_size(void) { return self("warpSize"), L->warp_size; }

static void yield_to_scheduler(fiber* f) { swapcontext(&f->ctx, &L->scheduler); }

void xent_emu_syncthreads(const char* file, int line) {
  fiber* f = self("__syncthreads");
  f->state = F_BARRIER;
  f->file = file;
  f->line = line;
  L->barrier_waiting++;
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
  fiber* warp = L->fibers + f->warp * L->warp_size;
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

static void try_complete_barrier(void) {
  if (L->barrier_waiting == 0 || L->barrier_waiting < L->live) return;
  const fiber* first = NULL;
  for (int i = 0; i < L->threads; ++i) {
    fiber* g = &L->fibers[i];
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
  for (int i = 0; i < L->threads; ++i) {
    fiber* g = &L->fibers[i];
    if (g->state == F_BARRIER) {
      g->state = F_RUNNABLE;
      g->bar++;
    }
  }
  L->barrier_waiting = 0;
}

/* A thread exited: nobody may wait for it. */
static void check_exit(fiber* f) {
  if (L->barrier_waiting > 0) {
    for (int i = 0; i < L->threads; ++i) {
      const fiber* g = &L->fibers[i];
      if (g->state != F_BARRIER) continue;
      char t[48];
      format_dim(t, sizeof t, g->tid);
      fail_block(f, "barrier not reached by every thread: this thread exited while thread %s (and %d in all) waits at "
                 "__syncthreads() %s:%d", t, L->barrier_waiting, g->file, g->line);
      return;
    }
  }
  fiber* warp = L->fibers + f->warp * L->warp_size;
  for (int i = 0; i < lanes_in_warp(f->warp); ++i) {
    if (warp[i].state == F_WARP && (warp[i].mask >> f->lane & 1)) {
      try_complete_warp_op(&warp[i]); /* reports the inactive lane */
      return;
    }
  }
}

static void report_deadlock(void) {
  for (int i = 0; i < L->threads; ++i) {
    fiber* g = &L->fibers[i];
    if (g->state != F_WARP) continue;
    fiber* warp = L->fibers + g->warp * L->warp_size;
    for (int j = 0; j < lanes_in_warp(g->warp); ++j) {
      if ((g->mask >> j & 1) && warp[j].state == F_BARRIER) {
        fail_block(g, "deadlock: %s at %s:%d waits for lane %d, which waits at __syncthreads() %s:%d",
                   warp_op_name(g->kind), g->file, g->line, j, warp[j].file, warp[j].line);
        return;
      }
    }
  }
  fail_block(NULL, "deadlock: no thread can make progress");
}

/* ---- shared memory -------------------------------------------------------- */

void* xent_emu_shared(const char* name, const char* file, int line, size_t count, size_t elem_size) {
  self("shared memory");
  for (int i = 0; i < L->shared_count; ++i) {
    shared_alloc* a = &L->shared[i];
    if (a->line == line && strcmp(a->file, file) == 0 && strcmp(a->name, name) == 0) return a->base;
  }
  if (L->shared_count == MAX_SHARED_ALLOCS) xent_emu_fail("more than %d shared arrays", MAX_SHARED_ALLOCS);
  const size_t bytes = count * elem_size;
  if (L->shared_used + bytes > L->smem_limit)
    xent_emu_fail("shared memory per block: %zu bytes (%s[%zu] at %s:%d on top of %zu) exceed the %zu-byte limit",
                  L->shared_used + bytes, name, count, file, line, L->shared_used, L->smem_limit);
  shared_alloc* a = &L->shared[L->shared_count++];
  a->name = name;
  a->file = file;
  a->line = line;
  a->count = count;
  a->elem_size = elem_size;
  /* Garbage, as on hardware: a kernel that reads before writing sees it. */
  a->base = malloc(bytes ? bytes : 1);
  memset(a->base, 0xA5, bytes);
  a->records = malloc((count ? count : 1) * sizeof *a->records);
  for (size_t i = 0; i < count; ++i) a->records[i] = (access_record){-1, -1, -1, 0, 0, 0, 0, 0, 0};
  L->shared_used += bytes;
  return a->base;
}

void* xent_emu_dynamic_shared(size_t* bytes) {
  self("dynamic shared memory");
  if (bytes) *bytes = L->dynamic_smem;
  return L->dynamic;
}

/* Whether an earlier access by thread `who` (with its counts then) happens
   before the current thread's access. */
static int ordered(const fiber* me, int32_t who, uint32_t bar, uint32_t ws) {
  if (who < 0 || who == me->linear) return 1;
  if (me->bar > bar) return 1;
  return who / L->warp_size == me->warp && me->ws > ws;
}

void xent_emu_shared_access(const void* base, int64_t index, int64_t count, const char* name, int is_write) {
  fiber* me = self("shared memory");
  if (index < 0 || index >= count)
    xent_emu_fail("shared array '%s' index %lld is out of range [0, %lld)", name, (long long)index, (long long)count);
  shared_alloc* a = NULL;
  for (int i = 0; i < L->shared_count && !a; ++i) {
    if (L->shared[i].base == base) a = &L->shared[i];
  }
  if (!a) return; /* dynamic shared memory: bounds only */
  access_record* r = &a->records[index];
  if (!ordered(me, r->writer, r->wbar, r->wws)) {
    xent_emu_fail("shared memory race on %s[%lld]: this thread %s it, thread %d wrote it with no __syncthreads() or "
                  "__syncwarp() between", name, (long long)index, is_write ? "writes" : "reads", r->writer);
  }
  if (is_write) {
    if (!ordered(me, r->reader, r->rbar, r->rws))
      xent_emu_fail("shared memory race on %s[%lld]: this thread writes it, thread %d read it with no __syncthreads() "
                    "or __syncwarp() between", name, (long long)index, r->reader);
    if (!ordered(me, r->reader2, r->r2bar, r->r2ws))
      xent_emu_fail("shared memory race on %s[%lld]: this thread writes it, thread %d read it with no __syncthreads() "
                    "or __syncwarp() between", name, (long long)index, r->reader2);
    r->writer = me->linear;
    r->wbar = me->bar;
    r->wws = me->ws;
  } else {
    if (r->reader != me->linear) {
      r->reader2 = r->reader;
      r->r2bar = r->rbar;
      r->r2ws = r->rws;
    }
    r->reader = me->linear;
    r->rbar = me->bar;
    r->rws = me->ws;
  }
}

static void free_shared(void) {
  for (int i = 0; i < L->shared_count; ++i) {
    free(L->shared[i].base);
    free(L->shared[i].records);
  }
  L->shared_count = 0;
  L->shared_used = L->dynamic_smem;
}

/* ---- launching ------------------------------------------------------------ */

static void fiber_main(void) {
  fiber* f = L->current;
  L->body(L->ctx);
  f->state = F_DONE;
  /* uc_link returns to the scheduler. */
}

/* Kept out of run_block: getcontext returns twice, and the compiler may not
   keep a loop's variables in registers across it. */
static void init_fiber(fiber* f, int i) {
  const xent_emu_dim3 b = L->block;
  memset(f, 0, sizeof *f);
  f->linear = i;
  f->tid = (xent_emu_dim3){(unsigned)i % b.x, (unsigned)(i / b.x) % b.y, (unsigned)(i / (b.x * b.y))};
  f->warp = i / L->warp_size;
  f->lane = i % L->warp_size;
  f->state = F_RUNNABLE;
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = L->stacks + (size_t)i * FIBER_STACK;
  f->ctx.uc_stack.ss_size = FIBER_STACK;
  f->ctx.uc_link = &L->scheduler;
  makecontext(&f->ctx, fiber_main, 0);
}

static int run_block(void) {
  for (int i = 0; i < L->threads; ++i) init_fiber(&L->fibers[i], i);
  L->barrier_waiting = 0;
  L->live = L->threads;
  free_shared();
  memset(L->dynamic, 0xA5, L->dynamic_smem);
  for (;;) {
    int ran = 0;
    /* Highest thread first: code that assumes lane 0 runs ahead of the
       others (lockstep) reads stale values, and the race detector says so. */
    for (int i = L->threads - 1; i >= 0 && !L->failed; --i) {
      fiber* f = &L->fibers[i];
      if (f->state != F_RUNNABLE) continue;
      L->current = f;
      swapcontext(&L->scheduler, &f->ctx);
      L->current = NULL;
      ran = 1;
      if (L->failed) break;
      if (f->state == F_WARP) try_complete_warp_op(f);
      else if (f->state == F_DONE) {
        L->live--;
        check_exit(f);
      }
      if (!L->failed) try_complete_barrier();
    }
    if (L->failed) return 1;
    if (L->live == 0) return 0;
    if (!ran) {
      report_deadlock();
      return 1;
    }
  }
}

static int check_config(const char* kernel, xent_emu_dim3 grid, xent_emu_dim3 block, size_t dynamic_smem,
                        size_t smem_limit) {
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
  else if (dynamic_smem > smem_limit) {
    snprintf(buf, sizeof buf, "%zu bytes of dynamic shared memory, the limit is %zu", dynamic_smem, smem_limit);
    why = buf;
  }
  if (!why) return 0;
  snprintf(message, sizeof message, "xent_emu: kernel %s: invalid launch configuration grid %s block %s: %s", kernel, g,
           b, why);
  pending_error = 1;
  return 1;
}

int xent_emu_launch(const char* kernel, int warp_size, size_t smem_limit, xent_emu_dim3 grid, xent_emu_dim3 block,
                    size_t dynamic_smem, void (*body)(void*), void* ctx) {
  if (pending_error) return 1; /* sticky until collected */
  if (L) {
    fprintf(stderr, "xent_emu: launch of %s from inside a kernel\n", kernel);
    abort();
  }
  if (check_config(kernel, grid, block, dynamic_smem, smem_limit)) return 1;
  launch_state state;
  memset(&state, 0, sizeof state);
  state.kernel = kernel;
  state.warp_size = warp_size;
  state.smem_limit = smem_limit;
  state.grid = grid;
  state.block = block;
  state.dynamic_smem = dynamic_smem;
  state.body = body;
  state.ctx = ctx;
  state.threads = (int)(block.x * block.y * block.z);
  state.fibers = calloc((size_t)state.threads, sizeof *state.fibers);
  state.stacks = malloc((size_t)state.threads * FIBER_STACK);
  state.dynamic = malloc(dynamic_smem ? dynamic_smem : 1);
  L = &state;
  int rc = 0;
  if (!state.fibers || !state.stacks || !state.dynamic) {
    snprintf(message, sizeof message, "xent_emu: kernel %s: out of memory for %d fibers", kernel, state.threads);
    pending_error = 1;
    rc = 1;
  }
  for (unsigned z = 0; z < grid.z && !rc; ++z) {
    for (unsigned y = 0; y < grid.y && !rc; ++y) {
      for (unsigned x = 0; x < grid.x && !rc; ++x) {
        state.block_idx = (xent_emu_dim3){x, y, z};
        rc = run_block();
      }
    }
  }
  free_shared();
  free(state.fibers);
  free(state.stacks);
  free(state.dynamic);
  L = NULL;
  return rc;
}
