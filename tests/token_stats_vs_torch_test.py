"""Temperature (one, or one a row), token weights and the per-token outputs
(entropy, the label's log-prob, argmax, and the entropy's gradient through
dentropy) of the public API on
the cpu backend, its own code and the generated kernels under the SIMT
emulator at 32 lanes (the CUDA rendering) and 64 (HIP), against PyTorch in float64 on
the same rounded inputs: forward, backward from the saved lse, and the fused
forward+backward, for every dtype, hard and soft labels, reductions, the
shapes of the row walk (a few threads per row, a warp, a block, the on-chip
cluster of the fused kernel, a strided class axis), with weights, smoothing,
ignored rows, a soft cap, masked (-inf) classes, ties and NaN.

The oracle is the objective a trainer writes with PyTorch ops: z = capped
logits / tau (tau a row's own where per row), loss = F.cross_entropy(z, ...)
(with token weights u: its per-row losses times u, 0 where u is 0, summed
and divided by sum w[y]*u over the counted rows, or by PyTorch's divisor
for the count), H = -sum p log p over the counted rows, log p of the label,
argmax of z, and the gradient of sum(dloss * loss) + sum(dentropy * H) by
autograd.

Tolerances: the loss and gradient are in the logits dtype (its rounding,
tests/torch_oracle.py's TOL); entropy, log-prob and lse are in the
accumulation type, f32 for f32/f16/bf16 logits (a few f32 ulps of the row's
scale, summed over the row: 2e-5 relative) and f64 for f64 logits."""

import ctypes
import os
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from xent_ctypes import F32, F16, BF16, F64, I32, I64, PROB, NONE, SUM, MEAN, BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP
from xent_ctypes import FORWARD, BACKWARD, FORWARD_BACKWARD, Tensors, VocabShard, make_desc
from torch_oracle import TORCH, TOL, P, Group, emulated_call, load_lib, on_threads, raw, from_raw, addr

LIB = load_lib()
# What a cpu handle runs (xent_cpu_emulate): its own code (BACKEND_CPU), or
# the CUDA or the HIP rendering under the emulator; with XENT_CPU_ISA set
# (tests/BUILD's _sse2 runs), its own code alone, as that build.
TARGETS = (BACKEND_CPU,) if os.environ.get("XENT_CPU_ISA") else (BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP)
INVALID_ARGUMENT = 1
ACC_TOL = {F32: 2e-5, F16: 2e-5, BF16: 2e-5, F64: 1e-10}


