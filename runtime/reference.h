/* The CPU reference: straightforward C, double accumulation, every option.
   It is the oracle for every kernel test and is itself checked against
   PyTorch (tests/reference_vs_torch_test.py). Inputs are in the descriptor's
   dtypes and layout (rows, classes, inner: see xent.h); outputs are double,
   so tests can compare at any tolerance. */
#ifndef XENT_REFERENCE_H
#define XENT_REFERENCE_H

#include "xent.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Offset of class c of row r in the logits layout. */
int64_t xent_ref_index(const xent_ce_desc* desc, int64_t row, int64_t c);

/* loss_rows [rows] (may be NULL): each row's loss; loss_total [1] (may be
   NULL): the reduction (for 'none': their sum); lse [rows], log_prob and
   softmax [rows * C] in the logits layout (each may be NULL). labels are
   [rows] integers, or for XENT_PROB [rows * C] like the logits. weights are
   in the accumulation type (f32, or f64 for XENT_F64) or NULL. */
void xent_ref_ce_forward(const xent_ce_desc* desc, const void* logits, const void* labels, const void* weights,
                         double* loss_rows, double* loss_total, double* lse, double* log_prob, double* softmax);

/* grad [rows * C] in the logits layout. dloss: [rows] for 'none', else [1],
   or NULL for 1. lse: the saved per-row log-sum-exp, or NULL to compute it
   here. grad_bias [rows * C] or NULL: added to grad. grad_labels [rows * C]
   or NULL: the gradient with respect to soft labels (XENT_PROB only). */
void xent_ref_ce_backward(const xent_ce_desc* desc, const void* logits, const void* labels, const void* weights,
                          const double* lse, const double* dloss, const double* grad_bias, double* grad,
                          double* grad_labels);

/* The softmax family: y [rows * C] = softmax or log_softmax of x along the
   class axis (desc's layout); dx from y and dy. x, y, dy are in desc->dtype;
   y_out and dx are double. */
void xent_ref_softmax_forward(const xent_softmax_desc* desc, const void* x, double* y_out);
void xent_ref_softmax_backward(const xent_softmax_desc* desc, const void* y, const void* dy, double* dx);

#ifdef __cplusplus
}
#endif

#endif
