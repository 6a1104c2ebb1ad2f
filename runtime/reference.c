#include "reference.h"

#include <math.h>

#include "numeric.h"

/* Offset of class c of row r when the class axis has `classes` entries and
   stride `inner` (README, "Semantics"): the layout of both families. */
static int64_t layout_index(int64_t classes, int64_t inner, int64_t row, int64_t c) {
  if (inner < 1) inner = 1;
  return (row / inner) * classes * inner + c * inner + row % inner;
}

int64_t xent_ref_index(const xent_ce_desc* d, int64_t row, int64_t c) {
  return layout_index(d->classes, d->inner, row, c);
}

static double weight_of(const xent_ce_desc* d, const void* weights, int64_t c) {
  return weights ? xent_load(xent_acc_dtype(d->dtype), weights, c) : 1.0;
}

/* Logit (row, c) after soft-capping (cap * tanh(x / cap); none when cap is 0). */
static double logit(const xent_ce_desc* d, const void* logits, int64_t row, int64_t c) {
  const double x = xent_load(d->dtype, logits, xent_ref_index(d, row, c));
  return d->softcap > 0 ? d->softcap * tanh(x / d->softcap) : x;
}

/* The smoothed soft label t'_c = (1 - eps) * t_c + eps / C. */
static double target(const xent_ce_desc* d, const void* labels, int64_t row, int64_t c) {
  const double t = xent_load(d->dtype, labels, xent_ref_index(d, row, c));
  return (1 - d->label_smoothing) * t + d->label_smoothing / (double)d->classes;
}

static double row_lse(const xent_ce_desc* d, const void* logits, int64_t n) {
  const int64_t C = d->classes;
  double m = -INFINITY;
  for (int64_t c = 0; c < C; ++c) {
    const double x = logit(d, logits, n, c);
    if (isnan(x)) return NAN;
    if (x > m) m = x;
  }
  if (m == -INFINITY || m == INFINITY) return m;
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += exp(logit(d, logits, n, c) - m);
  return m + log(s);
}

static double sum_class_weights(const xent_ce_desc* d, const void* weights) {
  double s = 0;
  for (int64_t c = 0; c < d->classes; ++c) s += weight_of(d, weights, c);
  return s;
}

/* Whether a hard label counts as ignored: it is ignore_index, or it is out
   of range and the policy says to ignore such labels. */
static int row_ignored(const xent_ce_desc* d, int64_t y) {
  if (y == d->ignore_index) return 1;
  return d->invalid_labels == XENT_INVALID_LABELS_IGNORE && (y < 0 || y >= d->classes);
}

/* The mean's denominator: for hard labels the sum over counted rows (not
   ignored, label in range) of w[y]; for soft labels the number of rows. */
static double mean_denominator(const xent_ce_desc* d, const void* labels, const void* weights) {
  if (d->label_type == XENT_PROB) return (double)d->rows;
  double total = 0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const int64_t y = xent_load_label(d->label_type, labels, n);
    if (!row_ignored(d, y) && y >= 0 && y < d->classes) total += weight_of(d, weights, y);
  }
  return total;
}

/* One row's loss. */
static double row_loss(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                       double sum_w, int64_t n, double lse) {
  const int64_t C = d->classes;
  const double eps = d->label_smoothing;
  if (d->label_type == XENT_PROB) {
    double l = 0;
    for (int64_t c = 0; c < C; ++c)
      l += weight_of(d, weights, c) * target(d, labels, n, c) * (lse - logit(d, logits, n, c));
    return l + d->z_loss * lse * lse;
  }
  const int64_t y = xent_load_label(d->label_type, labels, n);
  if (row_ignored(d, y)) return 0;
  if (y < 0 || y >= C) return NAN;
  double l = (1 - eps) * weight_of(d, weights, y) * (lse - logit(d, logits, n, y));
  if (eps != 0) {
    double sum_wx = 0;
    for (int64_t c = 0; c < C; ++c) sum_wx += weight_of(d, weights, c) * logit(d, logits, n, c);
    l += eps / (double)C * (sum_w * lse - sum_wx);
  }
  return l + d->z_loss * lse * lse;
}

void xent_ref_ce_forward(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                         double* loss_rows, double* loss_total, double* lse_out, double* log_prob, double* softmax) {
  const double sum_w = sum_class_weights(d, weights);
  double total = 0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const double lse = row_lse(d, logits, n);
    const double l = row_loss(d, logits, labels, weights, sum_w, n, lse);
    total += l;
    if (loss_rows) loss_rows[n] = l;
    if (lse_out) lse_out[n] = lse;
    for (int64_t c = 0; c < d->classes && (log_prob || softmax); ++c) {
      const double lp = logit(d, logits, n, c) - lse;
      if (log_prob) log_prob[xent_ref_index(d, n, c)] = lp;
      if (softmax) softmax[xent_ref_index(d, n, c)] = exp(lp);
    }
  }
  if (!loss_total) return;
  if (d->reduction == XENT_REDUCTION_MEAN) {
    const double denominator = mean_denominator(d, labels, weights);
    *loss_total = (denominator == 0 && d->all_ignored_zero) ? 0.0 : total / denominator;
  } else {
    *loss_total = total;
  }
}

