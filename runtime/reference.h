/* The CPU reference: straightforward C, double accumulation, every option.
   It is the oracle for every kernel test and is itself checked against
   PyTorch (tests/reference_vs_torch_test.py). Inputs are in the descriptor's
   dtypes; outputs are double so tests can compare at any tolerance. */
#ifndef XENT_REFERENCE_H
#define XENT_REFERENCE_H

#include "xent.h"

#ifdef __cplusplus
extern "C" {
#endif

/* loss_rows [N] (may be NULL): each row's loss; loss_total [1] (may be NULL):
   the reduction (for 'none': their sum); lse [N] (may be NULL). weights are
   in the accumulation type (f32, or f64 for XENT_F64) or NULL. */
void xent_ref_ce_forward(const xent_ce_desc* desc, const void* logits, const void* labels, const void* weights,
                         double* loss_rows, double* loss_total, double* lse);

/* grad [N*C]. dloss: [N] for 'none', else [1], or NULL for 1. lse: the
   saved per-row log-sum-exp, or NULL to compute it here. */
void xent_ref_ce_backward(const xent_ce_desc* desc, const void* logits, const void* labels, const void* weights,
                          const double* lse, const double* dloss, double* grad);

#ifdef __cplusplus
}
#endif

#endif
