"""The xent package against PyTorch's own ops (Debian's torch on the CPU):
every dtype, label type, reduction and option of xent.cross_entropy against
F.cross_entropy evaluated in float64 on the same (rounded) inputs, gradients
through torch.autograd.grad, gradcheck in float64, N-d and unbatched input,
softmax and log_softmax on any dim, the in-place backward, the module inside
a training step, and the errors a caller can make.

With XENT_TEST_DEVICE=cuda (PyTorch 2.0 or later, a library with the CUDA
backend) every tensor the tests make is on that device instead
(torch.set_default_device), so the same cases run on the CUDA backend:
bench/run_gpu.sh does so. A bad label there is reported by xent.check(),
since the call does not wait for the device."""

import os
import unittest

import torch
import torch.nn.functional as F

if "XENT_LIBRARY" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_LIBRARY"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "runtime", "libxent_shared.so")
if "XENT_EXTENSION" not in os.environ and "TEST_SRCDIR" in os.environ:
    os.environ["XENT_EXTENSION"] = os.path.join(os.environ["TEST_SRCDIR"], "xent", "python", "xent", "_C.so")

import xent  # noqa: E402

DEVICE = os.environ.get("XENT_TEST_DEVICE", "cpu")
if DEVICE != "cpu":
    torch.set_default_device(DEVICE)

DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.float16]
# Relative error allowed against the float64 oracle: the output's rounding
# to its dtype and float32 sums (xent accumulates f16/bf16 in float32).
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def close(test, got, want, dtype, what):
    got, want = got.to(torch.float64), want.to(torch.float64)
    scale = max(want.abs().max().item() if want.numel() else 0.0, 1e-3)
    err = (got - want).abs().max().item() if want.numel() else 0.0
    test.assertTrue(err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} > {TOL[dtype]:.1g} * {scale:.3g}")


def oracle(x, target, **kw):
    """F.cross_entropy in float64 on x's values, and its gradient."""
    x64 = x.detach().to(torch.float64).requires_grad_()
    t = target.to(torch.float64) if target.is_floating_point() else target
    loss = F.cross_entropy(x64, t, **kw)
    (g,) = torch.autograd.grad(loss.sum(), x64)
    return loss.detach(), g


