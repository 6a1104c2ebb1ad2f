"""xent's custom ops under torch.compile (PyTorch 2.4 and later; on older
PyTorch, as Debian's 1.13 in CI, it says SKIPPED).

torch.library.opcheck holds each op to PyTorch's rules (schema, fake
implementation against the real one, autograd registration, AOT dispatch).
Then functions calling xent.cross_entropy / softmax / log_softmax are
compiled with fullgraph=True (any graph break fails), once with a backend
that records the graph (the xent op must be in it: the compiler traced the
op, not around it) and once with Inductor, and their loss and gradients are
compared with F.cross_entropy in float64 and with the same call in eager
mode. On CPU tensors, and on CUDA tensors when a GPU is present and the
library has the CUDA backend."""

import os
import sys
import unittest

import torch
import torch.nn.functional as F

if "XENT_LIBRARY" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_LIBRARY"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "runtime", "libxent_shared.so")
if "XENT_EXTENSION" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_EXTENSION"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "python", "xent", "_C.so")

import xent  # noqa: E402
from xent import _ops  # noqa: E402

# Relative error against the float64 oracle (xent_torch_test.py says why).
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def devices():
    """cpu, and cuda where there is a GPU; XENT_TEST_DEVICES=cuda keeps one
    (the GPU run's stage: Inductor's C++ builds for CPU tensors took most of
    its 70 s on the H200 machine, and CPU tensors are tested off the GPU)."""
    out = ["cpu"]
    if torch.cuda.is_available() and os.environ.get("XENT_TEST_CUDA", "1") == "1":
        out.append("cuda")
    wanted = os.environ.get("XENT_TEST_DEVICES")
    return [d for d in out if d in wanted.split(",")] if wanted else out


def close(test, got, want, dtype, what):
    got, want = got.detach().to(torch.float64).cpu(), want.detach().to(torch.float64).cpu()
    scale = max(want.abs().max().item() if want.numel() else 0.0, 1.0)
    err = (got - want).abs().max().item() if want.numel() else 0.0
    test.assertTrue(err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} > {TOL[dtype]:.1g} * {scale:.3g}")


