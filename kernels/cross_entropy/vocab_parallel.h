// The vocabulary-parallel cross entropy's records: a row's statistics from
// every slice's.
#pragma once

#include "token_stats.h"

// Vocabulary-parallel: one row's global statistics from every slice's
// record, gathered rank by rank as [shards][rows][record]. A record is (ref,
// s, a, b) in the accumulation type: a slice's ref is its max (0 where it has
// no finite logit, s == 0), s its sum of exp(z - ref), and its share of the
// row's loss is a*(lse - ref) - b: with m the global max and lr = log sum
// exp(z - m), lse - ref = (m - ref) + lr, shift-invariant like the one-device
// formulas. A call with per-token outputs (wide) gathers wider records, (ref,
// s, a, b, t, yz, here, v) and an int64 index: t = sum exp(z - ref)*(z - ref)
// (the entropy's share), yz = z_y - ref and here = 1 on the slice holding the
// label (the log-prob), v and the index the slice's argmax as a global class
// (v NaN for its first NaN; XENT_NO_INDEX where it has neither). Always in
// rank order: the same bits on every rank.
template <typename A>
XENT_DEVICE int64_t xent_shard_record(bool wide) {
  return wide ? 8 + 8 / (int64_t)sizeof(A) : 4;  // in A's, the index in the last 8 bytes
}

template <typename A>
struct xent_gathered {
  A m, lr, lse;  // the global max, log sum exp(z - m), and m + lr
  A sum_a;       // the slices' a, added
  A loss;        // the row's loss without z-loss (hard labels: if in range)
  A Em;          // wide: E_p[z] - m, the slices' t moved to m over S
};

template <typename A>
XENT_DEVICE xent_gathered<A> xent_gathered_row(const A* g, int64_t rows, int shards, int64_t row, bool wide) {
  const int64_t rec = xent_shard_record<A>(wide);
  A m = xent_lowest(A(0)), s = 0;
  for (int k = 0; k < shards; ++k) {
    const A* st = g + ((int64_t)k * rows + row) * rec;
    if (st[1] == A(0)) continue;  // no finite logit: nothing to add, and ref is not a max
    if (st[0] > m) {
      s = s * xent_exp(m - st[0]) + st[1];
      m = st[0];
    } else {
      s += st[1] * xent_exp(st[0] - m);
    }
  }
  xent_gathered<A> r;
  const A log_s = xent_log(s);
  r.m = m;
  r.lr = log_s + (m - m);  // NaN where m is +inf or NaN, as one device has it
  r.lse = xent_lse(m, log_s);
  r.sum_a = 0;
  r.loss = 0;
  A T = 0;
  for (int k = 0; k < shards; ++k) {
    const A* st = g + ((int64_t)k * rows + row) * rec;
    r.sum_a += st[2];
    // A slice with a == 0 adds no lse: (m - ref) may be inf there (ref
    // -3e38 under a max of 3e38), and 0 * inf would make the row NaN.
    if (st[2] != A(0)) r.loss += st[2] * ((m - st[0]) + r.lr);
    r.loss -= st[3];
    if (wide) T += xent_entropy_share(st[0], st[1], st[4], m);
  }
  r.Em = T / s;
  return r;
}

// Wide records: the label's log-prob z_y - lse, from the slice holding it
// (false if none does: the slices do not cover the label's class).
template <typename A>
XENT_DEVICE bool xent_gathered_logprob(const A* g, int64_t rows, int shards, int64_t row, const xent_gathered<A>& r,
                                       A& logprob) {
  const int64_t rec = xent_shard_record<A>(true);
  for (int k = 0; k < shards; ++k) {
    const A* st = g + ((int64_t)k * rows + row) * rec;
    if (st[6] != A(0)) {
      logprob = st[5] - ((r.m - st[0]) + r.lr);
      return true;
    }
  }
  return false;
}

// Wide records: the row's argmax as torch.argmax has it, the lowest global
// index of the first NaN, else of the largest value, else 0 (a row of -inf).
// Ties go to the lowest index whatever the ranks' order.
template <typename A>
XENT_DEVICE int64_t xent_gathered_argmax(const A* g, int64_t rows, int shards, int64_t row) {
  const int64_t rec = xent_shard_record<A>(true);
  A bv = 0;
  int64_t bi = XENT_NO_INDEX;
  bool nan = false;
  for (int k = 0; k < shards; ++k) {
    const A* st = g + ((int64_t)k * rows + row) * rec;
    const int64_t i = *(const int64_t*)(st + 8);
    if (i == XENT_NO_INDEX) continue;
    const A v = st[7];
    const bool vn = v != v;
    const bool better = bi == XENT_NO_INDEX || (vn ? !nan || i < bi : !nan && (v > bv || (v == bv && i < bi)));
    if (better) {
      bv = v;
      bi = i;
      nan = vn;
    }
  }
  return bi == XENT_NO_INDEX ? 0 : bi;
}
