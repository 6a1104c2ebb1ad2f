/* Cross entropy, validated (runtime/api): its workspace, and its run on the
   handle's kernel, over the split vocabulary (vocab_parallel.c), or with a
   strided class axis in slices (column_split.c). */
#include "runtime/dispatch/dispatch.h"
#include "runtime/ops/ops.h"

/* Every backend runs the generated launchers, whose workspace layout is
   xent_ce_workspace_bytes() (generated xent_launch.h). */
size_t xent_ce_launcher_workspace(const xent_ce_desc* d, xent_op op) {
  const int reduced = d->reduction != XENT_REDUCTION_NONE && op != XENT_OP_BACKWARD;
  /* The totals kernel runs where the mean's gradient needs the sum of row
     weights (soft labels: of token weights, where the call has them), or
     smoothing that of class weights (the weights are known only at the
     call: counted whenever smoothing is on). */
  const int hard = d->label_type != XENT_PROB;
  const int totals = (d->reduction == XENT_REDUCTION_MEAN && op != XENT_OP_FORWARD) || (hard && d->label_smoothing != 0);
  return xent_ce_workspace_bytes(d->rows, xent_acc_bytes(d->dtype), reduced, reduced || totals);
}

/* A vocabulary-parallel call also holds every rank's row statistics, a
   strided call in slices every slice's. */
size_t xent_ce_op_workspace(const xent_handle* h, const xent_ce_desc* d, xent_op op) {
  const size_t bytes = xent_ce_launcher_workspace(d, op);
  if (d->vocab_shard) return xent_vocab_workspace(d, bytes);
  const int slices = xent_column_slices(h, d);
  return slices > 1 ? xent_column_workspace(d, slices, bytes) : bytes;
}

int xent_ce_uses(const xent_ce_call* c) {
  const xent_ce_tensors* t = &c->t;
  const int forward = c->op != XENT_OP_BACKWARD, backward = c->op != XENT_OP_FORWARD;
  const int stats = (forward && (t->entropy || t->label_logprob || t->argmax)) || (backward && t->dentropy);
  return (t->weights ? XENT_USES_WEIGHTS : 0) | (stats ? XENT_USES_TOKEN_STATS : 0) |
         (t->temperature ? XENT_USES_ROW_TEMPERATURE : 0) | (t->token_weight ? XENT_USES_TOKEN_WEIGHT : 0);
}

xent_status xent_ce_op(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* c) {
  xent_ce_call call = *c;
  if (!call.bad_label_row) call.bad_label_row = h->bad_label_row;
  call.row_group = h->row_group;
  call.row_threads = h->row_threads;
  if (d->vocab_shard) {
    xent_vocab_kernels k;
    const xent_status s = xent_vocab_find(h, d, c->op, xent_ce_uses(c), &k);
    return s != XENT_OK ? s : xent_vocab_run(h, d, &call, xent_ce_launcher_workspace(d, c->op), &k);
  }
  /* Per-element outputs need the lse before their pass: one slice. */
  const int slices = c->op != XENT_OP_BACKWARD && (c->t.log_prob || c->t.softmax) ? 1 : xent_column_slices(h, d);
  if (slices > 1) return xent_column_run(h, d, &call, slices, xent_ce_launcher_workspace(d, c->op));
  const xent_dispatch_entry* e = xent_ce_find(h, d, c->op, xent_ce_uses(c));
  if (!e) return XENT_ERROR_NOT_GENERATED;
  const xent_ce_args args = xent_ce_args_for(d, &call);
  return xent_ce_launch(h, d, c->op, e, &args);
}

xent_status xent_ce_scale_op(xent_handle* h, const xent_ce_desc* d, const void* dloss, void* grad, void* stream) {
  /* Any fused variant of the call's dtypes, labels and reduction scales
     alike: the one of the call's options, found as a whole-vocabulary call
     (a slice's gradient is scaled as any other). */
  xent_ce_desc whole = *d;
  whole.vocab_shard = NULL;
  const xent_dispatch_entry* e = xent_ce_find(h, &whole, XENT_OP_FORWARD_BACKWARD, 0);
  if (!e) return XENT_ERROR_NOT_GENERATED;
  const xent_ce_call call = {.op = XENT_OP_FORWARD_BACKWARD, .t = {.dloss = dloss, .grad = grad}, .stream = stream};
  xent_ce_args a = xent_ce_args_for(&whole, &call);
  a.rescale = 1;
  return xent_ce_launch(h, &whole, XENT_OP_FORWARD_BACKWARD, e, &a);
}
