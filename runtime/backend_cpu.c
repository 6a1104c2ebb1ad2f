/* The CPU backend: runs the reference on host memory and rounds its results
   to the descriptor's dtypes. Needs no workspace. */
#include <stdlib.h>

#include "internal.h"
#include "numeric.h"
#include "reference.h"

xent_status xent_cpu_ce_workspace(const xent_ce_desc* desc, xent_op op, size_t* bytes) {
  (void)desc;
  (void)op;
  *bytes = 0;
  return XENT_OK;
}

/* Reads n elements of `dtype` as doubles (NULL in, NULL out). */
static double* to_doubles(xent_dtype dtype, const void* src, int64_t n) {
  if (!src) return NULL;
  double* out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
  if (!out) return NULL;
  for (int64_t i = 0; i < n; ++i) out[i] = xent_load(dtype, src, i);
  return out;
}

xent_status xent_cpu_ce_run(xent_handle* h, const xent_ce_desc* d, const xent_ce_call* call) {
  (void)h;
  const int64_t N = d->rows, C = d->classes;
  const xent_dtype acc = xent_acc_dtype(d->dtype);
  const int none = d->reduction == XENT_REDUCTION_NONE;
  xent_status status = XENT_OK;
  double* rows = NULL, *lse = NULL, *dloss = NULL, *grad = NULL, *lse_in = NULL;
  double total = 0;

  if (call->op != XENT_OP_BACKWARD) {
    rows = malloc((size_t)(N > 0 ? N : 1) * sizeof *rows);
    lse = malloc((size_t)(N > 0 ? N : 1) * sizeof *lse);
    if (!rows || !lse) {
      status = xent_fail(XENT_ERROR_OUT_OF_MEMORY, "cpu backend: cannot allocate %lld row values", (long long)N);
      goto done;
    }
    xent_ref_ce_forward(d, call->logits, call->labels, call->weights, rows, &total, lse);
  }
  if (call->op != XENT_OP_FORWARD) {
    grad = malloc((size_t)(N * C > 0 ? N * C : 1) * sizeof *grad);
    dloss = to_doubles(d->dtype, call->dloss, none ? N : 1);
    lse_in = call->op == XENT_OP_BACKWARD ? to_doubles(acc, call->lse_in, N) : NULL;
    if (!grad || (call->dloss && !dloss) || (call->op == XENT_OP_BACKWARD && !lse_in)) {
      status = xent_fail(XENT_ERROR_OUT_OF_MEMORY, "cpu backend: cannot allocate the gradient (%lld x %lld)",
                         (long long)N, (long long)C);
      goto done;
    }
    /* Backward uses the lse it was given; the fused op recomputes it. */
    xent_ref_ce_backward(d, call->logits, call->labels, call->weights, lse_in, dloss, grad);
  }
  /* Outputs are written last: in-place fwd_bwd reads the logits above. */
  if (rows) {
    if (none) {
      for (int64_t n = 0; n < N; ++n) xent_store(d->dtype, call->loss, n, rows[n]);
    } else {
      xent_store(d->dtype, call->loss, 0, total);
    }
    if (call->lse_out) {
      for (int64_t n = 0; n < N; ++n) xent_store(acc, call->lse_out, n, lse[n]);
    }
  }
  if (grad) {
    for (int64_t i = 0; i < N * C; ++i) xent_store(d->dtype, call->grad, i, grad[i]);
  }
done:
  free(rows);
  free(lse);
  free(dloss);
  free(grad);
  free(lse_in);
  return status;
}