class CrossEntropy(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(7)

    def check_against_torch(self, dtype, label, reduction, options, shape=(6, 33)):
        n, c = shape[0], shape[1]
        x = (torch.randn(*shape, dtype=torch.float64) * 3).to(dtype).requires_grad_()
        row_shape = (n,) + tuple(shape[2:])
        if label == "prob":
            target = torch.softmax(torch.randn(*shape, dtype=torch.float64) * 2, 1).to(dtype)
        else:
            target = torch.randint(0, c, row_shape, dtype=torch.int64 if label == "i64" else torch.int32)
            if "ignore_index" in options:
                target.view(-1)[1] = options["ignore_index"]
        kw = dict(options)
        if "weight" in kw:
            kw["weight"] = kw["weight"](c)
        loss = xent.cross_entropy(x, target, reduction=reduction, **kw)
        self.assertEqual(loss.dtype, dtype)
        (grad,) = torch.autograd.grad(loss.sum(), x)
        ref_kw = dict(kw)
        ref_t = target.to(torch.int64) if label != "prob" else target
        if "weight" in ref_kw:
            ref_kw["weight"] = ref_kw["weight"].to(torch.float64)
        want, want_grad = oracle(x, ref_t, reduction=reduction, **ref_kw)
        what = f"{dtype} {label} {reduction} {sorted(options)} {tuple(shape)}"
        close(self, loss, want, dtype, what + " loss")
        close(self, grad, want_grad, dtype, what + " grad")

    def test_every_dtype_label_reduction_and_option(self):
        options = [{}, {"weight": lambda c: torch.rand(c, dtype=torch.float64) + 0.5, "ignore_index": 3,
                        "label_smoothing": 0.1}, {"ignore_index": -100, "label_smoothing": 0.25}]
        for dtype in DTYPES:
            for label in ("i64", "i32", "prob"):
                for reduction in ("none", "sum", "mean"):
                    for opt in options:
                        if label == "prob":
                            opt = {k: v for k, v in opt.items() if k != "ignore_index"}
                        with self.subTest(dtype=dtype, label=label, reduction=reduction, options=sorted(opt)):
                            self.check_against_torch(dtype, label, reduction, opt)

    def test_nd_class_axis_1(self):
        for label in ("i64", "prob"):
            for reduction in ("none", "mean"):
                with self.subTest(label=label, reduction=reduction):
                    self.check_against_torch(torch.float32, label, reduction, {"label_smoothing": 0.05},
                                             shape=(2, 7, 3, 5))

    def test_unbatched(self):
        x = torch.randn(11, dtype=torch.float64, requires_grad=True)
        for target in (torch.tensor(4), torch.softmax(torch.randn(11, dtype=torch.float64), 0)):
            for reduction in ("none", "mean"):
                loss = xent.cross_entropy(x, target, reduction=reduction)
                want = F.cross_entropy(x, target, reduction=reduction)
                self.assertEqual(loss.shape, want.shape)
                close(self, loss, want.detach(), torch.float64, "unbatched")

    def test_z_loss_and_softcap(self):
        # Independent of F.cross_entropy's options: the soft cap is applied to
        # the logits first, and each row adds z * logsumexp^2.
        x = (torch.randn(5, 40, dtype=torch.float64) * 8).requires_grad_()
        y = torch.randint(0, 40, (5,))
        for cap, z in ((0.0, 1e-3), (15.0, 0.0), (15.0, 1e-2)):
            for reduction in ("none", "sum"):
                loss = xent.cross_entropy(x, y, reduction=reduction, softcap=cap, z_loss=z)
                (g,) = torch.autograd.grad(loss.sum(), x)
                xr = x.detach().requires_grad_()
                xc = cap * torch.tanh(xr / cap) if cap else xr
                rows = F.cross_entropy(xc, y, reduction="none") + z * torch.logsumexp(xc, 1) ** 2
                want = rows if reduction == "none" else rows.sum()
                (wg,) = torch.autograd.grad(want.sum(), xr)
                close(self, loss, want.detach(), torch.float64, f"cap {cap} z {z} {reduction}")
                close(self, g, wg, torch.float64, f"cap {cap} z {z} {reduction} grad")

    def test_return_lse_and_loss_dtype(self):
        x = torch.randn(4, 9, 3, dtype=torch.bfloat16)
        y = torch.randint(0, 9, (4, 3))
        loss, lse = xent.cross_entropy(x, y, return_lse=True, loss_dtype=torch.float32)
        self.assertEqual((loss.dtype, lse.dtype, lse.shape), (torch.float32, torch.float32, (4, 3)))
        close(self, lse, torch.logsumexp(x.to(torch.float64), 1), torch.float32, "lse")
        close(self, loss, F.cross_entropy(x.to(torch.float64), y), torch.float32, "float32 loss of bf16 logits")

    def test_gradcheck(self):
        x = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
        y = torch.tensor([1, -100, 5])
        w = torch.rand(6, dtype=torch.float64) + 0.5
        self.assertTrue(torch.autograd.gradcheck(
            lambda a: xent.cross_entropy(a, y, w, label_smoothing=0.2, z_loss=0.01, softcap=4.0), (x,)))
        t = torch.softmax(torch.randn(3, 6, dtype=torch.float64), 1).requires_grad_()
        self.assertTrue(torch.autograd.gradcheck(lambda a, b: xent.cross_entropy(a, b, reduction="none"), (x, t)))

    def test_inplace_backward(self):
        for reduction in ("mean", "none"):
            x = torch.randn(5, 17, dtype=torch.float64)
            y = torch.randint(0, 17, (5,))
            want, want_grad = oracle(x, y, reduction=reduction)
            a = x.clone().requires_grad_()
            work = a * 1  # a non-leaf, overwritten by its gradient
            loss = xent.cross_entropy(work, y, reduction=reduction, inplace_backward=True)
            close(self, loss, want, torch.float64, "in-place loss")
            upstream = torch.rand_like(loss)
            loss.backward(upstream)
            close(self, a.grad, want_grad * (upstream.unsqueeze(1) if reduction == "none" else upstream),
                  torch.float64, "in-place grad")
        # The logits' gradient is their own memory, scaled where it lies (no
        # second [N, C] tensor), as Liger-Kernel's.
        x, y = torch.randn(4, 9, dtype=torch.float64), torch.randint(0, 9, (4,))
        _, want_grad = oracle(x, y, reduction="mean")
        work = x.clone().requires_grad_() * 1
        xent.cross_entropy(work, y, inplace_backward=True).backward(torch.tensor(0.5, dtype=torch.float64))
        close(self, work.detach(), want_grad * 0.5, torch.float64, "the logits' memory: the gradient, scaled there")
        # The class axis in place, per-position factors (some of them 1, which
        # xent_ce_scale_grad leaves unread); bf16 logits with an f32 loss;
        # loss.backward() of a mean (a dloss of 1).
        x, y = torch.randn(2, 7, 3, dtype=torch.float64), torch.randint(0, 7, (2, 3))
        want, want_grad = oracle(x, y, reduction="none")
        a = x.clone().requires_grad_()
        loss = xent.cross_entropy(a * 1, y, reduction="none", inplace_backward=True)
        upstream = torch.rand_like(loss)
        upstream[0, 1] = upstream[1, 2] = 1.0
        loss.backward(upstream)
        close(self, a.grad, want_grad * upstream.unsqueeze(1), torch.float64, "in-place grad, class axis 1")
        for reduction in ("none", "mean"):
            x, y = torch.randn(6, 33, dtype=torch.float64), torch.randint(0, 33, (6,))
            xb = x.to(torch.bfloat16).to(torch.float64)
            _, want_grad = oracle(xb, y, reduction=reduction)
            a = x.to(torch.bfloat16).requires_grad_()
            loss = xent.cross_entropy(a * 1, y, reduction=reduction, inplace_backward=True, loss_dtype=torch.float32)
            self.assertEqual(loss.dtype, torch.float32)
            up = torch.rand_like(loss) if reduction == "none" else None
            loss.backward(up)
            scale = up.to(torch.float64).unsqueeze(1) if up is not None else 1.0
            close(self, a.grad, want_grad * scale, torch.bfloat16, f"in-place bf16 grad, f32 loss, {reduction}")

    def test_no_grad_makes_no_gradient(self):
        """Under torch.no_grad() inputs that require grad get no gradient made
        in the forward: in-place, the logits are left as they are; the
        linear cross entropy's call is asked for none (a Function's
        needs_input_grad does not see no_grad)."""
        x, y = torch.randn(5, 17, dtype=torch.float64), torch.randint(0, 17, (5,))
        want, _ = oracle(x, y)
        a = x.clone().requires_grad_()
        with torch.no_grad():
            loss = xent.cross_entropy(a, y, inplace_backward=True)
        close(self, loss, want, torch.float64, "the loss under no_grad")
        self.assertTrue(torch.equal(a.detach(), x), "the logits under no_grad, inplace_backward=True")
        h = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
        w = torch.randn(11, 8, dtype=torch.float64, requires_grad=True)
        yl = torch.randint(0, 11, (6,))
        asked = []
        call = xent._linear._call

        def recording(*args, **kw):
            asked.append(set(args[8]))
            return call(*args, **kw)

        xent._linear._call = recording
        try:
            for grad in (False, True):
                with torch.set_grad_enabled(grad):
                    xent.linear_cross_entropy(h, w, yl, plan="one_pass")
        finally:
            xent._linear._call = call
        self.assertEqual(asked, [set(), {"hidden", "weight"}])

    def test_autocast(self):
        """Under torch.autocast (bfloat16), as PyTorch's ops there: the loss
        is float32 (F.cross_entropy runs in float32), unless loss_dtype
        says otherwise; the linear cross entropy's operands are cast to
        bfloat16, as F.linear's (a bfloat16 hidden with a float32 weight,
        the usual mixed-precision pair, included), and each gradient comes
        in its input's dtype, a float32 one made as a float32 sum."""
        x = (torch.randn(6, 33, dtype=torch.float64) * 3).to(torch.bfloat16)
        y = torch.randint(0, 33, (6,))
        want, _ = oracle(x, y)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = xent.cross_entropy(x, y)
            kept = xent.cross_entropy(x, y, loss_dtype=torch.bfloat16)
        self.assertEqual((loss.dtype, kept.dtype), (torch.float32, torch.bfloat16))
        close(self, loss, want, torch.float32, "the loss under autocast")
        self.assertEqual(xent.cross_entropy(x, y).dtype, torch.bfloat16, "the loss outside autocast")

        N, H, V = 12, 16, 40
        y = torch.randint(0, V, (N,))
        y[2] = -100
        calls = []
        call = xent._linear._call

        def recording(*args, **kw):
            grad_f32 = kw.get("grad_f32", args[12] if len(args) > 12 else False)
            calls.append((args[0].dtype, args[1].dtype, grad_f32 if args[8] else "no gradient"))
            return call(*args, **kw)

        for hidden_dtype in (torch.float32, torch.bfloat16):
            for reduction in ("mean", "none"):
                with self.subTest(hidden=hidden_dtype, reduction=reduction):
                    h = torch.randn(N, H, dtype=torch.float64).to(hidden_dtype).requires_grad_()
                    w = (torch.randn(V, H, dtype=torch.float64) / 4).to(torch.float32).requires_grad_()
                    b = (torch.randn(V, dtype=torch.float64) / 4).to(torch.float32).requires_grad_()
                    up = torch.rand(N, dtype=torch.float64) if reduction == "none" else torch.tensor(1.0)
                    xent._linear._call = recording
                    calls.clear()
                    try:
                        with torch.autocast(DEVICE, dtype=torch.bfloat16):
                            loss = xent.linear_cross_entropy(h, w, y, b, reduction=reduction, plan="one_pass")
                        (loss.to(torch.float64) * up).sum().backward()
                    finally:
                        xent._linear._call = call
                    self.assertEqual(loss.dtype, torch.float32)
                    made = [c for c in calls if c[2] != "no gradient"]
                    self.assertTrue(made and all(c[:2] == (torch.bfloat16, torch.bfloat16) for c in calls)
                                    and all(c[2] is True for c in made), f"the calls' operands and grad_f32: {calls}")
                    self.assertEqual((h.grad.dtype, w.grad.dtype, b.grad.dtype),
                                     (hidden_dtype, torch.float32, torch.float32))
                    # The oracle: F.linear's bf16 operands (and logits) under
                    # autocast, the rest in float64.
                    ops = [t.detach().to(torch.bfloat16).to(torch.float64).requires_grad_() for t in (h, w, b)]
                    z = F.linear(*ops).to(torch.bfloat16).to(torch.float64)
                    want = F.cross_entropy(z, y, reduction=reduction)
                    wants = torch.autograd.grad((want * up).sum(), ops)
                    close(self, loss, want, torch.bfloat16, "the loss")
                    for name, g, e in zip(("hidden", "weight", "bias"), (h.grad, w.grad, b.grad), wants):
                        close(self, g, e, torch.bfloat16, f"the gradient of {name}")

    def test_double_backward_raises(self):
        x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
        loss = xent.cross_entropy(x, torch.tensor([0, 1, 2]))
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        with self.assertRaisesRegex(RuntimeError, "xent.cross_entropy is differentiable once"):
            g.sum().backward()
        y = xent.log_softmax(x, 1)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        with self.assertRaisesRegex(RuntimeError, "xent.softmax / xent.log_softmax is differentiable once"):
            g.sum().backward()

    def test_module_in_a_training_step(self):
        torch.manual_seed(3)
        data = torch.randn(64, 10, dtype=torch.float64)
        labels = torch.randint(0, 7, (64,))
        models = []
        for loss_fn in (xent.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1)):
            torch.manual_seed(5)
            model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 7)).double()
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
            losses = []
            for _ in range(5):
                opt.zero_grad()
                loss = loss_fn(model(data), labels)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            models.append((model, losses))
        (ours, our_losses), (theirs, their_losses) = models
        self.assertLess(our_losses[-1], our_losses[0])
        for a, b in zip(our_losses, their_losses):
            self.assertAlmostEqual(a, b, delta=1e-9)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            close(self, p.detach(), q.detach(), torch.float64, "parameters after 5 steps")

    def test_errors(self):
        x = torch.randn(4, 6)
        with self.assertRaisesRegex(TypeError, "target has dtype torch.int16"):
            xent.cross_entropy(x, torch.zeros(4, dtype=torch.int16))
        with self.assertRaisesRegex(ValueError, r"target \(class indices\) has shape \(5,\)"):
            xent.cross_entropy(x, torch.zeros(5, dtype=torch.int64))
        with self.assertRaisesRegex(TypeError, "input has dtype torch.int64"):
            xent.cross_entropy(torch.zeros(4, 6, dtype=torch.int64), torch.zeros(4, dtype=torch.int64))
        with self.assertRaisesRegex(ValueError, "reduction is 'avg'"):
            xent.cross_entropy(x, torch.zeros(4, dtype=torch.int64), reduction="avg")
        with self.assertRaisesRegex(ValueError, r"weight has shape \(5,\)"):
            xent.cross_entropy(x, torch.zeros(4, dtype=torch.int64), torch.ones(5))
        with self.assertRaises(xent.InvalidLabelError) as caught:
            xent.cross_entropy(x, torch.tensor([0, 1, 6, 2]))
            xent.check(x.device)  # on a GPU the report waits for xent.check
        self.assertIn("row 2", str(caught.exception))
        xent.check(x.device, current_stream=True)  # nothing recorded since
        # xent's own checks come back as XentError with its message.
        with self.assertRaisesRegex(xent.XentError, "label_smoothing"):
            xent.cross_entropy(x, torch.zeros(4, dtype=torch.int64), label_smoothing=1.5)
        ignored = xent.cross_entropy(x, torch.tensor([0, 1, 6, 2]), invalid_labels="ignore", reduction="none")
        self.assertEqual(ignored[2].item(), 0.0)


