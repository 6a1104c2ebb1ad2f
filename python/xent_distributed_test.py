"""xent.distributed.cross_entropy on 2 and 3 CPU processes (gloo): each
rank's loss and lse are those of the whole vocabulary and its gradient is
its slice of the whole one, against F.cross_entropy in float64 on the
unsplit logits; hard labels (ignored rows, class weights, smoothing over
the whole vocabulary) and soft labels, with slices of unequal sizes; and
under a temperature the per-token outputs of the whole vocabulary (entropy,
log-prob, argmax: the same bits on every rank) with the gradient of loss +
a * entropy + b * log-prob, against Categorical(logits=z).entropy(),
log_softmax(z).gather and argmax."""

import os
import sys
import tempfile
import traceback
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

if "XENT_LIBRARY" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_LIBRARY"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "runtime", "libxent_shared.so")
if "XENT_EXTENSION" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_EXTENSION"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "python", "xent", "_C.so")

import xent.distributed  # noqa: E402

N, V = 7, 50
TOL = {torch.float64: 1e-10, torch.float32: 2e-5}


def slices(ranks):
    """Unequal consecutive slices of [0, V): the first rank's one larger."""
    base = V // ranks
    sizes = [base + (V - base * ranks)] + [base] * (ranks - 1)
    starts = [sum(sizes[:r]) for r in range(ranks)]
    return list(zip(starts, sizes))


def worker(rank, ranks, store, errors):
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=ranks)
        torch.manual_seed(1)  # the same full tensors on every rank
        start, size = slices(ranks)[rank]
        for dtype in (torch.float64, torch.float32):
            full = torch.randn(N, V, dtype=torch.float64) * 4
            hard = torch.randint(0, V, (N,))
            hard[3] = -100
            weight = torch.rand(V, dtype=torch.float64) + 0.5
            soft = torch.softmax(torch.randn(N, V, dtype=torch.float64), 1)
            cases = [("hard", hard, dict(weight=weight, label_smoothing=0.1)), ("hard", hard, dict()),
                     ("soft", soft, dict(label_smoothing=0.05))]
            for label, target, kw in cases:
                for reduction in ("mean", "none"):
                    x = full[:, start:start + size].to(dtype).requires_grad_()
                    t = target[:, start:start + size].to(dtype) if label == "soft" else target
                    ours_kw = dict(kw)
                    if "weight" in ours_kw:
                        ours_kw["weight"] = ours_kw["weight"].to(dtype)
                    loss, lse = xent.distributed.cross_entropy(x, t, reduction=reduction, return_lse=True, **ours_kw)
                    (grad,) = torch.autograd.grad(loss.sum(), x)
                    ref = full.to(dtype).to(torch.float64).requires_grad_()
                    want = F.cross_entropy(ref, target, reduction=reduction, **kw)
                    (want_grad,) = torch.autograd.grad(want.sum(), ref)
                    what = f"rank {rank}/{ranks} {dtype} {label} {reduction} {sorted(kw)}"
                    for got, exp, name in ((loss, want.detach(), "loss"), (lse, torch.logsumexp(ref.detach(), 1), "lse"),
                                           (grad, want_grad[:, start:start + size], "grad")):
                        err = (got.to(torch.float64) - exp).abs().max().item()
                        assert err <= TOL[dtype] * max(exp.abs().max().item(), 1.0), f"{what} {name}: error {err:.3g}"
                    # The loss is the same bits on every rank.
                    gathered = [torch.empty_like(loss) for _ in range(ranks)]
                    dist.all_gather(gathered, loss.detach().contiguous())
                    assert all(torch.equal(g, gathered[0]) for g in gathered), f"{what}: ranks disagree on the loss"
            per_token(rank, ranks, start, size, dtype)
        dist.destroy_process_group()
    except Exception:
        errors.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def per_token(rank, ranks, start, size, dtype):
    tau = 0.7
    full = torch.randn(N, V, dtype=torch.float64) * 4
    hard = torch.randint(0, V, (N,))
    hard[2] = -100
    soft = torch.softmax(torch.randn(N, V, dtype=torch.float64), 1)
    a, b = torch.randn(N, dtype=torch.float64), torch.randn(N, dtype=torch.float64)
    for label, target in (("hard", hard), ("soft", soft)):
        x = full[:, start:start + size].to(dtype).requires_grad_()
        t = target[:, start:start + size].to(dtype) if label == "soft" else target
        hard_labels = label == "hard"
        out = xent.distributed.cross_entropy(x, t, reduction="none", label_smoothing=0.1, temperature=tau,
                                             return_entropy=True, return_logprob=hard_labels,
                                             return_argmax=hard_labels)
        loss, entropy = out[0], out[1]
        objective = loss.sum() + (a.to(entropy.dtype) * entropy).sum()
        if hard_labels:
            logprob, argmax = out[2], out[3]
            objective = objective + (b.to(logprob.dtype) * logprob).sum()
        (grad,) = torch.autograd.grad(objective, x)
        ref = full.to(dtype).to(torch.float64).requires_grad_()
        z = ref / tau
        counted = (target != -100).to(torch.float64) if hard_labels else torch.ones(N, dtype=torch.float64)
        want_loss = F.cross_entropy(z, target, reduction="none", label_smoothing=0.1)
        want_ent = torch.distributions.Categorical(logits=z).entropy() * counted
        want_obj = want_loss.sum() + (a * want_ent).sum()
        if hard_labels:
            want_lp = torch.log_softmax(z, 1).gather(1, target.clamp(min=0)[:, None])[:, 0] * counted
            want_obj = want_obj + (b * want_lp).sum()
        (want_grad,) = torch.autograd.grad(want_obj, ref)
        what = f"rank {rank}/{ranks} {dtype} {label} per-token, tau {tau}"
        checks = [(loss, want_loss, "loss"), (entropy, want_ent, "entropy"),
                  (grad, want_grad[:, start:start + size], "grad")]
        if hard_labels:
            checks.append((logprob, want_lp, "logprob"))
            assert torch.equal(argmax, z.detach().argmax(1)), f"{what}: argmax {argmax} != {z.argmax(1)}"
        for got, exp, name in checks:
            err = (got.to(torch.float64) - exp.detach()).abs().max().item()
            assert err <= TOL[dtype] * max(exp.abs().max().item(), 1.0), f"{what} {name}: error {err:.3g}"
        for got in out:
            gathered = [torch.empty_like(got) for _ in range(ranks)]
            dist.all_gather(gathered, got.detach().contiguous())
            assert all(torch.equal(g, gathered[0]) for g in gathered), f"{what}: ranks disagree"


class VocabularyParallel(unittest.TestCase):
    def test_ranks(self):
        for ranks in (2, 3):
            with self.subTest(ranks=ranks), tempfile.TemporaryDirectory() as tmp:
                errors = mp.get_context("spawn").SimpleQueue()
                try:
                    mp.spawn(worker, args=(ranks, os.path.join(tmp, "store"), errors), nprocs=ranks)
                except Exception as e:
                    msgs = []
                    while not errors.empty():
                        msgs.append(errors.get())
                    self.fail("\n".join(msgs) or str(e))


if __name__ == "__main__":
    sys.exit(unittest.main())
