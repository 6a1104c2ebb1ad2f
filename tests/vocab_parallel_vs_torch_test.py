"""The vocabulary-parallel path (xent_vocab_shard) against PyTorch in float64,
on rows where a formula that is not shift-invariant loses everything.

Each rank is a Python thread with its own cpu handle (the generated kernels
under the SIMT emulator, both renderings) and its slice of the class axis;
they meet in an in-process all-gather passed as the xent_all_gather_fn. The
slices are cut so that one holds only -inf, another the row's max, another
logits of -3e38 under a max of +3e38, and the label sits in each of them. The
oracle is F.cross_entropy (and logsumexp for the lse, and autograd for the
gradient) of the whole row, on the same rounded values. Every rank must get
the same loss and lse, bit for bit.

Tolerance: as in xent_vs_torch_test (the dtype's rounding of the outputs plus
f32 sums); the combine adds a handful of f32 operations per rank."""

import ctypes
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from xent_ctypes import F32, F16, BF16, F64, I64, PROB, NONE, MEAN, BACKEND_CUDA, BACKEND_HIP, make_desc
from xent_ctypes import FORWARD, BACKWARD, FORWARD_BACKWARD, Tensors, VocabShard
from torch_oracle import TORCH, TOL, Group, emulated_call, load_lib, on_threads, raw, from_raw, addr

LIB = load_lib()


def run_ranks(target, dtype, label_type, reduction, cuts, op, x, labels, weights, smoothing, z_loss, dloss, lse_in=None):
    """One call of `op` split at `cuts` (the slices' first classes and C):
    each rank's (status, message, loss, lse, grad slice)."""
    ranks = len(cuts) - 1
    C = x.shape[1]
    group = Group(ranks)

    def rank_main(k):
        lo, hi = cuts[k], cuts[k + 1]
        xs = raw(x[:, lo:hi])
        out = {"loss": np.zeros(x.shape[0] if reduction == NONE else 1, xs.dtype),
               "lse": np.zeros(x.shape[0], np.float64 if dtype == F64 else np.float32),
               "grad": np.zeros_like(xs)}
        lab = raw(labels[:, lo:hi]) if label_type == PROB else labels
        fn = group.gather_fn(k)
        shard = VocabShard(lo, C, k, ranks, fn, None)
        d = make_desc(x.shape[0], hi - lo, dtype, label_type, reduction, -100, smoothing, z_loss=z_loss)
        d.vocab_shard = ctypes.pointer(shard)
        t = Tensors(logits=addr(xs), labels=addr(lab), weights=addr(weights), dloss=addr(dloss), lse_in=addr(lse_in),
                    loss=addr(out["loss"]) if op != BACKWARD else None,
                    lse=addr(out["lse"]) if op != BACKWARD else None,
                    grad=addr(out["grad"]) if op != FORWARD else None)
        return emulated_call(LIB, target, d, op, t) + (out,)

    return on_threads(ranks, rank_main), group.calls


