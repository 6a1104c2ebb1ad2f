/* The SIMT emulator's core (C): runs a kernel's threads as cooperative fibers
 * (ucontext) on the calling CPU thread, one block at a time, and implements
 * the points where GPU threads meet: block barriers, warp shuffles, votes and
 * __syncwarp. Lanes are never run in lockstep: a thread runs until it meets
 * one of those points, so code that relies on implicit warp synchrony sees
 * what it would see on Volta and later (and the shared-memory race detector
 * says so).
 *
 * It reports, naming kernel, block and thread: a barrier that not every
 * thread reaches, barriers at different sites (divergence), a warp operation
 * whose mask names a lane that has exited or waits elsewhere, a shared-memory
 * index out of range, a shared-memory race (an access not ordered after
 * another thread's by __syncthreads or __syncwarp), when asked a
 * global-memory race (xent_emu_check_global), and launch configurations
 * that the hardware would refuse.
 *
 * Thread-block clusters (sm_90): the blocks of a cluster run together, meet
 * at cluster syncs, and read and write each other's shared memory
 * (distributed shared memory). It also reports a cluster sync that not every
 * thread of the cluster reaches, an access to another block's shared memory
 * not ordered by a cluster sync, and one to a block that has exited. The
 * C++ side that kernels see is xent_emu.h. */
#ifndef XENT_EMU_H
#define XENT_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xent_emu_dim3 {
  unsigned x, y, z;
} xent_emu_dim3;

/* Shared memory per block the launch may use: CUDA's default (48 KiB without
   an opt-in attribute) and the LDS of AMD's CDNA GPUs (64 KiB). */
#define XENT_EMU_SMEM_CUDA (48u * 1024u)
#define XENT_EMU_SMEM_HIP (64u * 1024u)

/* Blocks per cluster: the portable limit of sm_90. */
#define XENT_EMU_MAX_CLUSTER 8
/* Shared memory per block with the opt-in attribute on sm_90 (227 KiB). */
#define XENT_EMU_SMEM_CUDA_OPTIN (227u * 1024u)

/* Runs body(ctx) in every thread of every block. `func` identifies the
   kernel function (its address) for the driver's per-function attributes
   below; smem_limit is the shared memory per block without an opt-in.
   Returns 0, or non-zero with xent_emu_last_message() describing the first
   error. After an error that has not been collected by
   xent_emu_last_error(), launches do nothing (as a sticky device error). */
int xent_emu_launch(const char* kernel, const void* func, int warp_size, size_t smem_limit, xent_emu_dim3 grid,
                    xent_emu_dim3 block, size_t dynamic_smem, void (*body)(void* ctx), void* ctx);

/* The same with clusters of `cluster` blocks along x (gridDim.x must be a
   multiple): the blocks of a cluster are co-scheduled. */
int xent_emu_launch_cluster(const char* kernel, const void* func, int warp_size, size_t smem_limit,
                            xent_emu_dim3 grid, xent_emu_dim3 block, size_t dynamic_smem, unsigned cluster,
                            void (*body)(void*), void* ctx);

/* ---- the driver's launch rules (CUDA) ---------------------------------------
   What the CUDA driver checks at launch, beyond the block and grid limits,
   as the emulator holds the CUDA rendering's launches to them:
   - static plus dynamic shared memory above smem_limit (48 KiB) only once
     the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize was raised;
     then the dynamic bytes at most that attribute, and the attribute plus
     the kernel's static shared memory at most the device's opt-in maximum;
   - a cluster launch only on a device that has them, and only of code built
     for sm_90 or later: code from compute_80 PTX, JIT-compiled for an H100,
     has the pre-cluster fallback compiled in (every block its own cluster).
   The emulated device: an H100 running an sm_90 build unless a test says
   otherwise (device 0). Process-wide: a test that sets another device
   (another ordinal) stands for a machine whose current GPU changed. */
typedef struct xent_emu_device {
  int ordinal;        /* cudaGetDevice: attributes are kept per function and device */
  size_t smem_optin;  /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
  int cluster_launch; /* cudaDevAttrClusterLaunch */
  int build_arch;     /* the kernels' code version (cudaFuncAttributes.ptxVersion): 80, 90, ... */
} xent_emu_device;
void xent_emu_set_device(xent_emu_device d);
xent_emu_device xent_emu_get_device(void);

/* cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize,
   bytes): recorded for the function; refused (non-zero, the message set)
   when bytes is negative or, with the static shared memory the function is
   known to use, above the opt-in maximum. */
int xent_emu_func_set_max_dynamic_smem(const void* func, const char* name, long long bytes);
/* cudaFuncGetAttributes: the static shared memory the function's blocks
   have used so far (0 before its first launch), the attribute above (-1:
   never set) and the code version. */
void xent_emu_func_get(const void* func, size_t* static_smem, long long* max_dynamic, int* ptx_version);