class Recorder:
    """A torch.compile backend that keeps the FX graphs it is given and runs
    them as they are."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, _example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def calls(self):
        return "\n".join(g.code for g in self.graphs)


class OpCheck(unittest.TestCase):
    def test_cross_entropy_ops(self):
        torch.manual_seed(1)
        for device in devices():
            for dtype, label, reduction in ((torch.float32, "i64", "mean"), (torch.bfloat16, "i32", "none"),
                                            (torch.float64, "prob", "sum")):
                x = torch.randn(5, 11, dtype=torch.float64).to(dtype).to(device).requires_grad_()
                if label == "prob":
                    t = torch.softmax(torch.randn(5, 11, dtype=torch.float64), 1).to(dtype).to(device)
                    t.requires_grad_()
                else:
                    t = torch.randint(0, 11, (5,), dtype=torch.int64 if label == "i64" else torch.int32,
                                      device=device)
                w = (torch.rand(11, dtype=torch.float64) + 0.5).to(
                    torch.float64 if dtype == torch.float64 else torch.float32).to(device)
                # The per-token outputs as the op takes them: temperature, a
                # temperature and a token weight per row and the mean's
                # divisor, then entropy, the label's log-prob, argmax (hard labels).
                acc = w.dtype
                row_tau = (torch.rand(5, dtype=torch.float64) + 0.5).to(acc).to(device)
                tw = torch.rand(5, dtype=torch.float64).to(acc).to(device)
                stats = [(1.0, None, None, False, False, False, False),
                         (0.7, None, None, False, True, label != "prob", label != "prob"),
                         (1.0, row_tau, tw, reduction == "mean", True, label != "prob", False)]
                for tau, rt, u, count, entropy, logprob, argmax in stats:
                    args = (x, t, w, -100, reduction, 0.1, 1e-3, 0.0, False, "raise", dtype, tau, rt, u, count,
                            entropy, logprob, argmax)
                    with self.subTest(device=device, dtype=dtype, label=label, reduction=reduction, tau=tau,
                                      per_row=rt is not None):
                        torch.library.opcheck(torch.ops.xent.cross_entropy.default, args)

    def test_linear_cross_entropy_op(self):
        torch.manual_seed(2)
        for device in devices():
            for dtype, reduction, stats, autocast in ((torch.float32, "mean", (False,) * 3, None),
                                                      (torch.float64, "none", (True, True, True), None),
                                                      (torch.float32, "sum", (False, False, True), torch.bfloat16)):
                h = torch.randn(7, 12, dtype=torch.float64).to(dtype).to(device).requires_grad_()
                w = (torch.randn(30, 12, dtype=torch.float64) / 3).to(dtype).to(device).requires_grad_()
                b = (torch.randn(30, dtype=torch.float64) / 3).to(dtype).to(device).requires_grad_()
                y = torch.randint(0, 30, (7,), device=device)
                acc = torch.float64 if dtype == torch.float64 else torch.float32
                cw = (torch.rand(30, dtype=torch.float64) + 0.5).to(acc).to(device)
                f32 = autocast is not None
                loss_dtype = torch.float32 if f32 else dtype
                for want in ((True, True, True), (False, True, False)):
                    args = (h, w, b, y, cw, None, None, -100, reduction, 0.1, 1e-3, 0.0, False, "raise", loss_dtype,
                            0.8, None, None, False, 4, 0, 0, autocast, *want, f32, *stats)
                    with self.subTest(device=device, dtype=dtype, reduction=reduction, want=want):
                        torch.library.opcheck(torch.ops.xent.linear_cross_entropy.default, args)

    def test_softmax_ops(self):
        for device in devices():
            for kind in (0, 1):
                x = torch.randn(3, 7, 5, device=device, requires_grad=True)
                with self.subTest(device=device, kind=kind):
                    torch.library.opcheck(torch.ops.xent.softmax.default, (x, 1, kind))
                    y = torch.ops.xent.softmax(x.detach(), 1, kind)
                    torch.library.opcheck(torch.ops.xent.softmax_backward.default, (y, torch.randn_like(y), 1, kind))


class Compiled(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        torch.manual_seed(3)

    def check(self, fn, oracle, inputs, dtype, what):
        """fn compiled (recorded graph, then Inductor) against eager fn and
        the float64 oracle: outputs and the gradients of their sum."""
        def run(f):
            xs = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
            out = f(*xs)
            grads = torch.autograd.grad(out.sum(), [t for t in xs if t.requires_grad])
            return out, grads

        want_out, want_grads = run(oracle)
        eager_out, eager_grads = run(fn)
        rec = Recorder()
        for name, backend in (("recorded", rec), ("inductor", "inductor")):
            torch._dynamo.reset()
            out, grads = run(torch.compile(fn, backend=backend, fullgraph=True))
            close(self, out, want_out, dtype, f"{what} {name}: output")
            close(self, out, eager_out, dtype, f"{what} {name}: output against eager")
            for g, w, e in zip(grads, want_grads, eager_grads):
                close(self, g, w, dtype, f"{what} {name}: gradient")
                close(self, g, e, dtype, f"{what} {name}: gradient against eager")
        self.assertIn("torch.ops.xent.", rec.calls(), f"{what}: no xent op in the traced graph")

    def test_cross_entropy(self):
        cases = [
            (torch.float32, (8, 37), "i64", dict(label_smoothing=0.1)),
            (torch.bfloat16, (6, 50), "i64", dict(reduction="sum", ignore_index=2)),
            (torch.float64, (4, 9, 3, 5), "i32", dict(reduction="none")),
            (torch.float32, (5, 21), "prob", dict(reduction="mean")),
            (torch.float16, (7, 33), "i64", dict(weight=True, label_smoothing=0.2)),
        ]
        for device in devices():
            for dtype, shape, label, kw in cases:
                c = shape[1]
                x = (torch.randn(*shape, dtype=torch.float64) * 3).to(dtype).to(device).requires_grad_()
                rows = (shape[0],) + shape[2:]
                if label == "prob":
                    t = torch.softmax(torch.randn(*shape, dtype=torch.float64), 1).to(dtype).to(device)
                    t.requires_grad_()
                else:
                    t = torch.randint(0, c, rows, dtype=torch.int64 if label == "i64" else torch.int32,
                                      device=device)
                    if "ignore_index" in kw:
                        t.view(-1)[0] = kw["ignore_index"]
                kw = dict(kw)
                w = None
                if kw.pop("weight", False):
                    w = (torch.rand(c, dtype=torch.float64) + 0.5).to(device)

                def fn(x, t, kw=kw, w=w):
                    return xent.cross_entropy(x, t, weight=w, **kw)

                def oracle(x, t, kw=kw, w=w):
                    x64 = x.to(torch.float64)
                    t64 = t.to(torch.float64) if t.is_floating_point() else t.to(torch.int64)
                    return F.cross_entropy(x64, t64, weight=w, **kw)

                with self.subTest(device=device, dtype=dtype, shape=shape, label=label, kw=sorted(kw)):
                    self.check(fn, oracle, [x, t], dtype, f"cross_entropy {device} {dtype} {shape} {label} {kw}")

    def test_per_token_outputs(self):
        """Temperature, entropy and the label's log-prob through the op,
        compiled whole: a GRPO-like objective (per-token log-probs times an
        advantage, an entropy bonus, reduction 'none') against the same in
        float64 PyTorch ops."""
        for device in devices():
            for dtype, label in ((torch.float32, "i64"), (torch.bfloat16, "i64"), (torch.float32, "prob")):
                torch.manual_seed(3)
                x = (torch.randn(6, 29, dtype=torch.float64) * 2).to(dtype).to(device).requires_grad_()
                if label == "prob":
                    t = torch.softmax(torch.randn(6, 29, dtype=torch.float64), 1).to(dtype).to(device)
                else:
                    t = torch.randint(0, 29, (6,), device=device)
                adv = torch.randn(6, dtype=torch.float64).to(device)
                tau = 0.7

                def fn(x, t, adv=adv, label=label):
                    if label == "prob":
                        loss, entropy = xent.cross_entropy(x, t, reduction="none", temperature=tau,
                                                           return_entropy=True)
                        return loss * adv.to(loss.dtype) - 0.01 * entropy
                    loss, entropy, logp = xent.cross_entropy(x, t, reduction="none", temperature=tau,
                                                             return_entropy=True, return_logprob=True)
                    return loss - logp * adv.to(logp.dtype) - 0.01 * entropy

                def oracle(x, t, adv=adv, label=label):
                    z = x.to(torch.float64) / tau
                    logp_all = torch.log_softmax(z, 1)
                    entropy = -(logp_all.exp() * logp_all).sum(1)
                    if label == "prob":
                        loss = -(t.to(torch.float64) * logp_all).sum(1)
                        return loss * adv - 0.01 * entropy
                    logp = logp_all.gather(1, t.unsqueeze(1)).squeeze(1)
                    return -logp - logp * adv - 0.01 * entropy

                with self.subTest(device=device, dtype=dtype, label=label):
                    self.check(fn, oracle, [x, t], dtype, f"per-token outputs {device} {dtype} {label}")

    def test_loss_in_a_model(self):
        """A small model's step compiled whole: the loss is one node of a
        larger graph, its gradient flows into the Linear layer."""
        for device in devices():
            torch.manual_seed(5)
            lin = torch.nn.Linear(16, 40).to(device)
            h = torch.randn(12, 16, device=device)
            t = torch.randint(0, 40, (12,), device=device)

            def step(h, t, loss):
                return loss(lin(torch.tanh(h)), t)

            ours = torch.compile(lambda h, t: step(h, t, lambda z, t: xent.cross_entropy(z, t, z_loss=1e-3)),
                                 fullgraph=True)

            def theirs(h, t):
                z = lin(torch.tanh(h)).to(torch.float64)
                return F.cross_entropy(z, t) + 1e-3 * (torch.logsumexp(z, 1) ** 2).mean()

            for what, fn in (("xent compiled", ours), ("torch", theirs)):
                lin.zero_grad()
                loss = fn(h, t)
                loss.backward()
                if what == "torch":
                    want_loss, want_grad = loss.detach(), lin.weight.grad.clone()
                else:
                    got_loss, got_grad = loss.detach(), lin.weight.grad.clone()
            close(self, got_loss, want_loss, torch.float32, f"model step {device}: loss")
            close(self, got_grad, want_grad, torch.float32, f"model step {device}: weight gradient")

    def test_linear_cross_entropy(self):
        """The fused linear cross entropy compiled whole: a mean with a bias
        (its gradients made in the forward), 'none' with class weights and
        smoothing, the entropy and the label's log-prob (the backward calls
        again), a temperature and token weight per row, and f32 weights
        under torch.autocast (bf16 operands, f32 gradients)."""
        F64 = torch.float64
        for device in devices():
            torch.manual_seed(4)
            N, H, V = 10, 16, 45
            y = torch.randint(0, V, (N,), device=device)
            y[3] = -100
            cw = (torch.rand(V, dtype=F64) + 0.5).to(device)
            tau = (torch.rand(N, dtype=F64) + 0.5).to(device)
            u = torch.rand(N, dtype=F64).to(device)
            cases = [("mean, bias", torch.float32, {}, False),
                     ("none, weights, smoothing", torch.bfloat16,
                      dict(reduction="none", ce_weight=cw, label_smoothing=0.1), False),
                     ("entropy and log-prob", torch.float32, dict(return_entropy=True, return_logprob=True), False),
                     ("per-row temperature, token weights", torch.float32, dict(temperature=tau, token_weight=u),
                      False),
                     ("autocast", torch.float32, {}, True)]
            for what, dtype, kw, autocast in cases:
                h = torch.randn(N, H, dtype=F64).to(dtype).to(device).requires_grad_()
                w = (torch.randn(V, H, dtype=F64) / 4).to(dtype).to(device).requires_grad_()
                b = (torch.randn(V, dtype=F64) / 4).to(dtype).to(device).requires_grad_()

                def fn(h, w, b, kw=kw, autocast=autocast):
                    with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                        out = xent.linear_cross_entropy(h, w, y, b, **kw)
                    if isinstance(out, tuple):  # loss - 0.1 entropy + 0.5 logp, per row
                        return out[0] - 0.1 * out[1] + 0.5 * out[2]
                    return out

                def oracle(h, w, b, kw=kw, autocast=autocast):
                    ops = [t.to(torch.bfloat16) if autocast else t for t in (h, w, b)]
                    z = F.linear(*(t.to(F64) for t in ops))
                    z = z.to(torch.bfloat16).to(F64) if autocast else z
                    kw = dict(kw)
                    t = kw.pop("temperature", None)
                    z = z / t[:, None] if t is not None else z
                    tw = kw.pop("token_weight", None)
                    ent, logp = kw.pop("return_entropy", False), kw.pop("return_logprob", False)
                    red = kw.pop("reduction", "mean")
                    weight = kw.pop("ce_weight", None)
                    loss = F.cross_entropy(z, y, weight=weight, reduction="none", **kw)
                    if tw is not None:  # the weights' mean: sum(u l) / sum(u) over counted rows
                        return (tw * loss).sum() / tw[y != -100].sum()
                    if red == "none":
                        return loss
                    wy = weight[y.clamp(min=0)] * (y != -100) if weight is not None else (y != -100).to(F64)
                    if ent:
                        logp_all = torch.log_softmax(z, 1)
                        entropy = -(logp_all.exp() * logp_all).sum(1) * (y != -100)
                        lp = logp_all.gather(1, y.clamp(min=0)[:, None])[:, 0] * (y != -100)
                        return loss.sum() / wy.sum() - 0.1 * entropy + 0.5 * lp
                    return loss.sum() / wy.sum()

                with self.subTest(device=device, case=what):
                    self.check(fn, oracle, [h, w, b], torch.bfloat16 if autocast else dtype,
                               f"linear_cross_entropy {device} {what}")

    def test_softmax(self):
        for device in devices():
            for dtype in (torch.float32, torch.bfloat16):
                x = torch.randn(4, 6, 10, dtype=torch.float64).to(dtype).to(device).requires_grad_()
                for name, fn, oracle in (
                        ("softmax", lambda x: xent.softmax(x, 1) * 3, lambda x: torch.softmax(x.double(), 1) * 3),
                        ("log_softmax", lambda x: xent.log_softmax(x, -1).exp() * 2,
                         lambda x: torch.log_softmax(x.double(), -1).exp() * 2)):
                    with self.subTest(device=device, dtype=dtype, op=name):
                        self.check(fn, oracle, [x], dtype, f"{name} {device} {dtype}")


if __name__ == "__main__":
    if not _ops.AVAILABLE:
        print(f"SKIPPED: PyTorch {torch.__version__} has no torch.library.custom_op (2.4 and later); "
              "xent runs eagerly there")
        sys.exit(0)
    # A run with a time limit (the GPU run's stage) names the test it was in
    # and where each thread stood, rather than being killed silently.
    if os.environ.get("XENT_TEST_TRACEBACK_AFTER"):
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["XENT_TEST_TRACEBACK_AFTER"]), exit=True)
    unittest.main(verbosity=2)
