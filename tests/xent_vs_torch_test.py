"""The public API (libxent_shared.so) on the cpu backend, its own code and the
generated kernels under the SIMT emulator, against PyTorch's F.cross_entropy
(Debian's python3-torch, CPU): forward, backward from the saved lse, and the
fused forward+backward, natively and for both renderings (CUDA's 32-lane
warps, HIP's 64-lane wavefronts), every dtype and reduction, with weights, ignore_index, label
smoothing, all-ignored batches and large logits.

PyTorch computes in float64 on the same rounded inputs; xent accumulates in
f32 (f64 for f64) and rounds its outputs to the dtype, so the tolerance is
the dtype's rounding plus f32 accumulation over the row."""

import ctypes
import os
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from xent_ctypes import F32, F16, BF16, F64, I32, I64, NONE, SUM, MEAN, BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP, make_desc
from xent_ctypes import INVALID_LABELS_IGNORE, INVALID_LABELS_REPORT, PROB, FORWARD, BACKWARD, FORWARD_BACKWARD, Tensors
from xent_ctypes import SOFTMAX, LOG_SOFTMAX, SoftmaxDesc
from torch_oracle import TORCH, TOL, P, load_lib, raw, from_raw, ptr

LIB = load_lib()
# What a cpu handle runs (xent_cpu_emulate): its own code (BACKEND_CPU), or
# the CUDA or the HIP rendering under the emulator; with XENT_CPU_ISA set
# (tests/BUILD's _sse2 runs), its own code alone, as that build.
TARGETS = (BACKEND_CPU,) if os.environ.get("XENT_CPU_ISA") else (BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP)


class XentVsTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.handles = {}
        for target in TARGETS:
            h = P()
            assert LIB.xent_create(ctypes.byref(h), BACKEND_CPU) == 0, LIB.xent_last_error()
            assert LIB.xent_cpu_emulate(h, target) == 0, LIB.xent_last_error()
            cls.handles[target] = h

    def call(self, fn, *args):
        status = fn(*args)
        self.assertEqual(status, 0, LIB.xent_last_error().decode())

    def check(self, target, dtype, label_type, reduction, rows, classes, weighted, ignore_index, smoothing,
              scale=3.0, ignore_all=False, all_ignored_zero=False, seed=0, z_loss=0.0, softcap=0.0,
              ignore_bad_labels=False, x=None, given_labels=None):
        name = (f"target={target} dtype={dtype} labels={label_type} red={reduction} N={rows} C={classes} "
                f"w={weighted} ii={ignore_index} eps={smoothing} scale={scale}")
        rng = np.random.default_rng(seed)
        h = self.handles[target]
        d = make_desc(rows, classes, dtype, label_type, reduction, ignore_index, smoothing, int(all_ignored_zero), z_loss,
                 softcap, INVALID_LABELS_IGNORE if ignore_bad_labels else INVALID_LABELS_REPORT)
        if x is None:
            x = torch.from_numpy(rng.standard_normal((rows, classes)) * scale).to(TORCH[dtype])
        labels = rng.integers(0, classes, size=rows)
        mask = np.ones(rows, bool) if ignore_all else rng.random(rows) < 0.2
        labels = np.where(mask, ignore_index, labels) if given_labels is None else np.array(given_labels)
        if ignore_bad_labels:  # out of range on both sides; PyTorch sees them as ignore_index
            bad = rng.random(rows) < 0.3
            labels = np.where(bad, classes + 3, labels)
        labels = labels.astype(np.int32 if label_type == I32 else np.int64)
        acc = np.float64 if dtype == F64 else np.float32
        weights = rng.uniform(0.3, 2.0, classes).astype(acc) if weighted else None
        n_loss = rows if reduction == NONE else 1
        dloss_t = torch.from_numpy(rng.uniform(0.5, 1.5, n_loss)).to(TORCH[dtype])
        # PyTorch, in float64 on the same rounded values.
        x64 = x.to(torch.float64, copy=True).requires_grad_(True)
        kwargs = dict(reduction={NONE: "none", SUM: "sum", MEAN: "mean"}[reduction], ignore_index=ignore_index,
                      label_smoothing=smoothing)
        if weighted:
            kwargs["weight"] = torch.from_numpy(weights.astype(np.float64))
        lab = torch.from_numpy(labels.astype(np.int64))
        if ignore_bad_labels:
            lab = torch.where((lab < 0) | (lab >= classes), torch.tensor(ignore_index), lab)
        xc = softcap * torch.tanh(x64 / softcap) if softcap else x64
        want = F.cross_entropy(xc, lab, **kwargs)
        if z_loss:
            counted = (lab != ignore_index).to(torch.float64)  # after the policy
            zterm = z_loss * torch.logsumexp(xc, 1) ** 2 * counted
            if reduction == NONE:
                want = want + zterm
            elif reduction == SUM:
                want = want + zterm.sum()
            else:
                w = kwargs["weight"][lab.clamp(min=0)] if weighted else torch.ones(rows, dtype=torch.float64)
                want = want + zterm.sum() / (w * counted).sum()
        dl = dloss_t.to(torch.float64)
        want.backward(dl if reduction == NONE else dl[0])
        want_grad = x64.grad.numpy()
        want_lse = torch.logsumexp(xc, 1).detach().numpy()
        want = want.detach().numpy().reshape(-1)
        if all_ignored_zero and reduction == MEAN:
            want = np.nan_to_num(want, nan=0.0)

        xr, dloss = raw(x), raw(dloss_t)
        ws_bytes = ctypes.c_size_t()
        self.call(LIB.xent_ce_workspace_size, h, ctypes.byref(d), 2, ctypes.byref(ws_bytes))
        ws = np.zeros(max(ws_bytes.value, 8), np.uint8)
        loss = np.zeros(n_loss, xr.dtype)
        lse = np.zeros(rows, acc)
        grad = np.zeros_like(xr)
        tol = TOL[dtype]
        finite = want[np.isfinite(want)]
        loss_scale = np.abs(finite).max() if finite.size else 1.0

        # forward
        self.call(LIB.xent_ce_forward, h, ctypes.byref(d), ptr(xr), ptr(labels), ptr(weights), ptr(loss), ptr(lse),
                  ptr(ws), ctypes.c_size_t(ws.size), None)
        np.testing.assert_allclose(from_raw(loss, dtype).numpy(), want, rtol=tol, atol=tol * loss_scale,
                                   equal_nan=True, err_msg=name + " loss")
        np.testing.assert_allclose(lse, want_lse, rtol=TOL[F32] if dtype != F64 else 1e-12, equal_nan=True,
                                   err_msg=name + " lse")
        # backward from the saved lse
        self.call(LIB.xent_ce_backward, h, ctypes.byref(d), ptr(xr), ptr(labels), ptr(weights), ptr(lse), ptr(dloss),
                  ptr(grad), ptr(ws), ctypes.c_size_t(ws.size), None)
        finite = want_grad[np.isfinite(want_grad)]
        gscale = np.abs(finite).max() if finite.size else 1.0
        np.testing.assert_allclose(from_raw(grad, dtype).numpy(), want_grad, rtol=tol, atol=tol * gscale,
                                   equal_nan=True, err_msg=name + " grad (bwd)")
        # fused, in place over a copy of the logits
        fused = xr.copy()
        loss2 = np.zeros_like(loss)
        self.call(LIB.xent_ce_forward_backward, h, ctypes.byref(d), ptr(fused), ptr(labels), ptr(weights), ptr(dloss),
                  ptr(loss2), None, ptr(fused), ptr(ws), ctypes.c_size_t(ws.size), None)
        np.testing.assert_allclose(from_raw(loss2, dtype).numpy(), want, rtol=tol, atol=tol * loss_scale,
                                   equal_nan=True, err_msg=name + " loss (fwd_bwd)")
        np.testing.assert_allclose(from_raw(fused, dtype).numpy(), want_grad, rtol=tol, atol=tol * gscale,
                                   equal_nan=True, err_msg=name + " grad (fwd_bwd, in place)")

    def test_matrix(self):
        seed = 0
        for target in TARGETS:
            for dtype in (F32, F16, BF16, F64):
                for reduction in (NONE, SUM, MEAN):
                    for weighted, ignore_index, smoothing in ((False, -100, 0.0), (True, 1, 0.2)):
                        seed += 1
                        self.check(target, dtype, I64 if seed % 2 else I32, reduction, 13, 301, weighted,
                                   ignore_index, smoothing, seed=seed)

    def test_row_shapes_asked_for(self):
        """xent_set_row_shape: each launch shape a tuning sweep may ask for
        (several rows a block at 1 to 32 threads a row, a row a block of 64
        to 512), on rows that end past a batch of loads and with more rows
        than the emulator's grid holds, against PyTorch in float64; the
        fused kernels then take no on-chip path. A block past a kernel's
        launch bounds fails, naming the kernel; bad arguments name theirs.
        (The renderings' shapes: the native path has none to ask for.)"""
        if BACKEND_CUDA not in self.handles:
            self.skipTest("the renderings' launch shapes: this run is the cpu backend's own code alone")
        seed = 900
        for target in (BACKEND_CUDA, BACKEND_HIP):
            h = self.handles[target]
            warp = 64 if target == BACKEND_HIP else 32
            shapes = [(1, 64), (4, 128), (32, 256), (32, 64), (warp, 128), (0, 64), (0, 512)]
            for group, threads in shapes:
                if threads < warp:
                    continue
                self.call(LIB.xent_set_row_shape, h, group, threads)
                try:
                    for dtype, classes in ((BF16, 3001), (F32, 700)):
                        seed += 1
                        self.check(target, dtype, I64, MEAN, 23, classes, True, -100, 0.1, seed=seed)
                finally:
                    self.call(LIB.xent_set_row_shape, h, 0, 0)
            # What the launcher refuses: f64's kernels are tuned (and
            # bounded) at 256 threads a block; a row of more threads than a
            # warp; a block that is not whole warps.
            refused = [(F64, 0, 512)] + ([(BF16, 0, 32)] if warp == 64 else [(BF16, 64, 256)])
            for dtype, group, threads in refused:
                self.call(LIB.xent_set_row_shape, h, group, threads)
                try:
                    d = make_desc(2, 10, dtype, I64, MEAN, -100, 0.0, 0, 0.0, 0.0, INVALID_LABELS_REPORT)
                    x = raw(torch.zeros((2, 10), dtype=TORCH[dtype]))
                    loss, lse = np.zeros(1, x.dtype), np.zeros(2, np.float64 if dtype == F64 else np.float32)
                    labels = np.zeros(2, np.int64)
                    ws_bytes = ctypes.c_size_t()
                    self.call(LIB.xent_ce_workspace_size, h, ctypes.byref(d), 0, ctypes.byref(ws_bytes))
                    ws = np.zeros(max(ws_bytes.value, 8), np.uint8)
                    status = LIB.xent_ce_forward(h, ctypes.byref(d), ptr(x), ptr(labels), None, ptr(loss), ptr(lse),
                                                 ptr(ws), ctypes.c_size_t(ws.size), None)
                    message = LIB.xent_last_error().decode()
                    self.assertNotEqual(status, 0, (target, dtype, group, threads))
                    self.assertIn("ce_fwd_%s_i64_mean" % {F64: "f64", BF16: "bf16"}[dtype], message)
                    self.assertIn("xent_set_row_shape", message)
                finally:
                    self.call(LIB.xent_set_row_shape, h, 0, 0)
            for group, threads, word in ((3, 256, "threads_per_row"), (128, 256, "threads_per_row"),
                                         (0, 48, "block_threads"), (0, 2048, "block_threads"),
                                         (0, 16, "block_threads"), (4, 0, "threads_per_row")):
                self.assertNotEqual(LIB.xent_set_row_shape(h, group, threads), 0, (group, threads))
                self.assertIn(word, LIB.xent_last_error().decode())
        self.assertNotEqual(LIB.xent_set_row_shape(None, 0, 0), 0)
        self.assertIn("handle", LIB.xent_last_error().decode())

    def test_all_ignored(self):
        for target in TARGETS:
            for zero in (False, True):
                self.check(target, F32, I64, MEAN, 6, 50, True, -100, 0.1, ignore_all=True, all_ignored_zero=zero)

    def test_large_logits_and_edge_shapes(self):
        for target in TARGETS:
            self.check(target, F32, I64, MEAN, 4, 2000, True, -100, 0.1, scale=1e4, seed=11)
            self.check(target, BF16, I64, SUM, 3, 1, False, -100, 0.3, seed=12)  # C = 1
            self.check(target, F16, I32, NONE, 1, 8192, False, 7, 0.0, seed=13)  # N = 1, long row

    def test_extreme_rows(self):
        """Rows where a formula that is not shift-invariant loses everything:
        logits around +-1e8 (+-1e4 in f16), at the dtype's largest finite
        value, +inf beside finite logits, -inf (masked) classes, NaN, and all
        -inf; loss, lse, the gradient from the saved lse and the fused
        gradient, against PyTorch in float64 on the same rounded values (which
        is NaN wherever x - max is NaN)."""
        inf, nan = float("inf"), float("nan")
        big = {F32: 3.4e38, BF16: 3.38e38, F16: 65504.0, F64: 1.7e308}
        offset = {F32: 1e8, BF16: 1e8, F16: 1e4, F64: 1e8}
        seed = 400
        for target in TARGETS:
            for dtype in (F32, F16, BF16, F64):
                b, o = big[dtype], offset[dtype]
                rows = [
                    [o, o, o, o, o],                       # PyTorch: log 5 everywhere; not 0
                    [o + 1, o, o - 1, o + 3, o + 2],
                    [-o, -o + 2, -o + 1, -o, -o + 3],
                    [b, b, -b, 0, 0],                      # log 2 for the label 0
                    [b, -b, -b, -b, b],
                    [1, inf, 0, 0, 0],                     # +inf not the label: NaN everywhere
                    [2, -inf, 1, -inf, 0],                 # masked classes
                    [-inf, 3, -inf, 1, 0],                 # the label's class masked: loss inf
                    [0, nan, 1, 2, 3],
                    [-inf, -inf, -inf, -inf, -inf],
                ]
                labels = [0, 3, 4, 0, 4, 0, 2, 0, 1, 2]
                x = torch.tensor(rows, dtype=torch.float64).to(TORCH[dtype])
                for reduction in (NONE, MEAN):
                    seed += 1
                    self.check(target, dtype, I64, reduction, len(rows), 5, False, -100, 0.0, seed=seed, x=x,
                               given_labels=labels)
                # Smoothing and weights on the shifted rows (their sums are
                # relative to the row, too).
                seed += 1
                self.check(target, dtype, I32, NONE, 3, 5, True, -100, 0.2, seed=seed, x=x[:3], given_labels=[0, 3, 4])

    def test_shift_invariant_log_softmax(self):
        """f32 logits [10000, 10001, 10002, 10003]: PyTorch's log-softmax is
        exact there (-0.4401897 for the last), x - lse rounded to f32 is not
        (-0.4404297); softmax likewise (0.6439143, not 0.6437597)."""
        x = np.array([[10000, 10001, 10002, 10003], [1e5, 1e5 + 1, 1e5 + 2, 1e5 + 3]], np.float32)
        want = F.log_softmax(torch.from_numpy(x).to(torch.float64), 1).numpy()
        for target in TARGETS:
            h = self.handles[target]
            for kind in (LOG_SOFTMAX, SOFTMAX):
                d = SoftmaxDesc()
                self.call(LIB.xent_softmax_desc_init_nd, ctypes.byref(d), 2, (ctypes.c_int64 * 2)(2, 4), -1, F32, kind)
                y = np.zeros_like(x)
                self.call(LIB.xent_softmax_forward, h, ctypes.byref(d), ptr(x), ptr(y), None)
                np.testing.assert_allclose(y, want if kind == LOG_SOFTMAX else np.exp(want), rtol=2e-7, atol=1e-7,
                                           err_msg=f"target={target} kind={kind}")
            log_prob, softmax = np.zeros_like(x), np.zeros_like(x)
            labels = np.array([3, 0], np.int64)
            loss = np.zeros(2, np.float32)
            d = make_desc(2, 4, F32, I64, NONE, -100, 0.0)
            self.run_ce(h, d, FORWARD, logits=x, labels=labels, loss=loss, log_prob=log_prob, softmax=softmax)
            np.testing.assert_allclose(log_prob, want, rtol=2e-7, atol=1e-7, err_msg="xent_ce_run log_prob")
            np.testing.assert_allclose(softmax, np.exp(want), rtol=2e-7, atol=1e-7, err_msg="xent_ce_run softmax")
            np.testing.assert_allclose(loss, [-want[0, 3], -want[1, 0]], rtol=2e-7, err_msg="loss")

    def test_out_of_range_labels_ignored(self):
        for target in TARGETS:
            for reduction in (NONE, SUM, MEAN):
                self.check(target, F32, I64, reduction, 20, 64, True, -100, 0.1, seed=200 + reduction,
                           ignore_bad_labels=True)
                self.assertEqual(LIB.xent_check(self.handles[target]), 0, LIB.xent_last_error())

    def test_out_of_range_labels_reported(self):
        h = self.handles[BACKEND_CPU]
        x = np.zeros((4, 5), np.float32)
        labels = np.array([1, 9, -100, -2], np.int64)
        loss = np.zeros(4, np.float32)
        d = make_desc(4, 5, F32, I64, NONE, -100, 0.0)
        ws = np.zeros(64, np.uint8)
        self.call(LIB.xent_ce_forward, h, ctypes.byref(d), ptr(x), ptr(labels), None, ptr(loss), None, ptr(ws),
                  ctypes.c_size_t(ws.size), None)
        self.assertTrue(np.isnan(loss[1]) and np.isnan(loss[3]) and loss[2] == 0 and np.isfinite(loss[0]))
        self.assertEqual(LIB.xent_check(h), 8)  # XENT_ERROR_INVALID_LABEL
        self.assertIn(b"row 1 has a label outside [0, classes)", LIB.xent_last_error())
        self.assertEqual(LIB.xent_check(h), 0, "xent_check clears the record")
        # The same in stream order (the cpu backend ran the call to its end).
        LIB.xent_check_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        labels[:] = [1, 2, -100, 7]
        self.call(LIB.xent_ce_forward, h, ctypes.byref(d), ptr(x), ptr(labels), None, ptr(loss), None, ptr(ws),
                  ctypes.c_size_t(ws.size), None)
        self.assertEqual(LIB.xent_check_stream(h, None), 8)
        self.assertIn(b"xent_check_stream: row 3 has a label outside [0, classes)", LIB.xent_last_error())
        self.assertEqual(LIB.xent_check_stream(h, None), 0, "xent_check_stream clears the record")

    def test_z_loss_and_softcap(self):
        seed = 100
        for target in TARGETS:
            for dtype in (F32, BF16, F64):
                for reduction in (NONE, MEAN):
                    seed += 1
                    self.check(target, dtype, I64, reduction, 9, 513, True, -100, 0.1, scale=6.0, seed=seed,
                               z_loss=0.02, softcap=4.0)


    def run_ce(self, h, d, op, **tensors):
        """xent_ce_run with numpy arrays for the named xent_ce_tensors fields."""
        t = Tensors(**{k: (v.ctypes.data if v is not None else None) for k, v in tensors.items()})
        ws_bytes = ctypes.c_size_t()
        self.call(LIB.xent_ce_workspace_size, h, ctypes.byref(d), op, ctypes.byref(ws_bytes))
        ws = np.zeros(max(ws_bytes.value, 8), np.uint8)
        self.call(LIB.xent_ce_run, h, ctypes.byref(d), op, ctypes.byref(t), ptr(ws), ctypes.c_size_t(ws.size), None)

    def test_soft_labels_class_axis_and_extras(self):
        """Through xent_ce_run: soft or hard labels on [N, C, d1, d2] logits
        (class axis 1, read strided) and on [N, C]; log_prob and softmax
        outputs; a gradient bias; the gradient to soft labels; and f32 loss
        and gradient from bf16/f16 logits, against PyTorch autograd."""
        rng = np.random.default_rng(77)
        cases = [(F32, False, (3, 7, 4, 5)), (F32, True, (3, 7, 4, 5)), (BF16, True, (6, 300)),
                 (F16, False, (2, 33, 9)), (F64, True, (2, 5, 3)), (BF16, False, (5, 400)),
                 # inner sizes that are multiples of the 16-byte vector (xent_column_walk)
                 (BF16, False, (2, 40, 4, 8)), (F16, True, (3, 9, 16)), (F64, False, (2, 11, 6))]
        for target in TARGETS:
            h = self.handles[target]
            for i, (dtype, soft, shape) in enumerate(cases):
                for reduction in (NONE, MEAN):
                    mixed = dtype in (F16, BF16) and reduction == MEAN
                    name = f"target={target} dtype={dtype} soft={soft} shape={shape} red={reduction} f32-out={mixed}"
                    n, classes = shape[0], shape[1]
                    inner = int(np.prod(shape[2:])) if len(shape) > 2 else 1
                    rows = n * inner
                    x = torch.from_numpy(rng.standard_normal(shape) * 3).to(TORCH[dtype])
                    weights = rng.uniform(0.3, 2.0, classes).astype(np.float64 if dtype == F64 else np.float32)
                    if soft:
                        t = rng.uniform(0, 1, shape)
                        t = torch.from_numpy(t / t.sum(1, keepdims=True)).to(TORCH[dtype])
                        labels, target_t = raw(t), t.to(torch.float64, copy=True).requires_grad_(True)
                    else:
                        lab = rng.integers(0, classes, (n,) + tuple(shape[2:]))
                        lab[rng.random(lab.shape) < 0.2] = -100
                        labels, target_t = lab.astype(np.int64), torch.from_numpy(lab)
                    out_dtype = F32 if mixed else dtype
                    d = make_desc(rows, classes, dtype, PROB if soft else I64, reduction, -100, 0.1, inner=inner,
                                  loss_dtype=out_dtype, grad_dtype=out_dtype)
                    x64 = x.to(torch.float64, copy=True).requires_grad_(True)
                    red = {NONE: "none", MEAN: "mean"}[reduction]
                    want = F.cross_entropy(x64, target_t, weight=torch.from_numpy(weights.astype(np.float64)),
                                           reduction=red, label_smoothing=0.1)
                    out_np = np.float32 if out_dtype == F32 else raw(x).dtype
                    dloss_t = torch.from_numpy(rng.uniform(0.5, 1.5, want.shape)).to(TORCH[out_dtype])
                    want.backward(dloss_t.to(torch.float64))
                    bias_t = torch.from_numpy(rng.standard_normal(shape) * 0.01).to(TORCH[out_dtype])
                    xr = raw(x)
                    loss = np.zeros(max(want.numel(), 1), out_np)
                    grad = np.zeros(xr.shape, out_np)
                    log_prob, softmax = np.zeros_like(xr), np.zeros_like(xr)
                    grad_labels = np.zeros_like(xr) if soft else None
                    self.run_ce(h, d, FORWARD_BACKWARD, logits=xr, labels=labels, weights=weights,
                                dloss=raw(dloss_t).reshape(-1), grad_bias=raw(bias_t), loss=loss, log_prob=log_prob,
                                softmax=softmax, grad=grad, grad_labels=grad_labels)
                    tol = TOL[out_dtype] if out_dtype == dtype else TOL[F32]
                    w = want.detach().numpy().reshape(-1)
                    np.testing.assert_allclose(from_raw(loss, out_dtype).numpy(), w, rtol=tol,
                                               atol=tol * np.abs(w).max(), err_msg=name + " loss")
                    want_grad = x64.grad.numpy() + bias_t.to(torch.float64).numpy()
                    np.testing.assert_allclose(from_raw(grad, out_dtype).numpy(), want_grad, rtol=tol,
                                               atol=tol * np.abs(want_grad).max(), err_msg=name + " grad")
                    np.testing.assert_allclose(from_raw(log_prob, dtype).numpy(), F.log_softmax(x64, 1).detach().numpy(),
                                               rtol=TOL[dtype], atol=TOL[dtype], err_msg=name + " log_prob")
                    np.testing.assert_allclose(from_raw(softmax, dtype).numpy(), F.softmax(x64, 1).detach().numpy(),
                                               rtol=TOL[dtype], atol=TOL[dtype] * 0.1, err_msg=name + " softmax")
                    if soft:
                        gt = target_t.grad.numpy()
                        np.testing.assert_allclose(from_raw(grad_labels, dtype).numpy(), gt, rtol=TOL[dtype],
                                                   atol=TOL[dtype] * np.abs(gt).max(), err_msg=name + " grad_labels")

    def test_strided_vectors_and_large_lse(self):
        """Class axis 1 of [2, 40, 3, 8] logits: the inner size (24) is a
        multiple of every dtype's 16-byte vector, so the strided path loads
        16 bytes at a time through shared memory (xent_column_walk), 40
        classes being a full step of them and a partial one. Every third
        position is shifted by 300, so its saved lse is beyond 64 and the
        backward takes its statistics again from the logits, for some of the
        positions that share a vector and not for the others. Forward (loss
        and lse), backward from the saved lse (out of place) and fused (in
        place), against PyTorch in float64 on the same rounded values."""
        rng = np.random.default_rng(123)
        shape = (2, 40, 3, 8)
        n, classes, inner = shape[0], shape[1], 24
        rows = n * inner
        shift = np.where(np.arange(inner).reshape(1, 1, 3, 8) % 3 == 0, 300.0, 0.0)
        for target in TARGETS:
            h = self.handles[target]
            for dtype in (F32, F16, BF16, F64):
                name = f"target={target} dtype={dtype}"
                x = torch.from_numpy(rng.standard_normal(shape) * 3 + shift).to(TORCH[dtype])
                lab = rng.integers(0, classes, (n, 3, 8))
                lab[rng.random(lab.shape) < 0.2] = -100
                d = make_desc(rows, classes, dtype, I64, NONE, -100, 0.1, inner=inner)
                x64 = x.to(torch.float64, copy=True).requires_grad_(True)
                want = F.cross_entropy(x64, torch.from_numpy(lab), reduction="none", label_smoothing=0.1)
                dloss_t = torch.from_numpy(rng.uniform(0.5, 1.5, want.shape)).to(TORCH[dtype])
                want.backward(dloss_t.to(torch.float64))
                want_lse = torch.logsumexp(x64, 1).detach().numpy().reshape(-1)
                want_grad = x64.grad.numpy()
                w = want.detach().numpy().reshape(-1)
                xr, labels, dloss = raw(x), lab.astype(np.int64), raw(dloss_t).reshape(-1)
                acc = np.float64 if dtype == F64 else np.float32
                tol = TOL[dtype]
                loss, lse = np.zeros(rows, xr.dtype), np.zeros(rows, acc)
                self.run_ce(h, d, FORWARD, logits=xr, labels=labels, loss=loss, lse=lse)
                np.testing.assert_allclose(from_raw(loss, dtype).numpy(), w, rtol=tol, atol=tol * np.abs(w).max(),
                                           err_msg=name + " loss")
                np.testing.assert_allclose(lse, want_lse, rtol=TOL[F32] if dtype != F64 else 1e-12,
                                           err_msg=name + " lse")
                grad = np.zeros_like(xr)
                self.run_ce(h, d, BACKWARD, logits=xr, labels=labels, lse_in=lse, dloss=dloss, grad=grad)
                gscale = np.abs(want_grad).max()
                np.testing.assert_allclose(from_raw(grad, dtype).numpy(), want_grad, rtol=tol, atol=tol * gscale,
                                           err_msg=name + " grad (bwd)")
                fused, loss2 = xr.copy(), np.zeros_like(loss)
                self.run_ce(h, d, FORWARD_BACKWARD, logits=fused, labels=labels, dloss=dloss, loss=loss2, grad=fused)
                np.testing.assert_allclose(from_raw(loss2, dtype).numpy(), w, rtol=tol, atol=tol * np.abs(w).max(),
                                           err_msg=name + " loss (fwd_bwd)")
                np.testing.assert_allclose(from_raw(fused, dtype).numpy(), want_grad, rtol=tol, atol=tol * gscale,
                                           err_msg=name + " grad (fwd_bwd, in place)")

    def test_softmax_family(self):
        """Softmax and log-softmax along any axis, and their gradients (ONNX
        Runtime SoftmaxGrad / LogSoftmaxGrad), against torch.softmax /
        torch.log_softmax and autograd, both renderings, every dtype."""
        rng = np.random.default_rng(99)
        for target in TARGETS:
            h = self.handles[target]
            for dtype in (F32, F16, BF16, F64):
                for kind in (SOFTMAX, LOG_SOFTMAX):
                    for shape, axis in (((7, 300), -1), ((2, 6, 3, 5), 1), ((4, 9, 11), 0), ((3, 37, 16), 1)):
                        name = f"target={target} dtype={dtype} kind={kind} shape={shape} axis={axis}"
                        x = torch.from_numpy(rng.standard_normal(shape) * 4).to(TORCH[dtype])
                        d = SoftmaxDesc()
                        c_shape = (ctypes.c_int64 * len(shape))(*shape)
                        self.call(LIB.xent_softmax_desc_init_nd, ctypes.byref(d), len(shape), c_shape, axis, dtype, kind)
                        x64 = x.to(torch.float64, copy=True).requires_grad_(True)
                        fn = torch.log_softmax if kind == LOG_SOFTMAX else torch.softmax
                        want = fn(x64, axis)
                        xr = raw(x)
                        y = np.zeros_like(xr)
                        self.call(LIB.xent_softmax_forward, h, ctypes.byref(d), ptr(xr), ptr(y), None)
                        tol = TOL[dtype]
                        np.testing.assert_allclose(from_raw(y, dtype).numpy(), want.detach().numpy(), rtol=tol,
                                                   atol=tol, err_msg=name + " forward")
                        # Backward from xent's own (rounded) y, as a framework would save it.
                        y64 = from_raw(y, dtype).requires_grad_(False)
                        dy = torch.from_numpy(rng.standard_normal(shape)).to(TORCH[dtype])
                        dy64 = dy.to(torch.float64)
                        if kind == LOG_SOFTMAX:
                            want_dx = dy64 - torch.exp(y64) * dy64.sum(axis, keepdim=True)
                        else:
                            want_dx = y64 * (dy64 - (dy64 * y64).sum(axis, keepdim=True))
                        # The same formula through autograd, on the exact forward, agrees (checks the formula).
                        want.backward(dy64)
                        np.testing.assert_allclose(x64.grad.numpy(), want_dx.numpy(), rtol=20 * tol, atol=20 * tol,
                                                   err_msg=name + " formula vs autograd")
                        dx = np.zeros_like(xr)
                        self.call(LIB.xent_softmax_backward, h, ctypes.byref(d), ptr(y), ptr(raw(dy)), ptr(dx), None)
                        scale = float(want_dx.abs().max())
                        np.testing.assert_allclose(from_raw(dx, dtype).numpy(), want_dx.numpy(), rtol=tol,
                                                   atol=tol * scale, err_msg=name + " backward")

    def test_scale_grad(self):
        """xent_ce_scale_grad, the backward of a fused call made ahead of
        time with dloss = 1 (the package's inplace_backward): grad * dloss in
        the accumulation type, rounded once to the gradient's dtype, as
        PyTorch's product of the widened tensors rounds it; every dtype,
        reduction and f32 gradient, the class axis last and in place
        ([N, C, d]). Rows whose factor is 1 are not touched: their pages (a
        row of 2048 f16 is one page) are unreadable during the call, and so
        is a whole gradient scaled by a dloss of 1."""
        rng = np.random.default_rng(5)
        for target in TARGETS:
            h = self.handles[target]
            for dtype, loss_t, grad_t in ((F32, F32, F32), (F64, F64, F64), (BF16, BF16, BF16), (F16, F16, F16),
                                          (BF16, F32, F32), (F16, F32, F32)):
                for reduction in (NONE, SUM, MEAN):
                    # (300, 203): more 16-byte vectors than the grid's
                    # threads hold at once, and rows that start off 16 bytes.
                    for shape in ((37, 29), (3, 11, 7), (300, 203)):
                        name = f"target {target} dtype {dtype} loss {loss_t} grad {grad_t} red {reduction} {shape}"
                        inner = int(np.prod(shape[2:]))
                        positions = shape[0] * inner
                        d = make_desc(positions, shape[1], dtype, I64, reduction, inner=inner, loss_dtype=loss_t,
                                      grad_dtype=grad_t)
                        g = torch.from_numpy(rng.standard_normal(shape)).to(TORCH[grad_t])
                        n_loss = positions if reduction == NONE else 1
                        s = torch.from_numpy(rng.uniform(0.25, 3.0, n_loss)).to(TORCH[loss_t])
                        if reduction == NONE:
                            s[::3] = 1.0  # every third position untouched
                            s[1] = float("nan")
                        acc = torch.float64 if dtype == F64 else torch.float32
                        # The factor of each element: its position's, broadcast over the class axis.
                        factor = s.reshape([shape[0]] + list(shape[2:])).unsqueeze(1) if reduction == NONE else s[0]
                        want = (g.to(acc) * factor.to(acc)).to(TORCH[grad_t])
                        graw, sraw = raw(g), raw(s)
                        self.call(LIB.xent_ce_scale_grad, h, ctypes.byref(d), ptr(sraw), ptr(graw), None)
                        got = torch.from_numpy(graw)
                        got = got.view(TORCH[grad_t]) if grad_t in (F16, BF16) else got
                        self.assertTrue(torch.equal(got.to(torch.float64).nan_to_num(7.0),
                                                    want.to(torch.float64).nan_to_num(7.0)), name)
            with self.subTest(target=target, what="a factor of 1 reads nothing"):
                self.unread_rows(h)

    def unread_rows(self, h):
        """Rows of 2048 f16 (a page each) whose factor is 1 are unreadable
        pages during the call; the others are scaled. A dloss of 1 for a sum
        leaves every page unread."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        page = os.sysconf("SC_PAGE_SIZE")
        C, rows = page // 2, 6
        PROT_NONE, PROT_RW, MAP_PRIVATE_ANON = 0, 3, 0x02 | 0x20
        base = libc.mmap(None, rows * page, PROT_RW, MAP_PRIVATE_ANON, -1, 0)
        self.assertNotEqual(base, ctypes.c_void_p(-1).value)
        try:
            grad = np.ctypeslib.as_array((ctypes.c_uint16 * (rows * C)).from_address(base)).reshape(rows, C)
            g = torch.from_numpy(np.random.default_rng(3).standard_normal((rows, C))).to(torch.float16)
            grad[:] = g.view(torch.int16).numpy().view(np.uint16)
            s = np.array([1.0, 2.0, 1.0, 0.5, 1.0, -3.0], np.float32)
            d = make_desc(rows, C, F16, I64, NONE, loss_dtype=F32, grad_dtype=F16)
            for r in (0, 2, 4):
                self.assertEqual(libc.mprotect(base + r * page, page, PROT_NONE), 0)
            status = LIB.xent_ce_scale_grad(h, ctypes.byref(d), ptr(s), ctypes.c_void_p(base), None)
            self.assertEqual(libc.mprotect(base, rows * page, PROT_RW), 0)
            self.assertEqual(status, 0, LIB.xent_last_error().decode())
            got = torch.from_numpy(grad.view(np.int16).copy()).view(torch.float16)
            want = (g.float() * torch.from_numpy(s)[:, None]).half()
            self.assertTrue(torch.equal(got, want))
            # A sum's dloss of 1: the whole gradient unread.
            d = make_desc(rows, C, F16, I64, SUM, loss_dtype=F32, grad_dtype=F16)
            self.assertEqual(libc.mprotect(base, rows * page, PROT_NONE), 0)
            status = LIB.xent_ce_scale_grad(h, ctypes.byref(d), ptr(np.ones(1, np.float32)), ctypes.c_void_p(base),
                                            None)
            self.assertEqual(libc.mprotect(base, rows * page, PROT_RW), 0)
            self.assertEqual(status, 0, LIB.xent_last_error().decode())
            self.assertTrue(torch.equal(torch.from_numpy(grad.view(np.int16).copy()).view(torch.float16), want))
        finally:
            libc.munmap(base, rows * page)

    def test_scale_grad_errors(self):
        """Bad calls name the argument; a NULL dloss (1) does nothing."""
        h = self.handles[BACKEND_CPU]
        d = make_desc(4, 8, F32, I64, NONE)
        g, s = np.zeros((4, 8), np.float32), np.ones(4, np.float32)
        self.assertEqual(LIB.xent_ce_scale_grad(h, ctypes.byref(d), None, None, None), 0)
        for args, needle in (((ptr(s), None), "xent_ce_scale_grad: grad is NULL"),
                             ((ptr(s), ctypes.c_void_p(g.ctypes.data + 2)), "grad"),
                             ((ctypes.c_void_p(g.ctypes.data), ptr(g)), "overlap")):
            self.assertEqual(LIB.xent_ce_scale_grad(h, ctypes.byref(d), *args, None), 1)
            self.assertIn(needle, LIB.xent_last_error().decode())
        bad = make_desc(4, 8, F32, I64, NONE, grad_dtype=F16)
        self.assertNotEqual(LIB.xent_ce_scale_grad(h, ctypes.byref(bad), ptr(s), ptr(g), None), 0)
        self.assertIn("grad_dtype", LIB.xent_last_error().decode())


if __name__ == "__main__":
    unittest.main(verbosity=1)