/* What the stand-in recorded, per function and device that was set or
   launched: tests
   read it to see what a launcher asked of the driver. */
typedef struct xent_emu_func_record {
  const char* name;
  int device;               /* the ordinal */
  long long max_dynamic;    /* the attribute's value, -1 if never set */
  unsigned long long sets;  /* calls that set it */
  unsigned long long launches; /* launches that passed the configuration checks */
  unsigned last_block;      /* threads a block (x) of the last of them: which launch shape ran */
  size_t static_smem;       /* the most static shared memory a block used */
} xent_emu_func_record;
/* Copies up to cap records, returns how many there are. */
int xent_emu_func_records(xent_emu_func_record* out, int cap);
/* Forgets every function's attributes (a fresh process, as far as the
   driver is concerned). */
void xent_emu_func_reset(void);

/* How many cluster launches have completed so far, by blocks per cluster
   (counts[k], k = 1..XENT_EMU_MAX_CLUSTER): tests use it to see that a
   clustered path ran. */
void xent_emu_cluster_launch_counts(unsigned long long counts[XENT_EMU_MAX_CLUSTER + 1]);

/* A launcher's refusal of a launch it will not make (a launch shape the
   kernel cannot take, as a GPU would refuse it): the message names the
   kernel and why; returns the launcher's non-zero status. No launch ran,
   so no error is left pending. */
int xent_emu_refuse_launch(const char* kernel, const char* why);

/* Returns the pending error code (0 if none) and clears it. */
int xent_emu_last_error(void);
/* The message of the last error ("" if none since the process started). */
const char* xent_emu_last_message(void);

/* The calling fiber's coordinates. */
xent_emu_dim3 xent_emu_thread_idx(void);
xent_emu_dim3 xent_emu_block_idx(void);
xent_emu_dim3 xent_emu_block_dim(void);
xent_emu_dim3 xent_emu_grid_dim(void);
int xent_emu_warp_size(void);
/* The block's rank in its cluster, and the blocks per cluster (1 without). */
unsigned xent_emu_cluster_rank(void);
unsigned xent_emu_cluster_size(void);

/* A cluster-wide barrier at file:line (cooperative_groups' cluster.sync()):
   every thread of every block of the cluster. It orders shared-memory
   accesses across the cluster, and within each block as __syncthreads. */
void xent_emu_cluster_sync(const char* file, int line);

/* __syncthreads() at file:line. */
void xent_emu_syncthreads(const char* file, int line);

/* fence.proxy.async by the current thread: its shared-memory stores before
   it may be read by the tensor cores (xent_emu_shared_async_n's products
   check that each generic store they read was followed by one). */
void xent_emu_proxy_fence(void);

/* An mbarrier's wait at file:line, every thread of the block at it: the
   threads leave together, but it orders none of their accesses (a
   __syncthreads() does); what it orders is the asynchronous copies' bytes
   landed (xent_emu_shared_landed). */
void xent_emu_mbarrier_wait(const char* file, int line);

/* __syncthreads_or(p) at file:line: the barrier, and whether p was nonzero
   in any thread of the block (the same answer in all of them). */
int xent_emu_syncthreads_or(int p, const char* file, int line);

typedef enum xent_emu_warp_kind {
  XENT_EMU_SHFL_IDX,
  XENT_EMU_SHFL_UP,
  XENT_EMU_SHFL_DOWN,
  XENT_EMU_SHFL_XOR,
  XENT_EMU_VOTE_ALL,
  XENT_EMU_VOTE_ANY,
  XENT_EMU_VOTE_BALLOT,
  XENT_EMU_SYNCWARP
} xent_emu_warp_kind;

/* One warp-wide operation. mask: the lanes that take part (all lanes of the
   warp for HIP's maskless forms: pass XENT_EMU_FULL_MASK). For shuffles,
   `value` is the caller's 8 bytes and `arg` the lane, delta or lane mask;
   for votes, `value` holds the predicate. Returns the shuffled bytes, the
   vote or the ballot. */
#define XENT_EMU_FULL_MASK (~(uint64_t)0)
uint64_t xent_emu_warp_op(xent_emu_warp_kind kind, uint64_t mask, uint64_t value, int arg, int width,
                          const char* file, int line);

/* Shared memory of the current block: the allocation named `name` at
   `site`, made by the first thread that reaches it and found by the others.
   Counts against the launch's shared-memory limit. */
void* xent_emu_shared(const char* name, const char* site_file, int site_line, size_t count, size_t elem_size);
/* The dynamic shared memory passed at launch (NULL if none). */
void* xent_emu_dynamic_shared(size_t* bytes);
/* The same, bounds- and race-checked as `count` elements of elem_size bytes
   (xent_emu_shared_access applies to it). A kernel may view it with
   several element types: the race records are in the first view's units,
   and an access through another covers the records of its bytes. */
