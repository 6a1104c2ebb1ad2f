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

static void* upload(xent_backend_kind kind, const void* host, size_t bytes) {
  void* p = tu_alloc(kind, bytes);
  if (host) tu_to_device(kind, p, host, bytes);
  return p;
}

static int report(const char* name, const char* what, double err, double tol) {
  if (err <= tol) return 0;
  printf("FAIL %s: %s error %.3g > %.3g\n", name, what, err, tol);
  return 1;
}

/* Largest |v| over n finite values (a scale for absolute tolerances). */
static double max_abs(const double* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = fmax(m, isnan(v[i]) ? 0 : fabs(v[i]));
  return m;
}

/* An atol that forgives f16's absolute rounding below its normal range
   (subnormal spacing 2^-24, rounding error up to half of it): long rows have
   gradient entries of 1e-6 and less. */
static double subnormal_atol(xent_dtype dtype, double tol) { return dtype == XENT_F16 ? ldexp(1.0, -25) / tol : 0.0; }

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
  dc.t.logits = upload(kind, in.logits, logits_bytes);
  dc.t.labels = upload(kind, in.labels, labels_bytes);
  dc.t.weights = in.weights ? upload(kind, in.weights, (size_t)C * ab) : NULL;
  dc.t.dloss = upload(kind, in.dloss, (size_t)nloss * lb);
  dc.t.grad_bias = in.grad_bias ? upload(kind, in.grad_bias, grad_bytes) : NULL;
  dc.t.loss = upload(kind, NULL, (size_t)nloss * lb);
  dc.t.lse = upload(kind, NULL, (size_t)N * ab);
  dc.t.grad = upload(kind, NULL, grad_bytes);
  if (extras) {
    dc.t.log_prob = upload(kind, NULL, logits_bytes);
    dc.t.softmax = upload(kind, NULL, logits_bytes);
    if (soft) dc.t.grad_labels = upload(kind, NULL, logits_bytes);
  }
  /* Backward needs a saved lse: the reference's, rounded to the accumulation
     type as forward would save it. */
  void* lse_host = malloc(COUNT(N) * ab);
  for (int64_t n = 0; n < N; ++n) xent_store(xent_acc_dtype(d->dtype), lse_host, n, want_lse[n]);
  void* lse_in = upload(kind, lse_host, (size_t)N * ab);
  dc.t.lse_in = lse_in;
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
  int64_t bad_row = -1;
  for (int64_t n = 0; !soft && n < N && bad_row < 0 && d->invalid_labels == XENT_INVALID_LABELS_REPORT; ++n) {
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
  void* host = malloc(COUNT(NC) * 8 + COUNT(N) * 8);
  if (!failed && forward) {
    tu_to_host(kind, host, dc.t.loss, (size_t)nloss * lb);
    /* Reduced losses are sums of row losses: compare against the sum of
       magnitudes so cancellation does not inflate the relative error. */
    double mag = 0;
    for (int64_t n = 0; n < N; ++n) mag += isnan(want_rows[n]) ? 0 : fabs(want_rows[n]);
    const double tol = tu_tolerance(d->loss_dtype, C);
    const double err = none ? tu_max_error(d->loss_dtype, host, want_rows, N, 1e-3)
                            : tu_max_error(d->loss_dtype, host, &want_total, 1, mag / (double)COUNT(N) + 1e-3);
    failed |= report(name, "loss", err, d->loss_dtype == d->dtype ? tol : tu_tolerance(d->dtype == XENT_F64 ? XENT_F64 : XENT_F32, C));
    tu_to_host(kind, host, dc.t.lse, (size_t)N * ab);
    failed |= report(name, "lse", tu_max_error(xent_acc_dtype(d->dtype), host, want_lse, N, 1.0), tu_tolerance(d->dtype, C));
    if (extras) {
      const double tol_out = tu_tolerance(d->dtype, C);
      tu_to_host(kind, host, dc.t.log_prob, logits_bytes);
      failed |= report(name, "log_prob", tu_max_error(d->dtype, host, want_log_prob, NC, 1.0), tol_out);
      tu_to_host(kind, host, dc.t.softmax, logits_bytes);
      failed |= report(name, "softmax", tu_max_error(d->dtype, host, want_softmax, NC, 1e-3 + subnormal_atol(d->dtype, tol_out)), tol_out);
    }
  }
  if (!failed && backward) {
    /* Gradient entries are differences of O(scale) terms: absolute tolerance
       relative to the largest entry. An f32 gradient from f16/bf16 logits
       must have f32 accuracy (it was not rounded to the logits dtype). */
    const double tol = tu_tolerance(d->grad_dtype == d->dtype ? d->dtype : XENT_F32, C);
    /* With C = 1 every entry is p*coef - coef with p = 1: exactly 0 in
       theory, a rounding residue of the upstream gradient's size in f32. */
    const double gscale = C == 1 ? fmax(max_abs(want_grad, NC), max_abs(dloss, nloss)) : max_abs(want_grad, NC);
    tu_to_host(kind, host, dc.t.grad, grad_bytes);
    failed |= report(name, "grad",
                     tu_max_error(d->grad_dtype, host, want_grad, NC, gscale + 1e-30 + subnormal_atol(d->grad_dtype, tol)), tol);
    if (!failed && dc.t.grad_labels) {
      void* gl = malloc(COUNT(NC) * eb);
      tu_to_host(kind, gl, dc.t.grad_labels, logits_bytes);
      failed |= report(name, "grad_labels",
                       tu_max_error(d->dtype, gl, want_grad_labels, NC,
                                    max_abs(want_grad_labels, NC) + 1e-30 + subnormal_atol(d->dtype, tu_tolerance(d->dtype, C))),
                       tu_tolerance(d->dtype, C));
      free(gl);
    }
    if (!failed && op == XENT_OP_FORWARD_BACKWARD && N > 0 && d->grad_dtype == d->dtype) {
      /* In place: the logits buffer receives the gradient, bit for bit the
         same as the separate buffer. */
      xent_ce_tensors t = dc.t;
      t.grad = (void*)t.logits;
      s = xent_ce_run(h, d, op, &t, dc.ws, dc.ws_bytes, NULL);
      tu_sync(kind);
      xent_check(h); /* already verified above; clear the record */
      void* in_place = malloc(logits_bytes);
      tu_to_host(kind, in_place, t.logits, logits_bytes);
      if (s != XENT_OK || memcmp(in_place, host, logits_bytes) != 0) {
        printf("FAIL %s: in-place gradient differs from the out-of-place one (%s)\n", name, xent_last_error());
        failed = 1;
      }
      free(in_place);
    }
  }
  free(host);
  free(lse_host);
  void* device[] = {(void*)dc.t.logits, (void*)dc.t.labels, (void*)dc.t.weights, (void*)dc.t.dloss,
                    (void*)dc.t.grad_bias, dc.t.loss, dc.t.lse, dc.t.grad, dc.t.log_prob, dc.t.softmax,
                    dc.t.grad_labels, lse_in, dc.ws};
  for (size_t i = 0; i < sizeof device / sizeof device[0]; ++i)
    if (device[i]) tu_free(kind, device[i]);
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
