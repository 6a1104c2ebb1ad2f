/* The ops layer: each call the API validated (runtime/api), run over the
   handle's kernels. Nothing here validates again what the API checked: a
   chunk of the fused linear cross entropy goes straight to its launch. */
#ifndef XENT_OPS_H
#define XENT_OPS_H

#include <stddef.h>

#include "runtime/base/internal.h"

/* Cross entropy (ce.c). The workspace a call needs: the launchers' alone,
   and with a vocabulary-parallel call's gathered statistics. */
size_t xent_ce_launcher_workspace(const xent_ce_desc* d, xent_op op);
size_t xent_ce_op_workspace(const xent_handle* h, const xent_ce_desc* d, xent_op op);
/* A validated call: the vocabulary-parallel path, or the handle's kernel
   for it (XENT_ERROR_NOT_GENERATED naming the spec where there is none).
   call->bad_label_row NULL records bad labels in the handle's word. */
xent_status xent_ce_op(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call);
/* grad *= dloss, where the factor is not 1 (xent_ce_scale_grad): the fused
   variant's launcher, asked to rescale. */
xent_status xent_ce_scale_op(xent_handle* h, const xent_ce_desc* d, const void* dloss, void* grad, void* stream);

/* Vocabulary-parallel calls (vocab_parallel.c): desc->vocab_shard's checks
   (the API's, for desc), the workspace with room for the gathered
   statistics after the launchers' `bytes`, the kernels of an op (found
   once: the fused linear cross entropy's chunks share them; `uses` as
   dispatch.h's XENT_USES_*), and a call run with them. */
xent_status xent_vocab_check(const char* fn, const xent_ce_desc* desc);
size_t xent_vocab_workspace(const xent_ce_desc* desc, size_t bytes);
/* One rank's records of a vocabulary-parallel call (xent_ce_shard_records):
   0 where the call gathers nothing (a hard-label backward from the lse). */
size_t xent_vocab_records_bytes(const xent_ce_desc* desc, xent_op op, int uses);
/* Whether a call of op gathers records (its forward pass, or a gradient
   that needs more than the lse: soft labels' sum of a, wide records' E_p[z]),
   and where they start in its workspace: after the launchers' bytes,
   8-byte aligned. The class axis in slices (below) lays out the same. */
int xent_vocab_gathers(const xent_ce_desc* desc, xent_op op, int wide);
size_t xent_records_offset(size_t launcher_bytes);
/* The option axes a call's tensors decide (dispatch.h's XENT_USES_*). */
int xent_ce_uses(const xent_ce_call* call);
typedef struct xent_vocab_kernels {
  const struct xent_dispatch_entry* forward;  /* the shard's statistics and the loss; NULL if unused */
  const struct xent_dispatch_entry* backward; /* the gradient; NULL for a forward */
  int token_stats;                            /* the call has per-token outputs: it gathers wide records */
} xent_vocab_kernels;
xent_status xent_vocab_find(const xent_handle* h, const xent_ce_desc* desc, xent_op op, int uses,
                            xent_vocab_kernels* kernels);
xent_status xent_vocab_run(xent_handle* h, const xent_ce_desc* desc, const xent_ce_call* call, size_t launcher_bytes,
                           const xent_vocab_kernels* kernels);

/* A strided call with its class axis in slices (column_split.c): how many
   the handle and the desc give it (1: none), its workspace after the
   launchers' bytes, and its run. */
int xent_column_slices(const xent_handle* h, const xent_ce_desc* desc);
size_t xent_column_workspace(const xent_ce_desc* desc, int slices, size_t launcher_bytes);
xent_status xent_column_run(xent_handle* h, const xent_ce_desc* desc, const xent_ce_call* call, int slices,
                            size_t launcher_bytes);

/* The fused linear cross entropy (linear_ce.c). Its plan (xent.h: one pass
   or tiled): the rows per chunk, and the workspace's regions, each 64-byte
   aligned, in this order. */
typedef struct xent_linear_ce_plan {
  xent_linear_ce_plan_kind kind; /* never AUTO */
  int64_t chunk;   /* rows per chunk */
  int64_t chunks;
  int64_t tile;    /* tiled: classes per tile; 0: one pass */
  int64_t tiles;   /* tiled: tiles across the vocabulary (of this rank) */
  size_t logits;   /* one pass: chunk * V, tiled: chunk * tile, dtype: the logits and (in place) their gradient */
  size_t weight_acc; /* one pass: V * H f32, an f16/bf16 grad_weight's sum over the chunks (has_weight_acc);
                        TILED: max(chunk, tile) * H f32, a chunk's grad_hidden or a tile's grad_weight sum;
                        TILED_HIDDEN_SUM: tile * H f32, a tile's grad_weight sum (f32 gradients and
                        main_grad need neither) */
  int has_weight_acc;
  size_t hidden_acc; /* TILED_HIDDEN_SUM: rows * H f32, grad_hidden's sum over the tiles */
  size_t records;  /* tiled: a chunk's records, [ranks * tiles][chunk], wide */
  size_t lse;      /* tiled: the rows' lse, accumulation type (unless the call keeps it) */
  size_t entropy;  /* tiled: the rows' entropy, for dentropy's term in sweep 3 (unless the call keeps it) */
  size_t sum_a;    /* tiled, soft labels: each row's sum of w[c] * t'_c, for sweep 3 */
  size_t gemm;     /* the GEMM library's workspace, gemm_bytes */
  size_t gemm_bytes;
  size_t steps;    /* the steps' workspace (xent_lce_workspace_bytes) */
  size_t ce;       /* the cross-entropy call's workspace */
  size_t total;
  /* ON_CHIP: tile and tiles are pass 1's slices of the vocabulary (records
     [tiles][rows], narrow), chunk the rows (one chunk); pass 2 runs in
     launches of chip_rows rows (grad_hidden's f32 sum, [chip_rows, H] in
     weight_acc, one launch a chunk with G @ W alone; rows: hidden_acc holds
     every row's and the launches make both products) by chip_classes
     classes (grad_weight's f32 sum, [chip_classes, H] in weight_acc). */
  int64_t chip_rows;
  int64_t chip_classes;
} xent_linear_ce_plan;

/* The plan of a validated call (the steps' PLAN on the host, unless
   desc->chunk_rows says), made once per call. */
xent_status xent_linear_ce_op_plan(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d,
                                   xent_linear_ce_plan* plan);
/* The call over its plan (the workspace's size and alignment checked). */
xent_status xent_linear_ce_op(const char* fn, xent_handle* h, const xent_linear_ce_desc* d,
                              const xent_linear_ce_plan* plan, const xent_linear_ce_tensors* t, void* workspace,
                              size_t workspace_bytes, void* stream);

#endif