void* xent_emu_dynamic_shared_checked(const char* name, size_t elem_size, size_t* count);
/* The block of rank `rank`'s copy of this block's shared allocation at
   `base` (cooperative_groups' cluster.map_shared_rank). */
void* xent_emu_cluster_shared(const void* base, unsigned rank);

/* Race bookkeeping for element `index` of the shared allocation `base`
   (returned by xent_emu_shared): reports an access that another thread's
   access does not happen before. */
void xent_emu_shared_access(const void* base, int64_t index, int64_t count, const char* name, int is_write);

/* An asynchronous access to that element begins (begin = 1, at its issue,
   checked as a write for a copy and a read for a product is) or completes
   (0, at its wait): a copy into it by this thread (a tensor copy,
   kernels/device/tensor_copy.h) or a tensor-core product that reads it
   (wgmma, warpgroup_mma.h; XENT_EMU_ASYNC_COMMITTED_PRODUCT: tcgen05's,
   whose read is not recorded as the issuer's, since the wait for its
   commit's mbarrier orders it before every waiting thread's later write).
   While one is in flight, any access to a copy's element and any write to
   a product's is reported, whatever barriers come between: the hardware
   may land or read it at any time before the wait. */
enum { XENT_EMU_ASYNC_COPY = 0, XENT_EMU_ASYNC_PRODUCT = 1, XENT_EMU_ASYNC_COMMITTED_PRODUCT = 2 };
void xent_emu_shared_async(const void* base, int64_t index, int64_t count, const char* name, int kind, int begin);
/* The same for n elements of one array (index[0..n)), the array looked up
   once: the tensor cores' operands, a tensor copy's box. */
void xent_emu_shared_async_n(const void* base, const int64_t* index, int n, int64_t count, const char* name, int kind,
                             int begin);
/* n elements of one array written by an asynchronous copy that has landed:
   ordered before every access after the wait for its mbarrier (which the
   model's block-wide wait puts every thread after). */
void xent_emu_shared_landed(const void* base, const int64_t* index, int n, int64_t count, const char* name);
/* Accesses to n elements of one array, checked as xent_emu_shared_access's;
   is_write may also be XENT_EMU_PRODUCT_READ: the tensor cores' read of an
   operand, checked as a read but not recorded (the wait for their commit
   orders it before every thread's later write). */
enum { XENT_EMU_PRODUCT_READ = 2 };
void xent_emu_shared_accesses(const void* base, const int64_t* index, int n, int64_t count, const char* name,
                              int is_write);

/* sm_100's tensor memory of the current block: 128 lanes x 512 columns of
   32 bits, apart from its shared memory, garbage at the block's start;
   cell (lane, column) at [lane * XENT_EMU_TMEM_COLUMNS + column]. */
#define XENT_EMU_TMEM_LANES 128
#define XENT_EMU_TMEM_COLUMNS 512
uint32_t* xent_emu_tensor_memory(void);
/* tcgen05.alloc of `columns` (a power of two from 32 to 512): the first
   free run of them, at a multiple of 32 columns; its first column. Reports
   a bad count, an allocation after the block relinquished its permit, and
   one that cannot be met (a GPU would wait for a free that never comes).
   A block that exits with columns allocated is reported. */
int xent_emu_tensor_alloc(int columns);
void xent_emu_tensor_relinquish(void);
/* tcgen05.dealloc: reports columns not allocated so, or written by a
   product in flight. */
void xent_emu_tensor_free(int column, int columns);
/* Tensor-core products that write columns [column, column + columns) of
   every lane: delta 1 at their issue, -1 at their completion. Reports
   columns not allocated, and an issue that a thread's earlier load of the
   columns is not ordered before (by __syncthreads or __syncwarp). */
void xent_emu_tensor_product(int column, int columns, int delta);
/* A read of those columns (tcgen05.ld, `what`): reports columns not
   allocated, written by a product in flight, or by products whose
   completion the reading thread is not ordered after. */
void xent_emu_tensor_read(int column, int columns, const char* what);

/* Global-memory race checks, for the calling thread's launches (off by
   default: they keep a record per 2-byte granule touched, so tests turn
   them on where buffers alias, as a gradient written over its logits).
   While on, every global access a kernel reports through
   xent_emu_global_access (xent_device.h's XENT_LD and XENT_ST) is checked
   against the other threads' accesses in the same launch: a store and a
   load, or two stores, of the same bytes by two threads are a race unless
   the first happens before the second, by __syncthreads (same block),
   __syncwarp (same warp) or a cluster sync (same cluster). Shuffles and
   votes order no memory, and blocks of different clusters are never
   ordered within a launch. Returns the previous setting. */
int xent_emu_check_global(int on);
/* Also, checks or not: an access of 2, 4, 8 or 16 bytes off that alignment
   is an error, as it is a fault on a GPU. */
void xent_emu_global_access(const void* p, size_t bytes, int is_write, const char* file, int line);

/* Reports an error at the current thread and abandons the launch (does not
   return). */
void xent_emu_fail(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
