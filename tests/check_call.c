/* tu_check_call: one call on a backend against the CPU reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/numeric.h"
#include "runtime/reference.h"
#include "tests/testutil.h"

/* Device copies of a call's tensors, and the host buffers they come back to. */
typedef struct device_call {
  xent_ce_tensors t;
  void* ws;
  size_t ws_bytes;
} device_call;

/* Runs the call again with tensors t and checks that the gradient (at
   t->grad, `bytes` long) is bit for bit `want`, the first run's. `differs`
   says what a failure means. Returns 1 on failure. */
static int same_gradient_again(xent_handle* h, xent_op op, const xent_ce_desc* d, const device_call* dc,
                               const xent_ce_tensors* t, const void* want, size_t bytes, const char* name,
                               const char* differs) {
  const xent_backend_kind kind = xent_handle_backend(h);
  const xent_status s = xent_ce_run(h, d, op, t, dc->ws, dc->ws_bytes, NULL);
  char why[1024] = "";
  if (s != XENT_OK) snprintf(why, sizeof why, "%s: %s", xent_status_string(s), xent_last_error());
  tu_sync(kind);
  xent_check(h); /* already verified by the first run; clear the record */
  void* got = malloc(bytes);
  tu_to_host(kind, got, t->grad, bytes);
  const int failed = s != XENT_OK || memcmp(got, want, bytes) != 0;
  if (failed) printf("FAIL %s: %s%s%s\n", name, s != XENT_OK ? "" : differs, s != XENT_OK ? "the call failed: " : "", why);
  free(got);
  return failed;
}