def token_outputs(z, target, ignore_index=-100):
    """(entropy, the label's log-prob) of float64 logits z ([N, C, d...]),
    differentiable in z, from their definitions in PyTorch: the entropy of
    Categorical(logits=z) and the label's log_softmax(z), 0 on ignored rows;
    the log-prob None for soft labels."""
    # (Categorical wants the class axis last.)
    entropy = torch.distributions.Categorical(logits=z.movedim(1, -1)).entropy()
    if target.is_floating_point():
        return entropy, None
    t = target.to(torch.int64)
    counted = t != ignore_index
    logprob = torch.log_softmax(z, 1).gather(1, t.clamp(0, z.shape[1] - 1).unsqueeze(1)).squeeze(1)
    zero = torch.zeros_like(entropy)
    return torch.where(counted, entropy, zero), torch.where(counted, logprob, zero)


def token_oracle(x, target, tau, ignore_index=-100, softcap=0.0):
    """The per-token outputs in float64 from x's values, as differentiable
    functions of the float64 leaf returned: (leaf, z, entropy, log-prob) with
    z = (capped x) / tau (token_outputs; argmax is that of z)."""
    x64 = x.detach().to(torch.float64).requires_grad_()
    z = softcap * torch.tanh(x64 / softcap) if softcap else x64
    z = z / tau
    return (x64, z) + token_outputs(z, target, ignore_index)