class Case:
    """One call's inputs and PyTorch's answers for them."""

    def __init__(self, dtype, label_type, reduction, rows, classes, tau, seed, inner=1, softcap=0.0, weighted=False,
                 smoothing=0.0, ignore_index=-100, scale=3.0, x=None, labels=None, masked=0.0, row_tau=False,
                 token_weight=None, count_mean=False, stats=True):
        """row_tau: each row's tau drawn from [tau/2, 2*tau] and passed per
        row. token_weight: None, "mask" (0 or a weight in [0.2, 2]) or
        "signed" (in [-1, 1], some 0); count_mean: the mean's divisor leaves
        them out. stats False: a call without the per-token outputs and
        without the entropy's gradient."""
        rng = np.random.default_rng(seed)
        self.dtype, self.label_type, self.reduction = dtype, label_type, reduction
        self.rows, self.classes, self.inner, self.tau = rows, classes, inner, tau
        outer = rows // inner
        soft = label_type == PROB
        if not soft:
            lab = rng.integers(0, classes, rows) if labels is None else np.array(labels)
            if labels is None:
                lab = np.where(rng.random(rows) < 0.2, ignore_index, lab)
        if x is None:
            x = torch.from_numpy(rng.standard_normal((outer, classes, inner)) * scale)
            if masked:
                # Classes masked out with -inf, as an RL trainer's vocabulary
                # mask does; never a row's label (its loss would be inf).
                mask = rng.random((outer, classes, inner)) < masked
                if not soft:
                    for r, y in enumerate(lab):
                        if 0 <= y < classes:
                            mask[r // inner, y, r % inner] = False
                x = torch.where(torch.from_numpy(mask), torch.tensor(float("-inf"), dtype=torch.float64), x)
        else:
            x = torch.as_tensor(x, dtype=torch.float64).reshape(outer, classes, inner)
        self.x = x.to(TORCH[dtype])
        acc = np.float64 if dtype == F64 else np.float32
        self.acc = acc
        self.weights = rng.uniform(0.3, 2.0, classes).astype(acc) if weighted else None
        self.row_tau = rng.uniform(tau / 2, 2 * tau, rows).astype(acc) if row_tau else None
        if token_weight == "mask":
            u = np.where(rng.random(rows) < 0.3, 0.0, rng.uniform(0.2, 2.0, rows))
        elif token_weight == "signed":
            u = np.where(rng.random(rows) < 0.2, 0.0, rng.uniform(-1.0, 1.0, rows))
        else:
            u = None
        self.token_weight = None if u is None else u.astype(acc)
        self.count_mean = count_mean
        # Rows in (o, i) order, classes last: the oracle's view.
        x64 = self.x.to(torch.float64).permute(0, 2, 1).reshape(rows, classes).clone().requires_grad_(True)
        xc = softcap * torch.tanh(x64 / softcap) if softcap else x64
        z = xc / (torch.from_numpy(self.row_tau.astype(np.float64))[:, None] if row_tau else tau)
        kwargs = dict(reduction={NONE: "none", SUM: "sum", MEAN: "mean"}[reduction], label_smoothing=smoothing)
        if weighted:
            kwargs["weight"] = torch.from_numpy(self.weights.astype(np.float64))
        if soft:
            t = torch.from_numpy(rng.dirichlet(np.ones(classes), rows)).to(TORCH[dtype])
            self.labels = raw(t.reshape(outer, inner, classes).permute(0, 2, 1))
            target = t.to(torch.float64)
            counted = torch.ones(rows, dtype=torch.float64)
        else:
            self.labels = lab.astype(np.int32 if label_type == I32 else np.int64)
            target = torch.from_numpy(lab.astype(np.int64))
            kwargs["ignore_index"] = ignore_index
            counted = (target != ignore_index).to(torch.float64)
        if self.token_weight is None:
            loss = F.cross_entropy(z, target, **kwargs)
        else:
            per_row = F.cross_entropy(z, target, **dict(kwargs, reduction="none"))
            u64 = torch.from_numpy(self.token_weight.astype(np.float64))
            weighed = torch.where(u64 == 0, torch.zeros_like(per_row), per_row * u64)
            if reduction == NONE:
                loss = weighed
            elif reduction == SUM:
                loss = weighed.sum()
            else:
                # PyTorch's divisor: sum of w[y] over the counted rows (the
                # row count for soft labels); with the token weights, w[y]*u.
                base = counted.clone()
                if weighted and not soft:
                    base = base * kwargs["weight"][target.clamp(0, classes - 1)]
                loss = weighed.sum() / (base.sum() if count_mean else (base * u64).sum())
        logp = F.log_softmax(z, 1)
        p = logp.exp()
        # H = lse - sum p z, with a masked class's p * z taken as 0 (not 0 *
        # -inf, and with no NaN in its gradient); NaN stays NaN.
        z_safe = torch.where(torch.isinf(z), torch.zeros_like(z), z)
        entropy = (torch.logsumexp(z, 1) - (p * z_safe).sum(1)) * counted
        n_loss = rows if reduction == NONE else 1
        self.dloss = raw(torch.from_numpy(rng.uniform(0.5, 1.5, n_loss)).to(TORCH[dtype]))
        self.stats = stats
        self.dentropy = rng.uniform(-1.0, 1.0, rows).astype(acc) if stats else None
        dl = from_raw(self.dloss, dtype)
        objective = (loss * (dl if reduction == NONE else dl[0])).sum()
        if stats:
            objective = objective + (entropy * torch.from_numpy(self.dentropy.astype(np.float64))).sum()
        objective.backward()
        grad = x64.grad.reshape(outer, inner, classes).permute(0, 2, 1)
        self.want = {
            "loss": loss.detach().numpy().reshape(-1),
            "lse": torch.logsumexp(z, 1).detach().numpy(),
            "entropy": entropy.detach().numpy(),
            "grad": grad.numpy(),
        }
        if not soft:
            picked = logp.gather(1, target.clamp(0, classes - 1)[:, None])[:, 0]
            self.want["label_logprob"] = torch.where(counted > 0, picked, torch.zeros_like(picked)).detach().numpy()
            self.want["argmax"] = torch.argmax(z.detach(), 1).numpy()
        self.desc = make_desc(rows, classes, dtype, label_type, reduction, ignore_index, smoothing, softcap=softcap,
                              inner=inner, temperature=1.0 if row_tau else tau)
        self.desc.token_weight_mean = 1 if count_mean else 0
        self.name = (f"dtype={dtype} labels={label_type} red={reduction} N={rows} C={classes} inner={inner} "
                     f"tau={'per row ~' if row_tau else ''}{tau} cap={softcap} w={weighted} eps={smoothing} "
                     f"u={token_weight}{' count' if count_mean else ''}")

    def per_row(self):
        """The per-row inputs of a call: each row's tau and token weight."""
        return {k: v for k, v in (("temperature", self.row_tau), ("token_weight", self.token_weight))
                if v is not None}


class TokenStatsVsTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.handles = {}
        for target in TARGETS:
            h = P()
            assert LIB.xent_create(ctypes.byref(h), BACKEND_CPU) == 0, LIB.xent_last_error()
            assert LIB.xent_cpu_emulate(h, target) == 0, LIB.xent_last_error()
            cls.handles[target] = h

    def run_op(self, h, c, op, t):
        ws_bytes = ctypes.c_size_t()
        self.assertEqual(LIB.xent_ce_workspace_size(h, ctypes.byref(c.desc), op, ctypes.byref(ws_bytes)), 0,
                         LIB.xent_last_error().decode())
        ws = np.zeros(max(ws_bytes.value, 8), np.uint8)
        status = LIB.xent_ce_run(h, ctypes.byref(c.desc), op, ctypes.byref(t), ws.ctypes.data_as(P),
                                 ctypes.c_size_t(ws.size), None)
        self.assertEqual(status, 0, f"{c.name}: {LIB.xent_last_error().decode()}")

    def close(self, got, want, tol, what, c):
        finite = want[np.isfinite(want)]
        scale = np.abs(finite).max() if finite.size else 1.0
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(scale, 1.0), equal_nan=True,
                                   err_msg=f"{c.name}: {what}")

    def check(self, target, c, fused_lse=True):
        """fused_lse False: the fused call keeps no lse."""
        h = self.handles[target]
        hard = c.label_type != PROB
        xr = raw(c.x)
        n_loss = c.rows if c.reduction == NONE else 1
        outputs = lambda: {
            "loss": np.zeros(n_loss, xr.dtype), "lse": np.zeros(c.rows, c.acc),
            "entropy": np.full(c.rows, 7.0, c.acc) if c.stats else None,
            "label_logprob": np.full(c.rows, 7.0, c.acc) if hard and c.stats else None,
            "argmax": np.full(c.rows, -5, np.int64) if hard and c.stats else None,
        }

        def tensors(out, **extra):
            t = Tensors(logits=addr(xr), labels=addr(c.labels), weights=addr(c.weights))
            for k, v in list(out.items()) + list(extra.items()) + list(c.per_row().items()):
                setattr(t, k, addr(v))
            return t

        def check_outputs(out, op):
            self.close(from_raw(out["loss"], c.dtype).numpy(), c.want["loss"], TOL[c.dtype], f"loss ({op})", c)
            if out["lse"] is not None:
                self.close(out["lse"], c.want["lse"], ACC_TOL[c.dtype], f"lse ({op})", c)
            if not c.stats:
                return
            self.close(out["entropy"], c.want["entropy"], ACC_TOL[c.dtype], f"entropy ({op})", c)
            if hard:
                self.close(out["label_logprob"], c.want["label_logprob"], ACC_TOL[c.dtype], f"label_logprob ({op})", c)
                np.testing.assert_array_equal(out["argmax"], c.want["argmax"], err_msg=f"{c.name}: argmax ({op})")

        # forward
        fwd = outputs()
        self.run_op(h, c, FORWARD, tensors(fwd))
        check_outputs(fwd, "fwd")
        # backward from the saved lse, with the entropy's gradient
        grad = np.zeros_like(xr)
        self.run_op(h, c, BACKWARD, tensors({"grad": grad}, lse_in=fwd["lse"], dloss=c.dloss, dentropy=c.dentropy))
        self.close(from_raw(grad, c.dtype).numpy(), c.want["grad"], TOL[c.dtype], "grad (bwd)", c)
        # fused, every output and the gradient in one pass
        both = outputs()
        if not fused_lse:
            both["lse"] = None
        grad2 = np.zeros_like(xr)
        self.run_op(h, c, FORWARD_BACKWARD, tensors(both, grad=grad2, dloss=c.dloss, dentropy=c.dentropy))
        check_outputs(both, "fwd_bwd")
        self.close(from_raw(grad2, c.dtype).numpy(), c.want["grad"], TOL[c.dtype], "grad (fwd_bwd)", c)

    def check_split(self, target, c, cuts):
        """The same call with the vocabulary split at cuts (the slices'
        first classes, then C), each rank a thread with its own handle: one
        all-gather per call and rank, every output of every rank bit for bit
        the same, and PyTorch's answers for the whole row; the gradient's
        slices put back together."""
        ranks = len(cuts) - 1
        soft = c.label_type == PROB
        xr = raw(c.x)
        n_loss = c.rows if c.reduction == NONE else 1
        names = ["loss", "lse", "entropy"] + ([] if soft else ["label_logprob", "argmax"])

        def run(op):
            group = Group(ranks)

            def rank_main(k):
                lo, hi = cuts[k], cuts[k + 1]
                xs = np.ascontiguousarray(xr[:, lo:hi, :])
                lab = np.ascontiguousarray(c.labels[:, lo:hi, :]) if soft else c.labels
                out = {}
                if op != BACKWARD:
                    out = {"loss": np.zeros(n_loss, xr.dtype), "lse": np.zeros(c.rows, c.acc),
                           "entropy": np.full(c.rows, 7.0, c.acc)}
                    if not soft:
                        out["label_logprob"] = np.full(c.rows, 7.0, c.acc)
                        out["argmax"] = np.full(c.rows, -5, np.int64)
                if op != FORWARD:
                    out["grad"] = np.zeros_like(xs)
                t = Tensors(logits=addr(xs), labels=addr(lab), weights=addr(c.weights))
                for name, v in list(out.items()) + list(c.per_row().items()):
                    setattr(t, name, addr(v))
                if op != FORWARD:
                    t.dloss, t.dentropy = addr(c.dloss), addr(c.dentropy)
                if op == BACKWARD:
                    t.lse_in = addr(c.want["lse"].astype(c.acc))
                shard = VocabShard(lo, c.classes, k, ranks, group.gather_fn(k), None)
                d = type(c.desc).from_buffer_copy(c.desc)
                d.classes = hi - lo
                d.vocab_shard = ctypes.pointer(shard)
                return emulated_call(LIB, target, d, op, t) + (out,)

            results = on_threads(ranks, rank_main)
            for k, (status, message, _) in enumerate(results):
                self.assertEqual(status, 0, f"{c.name} cuts={cuts} rank {k}: {message}")
            self.assertEqual(group.calls, [1] * ranks, f"{c.name} cuts={cuts}: one all-gather per call and rank")
            return [out for _, _, out in results]

        for op, label in ((FORWARD, "fwd"), (BACKWARD, "bwd"), (FORWARD_BACKWARD, "fwd_bwd")):
            outs = run(op)
            what = f"{label}, cuts={cuts}"
            if op != BACKWARD:
                for k, out in enumerate(outs):
                    for name in names:
                        self.assertEqual(out[name].tobytes(), outs[0][name].tobytes(),
                                         f"{c.name}: {name} ({what}): rank {k}'s bits differ from rank 0's")
                out = outs[0]
                self.close(from_raw(out["loss"], c.dtype).numpy(), c.want["loss"], TOL[c.dtype], f"loss ({what})", c)
                for name in ("lse", "entropy") + (() if soft else ("label_logprob",)):
                    self.close(out[name], c.want[name], ACC_TOL[c.dtype], f"{name} ({what})", c)
                if not soft:
                    np.testing.assert_array_equal(out["argmax"], c.want["argmax"], err_msg=f"{c.name}: argmax ({what})")
            if op != FORWARD:
                grad = np.concatenate([from_raw(out["grad"], c.dtype).numpy() for out in outs], axis=1)
                self.close(grad, c.want["grad"], TOL[c.dtype], f"grad ({what})", c)

    def test_dtypes_labels_reductions(self):
        """Every dtype and label type, 13 rows of 301 classes (a warp per
        row), a temperature of 0.7 and of 1 (the outputs alone)."""
        seed = 0
        for target in TARGETS:
            for dtype in (F32, F16, BF16, F64):
                for label_type, reduction in ((I64, MEAN), (I32, NONE), (PROB, SUM)):
                    for tau in (0.7, 1.0):
                        seed += 1
                        self.check(target, Case(dtype, label_type, reduction, 13, 301, tau, seed,
                                                weighted=seed % 3 == 0, smoothing=0.1 if seed % 2 else 0.0))

    def test_row_shapes(self):
        """Several rows per warp (C = 40), a block per row (C = 20000, and
        the fused kernel's on-chip cluster for it on CUDA), a strided class
        axis (inner = 3), and 40% of the classes masked with -inf."""
        seed = 100
        for target in TARGETS:
            for dtype in (F32, BF16):
                for rows, classes, inner in ((24, 40, 1), (3, 20000, 1), (12, 70, 3)):
                    seed += 1
                    self.check(target, Case(dtype, I64, MEAN, rows, classes, 0.6, seed, inner=inner, masked=0.4))
            seed += 1
            self.check(target, Case(F32, PROB, NONE, 2, 20000, 1.7, seed))

    def test_softcap_and_large_temperature(self):
        seed = 200
        for target in TARGETS:
            for tau in (0.25, 4.0):
                seed += 1
                self.check(target, Case(F32, I64, SUM, 9, 513, tau, seed, softcap=5.0, weighted=True, smoothing=0.2,
                                        scale=8.0))

    def test_argmax_ties_nan_and_masked_rows(self):
        """The first maximal index (bf16 ties are common), the first NaN,
        all -inf (index 0), and -inf beside a finite max, as torch.argmax;
        entropy and log-prob NaN with a NaN logit, as PyTorch's."""
        inf, nan = float("inf"), float("nan")
        rows = [
            [1, 3, 3, 2, 3, 0],
            [3, 1, 1, 3, 2, 3],
            [0, nan, 1, nan, 5, 1],
            [-inf, -inf, -inf, -inf, -inf, -inf],
            [-inf, -inf, 2, -inf, 2, -inf],
            [0, 0, 0, 0, 0, 0],
        ]
        seed = 300
        for target in TARGETS:
            for dtype in (F32, BF16, F64):
                seed += 1
                self.check(target, Case(dtype, I64, NONE, len(rows), 6, 0.5, seed, x=rows, labels=[1, 3, 2, 0, 4, 5]))

    def test_ignored_rows(self):
        """Ignored rows: entropy and log-prob 0 and no gradient from
        dentropy; every row ignored in a sum."""
        for target in TARGETS:
            self.check(target, Case(F32, I64, SUM, 5, 33, 0.9, 7, labels=[-100] * 5))
            self.check(target, Case(F32, I64, NONE, 6, 33, 0.9, 8, labels=[-100, 3, -100, 5, 0, -100]))

    def test_vocabulary_split(self):
        """Temperature, entropy, log-prob, argmax and dentropy with the
        vocabulary split over 2 and 3 ranks (one holding a single class):
        every dtype, hard and soft labels, weights and smoothing, ignored
        rows, a strided class axis and masked classes."""
        seed = 400
        for target in TARGETS:
            for dtype in (F32, F16, BF16, F64):
                for label_type, reduction in ((I64, NONE), (I32, MEAN), (PROB, SUM)):
                    seed += 1
                    c = Case(dtype, label_type, reduction, 11, 97, 0.7, seed, weighted=seed % 2 == 0,
                             smoothing=0.1 if seed % 3 else 0.0)
                    self.check_split(target, c, (0, 40, 97) if seed % 2 else (0, 30, 31, 97))
            seed += 1
            self.check_split(target, Case(F32, I64, MEAN, 12, 70, 1.3, seed, inner=3, masked=0.4), (0, 35, 70))
            seed += 1
            self.check_split(target, Case(BF16, I64, SUM, 3, 3000, 0.5, seed, softcap=5.0, scale=8.0),
                             (0, 1000, 1001, 3000))

    def test_vocabulary_split_argmax_ties_nan_and_masked_rows(self):
        """The argmax across slices: the maximum tied in two slices (the
        lower index wins whatever the rank), a NaN in a later slice than the
        max, a slice of -inf, a row of -inf (index 0), and a label in every
        slice."""
        inf, nan = float("inf"), float("nan")
        rows = [
            [1, 3, 0, 2, 3, 0],
            [3, 1, 1, 3, 2, 3],
            [9, 1, 1, 0, nan, 1],
            [-inf, -inf, -inf, -inf, -inf, -inf],
            [-inf, -inf, 2, -inf, 2, -inf],
            [-inf, -inf, -inf, 5, 1, 1],
        ]
        seed = 500
        for target in TARGETS:
            for dtype in (F32, BF16, F64):
                seed += 1
                c = Case(dtype, I64, NONE, len(rows), 6, 0.5, seed, x=rows, labels=[1, 3, 2, 0, 4, 5])
                self.check_split(target, c, (0, 3, 6))
                self.check_split(target, c, (0, 2, 4, 6))

    def test_row_temperature_and_token_weights(self):
        """A temperature per row and token weights (0 or positive, the mean
        over their sum; signed, the mean over the count) for every dtype,
        hard and soft labels and every reduction, with and without class
        weights and smoothing: 13 rows of 40 and of 301 classes."""
        seed = 600
        for target in TARGETS:
            for dtype in (F32, F16, BF16, F64):
                for label_type, reduction in ((I64, MEAN), (I32, NONE), (PROB, SUM), (PROB, MEAN), (I32, MEAN)):
                    seed += 1
                    count = seed % 3 == 0
                    self.check(target, Case(dtype, label_type, reduction, 13, 40 if seed % 2 else 301, 0.8, seed,
                                            weighted=seed % 2 == 0, smoothing=0.1 if seed % 3 == 1 else 0.0,
                                            row_tau=seed % 4 != 0, token_weight="signed" if count else "mask",
                                            count_mean=count))

    def test_row_options_shapes(self):
        """The per-row options in every shape of the row walk: several rows
        a warp (C = 40), a block a row (C = 20000; the fused kernel's
        on-chip cluster on CUDA), a strided class axis (inner = 3), masked
        classes, and a soft cap."""
        seed = 700
        for target in TARGETS:
            for dtype in (F32, BF16):
                for rows, classes, inner in ((24, 40, 1), (3, 20000, 1), (12, 70, 3)):
                    seed += 1
                    self.check(target, Case(dtype, I64, MEAN, rows, classes, 0.6, seed, inner=inner, masked=0.4,
                                            row_tau=True, token_weight="mask", weighted=True))
            seed += 1
            self.check(target, Case(F32, PROB, NONE, 2, 20000, 1.7, seed, row_tau=True, token_weight="signed"))
            seed += 1
            self.check(target, Case(F32, I64, SUM, 9, 513, 2.0, seed, softcap=5.0, weighted=True, smoothing=0.2,
                                    scale=8.0, row_tau=True, token_weight="signed", count_mean=True))

    def test_row_options_vocabulary_split(self):
        """A temperature per row and token weights with the vocabulary split
        over 2 and 3 ranks, every rank holding every row's tau and weight."""
        seed = 800
        for target in TARGETS:
            for dtype in (F32, BF16, F64):
                for label_type, reduction in ((I64, MEAN), (I32, NONE), (PROB, MEAN)):
                    seed += 1
                    c = Case(dtype, label_type, reduction, 11, 97, 0.7, seed, weighted=seed % 2 == 0,
                             smoothing=0.1 if seed % 3 else 0.0, row_tau=True, token_weight="mask")
                    self.check_split(target, c, (0, 40, 97) if seed % 2 else (0, 30, 31, 97))

    def test_class_axis_in_slices(self):
        """A strided class axis cut into 2, 3 and 7 slices
        (xent_set_column_slices), on both renderings: every dtype, hard and
        soft labels, every reduction, 70, 301 and 5 classes (a slice of one
        class: 5 slices), the 16-byte path (inner = 8) and the scalar one
        (inner = 3), with and without the per-token outputs and the
        entropy's gradient, a fused call keeping no lse, class weights,
        smoothing, masked classes, a soft cap, a temperature per row and
        token weights. The workspace grows with the slices, so the call did
        run in them."""
        targets = [t for t in (BACKEND_CUDA, BACKEND_HIP) if t in self.handles]
        if not targets:
            self.skipTest("the slices run the renderings' kernels: this run is the cpu backend's own code alone")
        seed = 1000
        for target in targets:
            h = self.handles[target]
            for slices in (2, 3, 7):
                self.assertEqual(LIB.xent_set_column_slices(h, slices), 0, LIB.xent_last_error().decode())
                try:
                    for dtype in (F32, F16, BF16, F64):
                        for label_type, reduction in ((I64, MEAN), (I32, NONE), (PROB, SUM), (PROB, MEAN)):
                            seed += 1
                            hard = label_type != PROB
                            classes, inner = ((70, 8), (301, 8), (5, 3), (70, 3))[seed % 4]
                            c = Case(dtype, label_type, reduction, 2 * inner, classes, 0.8, seed, inner=inner,
                                     weighted=seed % 2 == 0, smoothing=0.1 if seed % 3 == 0 else 0.0,
                                     masked=0.3 if hard and seed % 2 else 0.0, softcap=5.0 if seed % 5 == 0 else 0.0,
                                     row_tau=seed % 3 == 1, token_weight="mask" if seed % 4 == 1 else None,
                                     stats=seed % 2 == 1)
                            self.check(target, c, fused_lse=seed % 3 != 2)
                finally:
                    LIB.xent_set_column_slices(h, 0)
            # The slices' records are in the workspace: it grows with them.
            c = Case(BF16, I64, MEAN, 16, 301, 1.0, 1, inner=8)
            sizes = []
            for slices in (1, 2, 7):
                self.assertEqual(LIB.xent_set_column_slices(h, slices), 0)
                ws = ctypes.c_size_t()
                self.assertEqual(LIB.xent_ce_workspace_size(h, ctypes.byref(c.desc), FORWARD, ctypes.byref(ws)), 0)
                sizes.append(ws.value)
            LIB.xent_set_column_slices(h, 0)
            self.assertLess(sizes[0], sizes[1], sizes)
            self.assertLess(sizes[1], sizes[2], sizes)
        for bad in (-1, 65):
            self.assertNotEqual(LIB.xent_set_column_slices(self.handles[targets[0]], bad), 0)
            self.assertIn("slices", LIB.xent_last_error().decode())
        self.assertNotEqual(LIB.xent_set_column_slices(None, 2), 0)
        self.assertIn("handle", LIB.xent_last_error().decode())

    def test_vocabulary_split_two_phase(self):
        """The vocabulary split with the collective the caller's own, as a
        framework's graph has it (xent_jax under shard_map): each rank's
        records from xent_ce_shard_records, gathered here, then the call
        with vocab_shard->gathered and the slice's first class read on the
        device (class_offset_at): forward, backward and fused, PyTorch's
        answers and each rank's outputs bit for bit the same as with the
        all-gather inside the call."""
        seed = 900
        for target in TARGETS:
            for dtype, label_type, reduction, ranks in ((F32, I64, MEAN, 2), (BF16, PROB, SUM, 3), (F64, I32, NONE, 3)):
                seed += 1
                c = Case(dtype, label_type, reduction, 11, 96, 0.7, seed, weighted=True, smoothing=0.1,
                         row_tau=True, token_weight="mask")
                self.check_two_phase(target, c, ranks)

    def check_two_phase(self, target, c, ranks):
        soft = c.label_type == PROB
        xr = raw(c.x)
        local = c.classes // ranks
        n_loss = c.rows if c.reduction == NONE else 1
        h = self.handles[target]
        for op, label in ((FORWARD, "fwd"), (BACKWARD, "bwd"), (FORWARD_BACKWARD, "fwd_bwd")):
            ranks_state = []
            for k in range(ranks):
                lo = k * local
                xs = np.ascontiguousarray(xr[:, lo:lo + local, :])
                lab = np.ascontiguousarray(c.labels[:, lo:lo + local, :]) if soft else c.labels
                out = {}
                if op != BACKWARD:
                    out = {"loss": np.zeros(n_loss, xr.dtype), "lse": np.zeros(c.rows, c.acc),
                           "entropy": np.full(c.rows, 7.0, c.acc)}
                if op != FORWARD:
                    out["grad"] = np.zeros_like(xs)
                t = Tensors(logits=addr(xs), labels=addr(lab), weights=addr(c.weights))
                for name, v in list(out.items()) + list(c.per_row().items()):
                    setattr(t, name, addr(v))
                if op != FORWARD:
                    t.dloss, t.dentropy = addr(c.dloss), addr(c.dentropy)
                if op == BACKWARD:
                    t.lse_in = addr(c.want["lse"].astype(c.acc))
                offset = np.array([lo], np.int64)
                shard = VocabShard(0, c.classes, k, ranks)  # no all_gather: the caller gathers
                shard.class_offset_at = offset.ctypes.data
                d = type(c.desc).from_buffer_copy(c.desc)
                d.classes = local
                d.vocab_shard = ctypes.pointer(shard)
                size = ctypes.c_size_t()
                self.assertEqual(LIB.xent_ce_shard_records_size(h, ctypes.byref(d), op, ctypes.byref(t),
                                                                ctypes.byref(size)), 0, LIB.xent_last_error())
                records = np.zeros(max(size.value, 8), np.uint8)
                ws_bytes = ctypes.c_size_t()
                self.assertEqual(LIB.xent_ce_workspace_size(h, ctypes.byref(d), op, ctypes.byref(ws_bytes)), 0)
                ws = np.zeros(max(ws_bytes.value, 8), np.uint8)
                status = LIB.xent_ce_shard_records(h, ctypes.byref(d), op, ctypes.byref(t), records.ctypes.data_as(P),
                                                   ws.ctypes.data_as(P), ctypes.c_size_t(ws.size), None)
                self.assertEqual(status, 0, f"{c.name}: {LIB.xent_last_error().decode()}")
                ranks_state.append((xs, lab, out, t, offset, shard, d, records[:size.value], ws))
            gathered = np.concatenate([state[7] for state in ranks_state])
            what = f"{c.name} {label} two-phase over {ranks}"
            for k, (xs, lab, out, t, offset, shard, d, _, ws) in enumerate(ranks_state):
                shard.gathered = gathered.ctypes.data if gathered.size else None
                status = LIB.xent_ce_run(h, ctypes.byref(d), op, ctypes.byref(t), ws.ctypes.data_as(P),
                                         ctypes.c_size_t(ws.size), None)
                self.assertEqual(status, 0, f"{what} rank {k}: {LIB.xent_last_error().decode()}")
            outs = [state[2] for state in ranks_state]
            if op != BACKWARD:
                for k, out in enumerate(outs):
                    for name in ("loss", "lse", "entropy"):
                        self.assertEqual(out[name].tobytes(), outs[0][name].tobytes(), f"{what}: {name} of rank {k}")
                self.close(from_raw(outs[0]["loss"], c.dtype).numpy(), c.want["loss"], TOL[c.dtype], f"loss ({what})", c)
                self.close(outs[0]["lse"], c.want["lse"], ACC_TOL[c.dtype], f"lse ({what})", c)
                self.close(outs[0]["entropy"], c.want["entropy"], ACC_TOL[c.dtype], f"entropy ({what})", c)
            if op != FORWARD:
                grad = np.concatenate([from_raw(out["grad"], c.dtype).numpy() for out in outs], axis=1)
                self.close(grad, c.want["grad"], TOL[c.dtype], f"grad ({what})", c)

    def test_bad_row_temperature(self):
        """A per-row tau of 0, -1, inf or NaN makes its row NaN (loss, lse,
        gradient) and is reported by xent_check, naming the lowest such row;
        the other rows are PyTorch's."""
        rng = np.random.default_rng(5)
        x = rng.standard_normal((5, 8)).astype(np.float32)
        labels = np.array([1, 2, 3, 4, 5], np.int64)
        x64 = torch.from_numpy(x.astype(np.float64))
        for bad in (0.0, -1.0, float("inf"), float("nan")):
            tau = np.array([1.5, 0.5, bad, 2.0, bad], np.float32)
            good = np.isfinite(tau) & (tau > 0)
            want = F.cross_entropy(x64[good] / torch.from_numpy(tau[good].astype(np.float64))[:, None],
                                   torch.from_numpy(labels[good]), reduction="none").numpy()
            for target in TARGETS:
                h = self.handles[target]
                loss, lse = np.zeros(5, np.float32), np.zeros(5, np.float32)
                grad = np.zeros_like(x)
                d = make_desc(5, 8, F32, I64, NONE)
                t = Tensors(logits=addr(x), labels=addr(labels), loss=addr(loss), lse=addr(lse), grad=addr(grad),
                            temperature=addr(tau))
                ws = np.zeros(1 << 16, np.uint8)
                status = LIB.xent_ce_run(h, ctypes.byref(d), FORWARD_BACKWARD, ctypes.byref(t), ws.ctypes.data_as(P),
                                         ctypes.c_size_t(ws.size), None)
                self.assertEqual(status, 0, LIB.xent_last_error().decode())
                what = f"target {target}, tau {bad}"
                np.testing.assert_allclose(loss[good], want, rtol=TOL[F32], err_msg=what)
                self.assertTrue(np.isnan(loss[~good]).all() and np.isnan(lse[~good]).all(), what)
                self.assertTrue(np.isnan(grad[~good]).all() and np.isfinite(grad[good]).all(), what)
                self.assertEqual(LIB.xent_check(h), 8, what)  # XENT_ERROR_INVALID_LABEL
                msg = LIB.xent_last_error().decode()
                self.assertIn("row 2 has a label outside [0, classes) that is not ignore_index, or a per-row "
                              "temperature", msg, what)
                self.assertEqual(LIB.xent_check(h), 0, f"{what}: the record is cleared")

    def test_refused(self):
        """Bad temperatures, argmax and log-prob with soft labels and a
        misaligned argmax, each refused with a message naming the
        argument."""
        h = self.handles[BACKEND_CPU]
        x = np.zeros((2, 4), np.float32)
        labels = np.zeros(2, np.int64)
        out = np.zeros(2, np.float32)
        ws = np.zeros(1 << 16, np.uint8)

        def run(desc, op=FORWARD, **t):
            tensors = Tensors(logits=addr(x), labels=addr(labels), loss=addr(out), **{k: addr(v) for k, v in t.items()})
            status = LIB.xent_ce_run(h, ctypes.byref(desc), op, ctypes.byref(tensors), ws.ctypes.data_as(P),
                                     ctypes.c_size_t(ws.size), None)
            return status, LIB.xent_last_error().decode()

        for tau in (0.0, -1.0, float("inf"), float("nan"), 1e-300):
            status, msg = run(make_desc(2, 4, F32, I64, NONE, temperature=tau))
            self.assertEqual(status, INVALID_ARGUMENT, msg)
            self.assertIn("desc->temperature", msg)
        soft = np.full((2, 4), 0.25, np.float32)
        for name in ("argmax", "label_logprob"):
            d = make_desc(2, 4, F32, PROB, NONE)
            tensors = Tensors(logits=addr(x), labels=addr(soft), loss=addr(out))
            setattr(tensors, name, addr(np.zeros(2, np.int64)))
            status = LIB.xent_ce_run(h, ctypes.byref(d), FORWARD, ctypes.byref(tensors), ws.ctypes.data_as(P),
                                     ctypes.c_size_t(ws.size), None)
            msg = LIB.xent_last_error().decode()
            self.assertEqual(status, INVALID_ARGUMENT, msg)
            self.assertIn(name, msg)
            self.assertIn("hard labels", msg)
        status, msg = run(make_desc(2, 4, F32, I64, NONE), argmax=np.zeros(3, np.int32)[1:])
        self.assertEqual(status, INVALID_ARGUMENT, msg)
        self.assertIn("argmax", msg)
        tau = np.ones(2, np.float32)
        status, msg = run(make_desc(2, 4, F32, I64, NONE, temperature=0.5), temperature=tau)
        self.assertEqual(status, INVALID_ARGUMENT, msg)
        self.assertIn("temperature (per row) is set and desc->temperature is 0.5", msg)
        status, msg = run(make_desc(2, 4, F32, I64, NONE), token_weight=np.zeros(3, np.float32)[1:].view(np.uint8)[1:])
        self.assertEqual(status, INVALID_ARGUMENT, msg)
        self.assertIn("token_weight", msg)
        d = make_desc(2, 4, F32, I64, MEAN)
        d.token_weight_mean = 2
        status, msg = run(d, token_weight=tau)
        self.assertEqual(status, INVALID_ARGUMENT, msg)
        self.assertIn("desc->token_weight_mean 2 is not a xent_token_weight_mean", msg)


if __name__ == "__main__":
    unittest.main(verbosity=1)
