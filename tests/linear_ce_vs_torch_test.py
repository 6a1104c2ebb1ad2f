"""The fused linear cross entropy (xent_linear_ce_run) against PyTorch in
float64: F.linear then F.cross_entropy (and the z-loss and soft-cap formulas
written out), the loss and the gradients of hidden, weight and bias through
autograd, on the same rounded inputs. Every dtype, label type and reduction,
weights with ignore_index and smoothing, the soft cap and z-loss, dloss, the
f32 gradients of bf16 inputs, accumulation into grad_weight and grad_bias,
temperature and the per-token outputs (entropy, whose dentropy term joins
every gradient, the label's log-prob, argmax), chunk boundaries (one row,
fewer rows than a chunk, rows not a multiple of it), the three plans (one
pass, TILED_HIDDEN_SUM, TILED) and the default workspace's bound, the
vocabulary split over 3 ranks, both emulated renderings, and the errors.

Tolerance: per dtype as in the other differential tests, relative to the
largest magnitude of the expected tensor: the logits are rounded to the
dtype before the loss (as a GEMM in that dtype leaves them), and so is the
chunk's gradient of the logits before the gradient GEMMs (an f16/bf16
grad_weight is summed over the chunks in f32 and rounded once:
test_weight_gradient_rounded_once).

With XENT_TEST_DEVICE=cuda (and XENT_LIBRARY, a --config=cuda build) the
same cases run on the CUDA backend, cuBLASLt's GEMMs, on CUDA tensors; with
XENT_TEST_BACKEND=hip as well (and XENT_LIBRARY=libxent_hip_on_cuda_shared.so) on
the HIP backend built for NVIDIA GPUs (runtime/hip_on_cuda): the HIP
rendering's kernels and steps. bench/run_gpu.sh runs both. The tests of
the emulated renderings and the cpu workspace's size say SKIPPED there; the
vocabulary split runs its ranks as threads on the one GPU."""

import ctypes
import os
import threading
import unittest

import torch
import torch.nn.functional as F

from xent_ctypes import F32, F16, BF16, F64, I32, I64, PROB, NONE, SUM, MEAN, BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP
from xent_ctypes import NO_IGNORE_INDEX, LinearDesc, LinearTensors, ALL_GATHER, VocabShard
from xent_ctypes import PLAN_ONE_PASS, PLAN_TILED_HIDDEN_SUM, PLAN_TILED, PLAN_ON_CHIP
from torch_oracle import TORCH, TOL, P, load_lib

LIB = load_lib()


class EmuDevice(ctypes.Structure):
    """runtime/emu/emu.h's xent_emu_device: the emulated GPU and build."""
    _fields_ = [("ordinal", ctypes.c_int), ("smem_optin", ctypes.c_size_t), ("cluster_launch", ctypes.c_int),
                ("build_arch", ctypes.c_int)]


class EmuFuncRecord(ctypes.Structure):
    """runtime/emu/emu.h's xent_emu_func_record: a kernel's launches."""
    _fields_ = [("name", ctypes.c_char_p), ("device", ctypes.c_int), ("max_dynamic", ctypes.c_longlong),
                ("sets", ctypes.c_ulonglong), ("launches", ctypes.c_ulonglong), ("last_block", ctypes.c_uint),
                ("static_smem", ctypes.c_size_t)]

LIB.xent_linear_ce_workspace_size.argtypes = [P, ctypes.POINTER(LinearDesc), ctypes.POINTER(ctypes.c_size_t)]
LIB.xent_linear_ce_run.argtypes = [P, ctypes.POINTER(LinearDesc), ctypes.POINTER(LinearTensors), P, ctypes.c_size_t,
                                   P]
LIB.xent_linear_ce_desc_init.argtypes = [ctypes.POINTER(LinearDesc), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                         ctypes.c_int, ctypes.c_int, ctypes.c_int]
REDUCTION = {NONE: "none", SUM: "sum", MEAN: "mean"}
DEVICE = os.environ.get("XENT_TEST_DEVICE", "cpu")
GPU = DEVICE != "cpu"
BACKEND = {"cuda": BACKEND_CUDA, "hip": BACKEND_HIP}[os.environ.get("XENT_TEST_BACKEND", "cuda")] if GPU else BACKEND_CPU
CPU_ONLY = "the cpu backend only (XENT_TEST_DEVICE=%s)" % DEVICE
WORKSPACE_TOO_SMALL, INVALID_ARGUMENT = 5, 1


def ptr(t):
    return t.data_ptr() if t is not None else None


def on(t):
    """t on the device under test (None stays None)."""
    return t.to(DEVICE) if t is not None else None


def handle(render=None):
    h = P()
    assert LIB.xent_create(ctypes.byref(h), BACKEND) == 0, LIB.xent_last_error()
    if render is not None:
        assert LIB.xent_cpu_emulate(h, render) == 0
    return h


def run(h, desc, tensors, extra_bytes=0, keep=None):
    """(status, message, workspace bytes) of one call, with a workspace of
    the size xent asks for (plus extra_bytes, which may be negative); keep:
    a list the workspace tensor is added to before the call."""
    n = ctypes.c_size_t()
    s = LIB.xent_linear_ce_workspace_size(h, ctypes.byref(desc), ctypes.byref(n))
    assert s == 0, LIB.xent_last_error()
    ws = torch.empty(max(n.value + extra_bytes, 0) + 64, dtype=torch.uint8, device=DEVICE)
    if keep is not None:
        keep.append(ws)
    base = (ws.data_ptr() + 63) // 64 * 64
    s = LIB.xent_linear_ce_run(h, ctypes.byref(desc), ctypes.byref(tensors), base, n.value + extra_bytes, None)
    msg = LIB.xent_last_error().decode()
    if GPU:
        torch.cuda.synchronize()
    return s, msg, n.value


def run_checked(render, desc, tensors):
    """One call on a fresh handle whose bad-label record starts clear:
    (xent_check's status before, the call's status and message, xent_check's
    status and message after)."""
    LIB.xent_check.argtypes = [P]
    h = handle(render)
    try:
        before = LIB.xent_check(h)
        s, msg, _ = run(h, desc, tensors)
        c = LIB.xent_check(h)
        return before, s, msg, c, LIB.xent_last_error().decode()
    finally:
        LIB.xent_destroy(h)


def oracle(h, w, b, target, reduction, weights=None, ignore_index=-100, smoothing=0.0, z_loss=0.0, cap=0.0,
           dloss=None, tau=1.0, dentropy=None, u=None):
    """Loss, lse, the gradients of hidden, weight, bias, and the per-token
    outputs (entropy, the label's log-prob, z) in float64. With dentropy the
    objective adds sum(dentropy * entropy), ignored rows' entropy being 0.
    tau: a number or each row's ([N, 1]); u: each row's token weight, which
    multiplies its loss (0: none) and its weight in a mean (xent.h's
    XENT_TOKEN_WEIGHT_MEAN_WEIGHTS)."""
    h64 = h.to(torch.float64).requires_grad_()
    w64 = w.to(torch.float64).requires_grad_()
    b64 = b.to(torch.float64).requires_grad_() if b is not None else None
    z = F.linear(h64, w64, b64)
    if cap:
        z = cap * torch.tanh(z / cap)
    z = z / tau
    t = target.to(torch.float64) if target.is_floating_point() else target.to(torch.int64)
    wt = weights.to(torch.float64) if weights is not None else None
    rows = F.cross_entropy(z, t, weight=wt, ignore_index=ignore_index, label_smoothing=smoothing, reduction="none")
    # The z-loss (SEMANTICS.md): z * lse^2 on each counted row, its mean over
    # the cross entropy's own divisor (the counted rows' w[y]; soft labels:
    # the rows).
    hard_counted = (t != ignore_index).to(torch.float64) if not target.is_floating_point() else None
    zterm = z_loss * torch.logsumexp(z, 1) ** 2
    if hard_counted is not None:
        zterm = zterm * hard_counted
    rows = rows + zterm
    if u is not None:
        u = u.to(torch.float64)
        rows = torch.where(u == 0, torch.zeros_like(rows), rows * u)
    if reduction == "none":
        loss = rows
    elif reduction == "sum":
        loss = rows.sum()
    elif u is not None:
        wy = wt[t.clamp(0, z.shape[1] - 1)] if wt is not None else torch.ones_like(hard_counted)
        loss = rows.sum() / (wy * hard_counted * u).sum()
    else:
        loss = F.cross_entropy(z, t, weight=wt, ignore_index=ignore_index, label_smoothing=smoothing, reduction="mean")
        if hard_counted is None:
            divisor = float(rows.shape[0])
        else:
            wy = wt[t.clamp(0, z.shape[1] - 1)] if wt is not None else torch.ones_like(hard_counted)
            divisor = (wy * hard_counted).sum()
        loss = loss + zterm.sum() / divisor
    upstream = dloss.to(torch.float64) if dloss is not None else torch.ones_like(loss)
    lse = torch.logsumexp(z, 1)
    counted = (t != ignore_index) if not target.is_floating_point() else torch.ones_like(lse, dtype=torch.bool)
    # The per-token outputs from their definitions in PyTorch: the entropy of
    # Categorical(logits=z), the label's log_softmax(z).
    entropy = torch.where(counted, torch.distributions.Categorical(logits=z).entropy(), torch.zeros_like(lse))
    objective = (loss * upstream).sum()
    if dentropy is not None:
        objective = objective + (entropy * dentropy.to(torch.float64)).sum()
    grads = torch.autograd.grad(objective, [h64, w64] + ([b64] if b is not None else []))
    logprob = None
    if not target.is_floating_point():
        y = t.clamp(0, z.shape[1] - 1)
        logprob = torch.where(counted, torch.log_softmax(z, 1).gather(1, y[:, None])[:, 0], torch.zeros_like(lse))
    return loss.detach(), lse.detach(), grads, (entropy.detach(), logprob.detach() if logprob is not None else None,
                                                z.detach())


