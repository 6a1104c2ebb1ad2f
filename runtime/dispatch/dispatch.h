/* Finding a generated kernel: the call is turned into canonical keys and
   looked up by binary search in a generated table (xent_dispatch_<target>.c).
   The keys' format (each family's prefix, axes, their order and tokens) is
   the table's own schema, written by xentgen from gen/lua/dsl.lua; the
   runtime adds only what each axis means for a call. */
#ifndef XENT_DISPATCH_H
#define XENT_DISPATCH_H

#include <stddef.h>

#include "runtime/base/internal.h"

/* The generated launch contract: xent_ce_args, xent_dispatch_entry. It is
   the same for every target; the runtime includes the CUDA rendering. */
#include "xent_launch.h"

/* Binary search for an exact key; NULL if absent. */
const xent_dispatch_entry* xent_table_find(const xent_dispatch_entry* table, size_t count, const char* key);

/* What a call uses beyond its descriptor, for the option axes it decides
   (the `uses` argument below, a bit set): class weights, any per-token
   output (entropy, label_logprob, argmax, dentropy: axis token_stats), a
   temperature per row (axis temperature) and token weights (token_weight). */
enum { XENT_USES_WEIGHTS = 1, XENT_USES_TOKEN_STATS = 2, XENT_USES_ROW_TEMPERATURE = 4, XENT_USES_TOKEN_WEIGHT = 8 };

/* The entry for a call in the table: the most specialized key first
   (option axes named), then keys with those axes left to run time. On
   failure returns NULL with the failure recorded (XENT_ERROR_NOT_GENERATED,
   naming the key and the spec of the table's family to edit, or the axis
   of the table's schema this runtime does not know). */
const xent_dispatch_entry* xent_ce_lookup(const xent_table* table, const xent_ce_desc* desc, xent_op op,
                                       int uses, char* key_out, size_t key_cap);

/* The same for the fused linear cross entropy's steps (lce_fwd_bwd_...,
   the axes of desc, the loss of a chunk). */
const xent_dispatch_entry* xent_lce_lookup(const xent_table* table, const xent_ce_desc* desc, int uses,
                                        char* key_out, size_t key_cap);

/* The entry sm_<op>_<dtype>_<kind> of a softmax-family call (op forward or
   backward); NULL with XENT_ERROR_NOT_GENERATED recorded if absent. */
const xent_dispatch_entry* xent_softmax_lookup(const xent_table* table, const xent_softmax_desc* desc, xent_op op,
                                            char* key_out, size_t key_cap);

/* The handle's entry for a cross-entropy op (xent_ce_lookup on its
   backend's table); NULL with XENT_ERROR_NOT_GENERATED recorded. */
const xent_dispatch_entry* xent_ce_find(const xent_handle* h, const xent_ce_desc* d, xent_op op, int uses);

/* The fused linear cross entropy's steps (lce_ keys) for a chunk's loss d. */
const xent_dispatch_entry* xent_lce_find(const xent_handle* h, const xent_ce_desc* d, int uses);

/* One launch of a dispatch entry on the handle's backend. */
xent_status xent_backend_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args);
/* The same for a cross-entropy or softmax call of descriptor d: the
   backend's own code where it runs natively (backend.h, native), else the
   entry's kernel. */
xent_status xent_ce_launch(xent_handle* h, const xent_ce_desc* d, xent_op op, const xent_dispatch_entry* e,
                           const xent_ce_args* args);
xent_status xent_softmax_launch(xent_handle* h, const xent_softmax_desc* d, xent_op op,
                                const xent_dispatch_entry* e, const xent_softmax_args* args);

/* The launcher arguments of a call (the same on every backend). */
xent_ce_args xent_ce_args_for(const xent_ce_desc* desc, const xent_ce_call* call);

#endif