class PerTokenOutputs(unittest.TestCase):
    """temperature, return_entropy, return_logprob, return_argmax: values
    and gradients against the float64 oracle of the same objective."""

    def setUp(self):
        torch.manual_seed(11)

    def check(self, dtype, label, reduction, tau, used=("loss", "entropy", "logprob"), shape=(7, 29), **options):
        n, c = shape[0], shape[1]
        x = (torch.randn(*shape, dtype=torch.float64) * 3).to(dtype).requires_grad_()
        rows = (n,) + tuple(shape[2:])
        soft = label == "prob"
        if soft:
            target = torch.softmax(torch.randn(*shape, dtype=torch.float64) * 2, 1).to(dtype)
        else:
            target = torch.randint(0, c, rows, dtype=torch.int64 if label == "i64" else torch.int32)
            target.view(-1)[2] = -100
        kw = dict(options)
        if "weight" in kw:
            kw["weight"] = kw["weight"](c)
        outs = xent.cross_entropy(x, target, reduction=reduction, temperature=tau, return_entropy=True,
                                  return_logprob=not soft, return_argmax=not soft, **kw)
        loss, entropy = outs[0], outs[1]
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        self.assertEqual((entropy.dtype, entropy.shape), (acc, rows))
        # The objective: each output used weighs in with its own random factor.
        a = torch.rand(rows, dtype=torch.float64) - 0.3
        b = torch.rand(rows, dtype=torch.float64) + 0.2
        u = torch.rand(rows if reduction == "none" else (), dtype=torch.float64) + 0.5
        x64, z, want_entropy, want_logprob = token_oracle(x, target, tau, softcap=kw.get("softcap", 0.0))
        ref_kw = {k: (v.to(torch.float64) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()
                  if k != "softcap"}
        t64 = target.to(torch.float64) if soft else target.to(torch.int64)
        want_loss = F.cross_entropy(z.movedim(1, -1).reshape(-1, c) if z.dim() > 2 else z,
                                    t64.movedim(1, -1).reshape(-1, c) if soft and z.dim() > 2 else
                                    t64.reshape(-1) if z.dim() > 2 else t64,
                                    reduction="none" if reduction == "none" else reduction,
                                    **{k: v for k, v in ref_kw.items() if k != "z_loss"})
        if reduction == "none" and z.dim() > 2:
            want_loss = want_loss.reshape(n, *shape[2:])
        if kw.get("z_loss"):
            zl = kw["z_loss"] * torch.logsumexp(z, 1) ** 2
            counted = torch.ones_like(zl, dtype=torch.bool) if soft else target != -100
            zl = torch.where(counted, zl, torch.zeros_like(zl))
            want_loss = want_loss + (zl if reduction == "none" else zl.sum() if reduction == "sum" else
                                     zl.sum() / counted.sum())
        what = f"{dtype} {label} {reduction} tau={tau} {sorted(options)} used={used}"
        close(self, loss, want_loss, dtype, what + ": loss")
        close(self, entropy, torch.where(torch.isnan(want_entropy), want_entropy, want_entropy), dtype,
              what + ": entropy")
        ours, theirs = 0, 0
        if "loss" in used:
            ours, theirs = ours + (loss.to(torch.float64) * u).sum(), theirs + (want_loss * u).sum()
        if "entropy" in used:
            ours, theirs = ours + (entropy.to(torch.float64) * a).sum(), theirs + (want_entropy * a).sum()
        if not soft:
            logprob, argmax = outs[2], outs[3]
            close(self, logprob, want_logprob, dtype, what + ": logprob")
            self.assertEqual(argmax.dtype, torch.int64)
            picked = z.detach().gather(1, argmax.unsqueeze(1)).squeeze(1)
            gap = (z.detach().max(1).values - picked).max().item()
            self.assertLessEqual(gap, 0.0 if dtype == torch.float64 else TOL[dtype] * z.detach().abs().max().item(),
                                 what + ": argmax is not the row's largest")
            if "logprob" in used:
                ours, theirs = ours + (logprob.to(torch.float64) * b).sum(), theirs + (want_logprob * b).sum()
        (g,) = torch.autograd.grad(ours, x)
        (wg,) = torch.autograd.grad(theirs, x64)
        close(self, g, wg, dtype, what + ": gradient")

    def test_every_dtype_and_reduction(self):
        for dtype in DTYPES:
            for reduction in ("none", "mean", "sum"):
                with self.subTest(dtype=dtype, reduction=reduction):
                    self.check(dtype, "i64", reduction, 0.7)
                    self.check(dtype, "prob", reduction, 1.6, used=("loss", "entropy"))

    def test_with_the_loss_options(self):
        # Weights, smoothing and z-loss make the loss's gradient other than
        # -logp's: the log-prob's gradient then takes its own call.
        options = [dict(weight=lambda c: torch.rand(c, dtype=torch.float32) + 0.5), dict(label_smoothing=0.1),
                   dict(z_loss=1e-2, softcap=5.0), dict()]
        for opts in options:
            for reduction in ("mean", "none"):
                with self.subTest(options=sorted(opts), reduction=reduction):
                    self.check(torch.float64, "i32", reduction, 1.3, **opts)
                    self.check(torch.bfloat16, "i64", reduction, 0.5, **opts)

    def test_each_output_alone_in_the_objective(self):
        for used in (("logprob",), ("entropy",), ("loss",), ("entropy", "logprob")):
            for reduction in ("mean", "none"):
                with self.subTest(used=used, reduction=reduction):
                    self.check(torch.float32, "i64", reduction, 0.9, used=used)

    def test_nd_and_unbatched(self):
        self.check(torch.float64, "i64", "none", 2.0, shape=(3, 9, 4))
        x = torch.randn(13, dtype=torch.float64)
        loss, entropy, logprob, argmax = xent.cross_entropy(x, torch.tensor(4), return_entropy=True,
                                                            return_logprob=True, return_argmax=True, temperature=0.5)
        self.assertEqual((loss.shape, entropy.shape, logprob.shape, argmax.shape), ((),) * 4)
        self.assertEqual(argmax.item(), x.argmax().item())
        close(self, logprob, torch.log_softmax(x / 0.5, 0)[4], torch.float64, "unbatched logprob")

    def test_return_order(self):
        x, y = torch.randn(4, 6), torch.tensor([1, 2, 3, 4])
        out = xent.cross_entropy(x, y, return_lse=True, return_argmax=True)
        self.assertEqual(len(out), 3)
        self.assertEqual(out[2].tolist(), x.argmax(1).tolist())
        close(self, out[1], torch.logsumexp(x.to(torch.float64), 1), torch.float32, "lse before argmax")
        self.assertIsInstance(xent.cross_entropy(x, y, temperature=2.0), torch.Tensor)
        close(self, xent.CrossEntropyLoss(temperature=2.0)(x, y), F.cross_entropy(x.to(torch.float64) / 2, y),
              torch.float32, "the module's temperature")

    def test_grpo_step(self):
        """A GRPO-style step: per-token log-probs of the sampled tokens under
        the sampler's temperature, the clipped ratio to the old policy's
        times a per-token advantage, an entropy bonus, reduction 'none' and
        a mask, then an optimizer step: the same step written with PyTorch
        ops gives the same parameters and metrics."""
        torch.manual_seed(23)
        hidden, vocab, tokens, tau, beta, clip = 12, 50, 40, 0.8, 0.01, 0.2
        data = torch.randn(tokens, hidden, dtype=torch.float64)
        sampled = torch.randint(0, vocab, (tokens,))
        sampled[::7] = -100  # padding
        mask = (sampled != -100).to(torch.float64)
        advantage = torch.randn(tokens, dtype=torch.float64)
        old_logp = torch.log_softmax(torch.randn(tokens, vocab, dtype=torch.float64), 1).gather(
            1, sampled.clamp(0).unsqueeze(1)).squeeze(1)

        def policy_loss(logp, entropy):
            ratio = torch.exp(logp - old_logp)
            surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - clip, 1 + clip) * advantage)
            return -((surrogate + beta * entropy) * mask).sum() / mask.sum()

        def torch_outputs(logits):
            z = logits / tau
            logp_all = torch.log_softmax(z, 1)
            logp = logp_all.gather(1, sampled.clamp(0).unsqueeze(1)).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(1)
            return logp * mask, entropy * mask, z.argmax(1)

        def xent_outputs(logits):
            _, entropy, logp, argmax = xent.cross_entropy(logits, sampled, reduction="none", temperature=tau,
                                                          return_entropy=True, return_logprob=True,
                                                          return_argmax=True)
            return logp, entropy, argmax

        results = []
        for outputs in (xent_outputs, torch_outputs):
            torch.manual_seed(5)
            model = torch.nn.Sequential(torch.nn.Linear(hidden, 32), torch.nn.Tanh(),
                                        torch.nn.Linear(32, vocab)).double()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            metrics = []
            for _ in range(3):
                opt.zero_grad()
                logp, entropy, argmax = outputs(model(data))
                loss = policy_loss(logp, entropy)
                loss.backward()
                opt.step()
                accuracy = ((argmax == sampled).to(torch.float64) * mask).sum() / mask.sum()
                metrics.append((loss.item(), accuracy.item()))
            results.append((model, metrics))
        (ours, our_metrics), (theirs, their_metrics) = results
        for (l1, a1), (l2, a2) in zip(our_metrics, their_metrics):
            self.assertAlmostEqual(l1, l2, delta=1e-9)
            self.assertEqual(a1, a2)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            close(self, p.detach(), q.detach(), torch.float64, "parameters after 3 GRPO steps")

    def test_errors(self):
        x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 3])
        soft = torch.softmax(torch.randn(4, 6), 1)
        with self.assertRaisesRegex(ValueError, "return_logprob and return_argmax are for class-index targets"):
            xent.cross_entropy(x, soft, return_argmax=True)
        with self.assertRaisesRegex(ValueError, "inplace_backward computes the gradient in the forward pass"):
            xent.cross_entropy(x.clone().requires_grad_() * 1, y, inplace_backward=True, return_entropy=True)
        for tau, err in ((0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                         ("hot", TypeError)):
            with self.subTest(tau=tau), self.assertRaisesRegex(err, "temperature is"):
                xent.cross_entropy(x, y, temperature=tau)
        # A temperature whose inverse is not a normal float32: xent's own check.
        with self.assertRaisesRegex(xent.XentError, "temperature"):
            xent.cross_entropy(x, y, temperature=1e300)


def weighted_oracle(z, target, u, reduction, count=False, **kw):
    """F.cross_entropy of float64 logits z with token weights u (rows-shaped,
    float64): per-row losses times u (0 where u is 0), summed, or divided by
    sum_n w[y_n] * u_n over the counted rows (soft targets: sum u) or, with
    count, by PyTorch's own divisor. Differentiable in z."""
    per_row = F.cross_entropy(z, target, reduction="none", **kw)
    weighed = torch.where(u == 0, torch.zeros_like(per_row), per_row * u)
    if reduction == "none":
        return weighed
    if reduction == "sum":
        return weighed.sum()
    if target.is_floating_point():
        base = torch.ones_like(u)
    else:
        t = target.to(torch.int64)
        base = (t != kw.get("ignore_index", -100)).to(torch.float64)
        if kw.get("weight") is not None:
            base = base * kw["weight"][t.clamp(0, z.shape[1] - 1)]
    return weighed.sum() / (base.sum() if count else (base * u).sum())


class PerRowOptions(unittest.TestCase):
    """A temperature per row and token weights (temperature=<tensor>,
    token_weight=, token_weight_mean=): values and gradients against the
    float64 oracle from PyTorch ops."""

    def setUp(self):
        torch.manual_seed(13)

    def test_against_torch(self):
        for dtype in DTYPES:
            for label in ("i64", "i32", "prob"):
                for reduction in ("mean", "sum", "none"):
                    for count in (False, True):
                        with self.subTest(dtype=dtype, label=label, reduction=reduction, count=count):
                            self.check(dtype, label, reduction, count, weighted=label == "i64",
                                       label_smoothing=0.1 if label != "i32" else 0.0)

    def test_nd_and_options(self):
        self.check(torch.float32, "i64", "mean", False, shape=(3, 11, 4), z_loss=1e-3, softcap=4.0)
        self.check(torch.bfloat16, "prob", "mean", True, shape=(2, 9, 2, 3))

    def check(self, dtype, label, reduction, count, shape=(9, 23), weighted=False, **options):
        n, c = shape[0], shape[1]
        rows = (n,) + tuple(shape[2:])
        x = (torch.randn(*shape, dtype=torch.float64) * 3).to(dtype).requires_grad_()
        if label == "prob":
            target = torch.softmax(torch.randn(*shape, dtype=torch.float64) * 2, 1).to(dtype)
        else:
            target = torch.randint(0, c, rows, dtype=torch.int64 if label == "i64" else torch.int32)
            target.view(-1)[1] = -100
        tau = torch.rand(rows, dtype=torch.float64) * 1.5 + 0.5
        u = torch.randn(rows, dtype=torch.float64) if count else torch.rand(rows, dtype=torch.float64) * 2
        u.view(-1)[3] = 0.0
        weight = torch.rand(c, dtype=torch.float64) + 0.5 if weighted else None
        loss = xent.cross_entropy(x, target, weight, reduction=reduction, temperature=tau.to(torch.float32),
                                  token_weight=u.to(torch.float32), token_weight_mean="count" if count else "weights",
                                  **options)
        up = torch.rand_like(loss, dtype=torch.float64) + 0.5
        (got,) = torch.autograd.grad((loss.to(torch.float64) * up).sum(), x)
        # The oracle on the values the call saw: tau and u rounded to float32.
        x64 = x.detach().to(torch.float64).requires_grad_()
        cap = options.get("softcap", 0.0)
        zc = cap * torch.tanh(x64 / cap) if cap else x64
        tau32, u32 = tau.to(torch.float32).to(torch.float64), u.to(torch.float32).to(torch.float64)
        z = zc / tau32.unsqueeze(1)
        t = target.to(torch.float64) if target.is_floating_point() else target.to(torch.int64)
        kw = dict(weight=weight, label_smoothing=options.get("label_smoothing", 0.0))
        want = weighted_oracle(z, t, u32, reduction, count, **kw)
        zl = options.get("z_loss", 0.0)
        if zl:
            lse = torch.logsumexp(z, 1)
            counted = (t != -100).to(torch.float64) if not target.is_floating_point() else torch.ones_like(lse)
            zterm = torch.where(u32 == 0, torch.zeros_like(lse), zl * lse * lse * counted * u32)
            base = counted * (weight[t.clamp(0, c - 1)] if weight is not None else 1)
            want = want + (zterm.sum() / (base.sum() if count else (base * u32).sum())
                           if reduction == "mean" else zterm.sum() if reduction == "sum" else zterm)
        (wg,) = torch.autograd.grad((want * up).sum(), x64)
        close(self, loss, want.detach(), dtype, "loss")
        close(self, got, wg, dtype, "gradient")

    def test_grpo_step(self):
        """A GRPO-style step with a sampling temperature per sequence and
        token weights: the clipped ratio of per-token log-probs times the
        advantage, an entropy bonus, and a token-weighted cross entropy on
        the sampled tokens (each sequence's tokens weighted 1 / its length,
        verl's seq-mean-token-mean), then an optimizer step: the same step
        written with PyTorch ops gives the same parameters."""
        torch.manual_seed(29)
        hidden, vocab, seqs, length, beta, clip, lam = 12, 50, 4, 10, 0.01, 0.2, 0.1
        tokens = seqs * length
        data = torch.randn(tokens, hidden, dtype=torch.float64)
        sampled = torch.randint(0, vocab, (tokens,))
        sampled[length - 3:length] = -100  # padding at the end of sequence 0
        mask = (sampled != -100).to(torch.float64)
        lengths = mask.reshape(seqs, length).sum(1)
        u = (mask.reshape(seqs, length) / lengths.unsqueeze(1) / seqs).reshape(-1)
        tau = torch.tensor([0.7, 1.0, 1.3, 0.9], dtype=torch.float64).repeat_interleave(length)
        advantage = torch.randn(tokens, dtype=torch.float64)
        old_logp = torch.log_softmax(torch.randn(tokens, vocab, dtype=torch.float64), 1).gather(
            1, sampled.clamp(0).unsqueeze(1)).squeeze(1)

        def objective(sft, logp, entropy):
            ratio = torch.exp(logp - old_logp)
            surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - clip, 1 + clip) * advantage)
            return -((surrogate + beta * entropy) * mask).sum() / mask.sum() + lam * sft

        def torch_outputs(logits):
            z = logits / tau.unsqueeze(1)
            logp_all = torch.log_softmax(z, 1)
            logp = logp_all.gather(1, sampled.clamp(0).unsqueeze(1)).squeeze(1) * mask
            entropy = -(logp_all.exp() * logp_all).sum(1) * mask
            sft = -(logp * u).sum()
            return sft, logp, entropy

        def xent_outputs(logits):
            sft, entropy, logp = xent.cross_entropy(logits, sampled, reduction="sum", temperature=tau, token_weight=u,
                                                    return_entropy=True, return_logprob=True)
            return sft, logp, entropy

        results = []
        for outputs in (xent_outputs, torch_outputs):
            torch.manual_seed(5)
            model = torch.nn.Sequential(torch.nn.Linear(hidden, 32), torch.nn.Tanh(),
                                        torch.nn.Linear(32, vocab)).double()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            losses = []
            for _ in range(3):
                opt.zero_grad()
                loss = objective(*outputs(model(data)))
                loss.backward()
                opt.step()
                losses.append(loss.item())
            results.append((model, losses))
        (ours, our_losses), (theirs, their_losses) = results
        for l1, l2 in zip(our_losses, their_losses):
            self.assertAlmostEqual(l1, l2, delta=1e-9)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            close(self, p.detach(), q.detach(), torch.float64, "parameters after 3 GRPO steps")

    def test_linear(self):
        """The fused linear cross entropy's three gradients with a
        temperature per row and token weights."""
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            for reduction in ("mean", "none"):
                h, w, b = linear_inputs(dtype)
                y = torch.randint(0, 50, (2, 5))
                y[1, 2] = -100
                tau = torch.rand(2, 5, dtype=torch.float64) + 0.5
                u = torch.rand(2, 5, dtype=torch.float64)
                u[0, 0] = 0.0
                loss = xent.linear_cross_entropy(h, w, y, b, reduction=reduction, chunk_rows=3, temperature=tau,
                                                 token_weight=u, label_smoothing=0.1)
                up = torch.rand_like(loss, dtype=torch.float64) + 0.5
                got = torch.autograd.grad((loss.to(torch.float64) * up).sum(), (h, w, b))
                h64, w64, b64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w, b)]
                acc = torch.float64 if dtype == torch.float64 else torch.float32  # what the call takes them in
                tau32, u32 = [v.to(acc).to(torch.float64).reshape(10) for v in (tau, u)]
                z = F.linear(h64, w64, b64).reshape(10, 50) / tau32.unsqueeze(1)
                want = weighted_oracle(z, y.reshape(10), u32, reduction, label_smoothing=0.1)
                want = want.reshape(2, 5) if reduction == "none" else want
                wg = torch.autograd.grad((want * up).sum(), (h64, w64, b64))
                what = f"{dtype} {reduction}"
                close(self, loss, want.detach(), dtype, what + " loss")
                for name, g, e in zip(("hidden", "weight", "bias"), got, wg):
                    close(self, g, e, dtype, f"{what} grad of {name}")

    def test_errors(self):
        x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 3])
        with self.assertRaisesRegex(ValueError, r"temperature has shape \(3,\); the rows' \(4,\) expected"):
            xent.cross_entropy(x, y, temperature=torch.ones(3))
        with self.assertRaisesRegex(TypeError, "token_weight is"):
            xent.cross_entropy(x, y, token_weight=torch.ones(4, dtype=torch.int64))
        with self.assertRaisesRegex(ValueError, "token_weight_mean is 'tokens'"):
            xent.cross_entropy(x, y, token_weight=torch.ones(4), token_weight_mean="tokens")
        if DEVICE == "cpu":
            with self.assertRaisesRegex(ValueError, "temperature of row 2 is -1.0"):
                xent.cross_entropy(x, y, temperature=torch.tensor([1.0, 2.0, -1.0, 0.0]))


