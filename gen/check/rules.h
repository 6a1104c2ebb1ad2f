/* The rules xentgen --check holds every rendered kernel file to, and the
   syntax-tree helpers they share. Each rule is one file (rule_*.c) and one
   function that walks a translation unit and reports through check_report.

   A rule looks only at code from the rendered file itself and from the
   templates it came from (check_in_scope), never at the system headers. */
#ifndef XENT_GEN_CHECK_RULES_H
#define XENT_GEN_CHECK_RULES_H

#include <clang-c/Index.h>
#include <stddef.h>

typedef struct check_ctx {
  CXTranslationUnit tu;
  const char* target;  /* "cuda" or "hip" */
  const char* file;    /* the rendered file being checked */
  int shared_headers;  /* also check code from the device library (once per run) */
  int findings;
  /* The device library's directory (kernels/) as given, absolute, and with
     its links resolved: its headers are the shared code, and a finding there
     is reported under the name given. */
  const char* headers_given;
  const char* headers;
  const char* headers_real;
  /* The HIP-on-CUDA headers' directory when the HIP rendering is parsed as
     built for NVIDIA (NULL otherwise): the barrier analysis reads their
     functions too, since the wavefront's shuffles synchronise there. */
  const char* hip_on_cuda;
  const char* hip_on_cuda_real; /* the same with its links resolved */
} check_ctx;

/* Prints `where: rule: what` with `where` the cursor's template file and
   line (through #line), and counts the finding. */
void check_report(check_ctx* ctx, CXCursor at, const char* rule, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Whether a cursor's code is the rule's business: from the rendered file,
   or (ctx->shared_headers) from the device library. */
int check_in_scope(const check_ctx* ctx, CXCursor c);

/* Whether the file at path is one of the device library's headers; *rest
   (if asked) is its path below the library's directory. */
int check_in_headers(const check_ctx* ctx, const char* path, const char** rest);

/* Whether a rule's walk should not enter c: a declaration out of scope
   (the system headers' and, after the first file, the shared headers'). */
int check_skip(const check_ctx* ctx, CXCursor c);

/* The expression under any implicit conversions (libclang shows an
   implicit cast as an unexposed expression with one child). */
CXCursor check_strip_implicit(CXCursor c);

/* The width in bits of an integer type, 0 for any other. */
int check_int_bits(CXType t);

/* Whether the expression folds to an integer constant. */
int check_is_constant(CXCursor c);

/* A cursor's name; for a name libclang leaves unresolved (a template's
   dependent name, a property such as threadIdx.x), the last identifier of
   its text. Fills buf. */
const char* check_name(CXCursor c, char* buf, unsigned cap);

/* The name of the function a call expression calls ("" if none). Fills buf. */
const char* check_callee(CXCursor call, char* buf, unsigned cap);

/* The source text of a cursor, its tokens joined by spaces (cut at cap). */
const char* check_text(CXTranslationUnit tu, CXCursor c, char* buf, unsigned cap);

/* The first `max` children of a cursor; returns how many there are (at most max). */
int check_children(CXCursor c, CXCursor* kids, int max);

/* Whether a function declaration is device code (__device__ or __global__). */
int check_is_device_function(CXCursor fn);

/* index-width: every subscript of, and offset to, a pointer is a 64-bit
   integer, and no product or sum of run-time values inside it is computed
   in 32 bits before it is widened. */
void rule_index_width(check_ctx* ctx, CXCursor tu);

/* deterministic: no floating-point atomics; integer atomics only as listed
   (atomicMin of the 64-bit bad-label record). */
void rule_deterministic(check_ctx* ctx, CXCursor tu);

/* graph-safe: host code calls no synchronising or allocating runtime
   function (a launcher must be capturable in a CUDA graph). */
void rule_graph_safe(check_ctx* ctx, CXCursor tu);

/* warp-sync (masks): in the CUDA rendering, no maskless warp shuffle, vote
   or ballot. */
void rule_warp_sync(check_ctx* ctx, CXCursor tu);

/* warp-sync (barriers): every __syncthreads and cluster sync, and every
   call of a function that reaches one, is reached under conditions that
   are uniform across the block (the cluster). */
void rule_barrier_uniform(check_ctx* ctx, CXCursor tu);

/* abi, per kernel file: it defines exactly one launcher,
   xent_<target>_launch_<key>, of the function type xent_launch.h's
   xent_launcher points to. Its name goes to `name` ("" if the check fails). */
void rule_abi_launcher(check_ctx* ctx, CXCursor tu, const char* key, char* name, unsigned cap);

/* abi, across files: the dispatch table declares exactly the `n` launchers
   the kernel files define, each of xent_launcher's type. */
void rule_abi_dispatch(check_ctx* ctx, CXCursor tu, const char* const* defined, size_t n);

#endif
