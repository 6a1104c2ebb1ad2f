"""The CPU reference (runtime/reference.c) against PyTorch's F.cross_entropy
(Debian's python3-torch, CPU, float64) on randomized cases: every dtype,
label type and reduction, with and without class weights, ignore_index,
label smoothing, all-ignored batches, logits of magnitude 1e4, and C = 1.

Both sides see the same values: f16/bf16 logits are rounded once, and PyTorch
computes on those rounded values in float64. The reference accumulates in
double, so the tolerance is a few float64 ulps scaled by the row length."""

import ctypes
import os
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from xent_ctypes import F32, F16, BF16, F64, I32, I64, PROB, NONE, SUM, MEAN, make_desc
from xent_ctypes import NO_IGNORE_INDEX as NO_IGNORE


def find_library():
    here = os.path.dirname(os.path.abspath(__file__))
    for root in [os.environ.get("TEST_SRCDIR", ""), os.path.join(here, "..", "..")]:
        for path in [os.path.join(root, "xent", "runtime", "libxent_reference.so")]:
            if os.path.exists(path):
                return path
    raise FileNotFoundError("libxent_reference.so not found in the test's runfiles")


LIB = ctypes.CDLL(find_library())
LIB.xent_ref_ce_forward.restype = None
LIB.xent_ref_ce_backward.restype = None
LIB.xent_float_to_f16.restype = ctypes.c_uint16
LIB.xent_float_to_f16.argtypes = [ctypes.c_float]
LIB.xent_f16_to_float.restype = ctypes.c_float
LIB.xent_f16_to_float.argtypes = [ctypes.c_uint16]
LIB.xent_float_to_bf16.restype = ctypes.c_uint16
LIB.xent_float_to_bf16.argtypes = [ctypes.c_float]

TORCH_DTYPE = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16, F64: torch.float64}


def ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p) if array is not None else None


def raw(tensor):
    """The tensor's bytes as a numpy array (bf16 has no numpy dtype)."""
    t = tensor.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().copy()
    return t.numpy().copy()


class Case:
    def __init__(self, rng, dtype, label_type, reduction, rows, classes, weighted, ignore_index, smoothing,
                 scale=3.0, ignore_all=False, all_ignored_zero=False):
        self.dtype, self.reduction = dtype, reduction
        self.desc = make_desc(rows, classes, dtype, label_type, reduction, ignore_index, smoothing, int(all_ignored_zero))
        x = torch.from_numpy(rng.standard_normal((rows, classes)) * scale)
        self.x = x.to(TORCH_DTYPE[dtype])  # rounded once; both sides use these values
        labels = rng.integers(0, classes, size=rows)
        if ignore_index != NO_IGNORE and rows > 0:
            mask = rng.random(rows) < 0.25
            if ignore_all:
                mask[:] = True
            labels = np.where(mask, ignore_index, labels)
        self.labels = labels.astype(np.int32 if label_type == I32 else np.int64)
        acc = np.float64 if dtype == F64 else np.float32
        self.weights = rng.uniform(0.2, 2.0, size=classes).astype(acc) if weighted else None
        self.ignore_index, self.smoothing = ignore_index, smoothing

    def torch_loss(self, x64, reduction):
        kwargs = {"reduction": reduction, "label_smoothing": self.smoothing}
        if self.weights is not None:
            kwargs["weight"] = torch.from_numpy(self.weights.astype(np.float64))
        labels = torch.from_numpy(self.labels.astype(np.int64))
        if self.ignore_index != NO_IGNORE:
            kwargs["ignore_index"] = self.ignore_index
        else:
            kwargs["ignore_index"] = -(2**62)  # matches no label
        return F.cross_entropy(x64, labels, **kwargs)


