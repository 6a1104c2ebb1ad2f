/* Helpers shared by the C tests and the demo: parse a canonical key back into
   a call, make random inputs, compare with the CPU reference, and move
   buffers to and from the device of a backend. */
#ifndef XENT_TESTUTIL_H
#define XENT_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/xent.h"

/* "bf16" -> XENT_BF16 (the dtype token of a key). Returns 0, or -1. */
int tu_parse_dtype(const char* token, xent_dtype* dtype);

/* splitmix64: a small, well-mixed, reproducible generator; uniform in [0, 1). */
uint64_t tu_next_u64(uint64_t* state);
double tu_uniform(uint64_t* state);

/* "ce_fwd_bwd_bf16_i64_mean" -> op and the desc's dtype/label/reduction
   (rows, classes and inner are kept).
   Returns 0, or -1 for a key this family does not produce. */
int tu_parse_key(const char* key, xent_op* op, xent_ce_desc* desc);

/* Reads column 1 (the keys) of a manifest.tsv; returns the count (or -1) and
   a malloc'd array of malloc'd strings. */
int tu_read_manifest(const char* path, char*** keys);
void tu_free_manifest(char** keys, int count);

/* This process's share of a test sharded by Bazel (a cc_test's
   shard_count): *index of *count from TEST_SHARD_INDEX and
   TEST_TOTAL_SHARDS (0 of 1 unsharded), and the status file touched that
   says the test shards. A shard runs the items i with i % *count == *index.
   Returns 0, or -1 for a malformed pair (printed). */
int tu_test_shard(int* index, int* count);

/* Whether the sanitizer pass's sample (XENT_EMU_SAMPLE) runs a variant: of
   each op and dtype with labels, the i64 mean, i32 none and prob sum (every
   label type and reduction once); of the softmax family, softmax for bf16
   and f32 and log_softmax for f16 and f64 (each op both kinds). */
int tu_sampled(const char* key);

/* Inputs for one call, in host memory, in the descriptor's types and layout. */
typedef struct tu_inputs {
  void* logits;       /* [N*C] */
  void* labels;       /* [N], or [N*C] like logits for XENT_PROB */
  void* weights;      /* [C] accumulation type, or NULL */
  void* dloss;        /* [N] or [1] loss dtype */
  void* grad_bias;    /* [N*C] grad dtype, or NULL */
} tu_inputs;

/* What inputs to make besides random logits and labels. */
enum {
  TU_WEIGHTED = 1,    /* class weights */
  TU_IGNORE_ALL = 2,  /* every label is ignore_index (else about a quarter) */
  TU_BAD_LABELS = 4,  /* some labels outside [0, C): NaN rows, never an out-of-bounds read */
  TU_EXTRAS = 8,      /* also ask for log_prob, softmax, grad_bias and (soft labels) grad_labels */
};

/* The shapes and option mixes every kernel test runs (tests/cases.c). */
typedef struct tu_case {
  int64_t rows, classes, inner;
  int mix;
} tu_case;
extern const tu_case tu_cases[];
extern const int tu_ncases;

enum { TU_NOT_A_KEY = -1, TU_NOT_APPLICABLE = -2 };
/* Fills op and desc for `key` and case c. Returns the TU_* input flags for
   tu_check_call, TU_NOT_A_KEY, or TU_NOT_APPLICABLE (say, f32 outputs for
   f32 logits, or ignore_index for soft labels). */
int tu_case_setup(const tu_case* c, const char* key, xent_op* op, xent_ce_desc* desc);

/* Random logits of magnitude `scale`; hard labels in [0, C) with about a
   quarter set to desc->ignore_index, or soft labels (random distributions,
   a few rows unnormalised); and what `flags` asks for. */
void tu_make_inputs(const xent_ce_desc* d, uint64_t seed, double scale, int flags, tu_inputs* in);
void tu_free_inputs(tu_inputs* in);