void xent_ref_ce_backward(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                          const double* lse_in, const double* dloss, const double* grad_bias, double* grad,
                          double* grad_labels) {
  const int64_t C = d->classes;
  const double eps = d->label_smoothing;
  const double sum_w = sum_class_weights(d, weights);
  const double denominator = d->reduction == XENT_REDUCTION_MEAN ? mean_denominator(d, labels, weights) : 1.0;
  const int soft = d->label_type == XENT_PROB;
  for (int64_t n = 0; n < d->rows; ++n) {
    const double upstream = dloss ? dloss[d->reduction == XENT_REDUCTION_NONE ? n : 0] : 1.0;
    const double scale = upstream / denominator;
    const double lse = lse_in ? lse_in[n] : row_lse(d, logits, n);
    /* dx_c = p_c * p_coef - (the label's part of c), times the cap's factor. */
    double p_coef = 0;
    int64_t y = -1;
    double row_value = 0; /* 0 for ignored rows, NaN for bad labels */
    int active = 1;
    if (soft) {
      for (int64_t c = 0; c < C; ++c) p_coef += weight_of(d, weights, c) * target(d, labels, n, c);
    } else {
      y = xent_load_label(d->label_type, labels, n);
      if (row_ignored(d, y)) active = 0;
      else if (y < 0 || y >= C) active = 0, row_value = NAN;
      else p_coef = (1 - eps) * weight_of(d, weights, y) + eps / (double)C * sum_w;
    }
    p_coef += 2 * d->z_loss * lse;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = xent_ref_index(d, n, c);
      double dx = row_value;
      if (active) {
        const double p = exp(logit(d, logits, n, c) - lse);
        dx = p * p_coef;
        if (soft) {
          dx -= weight_of(d, weights, c) * target(d, labels, n, c);
        } else {
          dx -= eps / (double)C * weight_of(d, weights, c);
          if (c == y) dx -= (1 - eps) * weight_of(d, weights, y);
        }
        if (d->softcap > 0) {
          /* Chain rule through cap * tanh(x / cap). */
          const double t = tanh(xent_load(d->dtype, logits, i) / d->softcap);
          dx *= 1 - t * t;
        }
        dx *= scale;
      }
      grad[i] = dx + (grad_bias ? grad_bias[i] : 0.0);
      /* d loss / d t_c = (1 - eps) * w_c * (lse - x_c). */
      if (soft && grad_labels)
        grad_labels[i] = scale * (1 - eps) * weight_of(d, weights, c) * (lse - logit(d, logits, n, c));
    }
  }
}

static int64_t softmax_index(const xent_softmax_desc* d, int64_t row, int64_t c) {
  return layout_index(d->classes, d->inner, row, c);
}

void xent_ref_softmax_forward(const xent_softmax_desc* d, const void* x, double* y) {
  for (int64_t n = 0; n < d->rows; ++n) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < d->classes; ++c) m = fmax(m, xent_load(d->dtype, x, softmax_index(d, n, c)));
    for (int64_t c = 0; c < d->classes; ++c) s += exp(xent_load(d->dtype, x, softmax_index(d, n, c)) - m);
    const double lse = m + log(s);
    for (int64_t c = 0; c < d->classes; ++c) {
      const int64_t i = softmax_index(d, n, c);
      const double v = xent_load(d->dtype, x, i) - lse;
      y[i] = d->kind == XENT_LOG_SOFTMAX ? v : exp(v);
    }
  }
}

void xent_ref_softmax_backward(const xent_softmax_desc* d, const void* y, const void* dy, double* dx) {
  for (int64_t n = 0; n < d->rows; ++n) {
    double sum = 0;
    for (int64_t c = 0; c < d->classes; ++c) {
      const int64_t i = softmax_index(d, n, c);
      sum += xent_load(d->dtype, dy, i) * (d->kind == XENT_LOG_SOFTMAX ? 1.0 : xent_load(d->dtype, y, i));
    }
    for (int64_t c = 0; c < d->classes; ++c) {
      const int64_t i = softmax_index(d, n, c);
      const double yi = xent_load(d->dtype, y, i), dyi = xent_load(d->dtype, dy, i);
      dx[i] = d->kind == XENT_LOG_SOFTMAX ? dyi - exp(yi) * sum : yi * (dyi - sum);
    }
  }
}