class LinearCrossEntropy(unittest.TestCase):
    def close(self, got, want, dtype, what):
        got, want = got.to(torch.float64), want.to(torch.float64)
        scale = max(want.abs().max().item() if want.numel() else 0.0, 1e-3)
        err = (got - want).abs().max().item() if want.numel() else 0.0
        self.assertTrue(err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} > {TOL[dtype]:.1g} * {scale:.3g}")

    def check(self, dtype, label, reduction, N=9, H=12, V=37, chunk=4, bias=True, weights=False, ignore=False,
              smoothing=0.0, z_loss=0.0, cap=0.0, dloss=False, grad_f32=False, accumulate=False, render=None, tau=1.0,
              stats=False, main_grad=False, classes=0, dentropy=True, plan=0, hidden_only=False, row_tau=False,
              token_weight=False, trend=0.0, period=0):
        """One call against the oracle. classes: a tiled plan (desc.plan, or
        under AUTO the first that fits) with tiles of that many classes
        (desc.chunk_classes) and chunk rows. hidden_only: grad_hidden alone
        is asked for. stats: the per-token outputs too
        (entropy; the label's log-prob and argmax for hard labels) and a
        dentropy input, whose term joins every gradient. main_grad: the
        weight's gradient into an f32 main_grad (desc.main_grad) instead of
        grad_weight. row_tau: a temperature per row instead of tau;
        token_weight: a weight per row, one of them 0 (hard labels). trend:
        added to the bias from 0 at the first class to trend at the last,
        so that a row's running max grows along the vocabulary. period: the
        weight's (and bias's) rows repeat every `period` classes, so that
        each row's largest logit ties across classes (the argmax is the
        first)."""
        torch.manual_seed(N * 131 + V + 7 * chunk + dtype)
        tt = TORCH[dtype]
        hid = torch.randn(N, H, dtype=torch.float64).to(tt)
        w = (torch.randn(V, H, dtype=torch.float64) * 2 / H ** 0.5).to(tt)
        b = (torch.randn(V, dtype=torch.float64) * 0.5 + torch.linspace(0, trend, V, dtype=torch.float64)).to(tt) \
            if bias else None
        if period:
            w = w[torch.arange(V) % period]
            b = b[torch.arange(V) % period] if bias else None
        if label == PROB:
            target = torch.softmax(torch.randn(N, V, dtype=torch.float64) * 2, 1).to(tt)
        else:
            target = torch.randint(0, V, (N,), dtype=torch.int64 if label == I64 else torch.int32)
            if ignore:
                target[1::3] = 5  # every third row ignored (ignore_index 5), never all
        acc = torch.float64 if dtype == F64 else torch.float32
        cw = (torch.rand(V, dtype=torch.float64) + 0.5).to(acc) if weights else None
        gt = torch.float32 if grad_f32 else tt
        loss_t = torch.float32 if grad_f32 else tt
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, dtype, label, reduction)
        d.chunk_rows = chunk
        d.accumulate = int(accumulate)
        d.main_grad = int(main_grad)
        d.chunk_classes = classes
        d.plan = plan
        d.ce.ignore_index = 5 if ignore else NO_IGNORE_INDEX
        d.ce.label_smoothing, d.ce.z_loss, d.ce.softcap, d.ce.temperature = smoothing, z_loss, cap, tau
        if grad_f32:
            d.ce.grad_dtype = F32
            d.ce.loss_dtype = F32
        up = None
        if dloss:
            up = (torch.rand(N if reduction == NONE else 1, dtype=torch.float64) + 0.5).to(loss_t)
        loss = torch.full((N,) if reduction == NONE else (1,), float("nan"), dtype=loss_t)
        lse = torch.zeros(N, dtype=acc)
        gh = torch.full((N, H), float("nan"), dtype=gt)
        wt = torch.float32 if main_grad else gt
        before_w = torch.randn(V, H, dtype=torch.float64).to(wt) if accumulate else torch.full((V, H), float("nan"),
                                                                                               dtype=wt)
        before_b = torch.randn(V, dtype=torch.float64).to(gt) if accumulate else torch.full((V,), float("nan"), dtype=gt)
        gw, gb = before_w.clone(), before_b.clone() if bias else None
        hard = label != PROB
        ent = torch.full((N,), float("nan"), dtype=acc) if stats else None
        lp = torch.full((N,), float("nan"), dtype=acc) if stats and hard else None
        am = torch.full((N,), -7, dtype=torch.int64) if stats and hard else None
        dent = (torch.rand(N, dtype=torch.float64) - 0.3).to(acc) if stats and dentropy else None
        taus = (torch.rand(N, dtype=torch.float64) + 0.5).to(acc) if row_tau else None
        u = (torch.rand(N, dtype=torch.float64) * 2).to(acc) if token_weight else None
        if u is not None:
            u[N // 2] = 0
        # The call's tensors, on the device under test; the results come back.
        ins = [on(x) for x in (hid, w, b, target, cw, up, dent, taus, u)]
        outs = [on(x) for x in (loss, lse, gh, gw, gb, ent, lp, am)]
        t = LinearTensors(hidden=ptr(ins[0]), weight=ptr(ins[1]), bias=ptr(ins[2]), labels=ptr(ins[3]),
                          weights=ptr(ins[4]), dloss=ptr(ins[5]), loss=ptr(outs[0]), lse=ptr(outs[1]),
                          grad_hidden=ptr(outs[2]),
                          grad_weight=None if main_grad or hidden_only else ptr(outs[3]),
                          grad_bias=None if hidden_only else ptr(outs[4]), entropy=ptr(outs[5]), label_logprob=ptr(outs[6]),
                          argmax=ptr(outs[7]), dentropy=ptr(ins[6]), main_grad=ptr(outs[3]) if main_grad else None,
                          temperature=ptr(ins[7]), token_weight=ptr(ins[8]))
        h = handle(render)
        try:
            s, msg, _ = run(h, d, t)
        finally:
            LIB.xent_destroy(h)
        self.assertEqual(s, 0, msg)
        loss, lse, gh, gw, gb, ent, lp, am = [x.cpu() if x is not None else None for x in outs]
        want_loss, want_lse, grads, per_token = oracle(hid, w, b, target, REDUCTION[reduction], cw,
                                                       5 if ignore else -100, smoothing, z_loss, cap,
                                                       up.reshape(()) if dloss and reduction != NONE else up,
                                                       taus[:, None] if row_tau else tau, dent, u)
        what = (f"{TORCH[dtype]} label {label} {REDUCTION[reduction]} N={N} V={V} H={H} chunk={chunk} weights={weights} "
                f"ignore={ignore} eps={smoothing} z={z_loss} cap={cap} dloss={dloss} f32={grad_f32} acc={accumulate} "
                f"tau={tau} main_grad={main_grad} classes={classes} plan={plan} row_tau={row_tau} u={token_weight}")
        # The logits are rounded to dtype whatever the outputs' type.
        self.close(loss.reshape(want_loss.shape), want_loss, dtype, what + ": loss")
        self.close(lse, want_lse, dtype, what + ": lse")
        self.close(gh, grads[0], dtype, what + ": grad_hidden")
        if not hidden_only:
            self.close(gw, grads[1] + (before_w.to(torch.float64) if accumulate else 0), dtype, what + ": grad_weight")
        if bias and not hidden_only:
            self.close(gb, grads[2] + (before_b.to(torch.float64) if accumulate else 0), dtype, what + ": grad_bias")
        if stats:
            want_ent, want_lp, z = per_token
            self.close(ent, want_ent, dtype, what + ": entropy")
            if hard:
                self.close(lp, want_lp, dtype, what + ": label_logprob")
                # The logits xent's argmax saw were rounded to dtype: the
                # index it picks holds the row's largest value to within
                # that rounding (exactly, in f64).
                self.assertTrue(bool(((am >= 0) & (am < V)).all()), f"{what}: argmax out of range: {am}")
                picked = z.gather(1, am[:, None])[:, 0]
                gap = (z.max(1).values - picked).max().item()
                bound = 0.0 if dtype == F64 else TOL[dtype] * max(z.abs().max().item(), 1.0)
                self.assertLessEqual(gap, bound, f"{what}: argmax picks a value {gap:.3g} below the row's largest")
                # Where a row's largest value leads its second by more than
                # that rounding, or ties with it exactly (the same logits:
                # the first), the index itself.
                top = z.topk(min(2, V), dim=1).values
                lead = top[:, 0] - top[:, -1]
                clear = (lead > 2 * bound) | (lead == 0) if V > 1 else torch.ones(N, dtype=torch.bool)
                self.assertTrue(torch.equal(am[clear], z.argmax(1)[clear]),
                                f"{what}: argmax {am[clear]} != {z.argmax(1)[clear]}")
                if dtype == F64:
                    self.assertTrue(torch.equal(am, z.argmax(1)), f"{what}: argmax {am} != {z.argmax(1)}")

    def test_every_dtype_label_and_reduction(self):
        for dtype in (F64, F32, BF16, F16):
            for label in (I64, I32, PROB):
                for reduction in (NONE, SUM, MEAN):
                    with self.subTest(dtype=dtype, label=label, reduction=reduction):
                        self.check(dtype, label, reduction)

    def test_options(self):
        for dtype in (F64, F32, BF16):
            for reduction in (NONE, MEAN, SUM):
                with self.subTest(dtype=dtype, reduction=reduction, what="weights, ignore_index, smoothing"):
                    self.check(dtype, I64, reduction, weights=True, ignore=True, smoothing=0.1)
                with self.subTest(dtype=dtype, reduction=reduction, what="soft cap, z-loss, dloss"):
                    self.check(dtype, I64, reduction, z_loss=1e-2, cap=3.0, dloss=True)
            with self.subTest(dtype=dtype, what="soft labels, smoothing, dloss"):
                self.check(dtype, PROB, MEAN, smoothing=0.2, dloss=True)
            for label, tau in ((I64, 0.6), (PROB, 2.5)):
                with self.subTest(dtype=dtype, label=label, what="temperature, with the soft cap and weights"):
                    self.check(dtype, label, MEAN, weights=True, cap=3.0, dloss=True, tau=tau)

    def test_f32_gradients_and_accumulation(self):
        for dtype in (BF16, F16):
            with self.subTest(dtype=dtype, what="f32 loss and gradients"):
                self.check(dtype, I64, MEAN, grad_f32=True)
        for dtype in (F32, BF16):
            with self.subTest(dtype=dtype, what="accumulate into grad_weight and grad_bias"):
                self.check(dtype, I64, SUM, accumulate=True)

    def test_main_grad(self):
        """The weight's gradient into a caller's f32 main_grad (Megatron-LM's):
        written, or added to with accumulate, every dtype but f64, with the
        options and chunking of the other cases; grad_bias as before."""
        for dtype in (F32, F16, BF16):
            for accumulate in (False, True):
                with self.subTest(dtype=dtype, accumulate=accumulate):
                    self.check(dtype, I64, MEAN, accumulate=accumulate, main_grad=True)
        with self.subTest(what="options, dloss, soft labels, one chunk"):
            self.check(BF16, I32, SUM, weights=True, ignore=True, smoothing=0.1, z_loss=1e-3, cap=20.0, dloss=True,
                       accumulate=True, main_grad=True)
            self.check(BF16, PROB, NONE, dloss=True, main_grad=True)
            self.check(BF16, I64, MEAN, N=4, chunk=8, main_grad=True)

    def one_row_chunks(self, main_grad, classes=0, plan=0, render=None):
        """bf16 inputs over 256 chunks of one row, every row's label class 0,
        hidden positive (the other classes' sums have no cancellation): the
        weight's gradient the call left in grad_weight, or added to a
        main_grad of 3s, and the float64 one, both less class 0, with the
        bf16 ulp of each float64 value; and the inputs."""
        N, H, V = 256, 8, 16
        torch.manual_seed(11)
        hid = (torch.rand(N, H, dtype=torch.float64) + 0.5).to(torch.bfloat16)
        w = (torch.randn(V, H, dtype=torch.float64) * 0.1).to(torch.bfloat16)
        y = torch.zeros(N, dtype=torch.int64)
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, BF16, I64, SUM)
        d.chunk_rows = 1
        d.chunk_classes = classes
        d.plan = plan
        d.ce.ignore_index = NO_IGNORE_INDEX
        if main_grad:
            d.accumulate, d.main_grad = 1, 1
            out = torch.full((V, H), 3.0, dtype=torch.float32)
        else:
            out = torch.full((V, H), float("nan"), dtype=torch.bfloat16)
        loss = torch.zeros(1, dtype=torch.bfloat16)
        ins, outs = [on(x) for x in (hid, w, y)], [on(x) for x in (loss, out)]
        t = LinearTensors(hidden=ptr(ins[0]), weight=ptr(ins[1]), labels=ptr(ins[2]), loss=ptr(outs[0]))
        if main_grad:
            t.main_grad = ptr(outs[1])
        else:
            t.grad_weight = ptr(outs[1])
        h = handle(render)
        try:
            s, msg, _ = run(h, d, t)
        finally:
            LIB.xent_destroy(h)
        self.assertEqual(s, 0, msg)
        got = outs[1].cpu().to(torch.float64)[1:] - (3.0 if main_grad else 0.0)
        want = oracle(hid, w, None, y, "sum")[2][1][1:]
        ulp = 2.0 ** (torch.floor(torch.log2(want.abs())) - 7)  # bf16: 8 significant bits
        return got, want, ulp, (hid, w, y)

    def test_main_grad_is_the_f32_sum(self):
        """main_grad over 256 chunks of one row holds the f32 sum: within one
        bf16 ulp of the float64 gradient (the chunk gradients' own rounding
        to bf16, no rounding of the sum), added to what it held."""
        got, want, ulp, _ = self.one_row_chunks(main_grad=True)
        err = ((got - want).abs() / ulp).max().item()
        self.assertLessEqual(err, 1.0, f"main_grad off by {err:.2f} bf16 ulps")

    def test_weight_gradient_rounded_once(self):
        """bf16 grad_weight over 256 chunks of one row: summed in f32 and
        rounded once, within 1.25 bf16 ulps of the float64 gradient (its
        rounding, and the chunk gradients' own rounding to bf16), where a
        sum rounded to bf16 at every chunk, as a GEMM into a bf16 grad_weight
        with beta = 1 makes it, is off by many (checked here too, so the
        case tells them apart)."""
        gw, want, ulp, (hid, w, y) = self.one_row_chunks(main_grad=False)
        err = ((gw - want).abs() / ulp).max().item()
        self.assertLessEqual(err, 1.25, f"grad_weight off by {err:.2f} bf16 ulps")
        # The same sum rounded at every chunk.
        N, V, H = hid.shape[0], w.shape[0], w.shape[1]
        z = (hid.to(torch.float64) @ w.to(torch.float64).T).to(torch.bfloat16).to(torch.float64)
        dl = (torch.softmax(z, 1) - F.one_hot(y, V)).to(torch.bfloat16).to(torch.float64)
        running = torch.zeros(V, H, dtype=torch.float64)
        for r in range(N):
            running = (running + torch.outer(dl[r], hid[r].to(torch.float64))).to(torch.bfloat16).to(torch.float64)
        per_chunk = ((running[1:] - want).abs() / ulp).max().item()
        self.assertGreater(per_chunk, 4.0, f"rounding at every chunk is off by only {per_chunk:.2f} ulps")

    def test_tiled_weight_gradient_rounded_once(self):
        """The tiled plans' grad_weight, tiles of one row and 4 classes: each
        tile's rows are summed in f32 and rounded once, within 1.25 bf16 ulps
        of the float64 gradient, as the one pass's."""
        for plan in (PLAN_TILED_HIDDEN_SUM, PLAN_TILED):
            gw, want, ulp, _ = self.one_row_chunks(main_grad=False, classes=4, plan=plan)
            err = ((gw - want).abs() / ulp).max().item()
            self.assertLessEqual(err, 1.25, f"plan {plan}: grad_weight off by {err:.2f} bf16 ulps")
            # main_grad is the tiles' f32 sum itself, added to.
            got, want, ulp, _ = self.one_row_chunks(main_grad=True, classes=4, plan=plan)
            err = ((got - want).abs() / ulp).max().item()
            self.assertLessEqual(err, 1.0, f"plan {plan}: main_grad off by {err:.2f} bf16 ulps")

    def test_tiled_f32_gradients_and_main_grad(self):
        """Both tiled plans with gradients that are their own f32 sums: f32
        grad_hidden, grad_weight and grad_bias from f16/bf16 logits or f32
        ones (summed where they lie, nothing rounded), and the weight's
        gradient into a caller's main_grad, written or added to, with the
        options."""
        for plan in (PLAN_TILED_HIDDEN_SUM, PLAN_TILED):
            with self.subTest(plan=plan, what="f32 logits"):
                self.check(F32, I64, MEAN, weights=True, smoothing=0.1, dloss=True, classes=8, plan=plan)
                self.check(F32, I32, NONE, stats=True, z_loss=1e-3, classes=8, plan=plan)
                self.check(F32, I64, SUM, accumulate=True, main_grad=True, classes=8, plan=plan)
            for dtype in (BF16, F16):
                for reduction in (MEAN, NONE):
                    with self.subTest(plan=plan, dtype=dtype, reduction=reduction, what="f32 gradients"):
                        self.check(dtype, I64, reduction, grad_f32=True, dloss=True, classes=8, plan=plan)
                with self.subTest(plan=plan, dtype=dtype, what="f32 gradients, accumulated"):
                    self.check(dtype, I32, SUM, grad_f32=True, accumulate=True, weights=True, classes=8, plan=plan)
            for accumulate in (False, True):
                with self.subTest(plan=plan, accumulate=accumulate, what="main_grad"):
                    self.check(BF16, I64, MEAN, accumulate=accumulate, main_grad=True, classes=8, plan=plan)
            with self.subTest(plan=plan, what="main_grad with the options, f32 gradients, per-token outputs"):
                self.check(BF16, I64, SUM, weights=True, ignore=True, smoothing=0.1, z_loss=1e-3, cap=20.0, dloss=True,
                           accumulate=True, main_grad=True, classes=8, plan=plan)
                self.check(F16, I64, MEAN, grad_f32=True, main_grad=True, stats=True, classes=8, plan=plan)
                self.check(BF16, I64, SUM, N=5, H=4, V=9000, chunk=3, main_grad=True, classes=1024, plan=plan)
        with self.subTest(what="AUTO takes a tiled plan for main_grad"):
            self.check(BF16, I64, MEAN, main_grad=True, classes=8)

    def test_tiled_f64(self):
        """Both tiled plans in f64: the gradients their own f64 sums (the
        GEMMs of sweeps 2 and 3 write or add to them where they lie), the
        bias added to each tile's logits by the BIAS step, every label type
        and reduction, the options, the per-token outputs with dentropy,
        accumulate, ragged tiles and chunks, and many tiles; AUTO past the
        budget of the one pass takes a tiled plan (test_default_memory_bound)."""
        for plan in (PLAN_TILED_HIDDEN_SUM, PLAN_TILED):
            for label in (I64, I32, PROB):
                for reduction in (NONE, SUM, MEAN):
                    with self.subTest(plan=plan, label=label, reduction=reduction):
                        self.check(F64, label, reduction, classes=8, plan=plan)
            with self.subTest(plan=plan, what="weights, ignore_index, smoothing, soft cap, z-loss, dloss"):
                self.check(F64, I64, MEAN, weights=True, ignore=True, smoothing=0.1, z_loss=1e-2, cap=3.0, dloss=True,
                           classes=8, plan=plan)
                self.check(F64, PROB, SUM, weights=True, smoothing=0.1, tau=0.8, dloss=True, classes=8, plan=plan)
            with self.subTest(plan=plan, what="the per-token outputs and the entropy's gradient"):
                self.check(F64, I64, MEAN, stats=True, tau=0.7, weights=True, ignore=True, dloss=True, classes=8,
                           plan=plan)
                self.check(F64, I32, NONE, N=11, chunk=4, stats=True, cap=3.0, classes=16, plan=plan)
            with self.subTest(plan=plan, what="accumulate, no bias, many tiles"):
                self.check(F64, I64, SUM, accumulate=True, classes=8, plan=plan)
                self.check(F64, I64, MEAN, bias=False, classes=8, plan=plan)
                self.check(F64, I64, SUM, N=5, H=4, V=9000, chunk=3, stats=True, classes=1024, plan=plan)
            with self.subTest(plan=plan, what="grad_hidden alone"):
                self.check(F64, I64, MEAN, stats=True, classes=8, plan=plan, hidden_only=True)

    def test_tiled_plan(self):
        """Both tiled plans (desc.plan, desc.chunk_classes): tiles of 8
        classes and 4 rows over V = 37 and N = 9 (the last tile and chunk
        ragged), f16 and bf16, both hard label types, every reduction, the
        options, temperature, accumulate, no bias, and the per-token outputs
        with and without dentropy (sweep 3's gradients from the lse take
        E_p[z] from the rows' entropy); soft labels (each tile reads its
        block of the targets, rows V apart; sweep 3 takes each row's sum of
        the weighted targets from the combine); one tile wider than V, and
        tiles of a 9000-class vocabulary; AUTO with a tile size takes
        TILED_HIDDEN_SUM here."""
        for plan in (PLAN_TILED_HIDDEN_SUM, PLAN_TILED):
            for dtype in (BF16, F16):
                for label in (I64, I32):
                    for reduction in (NONE, SUM, MEAN):
                        with self.subTest(plan=plan, dtype=dtype, label=label, reduction=reduction):
                            self.check(dtype, label, reduction, classes=8, plan=plan)
            for reduction in (NONE, MEAN, SUM):
                with self.subTest(plan=plan, reduction=reduction, what="weights, ignore_index, smoothing"):
                    self.check(BF16, I64, reduction, weights=True, ignore=True, smoothing=0.1, classes=8, plan=plan)
                with self.subTest(plan=plan, reduction=reduction, what="soft cap, z-loss, dloss"):
                    self.check(BF16, I64, reduction, z_loss=1e-2, cap=3.0, dloss=True, classes=8, plan=plan)
            with self.subTest(plan=plan, what="temperature, weights, soft cap"):
                self.check(BF16, I64, MEAN, weights=True, cap=3.0, dloss=True, tau=0.6, classes=8, plan=plan)
            with self.subTest(plan=plan, what="accumulate, no bias"):
                self.check(BF16, I64, SUM, accumulate=True, classes=8, plan=plan)
                self.check(F16, I64, MEAN, bias=False, classes=8, plan=plan)
            with self.subTest(plan=plan, what="per-token outputs"):
                self.check(BF16, I64, MEAN, stats=True, dentropy=False, tau=0.7, weights=True, ignore=True,
                           smoothing=0.1, dloss=True, classes=8, plan=plan)
                self.check(F16, I32, NONE, N=11, chunk=4, stats=True, dentropy=False, tau=1.3, classes=16, plan=plan)
            with self.subTest(plan=plan, what="the entropy's gradient"):
                self.check(BF16, I64, MEAN, stats=True, tau=0.7, weights=True, ignore=True, smoothing=0.1,
                           dloss=True, classes=8, plan=plan)
                self.check(F16, I32, NONE, N=11, chunk=4, stats=True, tau=1.3, cap=3.0, classes=16, plan=plan)
                self.check(BF16, I64, SUM, N=5, H=4, V=9000, chunk=3, stats=True, classes=1024, plan=plan)
                # More chunks (20) than tiles (5): each chunk's records made
                # again for each tile, not all of them once.
                self.check(BF16, I64, MEAN, N=40, chunk=2, stats=True, weights=True, classes=8, plan=plan)
            with self.subTest(plan=plan, what="soft labels"):
                for reduction in (NONE, SUM, MEAN):
                    self.check(BF16, PROB, reduction, smoothing=0.1, dloss=True, classes=8, plan=plan)
                self.check(F16, PROB, MEAN, weights=True, z_loss=1e-3, cap=3.0, tau=0.8, classes=8, plan=plan)
                self.check(F32, PROB, SUM, weights=True, accumulate=True, main_grad=True, classes=8, plan=plan)
                # The entropy out (wide records), then its gradient too.
                self.check(BF16, PROB, SUM, stats=True, dentropy=False, classes=8, plan=plan)
                self.check(BF16, PROB, MEAN, stats=True, weights=True, smoothing=0.1, classes=8, plan=plan)
                self.check(BF16, PROB, SUM, N=5, H=4, V=9000, chunk=3, classes=1024, plan=plan)
                # More chunks (20) than tiles (5): row records per tile.
                self.check(BF16, PROB, MEAN, N=40, chunk=2, weights=True, classes=8, plan=plan)
            with self.subTest(plan=plan, what="one tile, one chunk; many tiles"):
                self.check(BF16, I64, MEAN, N=3, chunk=8, classes=64, plan=plan)
                self.check(BF16, I64, SUM, N=5, H=4, V=9000, chunk=3, classes=1024, plan=plan)
        with self.subTest(what="AUTO with a tile size"):
            self.check(BF16, I64, MEAN, weights=True, smoothing=0.1, classes=8)
        with self.subTest(what="TILED's sweep 2 takes dentropy when only grad_hidden is asked"):
            self.check(BF16, I64, MEAN, stats=True, classes=8, plan=PLAN_TILED, hidden_only=True)

    def test_per_token_outputs(self):
        """Entropy with its gradient (dentropy), the label's log-prob and
        argmax, chunk by chunk, under temperature, with weights, smoothing,
        ignored rows and the soft cap; soft labels take entropy."""
        for dtype in (F64, F32, BF16):
            for reduction in (NONE, MEAN):
                with self.subTest(dtype=dtype, reduction=reduction):
                    self.check(dtype, I64, reduction, stats=True, tau=0.7, weights=True, ignore=True, smoothing=0.1,
                               dloss=True)
            with self.subTest(dtype=dtype, what="soft labels, soft cap"):
                self.check(dtype, PROB, SUM, stats=True, tau=1.8, cap=4.0)
        with self.subTest(what="rows not a multiple of the chunk, i32 labels, f16"):
            self.check(F16, I32, MEAN, N=11, chunk=4, stats=True, tau=1.3)

    def test_chunk_boundaries(self):
        for N, chunk in ((1, 4), (3, 8), (7, 3), (8, 8), (9, 1), (40, 0)):
            with self.subTest(N=N, chunk=chunk):
                self.check(F32, I64, MEAN, N=N, chunk=chunk, weights=True, ignore=True)
        with self.subTest(what="many weight blocks"):
            self.check(F32, I64, SUM, N=5, H=4, V=9000, chunk=2)
            self.check(BF16, I64, MEAN, N=5, H=4, V=9000, chunk=3)

    def test_hip_rendering(self):
        if GPU:
            self.skipTest("the emulated HIP rendering: " + CPU_ONLY)
        self.check(BF16, I64, MEAN, render=BACKEND_HIP, weights=True, smoothing=0.1)
        self.check(F32, PROB, NONE, render=BACKEND_HIP)
        self.check(BF16, I64, MEAN, render=BACKEND_HIP, weights=True, smoothing=0.1, classes=8)

    # The ON_CHIP plan runs on the CUDA rendering: emulated here, an sm_90
    # GPU's with the kernels' sm_90a code on the GPU machine, where its
    # tests run in a process of their own (bench/gpu/stage.sh's on_chip:
    # XENT_TEST_SKIP_ON_CHIP elsewhere), so that a trap in its first run
    # on tensor cores cannot cost the other tests their context.
    CHIP_RENDER = None if GPU else BACKEND_CUDA
    CHIP_HERE = BACKEND != BACKEND_HIP

    def setUp(self):
        if "on_chip" in self._testMethodName and os.environ.get("XENT_TEST_SKIP_ON_CHIP"):
            self.skipTest("XENT_TEST_SKIP_ON_CHIP: run in its own process (bench/gpu/stage.sh's on_chip)")

    def test_on_chip(self):
        """The ON_CHIP plan (kernels/linear_cross_entropy/on_chip.h): 70 rows
        (a partial block of 128, its second warpgroup's 64 rows partial), 200
        classes (a partial tile of 128), H = 72 (tensor copies, a partial
        stage of 64 columns) and 76 (element by element); both label types and every reduction, dloss,
        ignore_index; grad_hidden's f32 sum of every row or in chunks of 48
        rows, grad_weight's in tiles of 136 classes; f32 gradients and
        main_grad (their own sums), accumulated; grad_hidden alone; class
        weights, label smoothing, z-loss, the soft cap and the temperature,
        the call's or each row's; token weights; a bias and its gradient
        (rounded once, f32, accumulated); the per-token outputs (entropy,
        the label's log-prob, argmax) and dentropy's term in every
        gradient, with those options and over three slices."""
        if not self.CHIP_HERE:
            self.skipTest("the ON_CHIP plan is the CUDA rendering's (test_on_chip_refusals)")
        chip = dict(bias=False, plan=PLAN_ON_CHIP, render=self.CHIP_RENDER, N=70, V=200)
        for label in (I64, I32):
            for reduction in (NONE, SUM, MEAN):
                with self.subTest(label=label, reduction=reduction):
                    self.check(BF16, label, reduction, H=72, chunk=0, ignore=True, dloss=True, **chip)
        with self.subTest(what="H = 76: element by element; chunks of rows, tiles of classes"):
            self.check(BF16, I64, MEAN, H=76, chunk=0, **chip)
            self.check(BF16, I64, SUM, H=72, chunk=48, classes=136, dloss=True, **chip)
            self.check(BF16, I32, NONE, H=76, chunk=48, ignore=True, **chip)
        with self.subTest(what="f32 gradients, main_grad, accumulated"):
            self.check(BF16, I64, MEAN, H=72, chunk=0, grad_f32=True, dloss=True, **chip)
            self.check(BF16, I32, NONE, H=72, chunk=0, grad_f32=True, dloss=True, **chip)
            self.check(BF16, I64, SUM, H=72, chunk=48, grad_f32=True, accumulate=True, **chip)
            self.check(BF16, I64, MEAN, H=72, chunk=0, main_grad=True, accumulate=True, classes=136, **chip)
            self.check(BF16, I32, MEAN, H=72, chunk=48, main_grad=True, **chip)
        with self.subTest(what="class weights, z-loss, soft cap, temperature"):
            self.check(BF16, I64, MEAN, H=72, chunk=0, weights=True, ignore=True, z_loss=1e-2, dloss=True, **chip)
            self.check(BF16, I32, NONE, H=76, chunk=48, cap=3.0, tau=0.7, dloss=True, **chip)
            self.check(BF16, I64, SUM, H=72, chunk=0, weights=True, z_loss=1e-3, cap=2.0, tau=1.3, grad_f32=True,
                       **chip)
        with self.subTest(what="label smoothing"):
            self.check(BF16, I64, MEAN, H=72, chunk=0, smoothing=0.1, ignore=True, dloss=True, **chip)
            self.check(BF16, I32, NONE, H=76, chunk=48, smoothing=0.5, weights=True, ignore=True, dloss=True,
                       **chip)
            self.check(BF16, I64, SUM, H=72, chunk=0, smoothing=0.05, weights=True, z_loss=1e-2, cap=3.0, tau=0.7,
                       classes=136, **chip)
            # (eps / C w[c] in every element of G: at 0.6 more than bf16's
            # tolerance of grad_bias, the column sums.)
            self.check(BF16, I64, MEAN, H=72, chunk=0, smoothing=0.6, weights=True, main_grad=True,
                       **dict(chip, bias=True))
            # Slices of three tiles (V = 1000, three slices), the rows' max
            # growing at each: the smoothing sums move with it.
            self.check(BF16, I64, SUM, H=72, chunk=0, smoothing=0.6, weights=True, trend=8.0,
                       **dict(chip, bias=True, V=1000))
        with self.subTest(what="a temperature per row, token weights"):
            # The chunked path first: the oracle's per-row terms.
            self.check(BF16, I64, MEAN, N=9, H=12, V=37, row_tau=True, token_weight=True, weights=True, ignore=True)
            self.check(BF16, I64, MEAN, H=72, chunk=0, row_tau=True, token_weight=True, weights=True, ignore=True,
                       dloss=True, **chip)
            self.check(BF16, I32, NONE, H=76, chunk=48, row_tau=True, cap=3.0, smoothing=0.1, dloss=True, **chip)
            self.check(BF16, I64, SUM, H=72, chunk=0, token_weight=True, z_loss=1e-2, classes=136,
                       **dict(chip, bias=True))
        with self.subTest(what="a bias"):
            bias = dict(chip, bias=True)
            self.check(BF16, I64, MEAN, H=72, chunk=0, ignore=True, dloss=True, **bias)
            self.check(BF16, I32, SUM, H=76, chunk=48, classes=136, accumulate=True, weights=True, cap=3.0, **bias)
            self.check(BF16, I64, NONE, H=72, chunk=0, grad_f32=True, accumulate=True, dloss=True, **bias)
            self.check(BF16, I64, MEAN, H=72, chunk=0, main_grad=True, tau=0.8, **bias)
        with self.subTest(what="grad_hidden alone"):
            self.check(BF16, I64, MEAN, H=72, chunk=0, hidden_only=True, **chip)
            self.check(BF16, I64, MEAN, H=72, chunk=48, hidden_only=True, **chip)
        with self.subTest(what="the per-token outputs and the entropy's gradient"):
            self.check(BF16, I64, MEAN, H=72, chunk=0, stats=True, ignore=True, dloss=True, **chip)
            self.check(BF16, I32, NONE, H=76, chunk=48, stats=True, dentropy=False, tau=0.7, cap=3.0, **chip)
            self.check(BF16, I64, SUM, H=72, chunk=0, stats=True, weights=True, smoothing=0.1, z_loss=1e-2,
                       row_tau=True, token_weight=True, ignore=True, classes=136, **dict(chip, bias=True))
            # Three slices, the rows' max growing along the vocabulary: the
            # argmax and the entropy's t move with it.
            self.check(BF16, I64, MEAN, H=72, chunk=0, stats=True, trend=8.0, **dict(chip, bias=True, V=1000))
            # Ties: the classes repeat every 37 (across lanes, tiles and
            # slices), and the first of the largest is the argmax.
            self.check(BF16, I64, SUM, H=72, chunk=0, stats=True, period=37, **dict(chip, bias=True, V=1000))

    def test_on_chip_weight_gradient_rounded_once(self):
        """ON_CHIP's bf16 grad_weight over 256 rows: the four row blocks'
        products summed in f32 (atomics) and rounded once, within 1.25 bf16
        ulps of float64 (as test_weight_gradient_rounded_once holds the one
        pass), and main_grad, added to, within 1."""
        if not self.CHIP_HERE:
            self.skipTest("the ON_CHIP plan is the CUDA rendering's (test_on_chip_refusals)")
        for main_grad in (False, True):
            got, want, ulp, _ = self.one_row_chunks(main_grad=main_grad, plan=PLAN_ON_CHIP, render=self.CHIP_RENDER)
            err = ((got - want).abs() / ulp).max().item()
            bound = 1.0 if main_grad else 1.25
            self.assertLessEqual(err, bound, f"main_grad={main_grad}: grad_weight off by {err:.2f} bf16 ulps")

    def test_on_chip_bad_labels(self):
        """ON_CHIP with labels outside [0, V) in rows 6 and 9: xent_check
        names row 6, the loss and those two rows of grad_hidden are NaN and
        the rest finite; ignoring invalid labels instead records none and
        leaves everything finite. A per-row temperature of 0 in row 3 and
        NaN in row 8 does the same (a bad label's report, naming row 3).
        The per-token outputs: entropy and label_logprob NaN in those rows
        (0 where ignored), a row of NaN logits' argmax 0 (torch.argmax's
        first NaN)."""
        if not self.CHIP_HERE:
            self.skipTest("the ON_CHIP plan is the CUDA rendering's (test_on_chip_refusals)")
        N, H, V = 11, 16, 130
        torch.manual_seed(12)
        x, w = on(torch.randn(N, H).to(torch.bfloat16)), on(torch.randn(V, H).to(torch.bfloat16))
        good = torch.randint(0, V, (N,))
        bad = good.clone()
        bad[6], bad[9] = V, -3
        tau = torch.ones(N)
        tau[3], tau[8] = 0.0, float("nan")
        for what, labels, temperature, ignore, rows in (("labels", bad, None, False, [6, 9]),
                                                        ("labels, ignored", bad, None, True, []),
                                                        ("temperature", good, tau, False, [3, 8])):
            with self.subTest(what=what):
                y, taus = on(labels), on(temperature)
                d = LinearDesc()
                LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, BF16, I64, SUM)
                d.plan = PLAN_ON_CHIP
                d.ce.invalid_labels = 1 if ignore else 0
                loss, gh = on(torch.zeros(1, dtype=torch.bfloat16)), on(torch.zeros(N, H, dtype=torch.bfloat16))
                ent, lp, am = on(torch.ones(N)), on(torch.ones(N)), on(torch.full((N,), -7))
                t = LinearTensors(hidden=ptr(x), weight=ptr(w), labels=ptr(y), loss=ptr(loss), grad_hidden=ptr(gh),
                                  temperature=ptr(taus), entropy=ptr(ent), label_logprob=ptr(lp), argmax=ptr(am))
                before, s, msg, c, msg_after = run_checked(self.CHIP_RENDER, d, t)
                self.assertEqual((before, s), (0, 0), msg)
                msg = msg_after
                finite = torch.isfinite(gh.float().cpu()).all(dim=1)
                self.assertEqual(torch.nonzero(~finite).flatten().tolist(), rows)
                ent, lp, am = ent.cpu(), lp.cpu(), am.cpu()
                for name, out in (("entropy", ent), ("label_logprob", lp)):
                    self.assertEqual(torch.nonzero(~torch.isfinite(out)).flatten().tolist(), rows, name)
                    if ignore:
                        self.assertEqual(out[[6, 9]].tolist(), [0.0, 0.0], name)
                self.assertTrue(bool(((am >= 0) & (am < V)).all()), f"argmax {am}")
                if temperature is not None:
                    self.assertEqual(am[[3, 8]].tolist(), [0, 0])
                if not rows:
                    self.assertEqual(c, 0, msg)
                    self.assertTrue(torch.isfinite(loss.float().cpu()).all())
                else:
                    self.assertEqual(c, 8, msg)  # XENT_ERROR_INVALID_LABEL
                    self.assertIn(f"row {rows[0]} has a label outside", msg)
                    self.assertTrue(torch.isnan(loss.float().cpu()).all())

    def test_on_chip_refusals(self):
        """What the ON_CHIP plan does not take is refused by name, and where
        it cannot run (the HIP rendering, the cpu backend's own code), the
        device is named."""
        d = LinearDesc()
        N, H, V = 8, 16, 40
        x, w = on(torch.randn(N, H).to(torch.bfloat16)), on(torch.randn(V, H).to(torch.bfloat16))
        y, loss = on(torch.zeros(N, dtype=torch.int64)), on(torch.zeros(1, dtype=torch.bfloat16))
        def call(render, desc_edit=None, **tensors):
            LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, BF16, I64, MEAN)
            d.plan = PLAN_ON_CHIP
            for k, v in (desc_edit or {}).items():
                setattr(d.ce, k, v)
            t = LinearTensors(hidden=ptr(x), weight=ptr(w), labels=ptr(y), loss=ptr(loss), **tensors)
            h = handle(render)
            try:
                n = ctypes.c_size_t()
                s = LIB.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(n))
                return (s, LIB.xent_last_error().decode()) if s != 0 else run(h, d, t)[:2]
            finally:
                LIB.xent_destroy(h)
        if self.CHIP_HERE:
            for edit, name in ((dict(dtype=F32, loss_dtype=F32, grad_dtype=F32), "desc->ce.dtype XENT_BF16"),
                               (dict(label_type=PROB), "class indices"),
                               (dict(rows=2**31 * 128), "desc->ce.rows x desc->ce.classes in at most")):
                with self.subTest(name=name):
                    s, msg = call(self.CHIP_RENDER, edit)
                    self.assertEqual((s, "which takes " + name in msg), (INVALID_ARGUMENT, True), msg)
        if not GPU:
            for render in (BACKEND_HIP, None):
                with self.subTest(render=render):
                    s, msg = call(render)
                    self.assertEqual((s, "which runs on an sm_90 GPU" in msg), (3, True), msg)  # UNSUPPORTED_DEVICE
        elif not self.CHIP_HERE:
            s, msg = call(None)
            self.assertEqual((s, "which runs on an sm_90 GPU" in msg), (3, True), msg)

    def test_vocabulary_parallel(self):
        """weight's rows split over 3 ranks (threads, each its own handle, an
        in-process all-gather: copies between their workspaces, on a GPU on
        the default stream, which every rank's kernels run on): every rank gets the whole loss, its slice of
        grad_weight and grad_bias, and its share of grad_hidden, whose sum
        over ranks is the unsplit gradient. Under a temperature, with the
        per-token outputs of the whole vocabulary (the same bits on every
        rank) and dentropy's term in every gradient."""
        # The last two: the tiled plans, tiles of 4 classes within each
        # rank's slice.
        self.vocabulary_parallel(((F32, MEAN, 0, 0), (F64, NONE, 0, 0), (BF16, SUM, 0, 0),
                                  (BF16, MEAN, 4, PLAN_TILED_HIDDEN_SUM), (BF16, NONE, 4, PLAN_TILED)))

    def test_on_chip_vocabulary_parallel(self):
        """The ON_CHIP plan over 3 ranks, as test_vocabulary_parallel: each
        rank's records of its classes gathered, its slice of the gradients,
        the per-token outputs of the whole vocabulary."""
        if not self.CHIP_HERE:
            self.skipTest("the ON_CHIP plan is the CUDA rendering's (test_on_chip_refusals)")
        self.vocabulary_parallel(((BF16, MEAN, 0, PLAN_ON_CHIP), (BF16, NONE, 0, PLAN_ON_CHIP)), self.CHIP_RENDER)
        # Class weights of the whole vocabulary, as the labels are, from 0.1
        # to 4.1, and a smoothing large enough for eps / C w[c] to show.
        self.vocabulary_parallel(((BF16, SUM, 0, PLAN_ON_CHIP),), self.CHIP_RENDER, weighted=True, eps=0.6)

    def test_on_chip_sm100(self):
        """The ON_CHIP plan's sm_100a passes (on_chip_sm100.h: tcgen05, tensor
        memory), which the runtime takes on an sm_100 GPU with sm_100a code:
        here the emulated device is an sm_100 build, and test_on_chip's and
        test_on_chip_vocabulary_parallel's cases run through them, their
        launches counted in the emulator's records (none of sm_90a's). No
        sm_100 GPU is lent to the project: on the GPU machine it is skipped."""
        if GPU or not self.CHIP_HERE:
            self.skipTest("the emulated CUDA rendering of an sm_100 build")
        dev = EmuDevice()
        LIB.xent_emu_get_device.restype = EmuDevice
        LIB.xent_emu_set_device.argtypes = [EmuDevice]
        LIB.xent_emu_func_records.argtypes = [ctypes.POINTER(EmuFuncRecord), ctypes.c_int]
        before = LIB.xent_emu_get_device()
        dev.ordinal, dev.smem_optin, dev.cluster_launch, dev.build_arch = 0, before.smem_optin, 1, 100

        def launches():
            """Launches so far by kernel ("(kernel<L, true>)" or "kernel")."""
            recs = (EmuFuncRecord * 8192)()
            n = LIB.xent_emu_func_records(recs, 8192)
            out = {}
            for r in recs[:min(n, 8192)]:
                name = r.name.decode().strip("()").split("<")[0]
                out[name] = out.get(name, 0) + r.launches
            return out

        first = launches()
        LIB.xent_emu_set_device(dev)
        try:
            self.test_on_chip()
            self.test_on_chip_vocabulary_parallel()
        finally:
            LIB.xent_emu_set_device(before)
        last = launches()
        ran = {k: v - first.get(k, 0) for k, v in last.items()}
        for name in ("xent_lce_chip_stats_sm100", "xent_lce_chip_grads_sm100"):
            self.assertGreater(ran.get(name, 0), 0, "%s never launched: %s" % (name, sorted(ran)))
        for name in ("xent_lce_chip_stats", "xent_lce_chip_grads"):
            self.assertEqual(ran.get(name, 0), 0, "sm_90a's %s launched on an sm_100 build" % name)

    def test_on_chip_failed_gather(self):
        """An all-gather that fails is the call's XENT_ERROR_COLLECTIVE, named
        with the rank, in the tiled plans and ON_CHIP (whose first pass
        gathers its records as they do)."""
        N, H, V = 5, 8, 12
        x, w = on(torch.randn(N, H).to(torch.bfloat16)), on(torch.randn(V, H).to(torch.bfloat16))
        y, loss = on(torch.randint(0, 2 * V, (N,))), on(torch.zeros(1, dtype=torch.bfloat16))
        fn = ALL_GATHER(lambda ctx, send, recv, nbytes, stream: 7)
        plans = [PLAN_TILED] + ([PLAN_ON_CHIP] if self.CHIP_HERE else [])
        for plan in plans:
            with self.subTest(plan=plan):
                shard = VocabShard(V, 2 * V, 1, 2, fn, None)
                d = LinearDesc()
                LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, BF16, I64, MEAN)
                d.plan, d.chunk_classes = plan, 4 if plan == PLAN_TILED else 0
                d.ce.vocab_shard = ctypes.pointer(shard)
                t = LinearTensors(hidden=ptr(x), weight=ptr(w), labels=ptr(y), loss=ptr(loss))
                h = handle(self.CHIP_RENDER if plan == PLAN_ON_CHIP else None)
                try:
                    s, msg, _ = run(h, d, t)
                finally:
                    LIB.xent_destroy(h)
                self.assertEqual(s, 9, msg)  # XENT_ERROR_COLLECTIVE
                self.assertIn("all_gather returned 7 (rank 1 of 2", msg)

    def vocabulary_parallel(self, cases, render=None, weighted=False, eps=0.1):
        """test_vocabulary_parallel's call of each (dtype, reduction, tile,
        plan) case on the handles `render` makes; weighted: class weights;
        eps: the label smoothing."""
        N, H, V, cuts = 7, 8, 30, (0, 9, 20, 30)
        for dtype, reduction, tile, plan in cases:
            torch.manual_seed(3)
            tt = TORCH[dtype]
            hid = torch.randn(N, H, dtype=torch.float64).to(tt)
            w = (torch.randn(V, H, dtype=torch.float64) / 2).to(tt)
            b = (torch.randn(V, dtype=torch.float64) / 2).to(tt)
            y = torch.randint(0, V, (N,))
            y[2] = -100
            acc = torch.float64 if dtype == F64 else torch.float32
            dent = (torch.rand(N, dtype=torch.float64) - 0.3).to(acc)
            cw = (torch.rand(V, dtype=torch.float64) * 4 + 0.1).to(acc) if weighted else None
            ranks = len(cuts) - 1
            parts, out = [None] * ranks, [None] * ranks
            barrier = threading.Barrier(ranks, timeout=20 if GPU else 120)  # (the GPU step's limit is 30 s)
            spaces = [[] for _ in range(ranks)]  # each rank's workspace (run's keep)

            def gather_fn(rank):
                def gather(ctx, send, recv, nbytes, stream):
                    # The ranks' records are in their workspaces (tensors on
                    # the device): copied as tensors, on the stream after the
                    # kernels that wrote them.
                    ws = spaces[rank][0]
                    parts[rank] = ws.narrow(0, send - ws.data_ptr(), nbytes)
                    barrier.wait()
                    into = ws.narrow(0, recv - ws.data_ptr(), ranks * nbytes)
                    for k in range(ranks):
                        if k != rank:
                            into.narrow(0, k * nbytes, nbytes).copy_(parts[k])
                    barrier.wait()
                    return 0
                return ALL_GATHER(gather)

            def rank_main(k):
                lo, hi = cuts[k], cuts[k + 1]
                w_k, b_k = on(w[lo:hi].contiguous()), on(b[lo:hi].contiguous())
                fn = gather_fn(k)
                shard = VocabShard(lo, V, k, ranks, fn, None)
                d = LinearDesc()
                LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, hi - lo, dtype, I64, reduction)
                d.chunk_rows = 3
                d.chunk_classes = tile
                d.plan = plan
                d.ce.label_smoothing = eps
                d.ce.temperature = 0.8
                d.ce.vocab_shard = ctypes.pointer(shard)
                outs = [on(x) for x in (torch.zeros(N if reduction == NONE else 1, dtype=tt),
                                        torch.zeros(N, H, dtype=tt), torch.zeros(hi - lo, H, dtype=tt),
                                        torch.zeros(hi - lo, dtype=tt), torch.full((N,), float("nan"), dtype=acc),
                                        torch.full((N,), float("nan"), dtype=acc),
                                        torch.full((N,), -7, dtype=torch.int64))]
                loss, gh, gw, gb, ent, lp, am = outs
                ins = [on(x) for x in (hid, y, dent, cw)]
                t = LinearTensors(hidden=ptr(ins[0]), weight=ptr(w_k), bias=ptr(b_k), labels=ptr(ins[1]),
                                  loss=ptr(loss), grad_hidden=ptr(gh), grad_weight=ptr(gw), grad_bias=ptr(gb),
                                  entropy=ptr(ent), label_logprob=ptr(lp), argmax=ptr(am), dentropy=ptr(ins[2]),
                                  weights=ptr(ins[3]))
                h = handle(render)
                try:
                    s, msg, _ = run(h, d, t, keep=spaces[k])
                finally:
                    LIB.xent_destroy(h)
                loss, gh, gw, gb, ent, lp, am = [x.cpu() for x in outs]
                out[k] = (s, msg, loss, gh, gw, gb, fn, ent, lp, am)

            threads = [threading.Thread(target=rank_main, args=(k,)) for k in range(ranks)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            want_loss, _, grads, (want_ent, want_lp, z) = oracle(hid, w, b, y, REDUCTION[reduction], cw, smoothing=eps,
                                                                 tau=0.8, dentropy=dent)
            what = f"{TORCH[dtype]} {REDUCTION[reduction]} vocabulary-parallel, tiles of {tile}, plan {plan}"
            for k, (s, msg, loss, gh, gw, gb, _, ent, lp, am) in enumerate(out):
                self.assertEqual(s, 0, f"rank {k}: {msg}")
                self.close(loss.reshape(want_loss.shape), want_loss, dtype, f"{what} rank {k}: loss")
                self.close(ent, want_ent, dtype, f"{what} rank {k}: entropy")
                self.close(lp, want_lp, dtype, f"{what} rank {k}: label_logprob")
                for i, name in ((2, "loss"), (7, "entropy"), (8, "label_logprob"), (9, "argmax")):
                    self.assertTrue(torch.equal(out[k][i], out[0][i]), f"{what}: rank {k}'s {name} differs from rank 0's")
                # The logits were rounded to dtype: the picked class holds
                # the row's largest z to within that rounding.
                picked = z.gather(1, am[:, None])[:, 0]
                gap = (z.max(1).values - picked).max().item()
                bound = 0.0 if dtype == F64 else TOL[dtype] * max(z.abs().max().item(), 1.0)
                self.assertLessEqual(gap, bound, f"{what} rank {k}: argmax picks a value {gap:.3g} below the largest")
                lo, hi = cuts[k], cuts[k + 1]
                self.close(gw, grads[1][lo:hi], dtype, f"{what} rank {k}: grad_weight")
                self.close(gb, grads[2][lo:hi], dtype, f"{what} rank {k}: grad_bias")
            total = sum(o[3].to(torch.float64) for o in out)
            self.close(total, grads[0], dtype, f"{what}: grad_hidden summed over ranks")

    def test_bad_labels(self):
        """Labels outside [0, V) in the second and third chunks: xent_check
        names the lowest such row counted from the first row of all (each
        chunk's fused call records it from its own first row); ignoring
        invalid labels instead records none, and the loss is finite."""
        N, H, V = 11, 6, 13
        torch.manual_seed(11)
        x, w = on(torch.randn(N, H)), on(torch.randn(V, H))
        y = torch.randint(0, V, (N,))
        y[6], y[9] = V, -3
        y = on(y)
        for ignore in (False, True):
            d = LinearDesc()
            LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, F32, I64, SUM)
            d.chunk_rows = 4
            d.ce.invalid_labels = 1 if ignore else 0
            loss = on(torch.zeros(1))
            t = LinearTensors(hidden=ptr(x), weight=ptr(w), labels=ptr(y), loss=ptr(loss))
            before, s, msg, c, msg_after = run_checked(None, d, t)
            self.assertEqual((before, s), (0, 0), msg)
            msg = msg_after
            if ignore:
                self.assertEqual(c, 0, msg)
                self.assertTrue(torch.isfinite(loss.cpu()).all())
            else:
                self.assertEqual(c, 8, msg)  # XENT_ERROR_INVALID_LABEL
                self.assertIn("row 6 has a label outside", msg)

    def test_no_rows(self):
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), 0, 4, 6, F32, I64, SUM)
        x = on(torch.zeros(1, 4))
        w, gw, gb, b = (on(torch.ones(6, 4)), on(torch.full((6, 4), 7.0)), on(torch.full((6,), 7.0)),
                        on(torch.zeros(6)))
        loss, y = on(torch.full((1,), float("nan"))), on(torch.zeros(1, dtype=torch.int64))
        t = LinearTensors(hidden=ptr(x), weight=ptr(w), bias=ptr(b), labels=ptr(y), loss=ptr(loss),
                          grad_weight=ptr(gw), grad_bias=ptr(gb))
        h = handle()
        s, msg, _ = run(h, d, t)
        LIB.xent_destroy(h)
        self.assertEqual(s, 0, msg)
        self.assertEqual((loss.item(), gw.abs().sum().item(), gb.abs().sum().item()), (0.0, 0.0, 0.0))

    def test_workspace_bound(self):
        """The workspace holds one chunk of logits, grad_weight's f32 sum
        where it is bf16 and there are several chunks, and O(rows), never all
        the logits: the size xent states for bf16 at V = 512, H = 64 and
        chunks of 32 rows (with f32 gradients, and in one chunk, no sum), and
        16 times the rows adding only O(rows) to it."""
        if GPU:
            self.skipTest("a GPU backend's GEMM workspace (32 MiB) is part of the size: " + CPU_ONLY)

        def size(N, chunk, grad_dtype=None, main_grad=False):
            d = LinearDesc()
            LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, 64, 512, BF16, I64, MEAN)
            d.chunk_rows = chunk
            d.main_grad = int(main_grad)
            if grad_dtype is not None:
                d.ce.grad_dtype = grad_dtype
            h = handle()
            n = ctypes.c_size_t()
            self.assertEqual(LIB.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(n)), 0)
            LIB.xent_destroy(h)
            return n.value

        # A chunk's logits in bf16 (2 bytes each; the chunk's gradient
        # replaces them, in place); grad_weight's sum over the chunks in f32
        # (V * H * 4 bytes); V floats (the bias gradient's sums); then two
        # workspaces of 8 KiB of partial sums and a few values per row or
        # chunk: the cross-entropy call's and the steps' (the divisor, the
        # chunks' sums and bad-label words). The cpu GEMM's f32 copies of
        # bf16 operands are its own (blas_cpu.c), a block of weight rows at a
        # time.
        weight_sum = 512 * 64 * 4
        stated = 32 * 512 * 2 + weight_sum + 512 * 4
        small, large = size(256, 32), size(4096, 32)
        self.assertGreaterEqual(small, stated + 2 * 8192)
        self.assertLess(small, stated + 2 * 8192 + 4096)
        self.assertLess(large - small, 16 * 4096)
        # f32 gradients: grad_weight is its own f32 sum.
        wide = size(256, 32, F32)
        self.assertGreaterEqual(small - wide, weight_sum)
        self.assertLess(small - wide, weight_sum + 128)
        # One chunk: nothing to sum.
        one = size(32, 32)
        self.assertLess(one, stated - weight_sum + 2 * 8192 + 4096)
        # main_grad: the caller's f32 buffer is the sum.
        self.assertEqual(size(256, 32, main_grad=True), wide)

    def workspace_size(self, N, H, V, dtype=BF16, **over):
        """xent_linear_ce_workspace_size of a mean (bf16 unless said): (status, bytes, message)."""
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), N, H, V, dtype, I64, MEAN)
        for k, v in over.items():
            setattr(d, k, v)
        h = handle()
        try:
            n = ctypes.c_size_t()
            s = LIB.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(n))
            return s, n.value, LIB.xent_last_error().decode()
        finally:
            LIB.xent_destroy(h)

    def test_default_memory_bound(self):
        """By default a bf16 call's workspace is at most
        XENT_LINEAR_CE_MEMORY_MIB (64 MiB; Liger-Kernel's is 128 and 64 MiB
        at the first two shapes) on this backend, at the issue's shapes and
        with 8 times the rows or twice the features; the rows add only their
        lse and entropy (8 bytes a row; 12 a chunk of steps' words). f64 calls
        too (their tiles' logits and records twice the bytes, their gradients
        their own sums). A budget that fits the one-pass plan takes it,
        grad_weight's f32 sum included; one that fits nothing is refused."""
        MiB = 1 << 20
        shapes = ((16384, 4096, 131072), (8192, 4096, 262144), (16384, 2048, 248320), (131072, 4096, 131072),
                  (16384, 8192, 131072))
        for N, H, V in shapes:
            for dtype in (BF16, F64):
                with self.subTest(N=N, H=H, V=V, dtype=dtype):
                    s, n, msg = self.workspace_size(N, H, V, dtype)
                    self.assertEqual(s, 0, msg)
                    self.assertLessEqual(n, 64 * MiB)
        small, large = self.workspace_size(16384, 4096, 131072)[1], self.workspace_size(131072, 4096, 131072)[1]
        self.assertLessEqual(large - small, (131072 - 16384) * 8 + 12 * 128 + 64)  # + a word and a sum a chunk
        # A budget between: four GEMMs, grad_hidden's f32 sum of every row.
        s, n, msg = self.workspace_size(16384, 4096, 131072, memory_mib=512)
        self.assertEqual(s, 0, msg)
        self.assertEqual(n, self.workspace_size(16384, 4096, 131072, memory_mib=512, plan=PLAN_TILED_HIDDEN_SUM)[1])
        self.assertGreater(n, 16384 * 4096 * 4)
        # The package's tests of the tiled plans (xent_torch_test.py,
        # test_linear_memory_mib) fit 1 MiB: the first in TILED_HIDDEN_SUM,
        # the second (more rows, wider) in TILED.
        for N, H, plan in ((64, 64, PLAN_TILED_HIDDEN_SUM), (1024, 256, PLAN_TILED)):
            s, n, msg = self.workspace_size(N, H, 8192, chunk_rows=16, memory_mib=1)
            self.assertEqual(s, 0, msg)
            self.assertLessEqual(n, MiB)
            self.assertEqual(n, self.workspace_size(N, H, 8192, chunk_rows=16, memory_mib=1, plan=plan)[1], plan)
        s, n, msg = self.workspace_size(16384, 4096, 131072, memory_mib=8192)
        self.assertEqual(s, 0, msg)
        self.assertGreater(n, 131072 * 4096 * 4)
        for plan in (0, PLAN_TILED_HIDDEN_SUM, PLAN_TILED):
            s, n, msg = self.workspace_size(16384, 4096, 131072, memory_mib=1, plan=plan)
            self.assertEqual(s, INVALID_ARGUMENT)
            self.assertIn("desc->memory_mib is 1: the call needs at least", msg)

    def test_workspace_size_overflow(self):
        """V x H past 64 bits of bytes is an error, not a small size: 2^33
        classes of 2^31 features, four rows, once answered XENT_OK."""
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), 4, 1 << 31, 1 << 33, BF16, I64, MEAN)
        h = handle()
        try:
            n = ctypes.c_size_t(12345)
            s = LIB.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(n))
            msg = LIB.xent_last_error().decode()
            self.assertEqual(s, INVALID_ARGUMENT, msg)
            self.assertIn("desc->ce.classes * desc->hidden overflows a 64-bit byte count", msg)
            self.assertEqual(n.value, 12345)
        finally:
            LIB.xent_destroy(h)

    def test_errors(self):
        d = LinearDesc()
        LIB.xent_linear_ce_desc_init(ctypes.byref(d), 4, 3, 5, F32, I64, MEAN)
        x, w = torch.randn(4, 3), torch.randn(5, 3)
        y, loss = torch.zeros(4, dtype=torch.int64), torch.zeros(1)
        h = handle()
        no_gather = ALL_GATHER(lambda ctx, send, recv, nbytes, stream: 0)
        try:
            cases = [
                ("tensors->hidden is NULL", INVALID_ARGUMENT, dict(hidden=None), {}),
                ("tensors->grad_bias is set but tensors->bias is NULL", INVALID_ARGUMENT,
                 dict(grad_bias=ptr(torch.zeros(5))), {}),
                ("desc->hidden is 0", INVALID_ARGUMENT, {}, dict(hidden=0)),
                ("desc->chunk_rows is -1", INVALID_ARGUMENT, {}, dict(chunk_rows=-1)),
                ("desc->chunk_classes is -1", INVALID_ARGUMENT, {}, dict(chunk_classes=-1)),
                ("desc->memory_mib is -2", INVALID_ARGUMENT, {}, dict(memory_mib=-2)),
                ("desc->plan is 5, must be an xent_linear_ce_plan_kind", INVALID_ARGUMENT, {}, dict(plan=5)),
                # V x H x 4 bytes of grad_weight's f32 sum wrapped to 0 here
                # once: 2^33 classes of 2^31 features, four rows.
                ("desc->ce.classes * desc->hidden overflows", INVALID_ARGUMENT, {},
                 {"ce.classes": 1 << 33, "hidden": 1 << 31}),
                ("desc->ce.rows * desc->hidden overflows", INVALID_ARGUMENT, {},
                 {"ce.rows": 1 << 40, "hidden": 1 << 30}),
                ("workspace_bytes is", WORKSPACE_TOO_SMALL, {}, dict(short=True)),
                ("tensors->argmax is set, but it is for hard labels", INVALID_ARGUMENT,
                 dict(argmax=ptr(torch.zeros(4, dtype=torch.int64))), {"ce.label_type": PROB}),
                ("tensors->label_logprob is set, but it is for hard labels", INVALID_ARGUMENT,
                 dict(label_logprob=ptr(torch.zeros(4))), {"ce.label_type": PROB}),
                ("tensors->entropy overlaps tensors->loss", INVALID_ARGUMENT, dict(entropy=ptr(loss)), {}),
                # main_grad: the desc's flag and the tensor go together, and
                # replace grad_weight; an f64 weight's gradient is its own sum.
                ("desc->main_grad is 1 but tensors->main_grad is NULL", INVALID_ARGUMENT, {}, dict(main_grad=1)),
                ("tensors->main_grad is set but desc->main_grad is 0", INVALID_ARGUMENT,
                 dict(main_grad=ptr(torch.zeros(5, 3))), {}),
                ("tensors->grad_weight is set with desc->main_grad", INVALID_ARGUMENT,
                 dict(main_grad=ptr(torch.zeros(5, 3)), grad_weight=ptr(torch.zeros(5, 3))), dict(main_grad=1)),
                ("desc->main_grad is 2", INVALID_ARGUMENT, dict(main_grad=ptr(torch.zeros(5, 3))), dict(main_grad=2)),
                ("desc->main_grad is for f32, f16 and bf16", INVALID_ARGUMENT,
                 dict(main_grad=ptr(torch.zeros(5, 3))), {"main_grad": 1, "ce.dtype": F64}),
                # A vocabulary split gathers each chunk's records through
                # its callback: not a gather of the caller's, nor without one.
                ("desc->ce.vocab_shard->all_gather is NULL", INVALID_ARGUMENT, {},
                 {"ce.vocab_shard": ctypes.pointer(VocabShard(0, 5, 0, 1))}),
                ("desc->ce.vocab_shard->gathered is set", INVALID_ARGUMENT, {},
                 {"ce.vocab_shard": ctypes.pointer(VocabShard(0, 5, 0, 1, no_gather, None, 8))}),
            ]
            for needle, status, tensor_over, desc_over in cases:
                with self.subTest(needle=needle):
                    dd = LinearDesc.from_buffer_copy(d)
                    short = desc_over.pop("short", False)
                    for k, v in desc_over.items():
                        setattr(dd.ce if k.startswith("ce.") else dd, k[3:] if k.startswith("ce.") else k, v)
                    fields = dict(hidden=ptr(x), weight=ptr(w), labels=ptr(y), loss=ptr(loss))
                    fields.update(tensor_over)
                    t = LinearTensors(**fields)
                    if short:
                        s, msg, _ = run(h, dd, t, extra_bytes=-8)
                    else:
                        n = ctypes.c_size_t((1 << 16) - 64)
                        ws = torch.empty(1 << 16, dtype=torch.uint8)
                        base = (ws.data_ptr() + 63) // 64 * 64
                        s = LIB.xent_linear_ce_run(h, ctypes.byref(dd), ctypes.byref(t), base, n.value, None)
                        msg = LIB.xent_last_error().decode()
                    self.assertEqual(s, status, msg)
                    self.assertIn(needle, msg)
        finally:
            LIB.xent_destroy(h)


if __name__ == "__main__":
    unittest.main()
