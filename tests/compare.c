/* What every cross-entropy call check compares against the reference, in one
   place: the tolerances of the loss, lse, gradients and extra outputs, the
   bad-label row xent_check must name, and the device buffers of a call. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/numeric.h"
#include "tests/testutil.h"

void* tu_upload(xent_backend_kind kind, const void* host, size_t bytes) {
  void* p = tu_alloc(kind, bytes ? bytes : 1);
  if (host && bytes) tu_to_device(kind, p, host, bytes);
  return p;
}

void tu_free_tensors(xent_backend_kind kind, const xent_ce_tensors* t) {
  const void* device[] = {t->logits, t->labels, t->weights, t->lse_in, t->dloss, t->grad_bias,
                          t->loss,   t->lse,    t->log_prob, t->softmax, t->grad, t->grad_labels};
  for (size_t i = 0; i < sizeof device / sizeof device[0]; ++i)
    if (device[i]) tu_free(kind, (void*)device[i]);
}

int tu_report(const char* name, const char* what, double err, double tol) {
  if (err <= tol) return 0;
  printf("FAIL %s: %s error %.3g > %.3g\n", name, what, err, tol);
  return 1;
}

double tu_max_abs(const double* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = fmax(m, isnan(v[i]) ? 0 : fabs(v[i]));
  return m;
}

/* f16's absolute rounding below its normal range (subnormal spacing 2^-24,
   rounding error up to half of it), as an atol relative to tol: long rows
   have gradient entries of 1e-6 and less. */
double tu_subnormal_atol(xent_dtype dtype, double tol) { return dtype == XENT_F16 ? ldexp(1.0, -25) / tol : 0.0; }

int64_t tu_first_bad_row(const xent_ce_desc* d, const void* labels) {
  if (d->label_type == XENT_PROB || d->invalid_labels != XENT_INVALID_LABELS_REPORT) return -1;
  for (int64_t n = 0; n < d->rows; ++n) {
    const int64_t y = xent_load_label(d->label_type, labels, n);
    if ((y != d->ignore_index || y == XENT_NO_IGNORE_INDEX) && (y < 0 || y >= d->classes)) return n;
  }
  return -1;
}

int tu_expect_check(const char* name, xent_status checked, const char* message, int64_t bad_row) {
  if (bad_row < 0) {
    if (checked == XENT_OK) return 0;
    printf("FAIL %s: xent_check reported %s: %s\n", name, xent_status_string(checked), message);
    return 1;
  }
  char expect[64];
  snprintf(expect, sizeof expect, "row %lld has a label outside", (long long)bad_row);
  if (checked == XENT_ERROR_INVALID_LABEL && strstr(message, expect)) return 0;
  printf("FAIL %s: xent_check should name row %lld, got %s: %s\n", name, (long long)bad_row,
         xent_status_string(checked), message);
  return 1;
}

/* The reference as the output dtype holds it where that is infinite: a sum
   past f16's range (65504) is inf in PyTorch's f16 loss as in ours. Finite
   references are compared unrounded (the tolerances include the output's
   rounding). */
static double tu_as_stored(xent_dtype dtype, double want) {
  double stored = 0;
  xent_store(dtype, &stored, 0, want);
  const double back = xent_load(dtype, &stored, 0);
  return isinf(back) && !isinf(want) && !isnan(want) ? back : want;
}

int tu_compare_loss(const char* name, const xent_ce_desc* d, const void* loss, const void* lse,
                    const double* want_rows, double want_total, const double* want_lse) {
  const int64_t N = d->rows, C = d->classes;
  const xent_dtype acc = xent_acc_dtype(d->dtype);
  const double tol = tu_tolerance(d->loss_dtype == d->dtype ? d->dtype : XENT_F32, C);
  int failed;
  if (d->reduction == XENT_REDUCTION_NONE) {
    /* A row's loss is a difference (lse - z_y, or lse - sum q z) of terms of
       order max(1, |lse|) computed in the accumulation type: its absolute
       error has that floor whatever the row's loss, which may be 1e-6 (a
       confident row). Relative to |loss| + that floor in units of the
       output's tolerance, and never less than 1e-3 of it. */
    const double floor_scale = tu_tolerance(acc, C) / tol;
    double worst = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double lse_n = isfinite(want_lse[n]) ? fabs(want_lse[n]) : 0;
      const double atol = fmax(1e-3, floor_scale * fmax(1.0, lse_n));
      const double want = tu_as_stored(d->loss_dtype, want_rows[n]);
      const void* got = (const char*)loss + (size_t)n * tu_dtype_bytes(d->loss_dtype);
      worst = fmax(worst, tu_max_error(d->loss_dtype, got, &want, 1, atol));
    }
    failed = tu_report(name, "loss", worst, tol);
  } else {
    /* Reduced losses are sums of row losses: compare against the sum of
       magnitudes so cancellation does not inflate the relative error. An
       f32 loss from f16/bf16 logits must have f32 accuracy. */
    double mag = 0;
    for (int64_t n = 0; n < N; ++n) mag += isnan(want_rows[n]) ? 0 : fabs(want_rows[n]);
    const double want = tu_as_stored(d->loss_dtype, want_total);
    failed = tu_report(name, "loss", tu_max_error(d->loss_dtype, loss, &want, 1, mag / (double)(N > 0 ? N : 1) + 1e-3),
                       tol);
  }
  failed |= tu_report(name, "lse", tu_max_error(acc, lse, want_lse, N, 1.0), tu_tolerance(d->dtype, C));
  return failed;
}

int tu_compare_grad(const char* name, const xent_ce_desc* d, const void* grad, const double* want_grad,
                    const double* dloss, const void* grad_labels, const double* want_grad_labels) {
  const int64_t C = d->classes, NC = d->rows * C;
  const int64_t nloss = d->reduction == XENT_REDUCTION_NONE ? d->rows : 1;
  /* Gradient entries are differences of O(scale) terms: absolute tolerance
     relative to the largest entry. An f32 gradient from f16/bf16 logits
     must have f32 accuracy (it was not rounded to the logits dtype). */
  const double tol = tu_tolerance(d->grad_dtype == d->dtype ? d->dtype : XENT_F32, C);
  /* With C = 1 every entry is p*coef - coef with p = 1: exactly 0 in
     theory, a rounding residue of the upstream gradient's size in f32. */
  const double gscale = C == 1 ? fmax(tu_max_abs(want_grad, NC), tu_max_abs(dloss, nloss)) : tu_max_abs(want_grad, NC);
  int failed = tu_report(name, "grad",
                         tu_max_error(d->grad_dtype, grad, want_grad, NC,
                                      gscale + 1e-30 + tu_subnormal_atol(d->grad_dtype, tol)),
                         tol);
  if (!failed && grad_labels) {
    const double tol_labels = tu_tolerance(d->dtype, C);
    failed |= tu_report(name, "grad_labels",
                        tu_max_error(d->dtype, grad_labels, want_grad_labels, NC,
                                     tu_max_abs(want_grad_labels, NC) + 1e-30 + tu_subnormal_atol(d->dtype, tol_labels)),
                        tol_labels);
  }
  return failed;
}
