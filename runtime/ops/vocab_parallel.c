/* Vocabulary-parallel cross entropy: the class axis is split over ranks
   (xent.h, xent_vocab_shard). A call is up to four launches and one
   collective, all enqueued on the caller's stream:

     1. the fwd variant, first pass: each row's (ref, s, a, b) on this
        slice, into this rank's part of the gather buffer;
     2. all_gather: every rank's part, rank by rank ([ranks][rows][4]);
     3. the fwd variant, combine: the global lse and loss of each row, then
        the reduction (forward ops);
     4. the bwd variant: this slice's gradient from the combined statistics
        (backward ops).

   A slice's ref is its max logit and s its sum of exp(x - ref): they merge
   into the global max m and lr = log sum exp(x - m). With lse = m + lr, the
   row loss is the sum over slices of a*(lse - ref) - b (+ z * lse^2), where
   lse - ref = (m - ref) + lr: shift-invariant, as on one device. For soft
   labels a = sum of w*t' and b = sum of w*t'*(x - ref) over the slice; for
   hard labels a = (1-eps)*w[y] (the slice holding y) + eps/C*sum(w) and b =
   (1-eps)*w[y]*(x[y] - ref) + eps/C*sum(w*(x - ref)). The gather is 4
   accumulation-type values per row, the only traffic between ranks. A
   hard-label backward from a saved (global) lse needs no collective at all
   (the gradient's precision is then the saved lse's: xent.h).

   A call with per-token outputs (entropy, label_logprob, argmax, or
   dentropy's gradient) gathers wider records instead, in the same one
   collective: also each slice's t = sum exp(x - ref)*(x - ref), whence
   E_p[z] and the entropy; x[y] - ref where the slice holds the label; and
   the slice's (max, first index), whence the argmax (xent_device.h's
   xent_gathered_row). A backward with dentropy gathers too (it needs
   E_p[z]). The temperature needs nothing across ranks: each slice scales
   its own logits. */
#include <stdint.h>

#include "runtime/dispatch/dispatch.h"
#include "runtime/ops/ops.h"
#include "runtime/base/internal.h"

xent_status xent_vocab_check(const char* fn, const xent_ce_desc* d) {
  const xent_vocab_shard* s = d->vocab_shard;
  if (s->ranks < 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->vocab_shard->ranks is %d, must be >= 1", fn, s->ranks);
  if (s->rank < 0 || s->rank >= s->ranks)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->vocab_shard->rank is %d, must be in [0, %d)", fn, s->rank,
                     s->ranks);
  if (s->class_offset < 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->vocab_shard->class_offset is %lld, must be >= 0", fn,
                     (long long)s->class_offset);
  if (s->global_classes < d->classes || s->class_offset > s->global_classes - d->classes)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->vocab_shard->global_classes is %lld, must be >= class_offset + desc->classes (%lld + %lld)",
                     fn, (long long)s->global_classes, (long long)s->class_offset, (long long)d->classes);
  if (s->class_offset_at && (s->class_offset != 0 || s->global_classes != (int64_t)s->ranks * d->classes))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->vocab_shard->class_offset_at is set: class_offset must be 0 (it is %lld) and "
                     "global_classes ranks * desc->classes (%lld, not %lld)",
                     fn, (long long)s->class_offset, (long long)s->ranks * (long long)d->classes,
                     (long long)s->global_classes);
  if (d->rows > 0 && (size_t)d->rows > SIZE_MAX / 128 / (size_t)s->ranks)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->rows * vocab_shard->ranks overflows the workspace size", fn);
  return XENT_OK;
}

/* One rank's statistics: a record per row (xent_launch.h). */
static size_t slice_bytes(const xent_ce_desc* d, int wide) {
  return (size_t)d->rows * xent_shard_record_bytes(xent_acc_bytes(d->dtype), wide);
}

/* The gather buffer follows the launchers' workspace, 8-byte aligned. */
size_t xent_records_offset(size_t launcher_bytes) { return (launcher_bytes + 7) & ~(size_t)7; }