class VocabParallelVsTorch(unittest.TestCase):
    def check(self, target, dtype, label_type, reduction, cuts, x, labels, weighted=False, smoothing=0.0, z_loss=0.0,
              seed=0, saved_lse_backward=False):
        name = (f"target={target} dtype={dtype} labels={label_type} red={reduction} cuts={cuts} w={weighted} "
                f"eps={smoothing} z={z_loss}")
        rng = np.random.default_rng(seed)
        rows, C = x.shape
        acc = np.float64 if dtype == F64 else np.float32
        weights = rng.uniform(0.3, 2.0, C).astype(acc) if weighted else None
        dloss_t = torch.from_numpy(rng.uniform(0.5, 1.5, rows if reduction == NONE else 1)).to(TORCH[dtype])
        # PyTorch, in float64 on the same rounded values.
        x64 = x.to(torch.float64, copy=True).requires_grad_(True)
        kwargs = dict(reduction={NONE: "none", MEAN: "mean"}[reduction], label_smoothing=smoothing)
        if weighted:
            kwargs["weight"] = torch.from_numpy(weights.astype(np.float64))
        target_t = labels.to(torch.float64) if label_type == PROB else torch.from_numpy(labels.astype(np.int64))
        want = F.cross_entropy(x64, target_t, **kwargs)
        lse64 = torch.logsumexp(x64, 1)
        if z_loss:
            # lse as m + log sum exp(x - m), m held constant: its gradient is
            # softmax(x), exact; logsumexp's own backward, exp(x - lse), loses
            # |lse| ulps (1e-8 relative at 1e8, even in float64).
            m = x64.detach().max(1, keepdim=True).values
            m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            zterm = z_loss * (m.squeeze(1) + torch.log(torch.exp(x64 - m).sum(1))) ** 2
            want = want + (zterm if reduction == NONE else zterm.sum() / rows)
        dl = dloss_t.to(torch.float64)
        want.backward(dl if reduction == NONE else dl[0])
        want_grad, want_lse = x64.grad.numpy(), lse64.detach().numpy()
        want = want.detach().numpy().reshape(-1)
        dloss = raw(dloss_t)
        tol = TOL[dtype]
        finite = want[np.isfinite(want)]
        loss_scale = np.abs(finite).max() if finite.size else 1.0
        finite = want_grad[np.isfinite(want_grad)]
        gscale = np.abs(finite).max() if finite.size else 1.0

        fwd, calls = run_ranks(target, dtype, label_type, reduction, cuts, FORWARD, x, labels, weights, smoothing,
                               z_loss, dloss)
        self.assertEqual(calls, [1] * (len(cuts) - 1), name + " one all-gather per rank")
        fused, _ = run_ranks(target, dtype, label_type, reduction, cuts, FORWARD_BACKWARD, x, labels, weights,
                             smoothing, z_loss, dloss)
        for k, (status, message, out) in enumerate(fwd + fused):
            self.assertEqual(status, 0, f"{name} rank {k % (len(cuts) - 1)}: {message}")
        for label, results in (("fwd", fwd), ("fwd_bwd", fused)):
            first = results[0][2]
            for k, (_, _, out) in enumerate(results):
                np.testing.assert_allclose(from_raw(out["loss"], dtype).numpy(), want, rtol=tol, atol=tol * loss_scale,
                                           equal_nan=True, err_msg=f"{name} loss ({label}, rank {k})")
                # Every rank combines the same statistics in the same order.
                self.assertEqual(out["loss"].tobytes(), first["loss"].tobytes(), f"{name} loss bits ({label}) rank {k}")
                self.assertEqual(out["lse"].tobytes(), first["lse"].tobytes(), f"{name} lse bits ({label}) rank {k}")
            np.testing.assert_allclose(first["lse"], want_lse, rtol=TOL[F32] if dtype != F64 else 1e-12,
                                       equal_nan=True, err_msg=f"{name} lse ({label})")
        grad = np.concatenate([from_raw(out["grad"], dtype).numpy() for _, _, out in fused], axis=1)
        np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol * gscale, equal_nan=True,
                                   err_msg=name + " grad (fwd_bwd)")
        if label_type == PROB or saved_lse_backward:
            # A soft-label backward gathers again: exact like the fused one. A
            # hard-label one uses the saved global lse, at its precision.
            bwd, _ = run_ranks(target, dtype, label_type, reduction, cuts, BACKWARD, x, labels, weights, smoothing,
                               z_loss, dloss, lse_in=fwd[0][2]["lse"])
            grad = np.concatenate([from_raw(out["grad"], dtype).numpy() for _, _, out in bwd], axis=1)
            np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol * gscale, equal_nan=True,
                                       err_msg=name + " grad (bwd)")

    def extreme_rows(self, dtype):
        """Eight classes, cut into slices [0, 3), [3, 6), [6, 8)."""
        inf, nan = float("inf"), float("nan")
        b = {F32: 3.4e38, BF16: 3.38e38, F16: 65504.0, F64: 1.7e308}[dtype]
        o = {F32: 1e8, BF16: 1e8, F16: 1e4, F64: 1e8}[dtype]
        rows = [
            [o, o, o, o, o, o, o, o],                         # log 8, not 0
            [o + 1, o, o - 1, o + 3, o + 2, o, o + 5, o - 2],
            [-o, -o + 2, -o + 1, -o, -o + 3, -o, -o + 1, -o + 4],
            [b, b, 0, -b, -b, -b, 0, 0],                      # a slice of -3e38 under a max of 3e38
            [-b, -b, -b, b, -b, b, -b, -b],
            [-inf, -inf, -inf, 1, 2, 3, 0, 0],                # a slice with no finite logit
            [1, 2, 3, -inf, -inf, -inf, -inf, -inf],          # two
            [1, 0, 0, 0, inf, 0, 0, 0],                       # +inf: NaN everywhere
            [0, 1, 2, 3, 4, 5, nan, 7],
            [-inf] * 8,
        ]
        return torch.tensor(rows, dtype=torch.float64).to(TORCH[dtype])

    def test_extreme_rows_hard_labels(self):
        seed = 500
        for target in (BACKEND_CUDA, BACKEND_HIP):
            for dtype in (F32, F16, BF16, F64):
                x = self.extreme_rows(dtype)
                labels = np.array([0, 6, 7, 0, 3, 4, 1, 0, 2, 5], np.int64)
                for reduction in (NONE, MEAN):
                    seed += 1
                    self.check(target, dtype, I64, reduction, (0, 3, 6, 8), x, labels, seed=seed)
                # Smoothing, weights and z-loss on the shifted rows and those
                # with -inf slices (not +-3e38: there lse - x overflows f32
                # where float64 does not), two ways of cutting.
                some = [0, 1, 2, 5, 6]
                for cuts in ((0, 3, 6, 8), (0, 4, 8)):
                    seed += 1
                    self.check(target, dtype, I64, NONE, cuts, x[some], labels[some], weighted=True, smoothing=0.2,
                               z_loss=1e-4, seed=seed)

    def test_hard_label_backward_from_saved_lse(self):
        """No collective: each slice's gradient from the global lse alone,
        never from statistics of its own logits (a single device takes them
        again where |lse| > 64; a slice must not). Logits around 100: the
        saved f32 lse keeps p to 2^-17, inside the f32 tolerance."""
        seed = 700
        for target in (BACKEND_CUDA, BACKEND_HIP):
            for dtype in (F32, F16, BF16, F64):
                seed += 1
                rng = np.random.default_rng(seed)
                x = torch.from_numpy(100 + 3 * rng.standard_normal((6, 8))).to(TORCH[dtype])
                labels = rng.integers(0, 8, 6)
                for reduction in (NONE, MEAN):
                    self.check(target, dtype, I64, reduction, (0, 3, 6, 8), x, labels, weighted=True, smoothing=0.1,
                               seed=seed, saved_lse_backward=True)

    def test_extreme_rows_soft_labels(self):
        seed = 600
        for target in (BACKEND_CUDA, BACKEND_HIP):
            for dtype in (F32, F16, BF16, F64):
                x = self.extreme_rows(dtype)[[0, 1, 2, 5, 6]]
                rng = np.random.default_rng(seed)
                t = rng.uniform(0.0, 1.0, x.shape)
                t = torch.from_numpy(t / t.sum(1, keepdims=True)).to(TORCH[dtype])
                for reduction, weighted, smoothing in ((NONE, False, 0.0), (MEAN, True, 0.1)):
                    seed += 1
                    self.check(target, dtype, PROB, reduction, (0, 3, 6, 8), x, t, weighted=weighted,
                               smoothing=smoothing, seed=seed)


if __name__ == "__main__":
    unittest.main()