class Softmax(unittest.TestCase):
    def test_any_dim_with_gradients(self):
        torch.manual_seed(11)
        for dtype in DTYPES:
            x = torch.randn(3, 5, 4, dtype=torch.float64).to(dtype).requires_grad_()
            for dim in (0, 1, 2, -1):
                for ours, theirs in ((xent.softmax, torch.softmax), (xent.log_softmax, torch.log_softmax)):
                    with self.subTest(dtype=dtype, dim=dim, op=theirs.__name__):
                        y = ours(x, dim)
                        up = torch.randn_like(y)
                        (g,) = torch.autograd.grad(y, x, up)
                        x64 = x.detach().to(torch.float64).requires_grad_()
                        y64 = theirs(x64, dim)
                        (g64,) = torch.autograd.grad(y64, x64, up.to(torch.float64))
                        close(self, y, y64.detach(), dtype, "value")
                        close(self, g, g64, dtype, "gradient")

    def test_gradcheck(self):
        x = torch.randn(4, 3, 5, dtype=torch.float64, requires_grad=True)
        for dim in (0, 2):
            self.assertTrue(torch.autograd.gradcheck(lambda a: xent.log_softmax(a, dim), (x,)))
            self.assertTrue(torch.autograd.gradcheck(lambda a: xent.softmax(a, dim), (x,)))