/* Relative tolerance for values rounded to dtype and accumulated in its
   accumulation type over `classes` terms. */
double tu_tolerance(xent_dtype dtype, int64_t classes);

/* Max over i of |got[i] - want[i]| / (|want[i]| + atol), NaN-aware: a NaN
   where the other side is not NaN gives +inf. */
double tu_max_error(xent_dtype dtype, const void* got, const double* want, int64_t n, double atol);

/* Device memory for a backend: cudaMalloc for CUDA, malloc for the CPU. */
void* tu_alloc(xent_backend_kind kind, size_t bytes);
void tu_free(xent_backend_kind kind, void* p);
void tu_to_device(xent_backend_kind kind, void* dst, const void* src, size_t bytes);
void tu_to_host(xent_backend_kind kind, void* dst, const void* src, size_t bytes);
/* Device to device on one backend. */
void tu_copy(xent_backend_kind kind, void* dst, const void* src, size_t bytes);
/* Waits for the device (tests only; the library never synchronises). */
void tu_sync(xent_backend_kind kind);
/* Turns the emulator's global-memory race checks on or off for calls on a
   cpu handle (emulated kernels; xent_emu_check_global) and returns the
   previous setting; does nothing for a GPU handle. The checks cost a table
   entry per 2-byte granule touched: the tests turn them on where buffers
   alias (in place). */
int tu_global_race_checks(xent_backend_kind kind, int on);

size_t tu_dtype_bytes(xent_dtype dtype);

/* Runs `op` for desc with the vocabulary split over `ranks` (<= 8) uneven
   slices (a quarter, a single class, the rest), each rank a thread with its
   own handle of `kind` (the cpu backend runs the `emulate` rendering), joined
   by an in-process all-gather. Checks that each rank gathers once when it
   should, gets the same loss bits, the loss and lse of the whole vocabulary,
   and that the slices' gradients make the unsplit reference's. Of
   TU_EXTRAS, grad_bias and grad_labels apply. Returns 0 if all is within
   tolerance, else prints why. */
int tu_check_vocab_parallel(xent_backend_kind kind, xent_backend_kind emulate, xent_op op, const xent_ce_desc* desc,
                            uint64_t seed, int flags, int ranks, const char* name);

/* "sm_bwd_bf16_log_softmax" -> op, dtype and kind (rows, classes and inner
   are kept). Returns 0, or -1 for a key of another family. */
int tu_parse_softmax_key(const char* key, xent_op* op, xent_softmax_desc* desc);

/* Runs a softmax-family call (out of place, then in place) against the CPU
   reference; returns 0 if within tolerance, else prints why. */
int tu_check_softmax(xent_handle* h, xent_op op, const xent_softmax_desc* desc, uint64_t seed, const char* name);

/* Shapes the softmax-family kernel tests run: {rows, classes, inner}. */
extern const int64_t tu_softmax_shapes[][3];
extern const int tu_softmax_nshapes;

/* Every case of tests/cases.c that applies to `key` (either family) on the
   handle's backend, skipping cases of more than max_rows rows. Test names
   are the key, `tag`, and the case; case c uses seed + c. Adds the calls run
   to *runs and returns the failures. */
int tu_check_key(xent_handle* h, const char* key, const char* tag, unsigned seed, int64_t max_rows, int* runs);

/* tu_check_key's cases with the rows on chip asked for
   (xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP, 0)), for the kernels that
   have the on-chip shape: every option mix through the pipelined kernel.
   The class axis last, at most max_classes classes (CUDA: 65536, an f32
   row of them fills a cluster of 8 at two 32 KiB halves a block; HIP:
   4096, a soft-label f32 row's 16 KiB fills its shape, specs/
   cross_entropy.lua) and 128 rows. */
int tu_check_key_on_chip(xent_handle* h, const char* key, const char* tag, unsigned seed, int64_t max_classes,
                         int* runs);

