#include "reference.h"

#include <math.h>

#include "numeric.h"

/* Offset of class c of row r when the class axis has `classes` entries and
   stride `inner` (docs/API.md, "Semantics"): the layout of both families. */
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

/* A row's statistics, kept apart as PyTorch's log_softmax keeps them: the
   max m and lr = log sum exp(x - m), so that lse - x_c = (m - x_c) + lr and
   log p_c = (x_c - m) - lr never round a difference of logits to the
   magnitude of lse (1e8, 3e38). A NaN logit, or a max of +-inf, makes the
   row NaN (lr NaN), as x - max is NaN somewhere in PyTorch's. */
typedef struct row_stats {
  double m, lr;
  double lse; /* log sum exp(x): +-inf where the max is, as torch.logsumexp */
} row_stats;

static row_stats stats_of(double m, double s) {
  row_stats st = {m, isfinite(m) ? log(s) : NAN, isfinite(m) ? m + log(s) : m};
  return st;
}

static row_stats row_statistics(const xent_ce_desc* d, const void* logits, int64_t n) {
  const int64_t C = d->classes;
  double m = -INFINITY;
  for (int64_t c = 0; c < C; ++c) {
    const double x = logit(d, logits, n, c);
    if (isnan(x)) return stats_of(NAN, 0);
    if (x > m) m = x;
  }
  if (!isfinite(m)) return stats_of(m, 0);
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += exp(logit(d, logits, n, c) - m);
  return stats_of(m, s);
}

/* lse - x_c, and the log-probability x_c - lse. */
static double lse_minus(row_stats st, double x) { return (st.m - x) + st.lr; }
static double log_prob_of(row_stats st, double x) { return (x - st.m) - st.lr; }

static double sum_class_weights(const xent_ce_desc* d, const void* weights) {
  double s = 0;
  for (int64_t c = 0; c < d->classes; ++c) s += weight_of(d, weights, c);
  return s;
}

/* Whether a hard label counts as ignored: it is ignore_index, or it is out
   of range and the policy says to ignore such labels. */
static int row_ignored(const xent_ce_desc* d, int64_t y) {
  if (y == d->ignore_index && d->ignore_index != XENT_NO_IGNORE_INDEX) return 1;
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
                       int64_t n, row_stats st) {
  const double lse = st.lse;
  const int64_t C = d->classes;
  const double eps = d->label_smoothing;
  if (d->label_type == XENT_PROB) {
    double l = 0;
    for (int64_t c = 0; c < C; ++c)
      l += weight_of(d, weights, c) * target(d, labels, n, c) * lse_minus(st, logit(d, logits, n, c));
    return l + d->z_loss * lse * lse;
  }
  const int64_t y = xent_load_label(d->label_type, labels, n);
  if (row_ignored(d, y)) return 0;
  if (y < 0 || y >= C) return NAN;
  double l = (1 - eps) * weight_of(d, weights, y) * lse_minus(st, logit(d, logits, n, y));
  if (eps != 0) {
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) smooth += weight_of(d, weights, c) * lse_minus(st, logit(d, logits, n, c));
    l += eps / (double)C * smooth;
  }
  return l + d->z_loss * lse * lse;
}

void xent_ref_ce_forward(const xent_ce_desc* d, const void* logits, const void* labels, const void* weights,
                         double* loss_rows, double* loss_total, double* lse_out, double* log_prob, double* softmax) {
  double total = 0;
  for (int64_t n = 0; n < d->rows; ++n) {
    const row_stats st = row_statistics(d, logits, n);
    const double l = row_loss(d, logits, labels, weights, n, st);
    total += l;
    if (loss_rows) loss_rows[n] = l;
    if (lse_out) lse_out[n] = st.lse;
    for (int64_t c = 0; c < d->classes && (log_prob || softmax); ++c) {
      const double lp = log_prob_of(st, logit(d, logits, n, c));
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
    /* A caller's lse stands for the row's statistics as it is. */
    const row_stats st = lse_in ? stats_of(lse_in[n], 1) : row_statistics(d, logits, n);
    const double lse = st.lse;
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
        const double p = exp(log_prob_of(st, logit(d, logits, n, c)));
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
        grad_labels[i] = scale * (1 - eps) * weight_of(d, weights, c) * lse_minus(st, logit(d, logits, n, c));
    }
  }
}

static int64_t softmax_index(const xent_softmax_desc* d, int64_t row, int64_t c) {
  return layout_index(d->classes, d->inner, row, c);
}

void xent_ref_softmax_forward(const xent_softmax_desc* d, const void* x, double* y) {
  for (int64_t n = 0; n < d->rows; ++n) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < d->classes; ++c) {
      const double v = xent_load(d->dtype, x, softmax_index(d, n, c));
      m = isnan(v) || isnan(m) ? NAN : fmax(m, v);
    }
    for (int64_t c = 0; c < d->classes && isfinite(m); ++c) s += exp(xent_load(d->dtype, x, softmax_index(d, n, c)) - m);
    const row_stats st = stats_of(m, s);
    for (int64_t c = 0; c < d->classes; ++c) {
      const int64_t i = softmax_index(d, n, c);
      const double v = log_prob_of(st, xent_load(d->dtype, x, i));
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
