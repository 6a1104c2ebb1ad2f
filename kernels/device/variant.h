// The compile-time axes a family kernel's traits type names, as a spec
// spells them: the op (V::kOp: fwd, bwd, fwd_bwd), the reduction
// (V::kReduction: none, sum, mean), and an option axis (cross_entropy's
// V::kWeights and the like): off or on where the spec specializes it (its
// first value or its second: "unweighted" or "weighted"), or XENT_RUNTIME
// where a kernel serves both and the call's argument decides.
#pragma once

enum { XENT_FWD = 0, XENT_BWD = 1, XENT_FWD_BWD = 2 };
// XENT_REDUCED: a sum or a mean, for a rows kernel that the two share (it
// reads the reduction only as none or not).
enum { XENT_REDUCE_NONE = 0, XENT_REDUCE_SUM = 1, XENT_REDUCE_MEAN = 2, XENT_REDUCED = 3 };
enum { XENT_OFF = 0, XENT_ON = 1, XENT_RUNTIME = 2 };