def linear_inputs(dtype):
    """hidden [2, 5, 16], weight [50, 16] and bias [50] in dtype, leaves
    that want gradients (values drawn in float64)."""
    h = torch.randn(2, 5, 16, dtype=torch.float64).to(dtype).requires_grad_()
    w = (torch.randn(50, 16, dtype=torch.float64) / 4).to(dtype).requires_grad_()
    b = (torch.randn(50, dtype=torch.float64) / 4).to(dtype).requires_grad_()
    return h, w, b


class LinearCrossEntropy(unittest.TestCase):
    """xent.linear_cross_entropy against F.linear + F.cross_entropy in
    float64, through autograd (tests/linear_ce_vs_torch_test.py holds the C
    call to every option)."""

    def test_against_torch(self):
        torch.manual_seed(11)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            for reduction in ("mean", "sum", "none"):
                for soft in (False, True):
                    h, w, b = linear_inputs(dtype)
                    if soft:
                        y = torch.softmax(torch.randn(2, 5, 50, dtype=torch.float64), -1).to(dtype)
                        kw = dict(label_smoothing=0.1)
                    else:
                        y = torch.randint(0, 50, (2, 5))
                        y[0, 1] = -100
                        kw = dict(ce_weight=torch.rand(50, dtype=torch.float64) + 0.5, label_smoothing=0.1)
                    loss = xent.linear_cross_entropy(h, w, y, b, reduction=reduction, chunk_rows=3, **kw)
                    up = torch.rand_like(loss, dtype=torch.float64).to(loss.dtype) + 0.5
                    got = torch.autograd.grad((loss * up).sum(), (h, w, b))
                    h64, w64, b64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w, b)]
                    z = F.linear(h64, w64, b64).reshape(10, 50)
                    yy = y.reshape(10, 50).to(torch.float64) if soft else y.reshape(10)
                    ref_kw = dict(kw)
                    if "ce_weight" in ref_kw:
                        ref_kw["weight"] = ref_kw.pop("ce_weight")
                    want = F.cross_entropy(z, yy, reduction=reduction, **ref_kw)
                    want = want.reshape(2, 5) if reduction == "none" else want
                    wg = torch.autograd.grad((want * up.to(torch.float64)).sum(), (h64, w64, b64))
                    what = f"{dtype} {reduction} soft={soft}"
                    close(self, loss, want.detach(), dtype, what + " loss")
                    for name, g, e in zip(("hidden", "weight", "bias"), got, wg):
                        close(self, g, e, dtype, f"{what} grad of {name}")

    def test_per_token_outputs(self):
        """temperature, entropy, the label's log-prob and argmax through the
        fused linear cross entropy: values, and the gradients of hidden,
        weight and bias of an objective using loss, entropy and log-prob,
        against F.linear and the float64 oracle; with class weights and
        smoothing the log-prob's gradient takes its own call."""
        torch.manual_seed(13)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            for reduction in ("none", "mean", "sum"):
                for weighted in (False, True):
                    h, w, b = linear_inputs(dtype)
                    y = torch.randint(0, 50, (2, 5))
                    y[1, 2] = -100
                    kw = dict(ce_weight=torch.rand(50, dtype=torch.float64) + 0.5, label_smoothing=0.1) if weighted \
                        else {}
                    loss, entropy, logprob, argmax = xent.linear_cross_entropy(
                        h, w, y, b, reduction=reduction, chunk_rows=3, temperature=0.8, return_entropy=True,
                        return_logprob=True, return_argmax=True, **kw)
                    self.assertEqual((entropy.shape, logprob.shape, argmax.shape), ((2, 5),) * 3)
                    h64, w64, b64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w, b)]
                    logits = F.linear(h64, w64, b64).reshape(10, 50)
                    # The per-token outputs as functions of hidden, weight and bias.
                    z = logits / 0.8
                    want_entropy, want_logprob = token_outputs(z, y.reshape(10))
                    ref_kw = {("weight" if k == "ce_weight" else k): v for k, v in kw.items()}
                    want = F.cross_entropy(z, y.reshape(10), reduction=reduction, **ref_kw)
                    want = want.reshape(2, 5) if reduction == "none" else want
                    a, c = torch.rand(2, 5, dtype=torch.float64) - 0.3, torch.rand(2, 5, dtype=torch.float64) + 0.2
                    up = torch.rand(want.shape, dtype=torch.float64) + 0.5
                    got = torch.autograd.grad((loss.to(torch.float64) * up).sum() + (entropy * a).sum()
                                              + (logprob * c).sum(), (h, w, b))
                    wg = torch.autograd.grad((want * up).sum() + (want_entropy.reshape(2, 5) * a).sum()
                                             + (want_logprob.reshape(2, 5) * c).sum(), (h64, w64, b64))
                    what = f"{dtype} {reduction} weighted={weighted}"
                    close(self, loss, want.detach(), dtype, what + " loss")
                    close(self, entropy, want_entropy.reshape(2, 5), dtype, what + " entropy")
                    close(self, logprob, want_logprob.reshape(2, 5), dtype, what + " logprob")
                    picked = z.detach().gather(1, argmax.reshape(10, 1)).squeeze(1)
                    self.assertLessEqual((z.detach().max(1).values - picked).max().item(),
                                         0.0 if dtype == torch.float64 else TOL[dtype] * z.detach().abs().max().item(),
                                         what + " argmax")
                    for name, g, e in zip(("hidden", "weight", "bias"), got, wg):
                        close(self, g, e, dtype, f"{what} grad of {name}")

    def test_weight_main_grad(self):
        """weight_main_grad (Megatron-LM's main_grad): the backward adds the
        weight's gradient to the f32 tensor, over two steps, and weight gets
        no .grad; hidden's and bias's as without it. Each reduction, and the
        per-token outputs' extra call (the log-prob with class weights)."""
        torch.manual_seed(17)
        for dtype in (torch.float32, torch.bfloat16):
            for reduction, stats in (("mean", False), ("sum", False), ("none", False), ("mean", True)):
                h, w, b = linear_inputs(dtype)
                y = torch.randint(0, 50, (2, 5))
                y[1, 3] = -100
                kw = dict(ce_weight=torch.rand(50, dtype=torch.float64) + 0.5, label_smoothing=0.1) if stats else {}
                main = torch.full((50, 16), 0.25)
                h64, w64, b64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w, b)]
                want_w = torch.full((50, 16), 0.25, dtype=torch.float64)
                for step in range(2):
                    out = xent.linear_cross_entropy(h, w, y, b, reduction=reduction, chunk_rows=3,
                                                    return_logprob=stats, weight_main_grad=main, **kw)
                    loss, logprob = out if stats else (out, None)
                    up = torch.rand(loss.shape, dtype=torch.float64) + 0.5
                    obj = (loss.to(torch.float64) * up).sum() + (logprob.sum() * 0.3 if stats else 0)
                    obj.backward()
                    got = (h.grad, b.grad)
                    h.grad = b.grad = None
                    z = F.linear(h64, w64, b64).reshape(10, 50)
                    ref_kw = {("weight" if k == "ce_weight" else k): v for k, v in kw.items()}
                    want = F.cross_entropy(z, y.reshape(10), reduction=reduction, **ref_kw)
                    want = want.reshape(2, 5) if reduction == "none" else want
                    ref = (want * up).sum()
                    if stats:
                        ref = ref + token_outputs(z, y.reshape(10))[1].sum() * 0.3
                    wg = torch.autograd.grad(ref, (h64, w64, b64))
                    want_w += wg[1]
                    what = f"{dtype} {reduction} stats={stats} step {step}"
                    self.assertIsNone(w.grad, what)
                    close(self, got[0], wg[0], dtype, what + " grad of hidden")
                    close(self, got[1], wg[2], dtype, what + " grad of bias")
                    close(self, main, want_w, dtype, what + " main_grad")
        h, w, b = linear_inputs(torch.bfloat16)
        y = torch.randint(0, 50, (2, 5))
        with self.assertRaisesRegex(TypeError, "float32 tensor"):
            xent.linear_cross_entropy(h, w, y, weight_main_grad=torch.zeros(50, 16, dtype=torch.bfloat16))
        with self.assertRaisesRegex(ValueError, r"weight's \(50, 16\)"):
            xent.linear_cross_entropy(h, w, y, weight_main_grad=torch.zeros(16, 50))

    def test_linear_memory_mib(self):
        """memory_mib=1 in chunks of 16 rows of bf16, a vocabulary of 8192:
        the one pass's f32 weight-gradient sum does not fit, so [64, 64]
        takes the TILED_HIDDEN_SUM plan and [1024, 256] the TILED plan
        (linear_ce_vs_torch_test checks which). Their three gradients under
        a temperature per row and token weights, for a mean and per row, and
        with the entropy in the objective (whose gradient takes the one
        pass)."""
        torch.manual_seed(5)
        V = 8192
        shapes = ((64, 64, (("mean", False), ("none", False), ("mean", True))), (1024, 256, (("sum", False),)))
        for N, H, cases in shapes:
            h = torch.randn(N, H, dtype=torch.float64).to(torch.bfloat16).requires_grad_()
            w = (torch.randn(V, H, dtype=torch.float64) / H ** 0.5).to(torch.bfloat16).requires_grad_()
            b = (torch.randn(V, dtype=torch.float64) / 4).to(torch.bfloat16).requires_grad_()
            y = torch.randint(0, V, (N,))
            y[2] = -100
            tau = torch.rand(N, dtype=torch.float64) + 0.5
            u = torch.rand(N, dtype=torch.float64)
            for reduction, entropy in cases:
                out = xent.linear_cross_entropy(h, w, y, b, reduction=reduction, chunk_rows=16, memory_mib=1,
                                                temperature=tau, token_weight=u, return_entropy=entropy)
                loss, ent = out if entropy else (out, None)
                up = torch.rand_like(loss, dtype=torch.float64) + 0.5
                objective = (loss.to(torch.float64) * up).sum() + (ent.sum() * 0.3 if entropy else 0)
                got = torch.autograd.grad(objective, (h, w, b))
                h64, w64, b64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w, b)]
                tau32, u32 = [v.to(torch.float32).to(torch.float64) for v in (tau, u)]
                z = F.linear(h64, w64, b64) / tau32.unsqueeze(1)
                objective = (weighted_oracle(z, y, u32, reduction) * up).sum()
                if entropy:
                    h_row = -(torch.softmax(z, 1) * torch.log_softmax(z, 1)).sum(1)
                    objective = objective + torch.where(y != -100, h_row, torch.zeros_like(h_row)).sum() * 0.3
                wg = torch.autograd.grad(objective, (h64, w64, b64))
                what = f"[{N}, {H}] {reduction} entropy={entropy}"
                close(self, loss, weighted_oracle(z, y, u32, reduction).detach(), torch.bfloat16, what + " loss")
                for name, g, e in zip(("hidden", "weight", "bias"), got, wg):
                    close(self, g, e, torch.bfloat16, f"{what} grad of {name}")

    @staticmethod
    def plan_inputs(seed):
        """bf16 hidden [70, 72] and weight [200, 72] requiring grad, labels,
        and whether this device runs plan="on_chip" (an sm_90 GPU)."""
        torch.manual_seed(seed)
        N, H, V = 70, 72, 200
        h = torch.randn(N, H, dtype=torch.float64).to(torch.bfloat16).requires_grad_()
        w = (torch.randn(V, H, dtype=torch.float64) / H ** 0.5).to(torch.bfloat16).requires_grad_()
        y = torch.randint(0, V, (N,))
        return h, w, y, DEVICE == "cuda" and torch.cuda.get_device_capability() == (9, 0)

    def test_linear_plans(self):
        """plan= names the xent_linear_ce_plan_kind: each plan's loss,
        entropy and argmax, and the gradients of the loss plus a share of
        the entropy, against float64 for a bf16 mean over class indices.
        "on_chip" runs where the device has sm_90a code (an H100/H200 with
        the default build) or sm_100f code; elsewhere (the cpu backend) it is refused with
        the device named. An unknown plan is a ValueError."""
        if os.environ.get("XENT_TEST_SKIP_ON_CHIP"):
            self.skipTest("XENT_TEST_SKIP_ON_CHIP: run in its own process (bench/gpu/stage.sh's on_chip)")
        h, w, y, on_chip = self.plan_inputs(9)
        y[3] = -100
        h64, w64 = [t.detach().to(torch.float64).requires_grad_() for t in (h, w)]
        z64 = F.linear(h64, w64)
        want = F.cross_entropy(z64, y)
        want_ent = torch.distributions.Categorical(logits=z64).entropy()
        want_ent = torch.where(y == -100, torch.zeros_like(want_ent), want_ent)
        want_grads = torch.autograd.grad(want + 0.1 * want_ent.sum(), (h64, w64))
        for plan in ("auto", "one_pass", "tiled_hidden_sum", "tiled", "on_chip"):
            with self.subTest(plan=plan):
                if plan == "on_chip" and not on_chip:
                    with self.assertRaisesRegex(xent.XentError, "runs on an sm_90 GPU"):
                        xent.linear_cross_entropy(h, w, y, plan=plan)
                    continue
                loss, ent, am = xent.linear_cross_entropy(h, w, y, chunk_rows=32, plan=plan, return_entropy=True,
                                                          return_argmax=True)
                got = torch.autograd.grad(loss + 0.1 * ent.sum(), (h, w))
                close(self, loss, want.detach(), torch.bfloat16, f"plan {plan}: loss")
                close(self, ent, want_ent.detach(), torch.bfloat16, f"plan {plan}: entropy")
                picked = z64.detach().gather(1, am[:, None])[:, 0]
                self.assertLess((z64.detach().max(1).values - picked).max().item(), 0.05, f"plan {plan}: argmax")
                for name, g, e in zip(("hidden", "weight"), got, want_grads):
                    close(self, g, e, torch.bfloat16, f"plan {plan}: grad of {name}")
        with self.assertRaisesRegex(ValueError, "plan is 'fast'"):
            xent.linear_cross_entropy(h, w, y, plan="fast")

    def test_linear_plans_deterministic_algorithms(self):
        """Under torch.use_deterministic_algorithms(True), plan="on_chip"
        (whose gradients atomics sum in no fixed order) is refused as PyTorch
        refuses its own such ops: a RuntimeError once gradients are asked
        for, a warning where warn_only. Its forward alone, and every other
        plan, are deterministic and run."""
        if os.environ.get("XENT_TEST_SKIP_ON_CHIP"):
            self.skipTest("XENT_TEST_SKIP_ON_CHIP: run in its own process (bench/gpu/stage.sh's on_chip)")
        h, w, y, on_chip = self.plan_inputs(10)
        refused = (xent.XentError, "runs on an sm_90 GPU")
        was, was_warn_only = (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())
        try:
            torch.use_deterministic_algorithms(True)
            for plan in ("auto", "tiled"):
                xent.linear_cross_entropy(h, w, y, plan=plan).backward()
            with torch.no_grad():
                if on_chip:
                    xent.linear_cross_entropy(h, w, y, plan="on_chip")
                else:
                    with self.assertRaisesRegex(*refused):
                        xent.linear_cross_entropy(h, w, y, plan="on_chip")
            # The gradients made in the forward ("mean"), and in the
            # backward's call ("none": the forward, refused here, has none).
            for reduction in ("mean", "none") if on_chip else ("mean",):
                with self.subTest(reduction=reduction):
                    with self.assertRaisesRegex(RuntimeError, "deterministic implementation"):
                        xent.linear_cross_entropy(h, w, y, reduction=reduction, plan="on_chip").sum().backward()
            torch.use_deterministic_algorithms(True, warn_only=True)
            with self.assertWarnsRegex(UserWarning, "plan='on_chip' do not have a deterministic"):
                if on_chip:
                    xent.linear_cross_entropy(h, w, y, plan="on_chip").backward()
                else:
                    with self.assertRaisesRegex(*refused):
                        xent.linear_cross_entropy(h, w, y, plan="on_chip")
        finally:
            torch.use_deterministic_algorithms(was, warn_only=was_warn_only)

    def test_training_step(self):
        """Two SGD steps of an output layer: the same weights as with PyTorch's
        own loss, and the loss goes down."""
        torch.manual_seed(2)
        h = torch.randn(32, 8)
        y = torch.randint(0, 20, (32,))
        w0 = torch.randn(20, 8) * 0.3
        for ours in (True, False):
            w = w0.clone().requires_grad_()
            losses = []
            for _ in range(2):
                loss = (xent.linear_cross_entropy(h, w, y, chunk_rows=5) if ours
                        else F.cross_entropy(F.linear(h, w), y))
                loss.backward()
                with torch.no_grad():
                    w -= 0.5 * w.grad
                    w.grad = None
                losses.append(loss.item())
            if ours:
                ours_w, ours_losses = w.detach().clone(), losses
            else:
                close(self, ours_w, w.detach(), torch.float32, "weights after two steps")
                self.assertLess(ours_losses[1], ours_losses[0])

    def test_errors(self):
        h, w, y = torch.randn(3, 4), torch.randn(6, 4), torch.randint(0, 6, (3,))
        with self.assertRaisesRegex(ValueError, "do not make"):
            xent.linear_cross_entropy(h, torch.randn(6, 5), y)
        with self.assertRaisesRegex(TypeError, "one dtype"):
            xent.linear_cross_entropy(h, w.double(), y)
        with self.assertRaisesRegex(xent.XentError, "chunk_rows is -2"):
            xent.linear_cross_entropy(h, w, y, chunk_rows=-2)
        with self.assertRaisesRegex(ValueError, "return_logprob and return_argmax are for class-index targets"):
            xent.linear_cross_entropy(h, w, torch.softmax(torch.randn(3, 6), 1), return_logprob=True)
        with self.assertRaisesRegex(ValueError, "temperature is -0.5"):
            xent.linear_cross_entropy(h, w, y, temperature=-0.5)


