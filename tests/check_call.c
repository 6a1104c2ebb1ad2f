/* tu_check_call: one call on a backend against the CPU reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/numeric.h"
#include "runtime/reference.h"
#include "tests/testutil.h"

int tu_check_call(xent_handle* h, xent_op op, const xent_ce_desc* d, uint64_t seed, int flags, const char* name) {
  const int weighted = (flags & TU_WEIGHTED) != 0;
  const xent_backend_kind kind = xent_handle_backend(h);
  const int64_t N = d->rows, C = d->classes;
  const size_t eb = tu_dtype_bytes(d->dtype);
  const size_t ab = d->dtype == XENT_F64 ? 8 : 4;
  const int none = d->reduction == XENT_REDUCTION_NONE;
  const int64_t nloss = none ? N : 1;
  const size_t logits_bytes = (size_t)(N * C) * eb;
  tu_inputs in;
  tu_make_inputs(d, seed, 4.0, flags, &in);

  /* The reference, from the same (rounded) inputs. */
  double* want_rows = calloc((size_t)(N > 0 ? N : 1), sizeof(double));
  double* want_lse = calloc((size_t)(N > 0 ? N : 1), sizeof(double));
  double* want_grad = calloc((size_t)(N * C > 0 ? N * C : 1), sizeof(double));
  double* dloss = calloc((size_t)(nloss > 0 ? nloss : 1), sizeof(double));
  double want_total = 0;
  for (int64_t i = 0; i < nloss; ++i) dloss[i] = xent_load(d->dtype, in.dloss, i);
  xent_ref_ce_forward(d, in.logits, in.labels, in.weights, want_rows, &want_total, want_lse);
  if (op != XENT_OP_FORWARD) xent_ref_ce_backward(d, in.logits, in.labels, in.weights, NULL, dloss, want_grad);

  void* logits = tu_alloc(kind, logits_bytes);
  void* labels = tu_alloc(kind, (size_t)N * (d->label_type == XENT_I32 ? 4 : 8));
  void* weights = weighted ? tu_alloc(kind, (size_t)C * ab) : NULL;
  void* dloss_dev = tu_alloc(kind, (size_t)nloss * eb);
  void* loss = tu_alloc(kind, (size_t)nloss * eb);
  void* lse = tu_alloc(kind, (size_t)N * ab);
  void* grad = tu_alloc(kind, logits_bytes);
  size_t ws_bytes = 0;
  xent_ce_workspace_size(h, d, op, &ws_bytes);
  void* ws = tu_alloc(kind, ws_bytes);
  tu_to_device(kind, logits, in.logits, logits_bytes);
  tu_to_device(kind, labels, in.labels, (size_t)N * (d->label_type == XENT_I32 ? 4 : 8));
  if (weighted) tu_to_device(kind, weights, in.weights, (size_t)C * ab);
  tu_to_device(kind, dloss_dev, in.dloss, (size_t)nloss * eb);
  /* Backward needs a saved lse: take the reference's, rounded to the
     accumulation type as forward would save it. */
  void* lse_host = malloc((size_t)(N > 0 ? N : 1) * ab);
  for (int64_t n = 0; n < N; ++n) xent_store(xent_acc_dtype(d->dtype), lse_host, n, want_lse[n]);
  if (op == XENT_OP_BACKWARD) tu_to_device(kind, lse, lse_host, (size_t)N * ab);

  xent_status s = XENT_OK;
  if (op == XENT_OP_FORWARD) s = xent_ce_forward(h, d, logits, labels, weights, loss, lse, ws, ws_bytes, NULL);
  if (op == XENT_OP_BACKWARD) s = xent_ce_backward(h, d, logits, labels, weights, lse, dloss_dev, grad, ws, ws_bytes, NULL);
  if (op == XENT_OP_FORWARD_BACKWARD)
    s = xent_ce_forward_backward(h, d, logits, labels, weights, dloss_dev, loss, lse, grad, ws, ws_bytes, NULL);
  tu_sync(kind);

  int failed = 0;
  char what[256];
  if (s != XENT_OK) {
    printf("FAIL %s: %s: %s\n", name, xent_status_string(s), xent_last_error());
    failed = 1;
  }
  /* xent_check names the lowest row whose label is outside [0, C), unless
     the policy ignores such labels. */
  int64_t bad_row = -1;
  for (int64_t n = 0; n < N && bad_row < 0 && d->invalid_labels == XENT_INVALID_LABELS_REPORT; ++n) {
    const int64_t y = xent_load_label(d->label_type, in.labels, n);
    if (y != d->ignore_index && (y < 0 || y >= C)) bad_row = n;
  }
  const xent_status checked = xent_check(h);
  if (!failed && bad_row < 0 && checked != XENT_OK) {
    printf("FAIL %s: xent_check reported %s: %s\n", name, xent_status_string(checked), xent_last_error());
    failed = 1;
  }
  if (!failed && bad_row >= 0) {
    char expect_msg[64];
    snprintf(expect_msg, sizeof expect_msg, "row %lld has a label outside", (long long)bad_row);
    if (checked != XENT_ERROR_INVALID_LABEL || !strstr(xent_last_error(), expect_msg)) {
      printf("FAIL %s: xent_check should name row %lld, got %s: %s\n", name, (long long)bad_row,
             xent_status_string(checked), xent_last_error());
      failed = 1;
    }
  }
  const double tol = tu_tolerance(d->dtype, C);
  void* host = malloc(logits_bytes > (size_t)N * ab ? logits_bytes + 16 : (size_t)N * ab + 16);
  if (!failed && op != XENT_OP_BACKWARD) {
    tu_to_host(kind, host, loss, (size_t)nloss * eb);
    /* Reduced losses are sums of row losses: compare against the sum of
       magnitudes so cancellation does not inflate the relative error. */
    double mag = 0;
    for (int64_t n = 0; n < N; ++n) mag += isnan(want_rows[n]) ? 0 : fabs(want_rows[n]);
    const double err = none ? tu_max_error(d->dtype, host, want_rows, N, 1e-3)
                            : tu_max_error(d->dtype, host, &want_total, 1, mag / (N > 0 ? N : 1) + 1e-3);
    if (err > tol) {
      snprintf(what, sizeof what, "loss error %.3g > %.3g", err, tol);
      printf("FAIL %s: %s\n", name, what);
      failed = 1;
    }
    tu_to_host(kind, host, lse, (size_t)N * ab);
    const double lerr = tu_max_error(xent_acc_dtype(d->dtype), host, want_lse, N, 1.0);
    if (lerr > tol) {
      printf("FAIL %s: lse error %.3g > %.3g\n", name, lerr, tol);
      failed = 1;
    }
  }
  if (!failed && op != XENT_OP_FORWARD) {
    tu_to_host(kind, host, grad, logits_bytes);
    /* Gradient entries are differences of O(scale) terms: absolute tolerance
       relative to the row's largest coefficient. */
    double gmax = 0;
    for (int64_t i = 0; i < N * C; ++i) gmax = fmax(gmax, isnan(want_grad[i]) ? 0 : fabs(want_grad[i]));
    const double err = tu_max_error(d->dtype, host, want_grad, N * C, gmax + 1e-30);
    if (err > tol) {
      printf("FAIL %s: grad error %.3g > %.3g\n", name, err, tol);
      failed = 1;
    }
    if (!failed && op == XENT_OP_FORWARD_BACKWARD && N > 0) {
      /* In place: the logits buffer receives the gradient, bit for bit the
         same as the separate buffer. */
      s = xent_ce_forward_backward(h, d, logits, labels, weights, dloss_dev, loss, lse, logits, ws, ws_bytes, NULL);
      tu_sync(kind);
      xent_check(h); /* already verified above; clear the record */
      void* in_place = malloc(logits_bytes);
      tu_to_host(kind, in_place, logits, logits_bytes);
      if (s != XENT_OK || memcmp(in_place, host, logits_bytes) != 0) {
        printf("FAIL %s: in-place gradient differs from the out-of-place one (%s)\n", name, xent_last_error());
        failed = 1;
      }
      free(in_place);
    }
  }
  free(host);
  free(lse_host);
  tu_free(kind, logits);
  tu_free(kind, labels);
  if (weights) tu_free(kind, weights);
  tu_free(kind, dloss_dev);
  tu_free(kind, loss);
  tu_free(kind, lse);
  tu_free(kind, grad);
  tu_free(kind, ws);
  free(want_rows);
  free(want_lse);
  free(want_grad);
  free(dloss);
  tu_free_inputs(&in);
  return failed;
}
