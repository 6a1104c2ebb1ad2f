#include "reference.h"

#include <math.h>

#include "numeric.h"

static double weight_of(const xent_ce_desc* d, const void* weights, int64_t c) {
  return weights ? xent_load(xent_acc_dtype(d->dtype), weights, c) : 1.0;
}

/* Logit i after soft-capping (cap * tanh(x / cap); none when cap is 0). */
static double logit(const xent_ce_desc* d, const void* logits, int64_t i) {
  const double x = xent_load(d->dtype, logits, i);
  return d->softcap > 0 ? d->softcap * tanh(x / d->softcap) : x;
}

static double row_lse(const xent_ce_desc* d, const void* logits, int64_t n) {
  const int64_t C = d->classes;
  double m = -INFINITY;
  for (int64_t c = 0; c < C; ++c) {
    const double x = logit(d, logits, n * C + c);
    if (isnan(x)) return NAN;
    if (x > m) m = x;
  }
  if (m == -INFINITY || m == INFINITY) return m;
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += exp(logit(d, logits, n * C + c) - m);
  return m + log(s);
}

static double sum_class_weights(const xent_ce_desc* d, const void* weights) {
  double s = 0;
  for (int64_t c = 0; c < d->classes; ++c) s += weight_of(d, weights, c);
  return s;
}

/* Whether row n counts as ignored: its label is ignore_index, or it is out
   of range and the policy says to ignore such labels. */
static int row_ignored(const xent_ce_desc* d, int64_t y) {
  if (y == d->ignore_index) return 1;
  return d->invalid_labels == XENT_INVALID_LABELS_IGNORE && (y < 0 || y >= d->classes);
}

/* Sum over rows of w[y] for rows that count (not ignored, label in range):
   the mean's denominator. */
static double total_row_weight(const xent_ce_desc* d, const void* labels, const void* weights) {
  double total = 0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const int64_t y = xent_load_label(d->label_type, labels, n);
    if (!row_ignored(d, y) && y >= 0 && y < d->classes) total += weight_of(d, weights, y);
  }
  return total;
}

void xent_ref_ce_forward(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                         double* loss_rows, double* loss_total, double* lse_out) {
  const int64_t C = d->classes;
  const double eps = d->label_smoothing;
  const double sum_w = sum_class_weights(d, weights);
  double total = 0, total_weight = 0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const double lse = row_lse(d, logits, n);
    const int64_t y = xent_load_label(d->label_type, labels, n);
    double l = 0;
    if (!row_ignored(d, y)) {
      if (y < 0 || y >= C) {
        l = NAN;
      } else {
        const double wy = weight_of(d, weights, y);
        l = (1 - eps) * wy * (lse - logit(d, logits, n * C + y));
        if (eps != 0) {
          double sum_wx = 0;
          for (int64_t c = 0; c < C; ++c) sum_wx += weight_of(d, weights, c) * logit(d, logits, n * C + c);
          l += eps / (double)C * (sum_w * lse - sum_wx);
        }
        l += d->z_loss * lse * lse;
        total_weight += wy;
      }
    }
    total += l;
    if (loss_rows) loss_rows[n] = l;
    if (lse_out) lse_out[n] = lse;
  }
  if (!loss_total) return;
  if (d->reduction == XENT_REDUCTION_MEAN) {
    *loss_total = (total_weight == 0 && d->all_ignored_zero) ? 0.0 : total / total_weight;
  } else {
    *loss_total = total;
  }
}

void xent_ref_ce_backward(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                          const double* lse_in, const double* dloss, double* grad) {
  const int64_t C = d->classes;
  const double eps = d->label_smoothing;
  const double sum_w = sum_class_weights(d, weights);
  const double mean_denominator = d->reduction == XENT_REDUCTION_MEAN ? total_row_weight(d, labels, weights) : 1.0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const int64_t y = xent_load_label(d->label_type, labels, n);
    double* g = grad + n * C;
    if (row_ignored(d, y)) {
      for (int64_t c = 0; c < C; ++c) g[c] = 0;
      continue;
    }
    if (y < 0 || y >= C) {
      for (int64_t c = 0; c < C; ++c) g[c] = NAN;
      continue;
    }
    const double upstream = dloss ? dloss[d->reduction == XENT_REDUCTION_NONE ? n : 0] : 1.0;
    const double scale = upstream / mean_denominator;
    const double lse = lse_in ? lse_in[n] : row_lse(d, logits, n);
    const double wy = weight_of(d, weights, y);
    const double p_coef = (1 - eps) * wy + eps / (double)C * sum_w + 2 * d->z_loss * lse;
    for (int64_t c = 0; c < C; ++c) {
      const double p = exp(logit(d, logits, n * C + c) - lse);
      double dx = p * p_coef - eps / (double)C * weight_of(d, weights, c);
      if (c == y) dx -= (1 - eps) * wy;
      if (d->softcap > 0) {
        /* Chain rule through cap * tanh(x / cap). */
        const double t = tanh(xent_load(d->dtype, logits, n * C + c) / d->softcap);
        dx *= 1 - t * t;
      }
      g[c] = scale * dx;
    }
  }
}
