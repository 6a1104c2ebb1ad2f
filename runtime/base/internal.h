/* Shared inside the runtime: the handle, one call's pointers, error
   reporting, the dispatch table a backend hands up and the GEMM it runs
   (backend.h is the interface itself). */
#ifndef XENT_INTERNAL_H
#define XENT_INTERNAL_H

#include "runtime/xent.h"

struct xent_backend;
struct xent_handle {
  const struct xent_backend* backend; /* backend.h: the table of its functions */
  int device;     /* GPU ordinal */
  int arch;       /* CUDA: SM number (90); HIP: gfx number read as hex (0x90a) */
  xent_backend_kind emulated; /* cpu backend: the GPU rendering it emulates (CUDA, HIP), or CPU: none */
  /* Where the fused linear cross entropy's ON_CHIP plan runs here, which
     passes: 90, sm_90a's (an sm_90 GPU with the kernels' sm_90a machine
     code, or the emulated CUDA rendering); 100, the tcgen05 ones (an
     sm_100 GPU with sm_100a code, sm_100 or sm_103 with sm_100f code, or
     the emulated rendering of an sm_100 build: xent_emu_device.build_arch);
     0, none. */
  int on_chip;
  /* One word in the backend's memory: the lowest row with a label outside
     [0, C) since the last xent_check(), or XENT_NO_BAD_ROW. */
  unsigned long long* bad_label_row;
  /* The GEMM library's handle (cuBLASLt or hipBLASLt), made by the first
     fused linear cross entropy call; NULL until then. */
  void* gemm;
  /* xent_set_row_shape: threads a row (0: the block) in blocks of
     row_threads; row_threads 0: the tune tables' shapes. */
  int row_group;
  int row_threads;
  /* xent_set_column_slices: 0 the runtime's choice, else at most this many. */
  int column_slices;
  /* Threads the device keeps resident (SMs or CUs times their threads; 0 on
     the cpu backend): what a strided call's rows must fill
     (runtime/ops/column_split.c). */
  int64_t resident_threads;
};

#define XENT_NO_BAD_ROW (~0ull)
/* The most slices xent_set_column_slices takes. */
#define XENT_MAX_COLUMN_SLICES 64

/* One call: the op, its tensors, and what api.c adds. */
typedef struct xent_ce_call {
  xent_op op;
  xent_ce_tensors t;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
  unsigned long long* bad_label_row;
  int row_group, row_threads; /* the handle's xent_set_row_shape */
  void* shard_records;        /* xent_ce_shard_records: the first pass alone, into here */
} xent_ce_call;

/* Records the message for xent_last_error() and returns status. */
xent_status xent_fail(xent_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void xent_clear_error(void);

/* Bytes of one element of the accumulation type (weights, lse), of one of
   the dtype itself, and its name (dtype.c). */
size_t xent_acc_bytes(xent_dtype dtype);
size_t xent_dtype_bytes(xent_dtype dtype);
const char* xent_dtype_name(xent_dtype dtype);

/* One row of a dispatch table's key schema (xent_dispatch_<target>.c's
   xent_<target>_dispatch_axes, written by xentgen from gen/lua/dsl.lua):
   family, key prefix, axis, "type" or "option", and the axis's values
   separated by spaces. A table's rows end with a row of NULLs. */
enum { XENT_AXIS_FAMILY, XENT_AXIS_PREFIX, XENT_AXIS_NAME, XENT_AXIS_KIND, XENT_AXIS_VALUES, XENT_AXIS_FIELDS };
typedef const char* const xent_axis_row[XENT_AXIS_FIELDS];

/* A backend's dispatch table (backend.h, table): the generated one, or for
   the cpu backend the emulated rendering's. */
struct xent_dispatch_entry;
typedef struct xent_table {
  const struct xent_dispatch_entry* entries;
  size_t count;
  const char* target; /* for messages: "cuda", "hip (emulated)", ... */
  /* The specs the table was generated from, by family, ending {NULL, NULL}:
     the "not generated" error names the one to edit. */
  const struct xent_dispatch_spec* specs;
  /* How the table's keys are made (runtime/dispatch builds a call's keys
     from these rows); NULL or no rows for a table with no kernels. */
  const xent_axis_row* axes;
} xent_table;

/* One of the fused linear cross entropy's GEMMs (backend.h, gemm),
   row-major as blas_cpu.h: C[m, n] = alpha * op(A) @ op(B) + beta * C (op
   transposes when ta / tb), computed in B's accumulation type; bias ([n],
   in B's dtype, or NULL) added to every row in the GEMM's epilogue, f16,
   bf16 or f32 only: the linear cross entropy adds an f64 bias by its BIAS
   step, the one path its f64 calls have run on a GPU, and the cpu backend
   refuses one so that the CPU tests hold every caller to that. A and B
   share a dtype; C has theirs or, for f16/bf16 A and B, f32 (the f32
   gradients of f16/bf16 inputs, and an f16/bf16 grad_weight's f32 sum over
   the chunks), as cuBLASLt (gemm_cuda.c) and hipBLASLt (gemm_hip.c), both
   loaded at run time, and the cpu backend's (blas_cpu.c) take them. */
typedef struct xent_gemm {
  xent_dtype a_dtype, b_dtype, c_dtype;
  int ta, tb;
  int64_t m, n, k;
  double alpha, beta;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  const void* bias;
} xent_gemm;

#endif
