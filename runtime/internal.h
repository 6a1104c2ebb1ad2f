/* Shared inside the runtime: the handle, one call's pointers, error
   reporting, and the backend entry points that api.c routes to. */
#ifndef XENT_INTERNAL_H
#define XENT_INTERNAL_H

#include "xent.h"

struct xent_handle {
  xent_backend_kind kind;
  int device;     /* GPU ordinal */
  int arch;       /* CUDA: SM number (90); HIP: gfx number read as hex (0x90a) */
  xent_backend_kind emulated; /* cpu backend: the rendering it runs (CUDA or HIP) */
  /* One word in the backend's memory: the lowest row with a label outside
     [0, C) since the last xent_check(), or XENT_NO_BAD_ROW. */
  unsigned long long* bad_label_row;
  /* The GEMM library's handle (cuBLASLt or hipBLASLt), made by the first
     fused linear cross entropy call; NULL until then. */
  void* gemm;
};

#define XENT_NO_BAD_ROW (~0ull)

/* One call: the op, its tensors, and what api.c adds. */
typedef struct xent_ce_call {
  xent_op op;
  xent_ce_tensors t;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
  unsigned long long* bad_label_row;
} xent_ce_call;

/* Records the message for xent_last_error() and returns status. */
xent_status xent_fail(xent_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void xent_clear_error(void);

/* Bytes of one element of the accumulation type (weights, lse). */
size_t xent_acc_bytes(xent_dtype dtype);
size_t xent_dtype_bytes(xent_dtype dtype);
const char* xent_dtype_name(xent_dtype dtype);

/* Backends. Each hands api.c its dispatch table (the generated one, or for
   the cpu backend the emulated rendering's) and runs a launcher from it,
   checking the device's architecture and translating errors. They validate
   nothing api.c already validated. */
struct xent_dispatch_entry;
typedef struct xent_table {
  const struct xent_dispatch_entry* entries;
  size_t count;
  const char* target; /* for messages: "cuda", "hip (emulated)", ... */
  /* The specs the table was generated from, by family, ending {NULL, NULL}:
     the "not generated" error names the one to edit. */
  const struct xent_dispatch_spec* specs;
} xent_table;

void xent_cpu_table(const xent_handle* h, xent_table* t);
xent_status xent_cpu_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
void xent_cuda_table(const xent_handle* h, xent_table* t);
xent_status xent_cuda_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
void xent_hip_table(const xent_handle* h, xent_table* t);
xent_status xent_hip_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);

/* One launch of a dispatch entry on the handle's backend. */
xent_status xent_backend_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
/* The handle's entry for a cross-entropy op (xent_ce_lookup on its table);
   NULL with XENT_ERROR_NOT_GENERATED recorded. */
const struct xent_dispatch_entry* xent_ce_find(const xent_handle* h, const xent_ce_desc* d, xent_op op, int has_weights);

/* The fused linear cross entropy's steps (lce_ keys) for a chunk's loss d. */
const struct xent_dispatch_entry* xent_lce_find(const xent_handle* h, const xent_ce_desc* d, int has_weights);

/* xent_ce_run with the call already gathered, reported as fn: every check,
   then the launch. call->bad_label_row NULL records bad labels in the
   handle's word; the linear cross entropy gives each chunk a word of its
   own (its rows counted from the chunk's first). */
xent_status xent_ce_run_call(const char* fn, xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call);

/* Vocabulary-parallel calls (vocab_parallel.c): desc->vocab_shard's checks,
   the workspace with room for the gathered statistics after the launchers'
   `bytes`, and the call itself (its arguments already checked). */
xent_status xent_vocab_check(const char* fn, const xent_ce_desc* desc);
size_t xent_vocab_workspace(const xent_ce_desc* desc, size_t bytes);
xent_status xent_vocab_run(xent_handle* h, const xent_ce_desc* desc, const xent_ce_call* call, size_t launcher_bytes);

/* The bad-label word: allocate (set to XENT_NO_BAD_ROW), read and reset
   (waiting for the device), free. */
xent_status xent_cpu_flag_alloc(xent_handle* h);
xent_status xent_cpu_flag_take(xent_handle* h, unsigned long long* row);
void xent_cpu_flag_free(xent_handle* h);
xent_status xent_cuda_flag_alloc(xent_handle* h);
xent_status xent_cuda_flag_take(xent_handle* h, unsigned long long* row);
void xent_cuda_flag_free(xent_handle* h);
xent_status xent_hip_flag_alloc(xent_handle* h);
xent_status xent_hip_flag_take(xent_handle* h, unsigned long long* row);
void xent_hip_flag_free(xent_handle* h);

/* The fused linear cross entropy's GEMMs on a GPU backend, row-major as
   blas_cpu.h: C[m, n] = alpha * op(A) @ op(B) + beta * C (op transposes
   when ta / tb), A, B and C in `dtype`, computed in its accumulation type;
   bias ([n], dtype, or NULL) added to every row in the GEMM's epilogue. On
   the caller's stream, with `workspace` for the library. cuBLASLt
   (gemm_cuda.c) and hipBLASLt (gemm_hip.c), both loaded at run time. */
typedef struct xent_gemm {
  xent_dtype dtype;
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
xent_status xent_cuda_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                           void* stream);
xent_status xent_hip_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                          void* stream);
/* Frees h->gemm (xent_destroy). */
void xent_cuda_gemm_free(xent_handle* h);
void xent_hip_gemm_free(xent_handle* h);
/* bytes of device memory at p set to zero, on the stream. */
xent_status xent_cuda_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream);
xent_status xent_hip_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream);

/* Fill h->device and h->arch; XENT_ERROR_BACKEND_UNAVAILABLE if not built in
   or no device is present. */
xent_status xent_cuda_open(xent_handle* h);
xent_status xent_hip_open(xent_handle* h);

#endif
