/* The fused linear cross entropy's entry points (xent.h): every argument
   checked once, the whole call's buffers against each other, then the op
   (runtime/ops/linear_ce.c), whose chunks are not checked again. */
#include <string.h>

#include "runtime/api/checks.h"
#include "runtime/backend/backend.h"
#include "runtime/ops/ops.h"

void xent_linear_ce_desc_init(xent_linear_ce_desc* d, int64_t rows, int64_t hidden, int64_t classes,
                              xent_dtype dtype, xent_label_type label_type, xent_reduction reduction) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  xent_ce_desc_init(&d->ce, rows, classes, dtype, label_type, reduction);
  d->hidden = hidden;
}

static xent_status check(const char* fn, const xent_handle* h, const xent_linear_ce_desc* d) {
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!d) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
  if (d->hidden < 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->hidden is %lld, must be >= 1", fn, (long long)d->hidden);
  if (d->chunk_rows < 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->chunk_rows is %lld, must be >= 0 (0 = the default)", fn,
                     (long long)d->chunk_rows);
  if (d->chunk_classes < 0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->chunk_classes is %lld, must be >= 0 (0 = the default)",
                     fn, (long long)d->chunk_classes);
  if (d->memory_mib < 0 || d->memory_mib > ((int64_t)1 << 40))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->memory_mib is %lld, must be in [0, 2^40] (0 = XENT_LINEAR_CE_MEMORY_MIB)", fn,
                     (long long)d->memory_mib);
  if (d->plan < XENT_LINEAR_CE_PLAN_AUTO || d->plan > XENT_LINEAR_CE_PLAN_ON_CHIP)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->plan is %d, must be an xent_linear_ce_plan_kind (0 AUTO, 1 ONE_PASS, 2 "
                     "TILED_HIDDEN_SUM, 3 TILED, 4 ON_CHIP)", fn, d->plan);
  if (d->accumulate != 0 && d->accumulate != 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->accumulate is %d, must be 0 or 1", fn, d->accumulate);
  if (d->main_grad != 0 && d->main_grad != 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->main_grad is %d, must be 0 or 1", fn, d->main_grad);
  if (d->main_grad && d->ce.dtype == XENT_F64)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->main_grad is for f32, f16 and bf16 (an f64 grad_weight is its own sum)", fn);
  /* hidden and weight and their gradients are rows x hidden and classes x
     hidden elements of up to 8 bytes: byte counts that must fit 64 bits. */
  xent_status s = xent_check_byte_count(fn, d->ce.rows, "desc->ce.rows", d->hidden, "desc->hidden");
  if (s == XENT_OK) s = xent_check_byte_count(fn, d->ce.classes, "desc->ce.classes", d->hidden, "desc->hidden");
  if (s != XENT_OK) return s;
  if (d->ce.inner != 1)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->ce.inner is %lld, must be 1 (logits [rows, classes])", fn,
                     (long long)d->ce.inner);
  /* Each chunk gathers its own rows' records: through the callback only. */
  const xent_vocab_shard* vs = d->ce.vocab_shard;
  if (vs && !vs->all_gather)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->ce.vocab_shard->all_gather is NULL (xent_vocab_shard_nccl fills it in)", fn);
  if (vs && (vs->gathered || vs->class_offset_at))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: desc->ce.vocab_shard->%s is set: the fused linear cross entropy gathers each chunk's "
                     "records through all_gather", fn, vs->gathered ? "gathered" : "class_offset_at");
  /* What the chunks' cross-entropy calls would check, once for all. */
  return xent_check_ce_desc(fn, h, &d->ce);
}

/* Every buffer of the call aligned to its element, and no output over
   another buffer of the call (checks.h). */
