"""xent.linear_cross_entropy: the fused linear cross entropy
(xent_linear_ce_run) as an autograd function. For a 'sum' or 'mean' the
forward computes the loss and every gradient in one call (Liger-Kernel's
way: the gradients of a loss of 1), and the backward scales them by the
incoming gradient, a scalar. For 'none' the incoming gradient weighs each row
differently inside grad_weight, so the backward makes the call again with it
(the logits' GEMM runs twice)."""

import ctypes

import torch

from . import _autograd as A
from . import _capi as C
from . import _run as R


def _desc(hidden, weight, target, o, chunk_rows):
    n, h = hidden.shape
    d = C.LinearDesc()
    label = C.PROB if target.is_floating_point() else (C.I64 if target.dtype == torch.int64 else C.I32)
    C.lib.xent_linear_ce_desc_init(ctypes.byref(d), n, h, weight.shape[0], R.xent_dtype(hidden, "hidden"), label,
                                   R.reduction_code(o.reduction))
    ce = A._desc(torch.empty(n, weight.shape[0], dtype=hidden.dtype, device="meta"), target.is_floating_point(),
                 target.dtype, o)
    ce.rows = n
    d.ce = ce
    d.chunk_rows = chunk_rows
    return d


def _call(hidden, weight, bias, target, ce_weight, o, chunk_rows, dloss, want):
    """One xent_linear_ce_run: (loss, grad_hidden, grad_weight, grad_bias),
    the gradients None unless in `want`."""
    d = _desc(hidden, weight, target, o, chunk_rows)
    n, dev = hidden.shape[0], hidden.device
    loss = torch.empty((n,) if o.reduction == "none" else (), dtype=o.loss_dtype, device=dev)
    gh = torch.empty_like(hidden) if "hidden" in want else None
    gw = torch.empty_like(weight) if "weight" in want else None
    gb = torch.empty_like(bias) if bias is not None and "bias" in want else None
    t = C.LinearTensors(hidden=hidden.data_ptr(), weight=weight.data_ptr(), bias=R.ptr(bias), labels=target.data_ptr(),
                        weights=R.ptr(ce_weight), dloss=R.ptr(dloss), loss=loss.data_ptr(), grad_hidden=R.ptr(gh),
                        grad_weight=R.ptr(gw), grad_bias=R.ptr(gb))
    h = R.handle(dev)
    size = ctypes.c_size_t()
    C.check(C.lib.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(size)))
    ws = torch.empty(size.value + 64, dtype=torch.uint8, device=dev)
    base = (ws.data_ptr() + 63) // 64 * 64
    C.check(C.lib.xent_linear_ce_run(h, ctypes.byref(d), ctypes.byref(t), base, size.value, R.stream(dev)))
    if dev.type == "cpu" and d.ce.invalid_labels == C.INVALID_LABELS_REPORT and d.ce.label_type != C.PROB:
        C.check(C.lib.xent_check(h))
    return loss, gh, gw, gb


class LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, ce_weight, o, chunk_rows):
        want = {name for name, i in (("hidden", 0), ("weight", 1), ("bias", 2)) if ctx.needs_input_grad[i]}
        if o.reduction == "none":
            loss, _, _, _ = _call(hidden, weight, bias, target, ce_weight, o, chunk_rows, None, set())
            ctx.save_for_backward(hidden, weight, bias, target, ce_weight)
        else:
            loss, gh, gw, gb = _call(hidden, weight, bias, target, ce_weight, o, chunk_rows, None, want)
            ctx.save_for_backward(gh, gw, gb)
        ctx.options, ctx.chunk_rows, ctx.want = o, chunk_rows, want
        return loss

    @staticmethod
    @A.once_differentiable("xent.linear_cross_entropy")
    def backward(ctx, dloss):
        o = ctx.options
        if o.reduction == "none":
            hidden, weight, bias, target, ce_weight = ctx.saved_tensors
            dl = dloss.to(o.loss_dtype).contiguous()
            _, gh, gw, gb = _call(hidden, weight, bias, target, ce_weight, o, ctx.chunk_rows, dl, ctx.want)
        else:
            gh, gw, gb = ctx.saved_tensors
            s = dloss.to(torch.float64).item() if dloss.device.type == "cpu" else dloss
            gh, gw, gb = [g * s if g is not None else None for g in (gh, gw, gb)]
        return gh, gw, gb, None, None, None, None
