"""bench/cublaslt_best.py's cuBLASLt calls against the host stand-in
tests/fake_blaslt.c (built with cublasLt.h's constants and the real
soname): the three GEMMs of a linear cross entropy step, each of the
heuristic's candidates, checked against PyTorch's products in float64; the
fastest candidate kept; and the errors named. A wrong constant, operand
order, transpose or leading dimension fails the products or the fake's
checks."""

import ctypes
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cublaslt_best  # noqa: E402

FAKE = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("FAKE_CUBLASLT", "")


class StubTimer:
    """Timer.many's shape: each candidate called once, `times` its median."""

    def __init__(self, times):
        self.times, self.called = times, []

    def many(self, fns):
        out = {}
        for i, fn in fns.items():
            fn()
            self.called.append(i)
            s = self.times[i]
            out[i] = (dict(median=s, min=s, p10=s, p90=s, max=s, n=1), dict(median=0.0))
        return out


@unittest.skipUnless(FAKE, "needs tests/fake_blaslt.c built as libcublasLt (the py_test's argument)")
class CublasLtBest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lt = cublaslt_best.CublasLt(FAKE)
        cls.fake = ctypes.CDLL(FAKE)
        cls.workspace = torch.empty(1 << 16, dtype=torch.uint8)

    @classmethod
    def tearDownClass(cls):
        cls.lt.close()

    def knob(self, name):
        return ctypes.c_int.in_dll(self.fake, name)

    def setUp(self):
        self.knob("fake_blaslt_algorithms").value = 3
        self.addCleanup(lambda: setattr(self.knob("fake_blaslt_algorithms"), "value", 1))

    def step(self, dtype, n=13, h=24, v=37, pad=0):
        """A step's operands and the three products' (a, b, out) triples:
        logits = hidden @ weight^T, logits @ weight, logits^T @ hidden.
        pad: the operands' rows that many elements longer than they are."""
        g = torch.Generator().manual_seed(7)
        hidden = torch.randn(n, h + pad, generator=g).to(dtype)[:, :h]
        weight = torch.randn(v, h + pad, generator=g).to(dtype)[:, :h]
        logits = torch.randn(n, v + pad, generator=g).to(dtype)[:, :v]
        return [(hidden, weight.t(), torch.empty(n, v, dtype=dtype)),
                (logits, weight, torch.empty(n, h, dtype=dtype)),
                (logits.t(), hidden, torch.empty(v, h, dtype=dtype))]

    def test_products_by_every_candidate(self):
        # bf16 products rounded once (2^-8 of the largest), f32's summed in
        # the fake's double.
        for dtype, tol, pad in ((torch.bfloat16, 2 ** -8, 0), (torch.float32, 1e-6, 0), (torch.float32, 1e-6, 5)):
            for a, b, out in self.step(dtype, pad=pad):
                gemm = cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=8)
                self.assertEqual(len(gemm.candidates), 3)
                want = a.double() @ b.double()
                for i in range(3):
                    out.fill_(float("nan"))
                    gemm.run(i, a, b, out)
                    self.assertEqual(self.knob("fake_blaslt_last_algorithm").value, i)
                    err = ((out.double() - want).abs().max() / want.abs().max()).item()
                    self.assertLess(err, tol, f"{dtype} {tuple(a.shape)} @ {tuple(b.shape)} pad {pad} by {i}")
                gemm.close()

    def test_fastest_is_kept(self):
        a, b, out = self.step(torch.float32)[1]
        gemm = cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=8)
        timer = StubTimer([3e-3, 2e-3, 1e-3 + 1e-9])
        best, times = cublaslt_best.fastest(gemm, (a, b, out), timer)
        self.assertEqual(best, 2)
        self.assertEqual(sorted(timer.called), [0, 1, 2])
        self.assertEqual([t["rank"] for t in times], [0, 1, 2])
        self.assertEqual(times[1]["s"], 2e-3)
        self.assertEqual(self.knob("fake_blaslt_last_algorithm").value, 2)
        gemm.close()

    def test_fewer_candidates_when_asked(self):
        a, b, out = self.step(torch.float32)[0]
        gemm = cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=2)
        self.assertEqual(len(gemm.candidates), 2)
        gemm.close()

    def test_unfit_candidates_are_dropped(self):
        # A result whose state says it cannot run the GEMM is no candidate.
        a, b, out = self.step(torch.float32)[0]
        self.knob("fake_blaslt_unfit_algorithm").value = 1
        try:
            gemm = cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=8)
        finally:
            self.knob("fake_blaslt_unfit_algorithm").value = -1
        self.assertEqual(len(gemm.candidates), 2)
        gemm.run(1, a, b, out)
        self.assertEqual(self.knob("fake_blaslt_last_algorithm").value, 2)
        gemm.close()

    def test_errors_are_named(self):
        a, b, out = self.step(torch.float32)[0]
        self.knob("fake_blaslt_no_algorithm").value = 1
        try:
            with self.assertRaisesRegex(RuntimeError, "no algorithm"):
                cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=4)
        finally:
            self.knob("fake_blaslt_no_algorithm").value = 0
        with self.assertRaisesRegex(ValueError, "into"):
            cublaslt_best.Gemm(self.lt, a, b, out.t(), self.workspace, candidates=4)
        # Operands less aligned than the plan: refused before the library.
        gemm = cublaslt_best.Gemm(self.lt, a, b, out, self.workspace, candidates=4)
        with self.assertRaisesRegex(ValueError, "less aligned"):
            gemm.run(0, a, b, torch.empty(out.numel() + 1, dtype=out.dtype)[1:].view(out.shape))
        gemm.close()
        with self.assertRaisesRegex(ValueError, "strides"):
            cublaslt_best.Gemm(self.lt, a[:, ::2], b[::2], out, self.workspace, candidates=4)
        # A workspace smaller than the fake's algorithm asks: none offered.
        with self.assertRaisesRegex(RuntimeError, "no algorithm"):
            cublaslt_best.Gemm(self.lt, a, b, out, torch.empty(16, dtype=torch.uint8), candidates=4)


if __name__ == "__main__":
    unittest.main()
