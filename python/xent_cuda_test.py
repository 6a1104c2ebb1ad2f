"""The package on CUDA tensors: what only a GPU shows (issue 16). Without a
CUDA device, or with a library built without the CUDA backend, it says
SKIPPED; bench/run_gpu.sh runs it on the GPU machine, beside
xent_torch_test.py with XENT_TEST_DEVICE=cuda (every CPU case again on CUDA
tensors) and xent_compile_test.py (torch.compile on CUDA tensors).

- CUDA-graph capture: xent.cross_entropy's forward and backward, and
  xent.linear_cross_entropy's, captured once and replayed on new inputs
  copied into the captured tensors, against PyTorch in float64; a bad label
  inside a replay is reported by xent.check() after it, and by
  xent.check(current_stream=True) waiting for that stream alone. A call that waited
  for the host, or allocated outside PyTorch's allocator, breaks the capture.
  inplace_backward's backward too: the device decides where the incoming
  gradient is 1 (xent_ce_scale_grad).
- The current stream: a call made under torch.cuda.stream(s) on a
  non-blocking stream whose input is written late on s (after a sleep) must
  read it after it is written: a call on any other stream reads garbage.
- No host synchronisation from the package's Python: the calls run under
  torch.cuda.set_sync_debug_mode("error")."""

import ctypes
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
from xent import _capi  # noqa: E402

TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def cuda_backend_missing():
    """Why this cannot run here, or None."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    h = _capi.P()
    if _capi.lib.xent_create(ctypes.byref(h), _capi.BACKEND_CUDA) != 0:
        return "the library has no CUDA backend (build with --config=cuda): " + _capi.lib.xent_last_error().decode()
    _capi.lib.xent_destroy(h)
    return None


def close(test, got, want, dtype, what):
    got, want = got.detach().to(torch.float64).cpu(), want.detach().to(torch.float64).cpu()
    scale = max(want.abs().max().item() if want.numel() else 0.0, 1.0)
    err = (got - want).abs().max().item() if want.numel() else 0.0
    test.assertTrue(err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} > {TOL[dtype]:.1g} * {scale:.3g}")


def capture(step):
    """step() warmed up on a side stream, then captured; returns the graph
    and what the captured step returned."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph, out