static xent_status check_buffers(const char* fn, const xent_linear_ce_desc* d, const xent_linear_ce_tensors* t,
                                 const void* workspace, size_t workspace_bytes) {
  const xent_ce_desc* c = &d->ce;
  const size_t rows = (size_t)c->rows, classes = (size_t)c->classes, hidden = (size_t)d->hidden;
  const size_t eb = xent_dtype_bytes(c->dtype), ab = xent_acc_bytes(c->dtype);
  const size_t lb = xent_dtype_bytes(c->loss_dtype), gb = xent_dtype_bytes(c->grad_dtype);
  const int soft = c->label_type == XENT_PROB;
  const size_t label_b = soft ? eb : c->label_type == XENT_I32 ? 4 : 8;
  const size_t n_loss = c->reduction == XENT_REDUCTION_NONE ? rows : 1;
  const size_t weights_n = (size_t)(c->vocab_shard ? c->vocab_shard->global_classes : c->classes);
  const xent_buffer all[] = {
      {"tensors->hidden", t->hidden, rows * hidden * eb, eb, 0},
      {"tensors->weight", t->weight, classes * hidden * eb, eb, 0},
      {"tensors->bias", t->bias, classes * eb, eb, 0},
      {"tensors->labels", t->labels, (soft ? rows * classes : rows) * label_b, label_b, 0},
      {"tensors->weights", t->weights, weights_n * ab, ab, 0},
      {"tensors->dloss", t->dloss, n_loss * lb, lb, 0},
      {"tensors->loss", t->loss, n_loss * lb, lb, 1},
      {"tensors->lse", t->lse, rows * ab, ab, 1},
      {"tensors->grad_hidden", t->grad_hidden, rows * hidden * gb, gb, 1},
      {"tensors->grad_weight", t->grad_weight, classes * hidden * gb, gb, 1},
      {"tensors->main_grad", t->main_grad, classes * hidden * 4, 4, 1},
      {"tensors->grad_bias", t->grad_bias, classes * gb, gb, 1},
      {"tensors->entropy", t->entropy, rows * ab, ab, 1},
      {"tensors->label_logprob", t->label_logprob, rows * ab, ab, 1},
      {"tensors->argmax", t->argmax, rows * 8, 8, 1},
      {"tensors->dentropy", t->dentropy, rows * ab, ab, 0},
      {"tensors->temperature", t->temperature, rows * ab, ab, 0},
      {"tensors->token_weight", t->token_weight, rows * ab, ab, 0},
      /* (its 64-byte alignment: the op's check, with the size) */
      {"workspace", workspace, workspace_bytes, 1, 1},
  };
  return xent_check_buffers(fn, all, sizeof all / sizeof all[0], NULL);
}

xent_status xent_linear_ce_workspace_size(const xent_handle* h, const xent_linear_ce_desc* d, size_t* bytes) {
  xent_clear_error();
  const char* fn = "xent_linear_ce_workspace_size";
  if (!bytes) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  xent_status s = check(fn, h, d);
  xent_linear_ce_plan plan;
  if (s == XENT_OK) s = xent_linear_ce_op_plan(fn, h, d, &plan);
  if (s == XENT_OK) *bytes = plan.total;
  return s;
}

xent_status xent_linear_ce_run(xent_handle* h, const xent_linear_ce_desc* d, const xent_linear_ce_tensors* t,
                               void* workspace, size_t workspace_bytes, void* stream) {
  xent_clear_error();
  const char* fn = "xent_linear_ce_run";
  xent_status s = check(fn, h, d);
  if (s != XENT_OK) return s;
  if (!t) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors is NULL", fn);
  if (!t->hidden) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->hidden is NULL", fn);
  if (!t->weight) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->weight is NULL", fn);
  if (!t->labels) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->labels is NULL", fn);
  if (!t->loss) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->loss is NULL", fn);
  if (t->grad_bias && !t->bias)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->grad_bias is set but tensors->bias is NULL", fn);
  if (d->main_grad && !t->main_grad)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: desc->main_grad is 1 but tensors->main_grad is NULL", fn);
  if (!d->main_grad && t->main_grad)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: tensors->main_grad is set but desc->main_grad is 0", fn);
  if (d->main_grad && t->grad_weight)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: tensors->grad_weight is set with desc->main_grad: the weight's gradient goes to main_grad",
                     fn);
  /* The per-token outputs: argmax and the label's log-prob are for hard
     labels only, as xent_ce_run has them. */
  if (d->ce.label_type == XENT_PROB && (t->label_logprob || t->argmax))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: tensors->%s is set, but it is for hard labels (desc->ce.label_type is XENT_PROB; entropy "
                     "and temperature serve soft labels)",
                     fn, t->label_logprob ? "label_logprob" : "argmax");
  if (t->temperature && d->ce.temperature != 1.0)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "%s: tensors->temperature (per row) is set and desc->ce.temperature is %g: pass one or the other "
                     "(1 = off)", fn, d->ce.temperature);
  xent_linear_ce_plan plan;
  s = xent_linear_ce_op_plan(fn, h, d, &plan);
  if (s != XENT_OK) return s;
  s = check_buffers(fn, d, t, workspace, workspace_bytes < plan.total ? workspace_bytes : plan.total);
  if (s != XENT_OK) return s;
  return xent_linear_ce_op(fn, h, d, &plan, t, workspace, workspace_bytes, stream);
}