/* The workspace does not know the call's tensors: it holds wide records. */
size_t xent_vocab_workspace(const xent_ce_desc* d, size_t bytes) {
  return xent_records_offset(bytes) + (size_t)d->vocab_shard->ranks * slice_bytes(d, 1);
}

/* Soft labels' gradient needs the gathered sum(a), and the entropy's the
   gathered E_p[z], not only the lse. */
int xent_vocab_gathers(const xent_ce_desc* d, xent_op op, int wide) {
  return op != XENT_OP_BACKWARD || d->label_type == XENT_PROB || wide;
}

size_t xent_vocab_records_bytes(const xent_ce_desc* d, xent_op op, int uses) {
  const int wide = (uses & XENT_USES_TOKEN_STATS) != 0;
  return xent_vocab_gathers(d, op, wide) ? slice_bytes(d, wide) : 0;
}

xent_status xent_vocab_find(const xent_handle* h, const xent_ce_desc* d, xent_op op, int uses,
                            xent_vocab_kernels* k) {
  /* A call's records are wide where it has per-token outputs: the option
     axis its tensors decide (ce.c, linear_ce.c). */
  k->token_stats = (uses & XENT_USES_TOKEN_STATS) != 0;
  const int gather = xent_vocab_gathers(d, op, k->token_stats);
  k->forward = gather ? xent_ce_find(h, d, XENT_OP_FORWARD, uses) : NULL;
  if (gather && !k->forward) return XENT_ERROR_NOT_GENERATED;
  k->backward = op != XENT_OP_FORWARD ? xent_ce_find(h, d, XENT_OP_BACKWARD, uses) : NULL;
  if (op != XENT_OP_FORWARD && !k->backward) return XENT_ERROR_NOT_GENERATED;
  return XENT_OK;
}

xent_status xent_vocab_run(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call, size_t launcher_bytes,
                           const xent_vocab_kernels* k) {
  const xent_vocab_shard* shard = d->vocab_shard;
  const int forward = call->op != XENT_OP_BACKWARD, backward = call->op != XENT_OP_FORWARD;
  const int wide = k->token_stats;
  const int gather = xent_vocab_gathers(d, call->op, wide);
  const size_t slice = slice_bytes(d, wide);
  const xent_dispatch_entry* fwd = k->forward;
  const xent_dispatch_entry* bwd = k->backward;

  xent_ce_args base = xent_ce_args_for(d, call);
  base.shard_token_stats = wide;
  char* gathered = (char*)call->workspace + xent_records_offset(launcher_bytes);
  xent_status s;
  /* The first half alone (xent_ce_shard_records): this rank's records. */
  if (call->shard_records) {
    if (!gather || d->rows == 0) return XENT_OK;
    xent_ce_args a = base;
    a.shard_stats = call->shard_records;
    a.loss = a.lse_out = NULL;
    return xent_backend_launch(h, fwd, &a);
  }
  /* The second half: the caller gathered them. */
  if (shard->gathered) {
    gathered = (char*)shard->gathered;
  } else if (gather && d->rows > 0) {
    /* Every rank has the same rows, so either all of them gather or none. */
    xent_ce_args a = base;
    a.shard_stats = gathered + (size_t)shard->rank * slice;
    a.loss = a.lse_out = NULL;
    if ((s = xent_backend_launch(h, fwd, &a)) != XENT_OK) return s;
    const int rc = shard->all_gather(shard->ctx, a.shard_stats, gathered, slice, call->stream);
    if (rc != 0)
      return xent_fail(XENT_ERROR_COLLECTIVE,
                       "vocabulary-parallel call: desc->vocab_shard->all_gather returned %d (rank %d of %d, %zu bytes "
                       "per rank)", rc, shard->rank, shard->ranks, slice);
  }
  if (forward) {
    xent_ce_args a = base;
    a.gathered = gathered;
    a.shards = shard->ranks;
    if ((s = xent_backend_launch(h, fwd, &a)) != XENT_OK) return s;
  }
  if (backward) {
    xent_ce_args a = base;
    a.gathered = gather ? gathered : NULL;
    a.shards = shard->ranks;
    a.loss = a.lse_out = NULL;
    return xent_backend_launch(h, bwd, &a);
  }
  return XENT_OK;
}