class Cuda(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(5)

    def test_cross_entropy_in_a_cuda_graph(self):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.zeros(64, 1000, dtype=dtype, device="cuda", requires_grad=True)
            y = torch.zeros(64, dtype=torch.int64, device="cuda")

            def step():
                x.grad = None
                loss = xent.cross_entropy(x, y, label_smoothing=0.1)
                loss.backward()
                return loss, x.grad

            graph, (loss, grad) = capture(step)
            for replay in range(3):
                new_x = torch.randn(64, 1000, dtype=torch.float64, device="cuda") * 3
                new_y = torch.randint(0, 1000, (64,), device="cuda")
                new_y[replay] = -100
                with torch.no_grad():
                    x.copy_(new_x.to(dtype))
                y.copy_(new_y)
                graph.replay()
                x64 = x.detach().to(torch.float64).requires_grad_()
                want = F.cross_entropy(x64, y, label_smoothing=0.1)
                (want_grad,) = torch.autograd.grad(want, x64)
                close(self, loss, want, dtype, f"{dtype} replay {replay}: loss")
                close(self, grad, want_grad, dtype, f"{dtype} replay {replay}: grad")
            xent.check()
            # A bad label inside a replay: reported by xent.check() after it.
            y[7] = 1000
            graph.replay()
            with self.assertRaises(xent.InvalidLabelError) as caught:
                xent.check()
            self.assertIn("row 7", str(caught.exception))
            # The same after the current stream alone (xent_check_stream).
            y[7] = 0
            y[9] = -5
            graph.replay()
            with self.assertRaises(xent.InvalidLabelError) as caught:
                xent.check(current_stream=True)
            self.assertIn("xent_check_stream: row 9", str(caught.exception))
            xent.check(current_stream=True)

    def test_inplace_backward_in_a_cuda_graph(self):
        """inplace_backward's backward scales the gradient where it lies by
        the incoming one, deciding on the device where that is 1
        (xent_ce_scale_grad): captured and replayed, per-row factors with
        some 1s, and a mean's dloss of 1."""
        x = torch.zeros(48, 3000, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        y = torch.zeros(48, dtype=torch.int64, device="cuda")
        up = torch.ones(48, dtype=torch.bfloat16, device="cuda")

        def step():
            x.grad = None
            xent.cross_entropy(x * 1, y, reduction="none", inplace_backward=True).backward(up)
            xent.cross_entropy(x * 1, y, inplace_backward=True).backward()
            return x.grad

        graph, grad = capture(step)
        for replay in range(3):
            with torch.no_grad():
                x.copy_((torch.randn(48, 3000, device="cuda") * 3).to(torch.bfloat16))
            y.copy_(torch.randint(0, 3000, (48,), device="cuda"))
            up.copy_(torch.rand(48, device="cuda").to(torch.bfloat16) + 0.5)
            up[replay::4] = 1.0
            graph.replay()
            x64 = x.detach().to(torch.float64).requires_grad_()
            want = (F.cross_entropy(x64, y, reduction="none") * up.to(torch.float64)).sum() + F.cross_entropy(x64, y)
            (want_grad,) = torch.autograd.grad(want, x64)
            close(self, grad, want_grad, torch.bfloat16, f"replay {replay}: grad")

    def test_linear_cross_entropy_in_a_cuda_graph(self):
        h = torch.zeros(40, 32, device="cuda", requires_grad=True)
        w = torch.zeros(300, 32, device="cuda", requires_grad=True)
        y = torch.zeros(40, dtype=torch.int64, device="cuda")

        def step():
            h.grad, w.grad = None, None
            loss = xent.linear_cross_entropy(h, w, y, chunk_rows=16)
            loss.backward()
            return loss, h.grad, w.grad

        graph, (loss, gh, gw) = capture(step)
        for replay in range(2):
            with torch.no_grad():
                h.copy_(torch.randn(40, 32, device="cuda"))
                w.copy_(torch.randn(300, 32, device="cuda") / 6)
            y.copy_(torch.randint(0, 300, (40,), device="cuda"))
            graph.replay()
            h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
            want = F.cross_entropy(F.linear(h64, w64), y)
            want_gh, want_gw = torch.autograd.grad(want, (h64, w64))
            close(self, loss, want, torch.float32, f"replay {replay}: loss")
            close(self, gh, want_gh, torch.float32, f"replay {replay}: grad of hidden")
            close(self, gw, want_gw, torch.float32, f"replay {replay}: grad of weight")

    def test_the_current_stream(self):
        x = torch.randn(128, 4096, device="cuda")
        y = torch.randint(0, 4096, (128,), device="cuda")
        want = F.cross_entropy(x.double(), y, reduction="none")
        side = torch.cuda.Stream()  # PyTorch's pool streams do not wait for the legacy default stream
        late = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU clocks before `late` is written on this stream
            late.copy_(x)
            loss = xent.cross_entropy(late, y, reduction="none")
            soft = xent.softmax(late, 1)
        side.synchronize()
        close(self, loss, want, torch.float32, "loss on the side stream")
        close(self, soft, torch.softmax(x.double(), 1), torch.float32, "softmax on the side stream")

    def test_no_host_synchronisation(self):
        x = torch.randn(32, 500, device="cuda", requires_grad=True)
        y = torch.randint(0, 500, (32,), device="cuda")
        h = torch.randn(32, 16, device="cuda", requires_grad=True)
        w = torch.randn(500, 16, device="cuda", requires_grad=True)
        for _ in range(2):  # the first call makes the handle; the second must not wait either
            torch.cuda.set_sync_debug_mode("error")
            try:
                xent.cross_entropy(x, y, label_smoothing=0.1).backward()
                xent.cross_entropy(x * 1, y, inplace_backward=True).backward()
                xent.cross_entropy(x * 1, y, reduction="none", inplace_backward=True).sum().backward()
                xent.log_softmax(x, 1).sum().backward()
                xent.linear_cross_entropy(h, w, y).backward()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        xent.check()


if __name__ == "__main__":
    why = cuda_backend_missing()
    if why:
        print(f"SKIPPED: {why}")
        sys.exit(0)
    unittest.main()