class Subclass(torch.Tensor):
    """A tensor subclass, as libraries make them."""


class Paths(unittest.TestCase):
    """Which path ran: with XENT_NATIVE=1 the C++ one (xent/_C.cpp) takes the
    calls it covers, and declines those it leaves to Python; with
    XENT_NATIVE=0 it is not loaded."""

    def library_calls(self, call):
        """Nanoseconds the C++ path spent in libxent during call()."""
        native = xent._native.module
        native.set_timing(True)
        try:
            call()
            return native.library_ns()
        finally:
            native.set_timing(False)

    def test_path(self):
        if os.environ.get("XENT_NATIVE") == "0":
            self.assertIsNone(xent._native.module)
            return
        self.assertIsNotNone(xent._native.module, xent._native.why)
        x = torch.randn(5, 9, requires_grad=True)
        y = torch.randint(0, 9, (5,))
        self.assertGreater(self.library_calls(lambda: xent.cross_entropy(x, y).backward()), 0)
        self.assertGreater(self.library_calls(lambda: xent.log_softmax(x, 0).sum().backward()), 0)
        h = torch.randn(5, 4, requires_grad=True)
        w = torch.randn(9, 4, requires_grad=True)
        self.assertGreater(self.library_calls(
            lambda: xent.linear_cross_entropy(h, w, y, reduction="none").sum().backward()), 0)
        # Per-token outputs and an unbatched input take the Python path.
        self.assertEqual(self.library_calls(lambda: xent.cross_entropy(x, y, return_entropy=True)), 0)
        self.assertEqual(self.library_calls(lambda: xent.cross_entropy(x[0], y[0])), 0)
        # A tensor subclass takes the Python path, whose torch calls it may
        # override, and gets the same loss.
        sub = x.detach().as_subclass(Subclass)
        self.assertEqual(self.library_calls(lambda: xent.cross_entropy(sub, y)), 0)
        self.assertEqual(xent.cross_entropy(sub, y).item(), xent.cross_entropy(x.detach(), y).item())
        # An argument of another type is declined, and Python names it.
        with self.assertRaisesRegex(ValueError, "reduction is 3"):
            xent.cross_entropy(x, y, reduction=3)


if __name__ == "__main__":
    unittest.main()