/* One call of `key` (cross entropy with mix 0, PyTorch's defaults, or
   softmax) on rows x C, class axis last, against the CPU reference. Returns
   its failures. */
int tu_check_key_at(xent_handle* h, const char* key, int64_t rows, int64_t C, unsigned seed, const char* tag);
/* The same with the row on chip asked for (a launch that cannot is a
   failure: the call is refused). */
int tu_check_key_on_chip_at(xent_handle* h, const char* key, int64_t rows, int64_t C, unsigned seed, const char* tag);

/* The on-chip shape's shared memory at the CUDA driver's 48 KiB boundary:
   the fused cross entropy and the softmax forward (tu_on_chip_keys), bf16
   and f32, at C = 24,576 and 49,152 (tu_on_chip_boundary), whose requests
   are exactly 48 KiB a block, past the default limit with the kernel's
   static shared memory. Run first by the GPU test (a launch the driver
   refuses shows there before anything else) and by the emulator's
   launch-rules test. Returns the failures; adds the calls to *runs. */
#define TU_ON_CHIP_KEYS 4
extern const char* const tu_on_chip_keys[TU_ON_CHIP_KEYS];
extern const int64_t tu_on_chip_boundary[2];
int tu_check_on_chip_boundary(xent_handle* h, const char* tag, unsigned seed, int* runs);
/* The on-chip shape's pipeline with rows to walk in turn (more rows than
   the device holds clusters): the keys above on min(max_rows, 500) rows of
   C classes (the tables keep rows on chip below 512 rows; C odd, so the
   rows' 16-byte runs start at different elements: CUDA's 20001, HIP's
   12001, whose bf16 rows fit its 32 KiB), then the fused bf16 key on
   min(max_rows, 2048) rows with the row on chip asked for
   (xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP, 0), where the tables would
   take a warp a row). Returns the failures; adds the calls to *runs. */
int tu_check_on_chip_rows(xent_handle* h, const char* tag, unsigned seed, int64_t max_rows, int64_t C, int* runs);

#endif

/* Shared by the call checks (tests/compare.c). */
void* tu_upload(xent_backend_kind kind, const void* host, size_t bytes); /* host may be NULL: allocate only */
void tu_free_tensors(xent_backend_kind kind, const xent_ce_tensors* t);  /* every non-NULL pointer */
/* Prints "FAIL name: what error ..." and returns 1 if err > tol. */
int tu_report(const char* name, const char* what, double err, double tol);
/* Largest |v| over the finite values (a scale for absolute tolerances). */
double tu_max_abs(const double* v, int64_t n);
double tu_subnormal_atol(xent_dtype dtype, double tol);
/* The lowest row xent_check must name (a label outside [0, classes) that is
   not ignore_index, under XENT_INVALID_LABELS_REPORT), or -1. */
int64_t tu_first_bad_row(const xent_ce_desc* desc, const void* labels);
/* 0 if xent_check's `checked` and `message` name bad_row (or report nothing
   for -1); else prints why and returns 1. */
int tu_expect_check(const char* name, xent_status checked, const char* message, int64_t bad_row);
/* Downloaded outputs against the reference of desc (its rows and classes):
   loss and lse; grad and, if not NULL, grad_labels. 0 if within tolerance. */
int tu_compare_loss(const char* name, const xent_ce_desc* desc, const void* loss, const void* lse,
                    const double* want_rows, double want_total, const double* want_lse);
int tu_compare_grad(const char* name, const xent_ce_desc* desc, const void* grad, const double* want_grad,
                    const double* dloss, const void* grad_labels, const double* want_grad_labels);

/* Runs `op` for desc on the handle's backend with inputs made from `seed`
   and `flags` (TU_*), checks loss, lse and grad against the CPU reference,
   and for fwd_bwd also the in-place form. Returns 0 if within tolerance;
   else prints why (prefixed by `name`). */
int tu_check_call(xent_handle* h, xent_op op, const xent_ce_desc* desc, uint64_t seed, int flags, const char* name);
