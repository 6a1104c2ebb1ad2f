/* The backend interface: all that the layers above (api.c, linear_ce.c,
   vocab_parallel.c, nccl.c) ask of a backend, as one table of functions per
   backend. backend_cpu.c defines xent_backend_cpu; backend_cuda.c and
   backend_hip.c define xent_backend_cuda and xent_backend_hip, built into
   their plugins (plugin.h) or linked in. A handle points at its backend's
   table; nothing above this layer asks which backend it is, only what its
   table holds. */
#ifndef XENT_BACKEND_H
#define XENT_BACKEND_H

#include "runtime/base/internal.h"
/* The launchers' arguments (xent_ce_args, xent_softmax_args). */
#include "xent_launch.h"

/* The collective library a backend's vocabulary-parallel calls can use
   (nccl.c loads it). */
typedef enum xent_collective {
  XENT_COLLECTIVE_NONE, /* the caller gives vocab_shard->all_gather */
  XENT_COLLECTIVE_NCCL,
  XENT_COLLECTIVE_RCCL,
} xent_collective;

typedef struct xent_backend {
  xent_backend_kind kind; /* what xent_handle_backend() reports */
  const char* name;       /* for messages: "cpu", "cuda", "hip" */
  /* Fill h->device and h->arch; XENT_ERROR_BACKEND_UNAVAILABLE where the
     backend is not built in or finds no device. */
  xent_status (*open)(xent_handle* h);
  /* The dispatch table: the generated one, or the emulated rendering's. */
  void (*table)(const xent_handle* h, xent_table* t);
  /* One launcher of the table on the caller's stream, the device's
     architecture checked and errors translated. It validates nothing the
     layers above validated. */
  xent_status (*launch)(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
  /* The bad-label word: allocate (set to XENT_NO_BAD_ROW), read and reset,
     free. flag_take is the backend's one wait for the device: after every
     stream's work (stream XENT_WHOLE_DEVICE, xent_check), or in the order
     of one stream, waiting for that stream alone (xent_check_stream). */
  xent_status (*flag_alloc)(xent_handle* h);
  xent_status (*flag_take)(xent_handle* h, const char* fn, void* stream, unsigned long long* row);
  void (*flag_free)(xent_handle* h);
  /* The fused linear cross entropy's GEMM (xent_gemm) on the backend's
     memory, with `workspace` (gemm_workspace bytes of the caller's) for the
     library; gemm_free frees the library's handle at xent_destroy (NULL:
     nothing to free). Every backend takes A and B in one dtype and C in
     theirs or, for f16/bf16 A and B, in f32 (internal.h, xent_gemm). */
  xent_status (*gemm)(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                      void* stream);
  void (*gemm_free)(xent_handle* h);
  size_t gemm_workspace;
  /* Where not NULL and native(h) says so, a cross-entropy or softmax launch
     runs as this backend's own code instead of the table's kernel, with the
     same arguments (the cpu backend unless it emulates a GPU rendering).
     The table's entry is still looked up first: a variant a spec does not
     generate is missing here too. */
  int (*native)(const xent_handle* h);
  xent_status (*native_ce)(const xent_ce_desc* d, xent_op op, const xent_ce_args* args);
  xent_status (*native_softmax)(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* args);
  /* bytes of the backend's memory at p set to zero, on the stream. */
  xent_status (*zero)(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream);
  xent_collective collective;
} xent_backend;

/* flag_take's stream for "every stream on the device": an address no GPU
   runtime gives a stream. */
#define XENT_WHOLE_DEVICE ((void*)~(uintptr_t)0)

extern const xent_backend xent_backend_cpu;

/* The GEMM library's workspace on a GPU backend: what cuBLASLt asks for on
   Hopper (32 MiB) for its fastest kernels. */
#define XENT_GPU_GEMM_WORKSPACE ((size_t)32 << 20)

/* The GPU backend of each kind, one of three ways, chosen at link time:
   - linked in: backend_<name>.c itself (the GPU tests' static libraries);
   - as its plugin: backend_<name>_plugin.c loads libxent_<name>.so
     (plugin_load.c), libxent's way;
   - absent: backend_<name>_absent.c, in a library built from a project's
     own specs without that backend (gen/library.bzl), which must not pick
     up xent's plugin with other kernels.
   XENT_ERROR_BACKEND_UNAVAILABLE saying why where there is none. */
xent_status xent_cuda_backend(const xent_backend** out);
xent_status xent_hip_backend(const xent_backend** out);

/* The table of GPU backend NAME (cuda, hip) over its entry points
   xent_NAME_* below, and its linked-in xent_NAME_backend. */
#define XENT_GPU_BACKEND(NAME, KIND, COLLECTIVE)                  \
  extern const xent_backend xent_backend_##NAME;                  \
  xent_status xent_##NAME##_backend(const xent_backend** out) {   \
    *out = &xent_backend_##NAME;                                  \
    return XENT_OK;                                               \
  }                                                               \
  const xent_backend xent_backend_##NAME = {     \
      .kind = KIND,                              \
      .name = #NAME,                             \
      .open = xent_##NAME##_open,                \
      .table = xent_##NAME##_table,              \
      .launch = xent_##NAME##_launch,            \
      .flag_alloc = xent_##NAME##_flag_alloc,    \
      .flag_take = xent_##NAME##_flag_take,      \
      .flag_free = xent_##NAME##_flag_free,      \
      .gemm = xent_##NAME##_gemm,                \
      .gemm_free = xent_##NAME##_gemm_free,      \
      .gemm_workspace = XENT_GPU_GEMM_WORKSPACE, \
      .zero = xent_##NAME##_zero,                \
      .collective = COLLECTIVE,                  \
  }

/* The entry points the tables hold, one set per backend (the GEMMs live in
   gemm_cuda.c and gemm_hip.c, apart from the rest of their backend). */
xent_status xent_cuda_open(xent_handle* h);
void xent_cuda_table(const xent_handle* h, xent_table* t);
xent_status xent_cuda_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
xent_status xent_cuda_flag_alloc(xent_handle* h);
xent_status xent_cuda_flag_take(xent_handle* h, const char* fn, void* stream, unsigned long long* row);
void xent_cuda_flag_free(xent_handle* h);
xent_status xent_cuda_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                           void* stream);
void xent_cuda_gemm_free(xent_handle* h);
xent_status xent_cuda_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream);

xent_status xent_hip_open(xent_handle* h);
void xent_hip_table(const xent_handle* h, xent_table* t);
xent_status xent_hip_launch(xent_handle* h, const struct xent_dispatch_entry* e, const void* args);
xent_status xent_hip_flag_alloc(xent_handle* h);
xent_status xent_hip_flag_take(xent_handle* h, const char* fn, void* stream, unsigned long long* row);
void xent_hip_flag_free(xent_handle* h);
xent_status xent_hip_gemm(xent_handle* h, const char* fn, const xent_gemm* g, void* workspace, size_t workspace_bytes,
                          void* stream);
void xent_hip_gemm_free(xent_handle* h);
xent_status xent_hip_zero(const xent_handle* h, const char* fn, void* p, size_t bytes, void* stream);

#endif
