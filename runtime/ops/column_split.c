/* A strided cross entropy cut along its class axis (xent.h,
   xent_set_column_slices). With the class axis in place ([N, C, d1..dk]
   read with inner = d1*..*dk), the strided kernel runs a thread a row, and
   a row's classes are one load after another: few rows and many classes
   (8192 positions of 1000 classes) leave most of a GPU idle with little in
   flight. Cut into S slices of the class axis, each row has S threads, one
   per slice, and the call runs as a vocabulary-parallel call runs its ranks
   (vocab_parallel.c), all in one launch per pass (the grid's y is the
   slice):

     1. the fwd variant, records: each slice's (ref, s, a, b) of each row
        (wide with per-token outputs) into [S][rows][record];
     2. the fwd variant, combine: the loss, the lse and the per-token
        outputs of each row from its S records, then the reduction;
     3. the bwd variant, each slice's gradient: from the lse where that
        suffices (hard labels without the entropy's gradient), else from
        the records.

   The records are the only bytes added: 16 a row and slice (40 wide) in
   f32, against the row's C * inner elements. Calls with per-element
   outputs (log_prob, softmax) keep one slice: they would need the lse
   before a third pass. */
#include <stdint.h>

#include "runtime/backend/backend.h"
#include "runtime/dispatch/dispatch.h"
#include "runtime/ops/ops.h"

/* The auto choice's bounds: a slice of at least 64 classes (records of 16
   bytes against at least 128 of bf16 logits a row), a multiple of 32 (a
   whole number of the strided walk's steps for every dtype: 32 classes of
   a 16-bit dtype, 16 of f32, 8 of f64). */
#define MIN_CLASSES 64
#define STEP_CLASSES 32

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int xent_column_slices(const xent_handle* h, const xent_ce_desc* d) {
  if (d->inner <= 1 || d->vocab_shard || d->rows <= 0 || h->column_slices == 1) return 1;
  if (h->backend->native_ce && h->backend->native(h)) return 1; /* the cpu backend's own code */
  int64_t per;
  if (h->column_slices > 1) {
    per = ceil_div(d->classes, h->column_slices);
  } else {
    /* Enough threads to fill the device once (its SMs' or CUs' threads). */
    if (h->resident_threads <= 0 || d->rows >= h->resident_threads) return 1;
    per = ceil_div(ceil_div(d->classes, ceil_div(h->resident_threads, d->rows)), STEP_CLASSES) * STEP_CLASSES;
    if (per < MIN_CLASSES) per = MIN_CLASSES;
    if (per < ceil_div(d->classes, XENT_MAX_COLUMN_SLICES)) per = ceil_div(d->classes, XENT_MAX_COLUMN_SLICES);
  }
  return (int)ceil_div(d->classes, per); /* every slice holds at least one class */
}

/* The workspace: the launchers' bytes, then (8-byte aligned) the records,
   wide (the workspace does not know the call's tensors), then the rows'
   lse for the gradient pass. */
static size_t records_bytes(const xent_ce_desc* d, int slices) {
  return (size_t)slices * (size_t)d->rows * xent_shard_record_bytes(xent_acc_bytes(d->dtype), 1);
}
size_t xent_column_workspace(const xent_ce_desc* d, int slices, size_t launcher_bytes) {
  return xent_records_offset(launcher_bytes) + records_bytes(d, slices) + (size_t)d->rows * xent_acc_bytes(d->dtype);
}

xent_status xent_column_run(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call, int slices,
                            size_t launcher_bytes) {
  const xent_ce_tensors* t = &call->t;
  const int forward = call->op != XENT_OP_BACKWARD, backward = call->op != XENT_OP_FORWARD;
  xent_vocab_kernels k;
  xent_status s = xent_vocab_find(h, d, call->op, xent_ce_uses(call), &k);
  if (s != XENT_OK) return s;
  const int soft = d->label_type == XENT_PROB, wide = k.token_stats;
  /* The gradient needs the records where the lse is not enough: soft
     labels (sum of a), the entropy's gradient (E_p[z]). */
  const int from_records = soft || wide;
  char* records = (char*)call->workspace + xent_records_offset(launcher_bytes);
  void* lse = t->lse ? t->lse : records + records_bytes(d, slices);

  xent_ce_args base = xent_ce_args_for(d, call);
  base.shard_token_stats = wide;
  if (xent_vocab_gathers(d, call->op, wide)) {
    xent_ce_args a = base;
    a.column_slices = slices;
    a.shard_stats = records;
    a.loss = a.lse_out = NULL;
    if ((s = xent_backend_launch(h, k.forward, &a)) != XENT_OK) return s;
  }
  if (forward) {
    xent_ce_args a = base;
    a.gathered = records;
    a.shards = slices;
    if (backward && !from_records) a.lse_out = lse; /* the gradient's, if the caller keeps none */
    if ((s = xent_backend_launch(h, k.forward, &a)) != XENT_OK) return s;
  }
  if (backward) {
    xent_ce_args a = base;
    a.column_slices = slices;
    a.shards = slices;
    a.loss = a.lse_out = NULL;
    if (from_records) a.gathered = records;
    else if (forward) a.lse_in = lse;
    return xent_backend_launch(h, k.backward, &a);
  }
  return XENT_OK;
}