class ReferenceVsTorch(unittest.TestCase):
    def check_case(self, case, name):
        d = case.desc
        rows, classes = d.rows, d.classes
        x = raw(case.x)
        loss_rows = np.zeros(max(rows, 1))
        total = np.zeros(1)
        lse = np.zeros(max(rows, 1))
        LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(case.labels), ptr(case.weights), ptr(loss_rows),
                                ptr(total), ptr(lse), None, None)
        x64 = case.x.to(torch.float64).requires_grad_(True)
        red = {NONE: "none", SUM: "sum", MEAN: "mean"}[case.reduction]
        expected = case.torch_loss(x64, red)
        tol = dict(rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(x.astype(np.float64)).max()) if x.size else 1.0))
        if case.reduction == NONE:
            np.testing.assert_allclose(loss_rows[:rows], expected.detach().numpy(), err_msg=name, **tol)
        else:
            if d.all_ignored_zero and case.reduction == MEAN and np.isnan(expected.item()):
                self.assertEqual(total[0], 0.0, name)
            else:
                np.testing.assert_allclose(total[0], expected.item(), err_msg=name, equal_nan=True, **tol)
        if rows:
            np.testing.assert_allclose(lse[:rows], torch.logsumexp(x64, dim=1).detach().numpy(), err_msg=name, **tol)
        # Backward with a random upstream gradient.
        rng = np.random.default_rng(rows * 7919 + classes)
        dloss = rng.uniform(0.5, 1.5, size=rows if case.reduction == NONE else 1)
        if rows == 0:
            return
        if case.reduction == NONE:
            expected.backward(torch.from_numpy(dloss))
        else:
            expected.backward(torch.tensor(dloss[0], dtype=torch.float64))
        grad = np.zeros(rows * classes)
        LIB.xent_ref_ce_backward(ctypes.byref(d), ptr(x), ptr(case.labels), ptr(case.weights), None, ptr(dloss), None,
                                 ptr(grad), None)
        np.testing.assert_allclose(grad.reshape(rows, classes), x64.grad.numpy(), err_msg=name + " (grad)",
                                   equal_nan=True, **tol)

    def test_randomized_matrix(self):
        rng = np.random.default_rng(1234)
        count = 0
        for dtype in (F32, F16, BF16, F64):
            for label_type in (I32, I64):
                for reduction in (NONE, SUM, MEAN):
                    for weighted in (False, True):
                        for ignore_index, smoothing in ((-100, 0.0), (NO_IGNORE, 0.1), (2, 0.0), (-100, 0.3)):
                            rows = int(rng.integers(1, 40))
                            classes = int(rng.integers(1, 300))
                            case = Case(rng, dtype, label_type, reduction, rows, classes, weighted, ignore_index,
                                        smoothing)
                            name = f"dtype={dtype} label={label_type} red={reduction} w={weighted} " \
                                   f"ii={ignore_index} eps={smoothing} N={rows} C={classes}"
                            self.check_case(case, name)
                            count += 1
        self.assertEqual(count, 4 * 2 * 3 * 2 * 4)

    def test_all_ignored_mean_is_nan_or_zero(self):
        rng = np.random.default_rng(5)
        for weighted in (False, True):
            case = Case(rng, F32, I64, MEAN, 8, 10, weighted, -100, 0.0, ignore_all=True)
            self.check_case(case, "all ignored, NaN")
            total = np.zeros(1)
            LIB.xent_ref_ce_forward(ctypes.byref(case.desc), ptr(raw(case.x)), ptr(case.labels),
                                    ptr(case.weights), None, ptr(total), None, None, None)
            self.assertTrue(np.isnan(total[0]))
            case = Case(rng, F32, I64, MEAN, 8, 10, weighted, -100, 0.1, ignore_all=True, all_ignored_zero=True)
            self.check_case(case, "all ignored, zero")

    def test_large_magnitude_logits(self):
        rng = np.random.default_rng(6)
        for dtype in (F32, F64, BF16):
            for reduction in (NONE, MEAN):
                case = Case(rng, dtype, I64, reduction, 16, 1000, True, -100, 0.1, scale=1e4)
                self.check_case(case, f"|x| ~ 1e4 dtype={dtype}")

    def test_single_class(self):
        rng = np.random.default_rng(7)
        for reduction in (NONE, SUM, MEAN):
            for smoothing in (0.0, 0.2):
                case = Case(rng, F64, I32, reduction, 5, 1, False, -100, smoothing)
                self.check_case(case, f"C=1 red={reduction} eps={smoothing}")

    def test_ignore_index_out_of_class_range(self):
        rng = np.random.default_rng(8)
        case = Case(rng, F32, I64, MEAN, 20, 7, True, 1000, 0.1)
        self.check_case(case, "ignore_index >= C")

    def test_paddle_example(self):
        # Paddle's documented example (its value is printed from float32, so
        # it agrees with the exact value to about 1e-7).
        x = np.array([0.4, 0.6, 0.9], dtype=np.float64)
        labels = np.array([1], dtype=np.int64)
        total = np.zeros(1)
        d = make_desc(1, 3, F64, I64, MEAN, -100, 0.0, 0)
        LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(labels), None, None, ptr(total), None, None, None)
        self.assertAlmostEqual(total[0], 1.15328646, delta=2e-7)

    def test_out_of_range_label_is_nan_not_a_read(self):
        x = np.zeros(6, dtype=np.float64)
        labels = np.array([5, -3], dtype=np.int64)
        rows = np.zeros(2)
        d = make_desc(2, 3, F64, I64, NONE, -100, 0.0, 0)
        LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(labels), None, ptr(rows), None, None, None, None)
        self.assertTrue(np.isnan(rows).all())

    def test_z_loss_and_softcap(self):
        """Liger's z-loss (z * lse^2 per counted row, with the mean's
        denominator) and Gemma-2's soft cap (cap * tanh(x / cap) before the
        softmax), alone and together, against PyTorch autograd."""
        rng = np.random.default_rng(10)
        for reduction in (NONE, SUM, MEAN):
            for z, cap in ((0.01, 0.0), (0.0, 3.0), (0.05, 5.0)):
                for weighted, smoothing in ((False, 0.0), (True, 0.2)):
                    rows, classes = 12, 37
                    x = rng.standard_normal((rows, classes)) * 6
                    labels = rng.integers(0, classes, rows)
                    labels[rng.random(rows) < 0.25] = -100
                    weights = rng.uniform(0.3, 2.0, classes).astype(np.float64) if weighted else None
                    d = make_desc(rows, classes, F64, I64, reduction, -100, smoothing, 0, z, cap)
                    loss_rows, total, lse = np.zeros(rows), np.zeros(1), np.zeros(rows)
                    LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(labels), ptr(weights), ptr(loss_rows),
                                            ptr(total), ptr(lse), None, None)
                    x64 = torch.from_numpy(x.copy()).requires_grad_(True)
                    xc = cap * torch.tanh(x64 / cap) if cap else x64
                    lab = torch.from_numpy(labels)
                    w = torch.from_numpy(weights) if weighted else None
                    counted = (lab != -100).to(torch.float64)
                    zterm = z * torch.logsumexp(xc, 1) ** 2 * counted
                    red = {NONE: "none", SUM: "sum", MEAN: "mean"}[reduction]
                    ce = F.cross_entropy(xc, lab, weight=w, reduction=red, label_smoothing=smoothing)
                    if reduction == NONE:
                        want = ce + zterm
                    elif reduction == SUM:
                        want = ce + zterm.sum()
                    else:
                        denominator = (w[lab.clamp(min=0)] * counted).sum() if weighted else counted.sum()
                        want = ce + zterm.sum() / denominator
                    name = f"red={reduction} z={z} cap={cap} w={weighted} eps={smoothing}"
                    got = loss_rows if reduction == NONE else total
                    np.testing.assert_allclose(got, want.detach().numpy().reshape(-1), rtol=1e-10, atol=1e-12,
                                               err_msg=name)
                    np.testing.assert_allclose(lse, torch.logsumexp(xc, 1).detach().numpy(), rtol=1e-12, err_msg=name)
                    dloss = rng.uniform(0.5, 1.5, rows if reduction == NONE else 1)
                    want.backward(torch.from_numpy(dloss) if reduction == NONE else torch.tensor(dloss[0]))
                    grad = np.zeros(rows * classes)
                    LIB.xent_ref_ce_backward(ctypes.byref(d), ptr(x), ptr(labels), ptr(weights), None, ptr(dloss), None,
                                             ptr(grad), None)
                    np.testing.assert_allclose(grad.reshape(rows, classes), x64.grad.numpy(), rtol=1e-9, atol=1e-12,
                                               err_msg=name + " (grad)")

    def test_soft_labels(self):
        """Probability targets (PyTorch's class-probability F.cross_entropy):
        weights, smoothing, every reduction (the mean divides by the row
        count), z-loss, the gradient to the logits and, as TensorFlow offers,
        to the labels, against autograd through both."""
        rng = np.random.default_rng(11)
        for reduction in (NONE, SUM, MEAN):
            for weighted, smoothing, z in ((False, 0.0, 0.0), (True, 0.0, 0.0), (True, 0.25, 0.0), (False, 0.1, 0.02)):
                rows, classes = 9, 23
                x = rng.standard_normal((rows, classes)) * 4
                t = rng.uniform(0, 1, (rows, classes))
                t[:6] /= t[:6].sum(1, keepdims=True)  # the last rows stay unnormalised, as PyTorch allows
                weights = rng.uniform(0.3, 2.0, classes) if weighted else None
                d = make_desc(rows, classes, F64, PROB, reduction, -100, smoothing, 0, z)
                loss_rows, total, lse = np.zeros(rows), np.zeros(1), np.zeros(rows)
                LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(t), ptr(weights), ptr(loss_rows), ptr(total),
                                        ptr(lse), None, None)
                x64 = torch.from_numpy(x.copy()).requires_grad_(True)
                t64 = torch.from_numpy(t.copy()).requires_grad_(True)
                red = {NONE: "none", SUM: "sum", MEAN: "mean"}[reduction]
                w = torch.from_numpy(weights) if weighted else None
                want = F.cross_entropy(x64, t64, weight=w, reduction=red, label_smoothing=smoothing)
                zterm = z * torch.logsumexp(x64, 1) ** 2
                want = want + {NONE: zterm, SUM: zterm.sum(), MEAN: zterm.mean()}[reduction]
                name = f"soft red={reduction} w={weighted} eps={smoothing} z={z}"
                got = loss_rows if reduction == NONE else total
                np.testing.assert_allclose(got, want.detach().numpy().reshape(-1), rtol=1e-10, atol=1e-12, err_msg=name)
                dloss = rng.uniform(0.5, 1.5, rows if reduction == NONE else 1)
                want.backward(torch.from_numpy(dloss) if reduction == NONE else torch.tensor(dloss[0]))
                grad, grad_t = np.zeros(rows * classes), np.zeros(rows * classes)
                LIB.xent_ref_ce_backward(ctypes.byref(d), ptr(x), ptr(t), ptr(weights), None, ptr(dloss), None,
                                         ptr(grad), ptr(grad_t))
                np.testing.assert_allclose(grad.reshape(rows, classes), x64.grad.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=name + " (grad)")
                np.testing.assert_allclose(grad_t.reshape(rows, classes), t64.grad.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=name + " (grad to labels)")

    def test_class_axis_and_extra_outputs(self):
        """[N, C, d1, d2] logits with the class axis at 1 (PyTorch), read in
        place with stride d1*d2; log_prob and softmax outputs; an added
        gradient bias (ONNX Runtime's SoftmaxCrossEntropyLossGrad)."""
        rng = np.random.default_rng(12)
        for reduction in (NONE, SUM, MEAN):
            for soft in (False, True):
                n, classes, d1, d2 = 3, 6, 4, 5
                x = rng.standard_normal((n, classes, d1, d2)) * 3
                inner, rows = d1 * d2, n * d1 * d2
                if soft:
                    t = rng.uniform(0, 1, x.shape)
                    t /= t.sum(1, keepdims=True)
                    labels, torch_target = t, torch.from_numpy(t)
                else:
                    labels = rng.integers(0, classes, (n, d1, d2))
                    labels[rng.random(labels.shape) < 0.2] = -100
                    torch_target = torch.from_numpy(labels)
                weights = rng.uniform(0.3, 2.0, classes)
                d = make_desc(rows, classes, F64, PROB if soft else I64, reduction, -100, 0.1, inner=inner)
                loss_rows, total = np.zeros(rows), np.zeros(1)
                log_prob, softmax = np.zeros(x.size), np.zeros(x.size)
                LIB.xent_ref_ce_forward(ctypes.byref(d), ptr(x), ptr(labels), ptr(weights), ptr(loss_rows),
                                        ptr(total), None, ptr(log_prob), ptr(softmax))
                x64 = torch.from_numpy(x.copy()).requires_grad_(True)
                red = {NONE: "none", SUM: "sum", MEAN: "mean"}[reduction]
                want = F.cross_entropy(x64, torch_target, weight=torch.from_numpy(weights), reduction=red,
                                       label_smoothing=0.1)
                name = f"N-d red={reduction} soft={soft}"
                got = loss_rows if reduction == NONE else total
                np.testing.assert_allclose(got, want.detach().numpy().reshape(-1), rtol=1e-10, atol=1e-12, err_msg=name)
                np.testing.assert_allclose(log_prob.reshape(x.shape), F.log_softmax(x64, 1).detach().numpy(),
                                           rtol=1e-12, atol=1e-12, err_msg=name + " log_prob")
                np.testing.assert_allclose(softmax.reshape(x.shape), F.softmax(x64, 1).detach().numpy(),
                                           rtol=1e-12, atol=1e-15, err_msg=name + " softmax")
                dloss = rng.uniform(0.5, 1.5, rows if reduction == NONE else 1)
                want.backward(torch.from_numpy(dloss.reshape(n, d1, d2)) if reduction == NONE
                              else torch.tensor(dloss[0]))
                bias = rng.standard_normal(x.size) * 0.01
                grad = np.zeros(x.size)
                LIB.xent_ref_ce_backward(ctypes.byref(d), ptr(x), ptr(labels), ptr(weights), None, ptr(dloss),
                                         ptr(bias), ptr(grad), None)
                np.testing.assert_allclose(grad.reshape(x.shape), x64.grad.numpy() + bias.reshape(x.shape),
                                           rtol=1e-9, atol=1e-12, err_msg=name + " (grad + bias)")

    def test_half_conversions_match_numpy_and_torch(self):
        rng = np.random.default_rng(9)
        values = np.concatenate([
            rng.standard_normal(20000).astype(np.float32) * np.float32(1000),
            rng.standard_normal(5000).astype(np.float32) * np.float32(1e-6),  # f16 subnormals
            np.array([0.0, -0.0, 65504, 65519.996, 65520, 1e9, -1e9, np.inf, -np.inf, 6e-8, 3e-8, 2.9e-8],
                     dtype=np.float32),
        ])
        np.seterr(over="ignore")  # casting 1e9 to float16 is meant to overflow to inf
        for v in values:
            got = LIB.xent_float_to_f16(float(v))
            want = int(np.array([v], dtype=np.float32).astype(np.float16).view(np.uint16)[0])
            self.assertEqual(got, want, f"f16({v!r})")
            back = LIB.xent_f16_to_float(got)
            self.assertEqual(np.float32(back), np.float32(np.float16(v)), f"f16->f32({v!r})")
        t = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        for v, want in zip(values, t):
            self.assertEqual(LIB.xent_float_to_bf16(float(v)), int(want), f"bf16({v!r})")


if __name__ == "__main__":
    unittest.main(verbosity=1)
