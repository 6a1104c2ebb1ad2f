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
size_t xent_ce_op_workspace(const xent_ce_desc* d, xent_op op);
/* A validated call: the vocabulary-parallel path, or the handle's kernel
   for it (XENT_ERROR_NOT_GENERATED naming the spec where there is none).
   call->bad_label_row NULL records bad labels in the handle's word. */
xent_status xent_ce_op(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call);

/* Vocabulary-parallel calls (vocab_parallel.c): desc->vocab_shard's checks
   (the API's, for desc), the workspace with room for the gathered
   statistics after the launchers' `bytes`, and the call itself. */
xent_status xent_vocab_check(const char* fn, const xent_ce_desc* desc);
size_t xent_vocab_workspace(const xent_ce_desc* desc, size_t bytes);
xent_status xent_vocab_run(xent_handle* h, const xent_ce_desc* desc, const xent_ce_call* call, size_t launcher_bytes);

/* The fused linear cross entropy (linear_ce.c): the workspace a validated
   call needs, and the call (the workspace's size and alignment checked). */
xent_status xent_linear_ce_op_workspace(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d,
                                        size_t* bytes);
xent_status xent_linear_ce_op(const char* fn, xent_handle* h, const xent_linear_ce_desc* d,
                              const xent_linear_ce_tensors* t, void* workspace, size_t workspace_bytes, void* stream);

#endif