int tu_check_call(xent_handle* h, xent_op op, const xent_ce_desc* d, uint64_t seed, int flags, const char* name) {
  const xent_backend_kind kind = xent_handle_backend(h);
  const int64_t N = d->rows, C = d->classes, NC = N * C;
  const int soft = d->label_type == XENT_PROB;
  const int extras = (flags & TU_EXTRAS) != 0;
  const int forward = op != XENT_OP_BACKWARD, backward = op != XENT_OP_FORWARD;
  const size_t eb = tu_dtype_bytes(d->dtype), lb = tu_dtype_bytes(d->loss_dtype), gb = tu_dtype_bytes(d->grad_dtype);
  const size_t ab = d->dtype == XENT_F64 ? 8 : 4;
  const int none = d->reduction == XENT_REDUCTION_NONE;
  const int64_t nloss = none ? N : 1;
  const size_t logits_bytes = (size_t)NC * eb, grad_bytes = (size_t)NC * gb;
  const size_t labels_bytes = soft ? logits_bytes : (size_t)N * (d->label_type == XENT_I32 ? 4 : 8);
#define COUNT(n) ((size_t)((n) > 0 ? (n) : 1))
  tu_inputs in;
  tu_make_inputs(d, seed, 4.0, flags, &in);

  /* The reference, from the same (rounded) inputs. */
  double* want_rows = calloc(COUNT(N), sizeof(double));
  double* want_lse = calloc(COUNT(N), sizeof(double));
  double* want_grad = calloc(COUNT(NC), sizeof(double));
  double* want_grad_labels = calloc(COUNT(NC), sizeof(double));
  double* want_log_prob = calloc(COUNT(NC), sizeof(double));
  double* want_softmax = calloc(COUNT(NC), sizeof(double));
  double* dloss = calloc(COUNT(nloss), sizeof(double));
  double* bias = in.grad_bias ? calloc(COUNT(NC), sizeof(double)) : NULL;
  double want_total = 0;
  for (int64_t i = 0; i < nloss; ++i) dloss[i] = xent_load(d->loss_dtype, in.dloss, i);
  for (int64_t i = 0; bias && i < NC; ++i) bias[i] = xent_load(d->grad_dtype, in.grad_bias, i);
  xent_ref_ce_forward(d, in.logits, in.labels, in.weights, want_rows, &want_total, want_lse, want_log_prob, want_softmax);
  if (backward)
    xent_ref_ce_backward(d, in.logits, in.labels, in.weights, NULL, dloss, bias, want_grad, want_grad_labels);

  device_call dc;
  memset(&dc, 0, sizeof dc);
  dc.t.logits = tu_upload(kind, in.logits, logits_bytes);
  dc.t.labels = tu_upload(kind, in.labels, labels_bytes);
  dc.t.weights = in.weights ? tu_upload(kind, in.weights, (size_t)C * ab) : NULL;
  dc.t.dloss = tu_upload(kind, in.dloss, (size_t)nloss * lb);
  dc.t.grad_bias = in.grad_bias ? tu_upload(kind, in.grad_bias, grad_bytes) : NULL;
  dc.t.loss = tu_upload(kind, NULL, (size_t)nloss * lb);
  dc.t.lse = tu_upload(kind, NULL, (size_t)N * ab);
  dc.t.grad = tu_upload(kind, NULL, grad_bytes);
  if (extras) {
    dc.t.log_prob = tu_upload(kind, NULL, logits_bytes);
    dc.t.softmax = tu_upload(kind, NULL, logits_bytes);
    if (soft) dc.t.grad_labels = tu_upload(kind, NULL, logits_bytes);
  }
  /* Backward needs a saved lse: the reference's, rounded to the accumulation
     type as forward would save it. */
  void* lse_host = malloc(COUNT(N) * ab);
  for (int64_t n = 0; n < N; ++n) xent_store(xent_acc_dtype(d->dtype), lse_host, n, want_lse[n]);
  dc.t.lse_in = tu_upload(kind, lse_host, (size_t)N * ab);
  xent_ce_workspace_size(h, d, op, &dc.ws_bytes);
  dc.ws = tu_alloc(kind, dc.ws_bytes);

  xent_status s = xent_ce_run(h, d, op, &dc.t, dc.ws, dc.ws_bytes, NULL);
  tu_sync(kind);

  int failed = 0;
  if (s != XENT_OK) {
    printf("FAIL %s: %s: %s\n", name, xent_status_string(s), xent_last_error());
    failed = 1;
  }
  /* xent_check names the lowest row whose label is outside [0, C), unless
     the policy ignores such labels. */
  const xent_status checked = xent_check(h);
  if (!failed) failed = tu_expect_check(name, checked, xent_last_error(), tu_first_bad_row(d, in.labels));
  void* host = malloc(COUNT(NC) * 8 + COUNT(N) * 8);
  if (!failed && forward) {
    void* lse = malloc(COUNT(N) * ab);
    tu_to_host(kind, host, dc.t.loss, (size_t)nloss * lb);
    tu_to_host(kind, lse, dc.t.lse, (size_t)N * ab);
    failed |= tu_compare_loss(name, d, host, lse, want_rows, want_total, want_lse);
    free(lse);
    if (extras) {
      const double tol_out = tu_tolerance(d->dtype, C);
      tu_to_host(kind, host, dc.t.log_prob, logits_bytes);
      failed |= tu_report(name, "log_prob", tu_max_error(d->dtype, host, want_log_prob, NC, 1.0), tol_out);
      tu_to_host(kind, host, dc.t.softmax, logits_bytes);
      failed |= tu_report(name, "softmax", tu_max_error(d->dtype, host, want_softmax, NC, 1e-3 + tu_subnormal_atol(d->dtype, tol_out)), tol_out);
    }
  }
  if (!failed && backward) {
    void* gl = dc.t.grad_labels ? malloc(COUNT(NC) * eb) : NULL;
    tu_to_host(kind, host, dc.t.grad, grad_bytes);
    if (gl) tu_to_host(kind, gl, dc.t.grad_labels, logits_bytes);
    failed |= tu_compare_grad(name, d, host, want_grad, dloss, gl, want_grad_labels);
    free(gl);
    /* XENT_TEST_SKIP_RERUNS (the sanitizer pass of .ci/run): the reruns
       below compare bits with the first run, which the plain pass does; the
       element-by-element stores they exercise also serve every row that
       does not start on 16 bytes (odd widths), which the sanitizers see. */
    const int reruns = getenv("XENT_TEST_SKIP_RERUNS") == NULL;
    if (!failed && N > 0 && reruns) {
      /* A gradient buffer one element off the logits' 16-byte alignment:
         the kernels store it element by element instead of 16 bytes at a
         time; bit for bit the same values. (Before the in-place run, which
         overwrites the logits.) */
      char* shifted = tu_alloc(kind, grad_bytes + 16);
      xent_ce_tensors t = dc.t;
      t.grad = shifted + gb;
      failed = same_gradient_again(h, op, d, &dc, &t, host, grad_bytes, name,
                                   "the gradient at a misaligned address differs from the aligned one");
      tu_free(kind, shifted);
    }
    if (!failed && reruns && op == XENT_OP_FORWARD_BACKWARD && N > 0 && d->grad_dtype == d->dtype) {
      /* In place: the logits buffer receives the gradient, bit for bit the
         same as the separate buffer. */
      xent_ce_tensors t = dc.t;
      t.grad = (void*)t.logits;
      /* Under the emulator, with its global-memory race detector on: every
         element the gradient overwrites must be read by its other readers
         (the label's logit, the row's first) before, ordered by a barrier
         or __syncwarp, not only by shuffles. */
      const int was = tu_global_race_checks(kind, 1);
      failed = same_gradient_again(h, op, d, &dc, &t, host, grad_bytes, name,
                                   "in-place gradient differs from the out-of-place one");
      tu_global_race_checks(kind, was);
    }
  }
  free(host);
  free(lse_host);
  tu_free_tensors(kind, &dc.t);
  tu_free(kind, dc.ws);
  free(want_rows);
  free(want_lse);
  free(want_grad);
  free(want_grad_labels);
  free(want_log_prob);
  free(want_softmax);
  free(dloss);
  free(bias);
  tu_free_inputs(&in);
  return failed;
#undef COUNT
}
