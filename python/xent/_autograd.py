"""The autograd functions: cross entropy (the forward saves the per-row lse,
or with inplace_backward computes the gradient in the forward, Liger-style)
and softmax / log_softmax (the forward saves its output). Their backward
passes call xent's; they are not differentiable twice. The calls
themselves (ce_forward, ce_backward, softmax_forward, softmax_backward) are
plain functions, which the custom ops of _ops.py call too."""

import ctypes
from collections import namedtuple

import functools

import torch

from . import _capi as C
from . import _run as R

def once_differentiable(what):
    """A backward that xent computes once: its result has no derivative.
    When the caller asks for one (create_graph=True), the gradients come
    back with a node that raises a clear error if differentiated again
    (torch's once_differentiable does so only when the incoming gradients
    require grad)."""

    def wrap(backward):
        @functools.wraps(backward)
        def wrapper(ctx, *grads):
            with torch.no_grad():
                out = backward(ctx, *grads)
            if not torch.is_grad_enabled():
                return out
            tensors = [t for t in out if t is not None]
            if not tensors:
                return out
            err = torch._C._functions.DelayedError(
                f"xent: {what} is differentiable once: its gradient has no gradient (double backward)".encode(),
                len(tensors))

            def alias(t):
                t = t.detach()
                t.requires_grad = True
                return t

            marked = err(*[alias(t) for t in tensors])
            marked = iter(marked if isinstance(marked, tuple) else (marked,))
            return tuple(next(marked) if t is not None else None for t in out)

        return wrapper

    return wrap


# The options of a cross-entropy call, as the C descriptor takes them.
# shard: None, or this rank's slice of the vocabulary (xent.distributed).
Options = namedtuple("Options", "ignore_index reduction label_smoothing z_loss softcap all_ignored_zero "
                                "invalid_labels loss_dtype inplace_backward shard")


def _desc(x, target_is_prob, target_dtype, o):
    """The descriptor for logits x ([N, C, d1..dk], class axis 1, contiguous)."""
    d = C.Desc()
    shape = C.shape_array(list(x.shape))
    label = C.PROB if target_is_prob else (C.I64 if target_dtype == torch.int64 else C.I32)
    C.check(C.lib.xent_ce_desc_init_nd(ctypes.byref(d), x.dim(), shape, 1, R.xent_dtype(x, "input"), label,
                                       R.reduction_code(o.reduction)))
    d.loss_dtype = R.xent_dtype(torch.empty(0, dtype=o.loss_dtype), "loss_dtype")
    d.ignore_index = o.ignore_index
    d.label_smoothing = o.label_smoothing
    d.z_loss = o.z_loss
    d.softcap = o.softcap
    d.all_ignored_zero = int(o.all_ignored_zero)
    d.invalid_labels = C.INVALID_LABELS_IGNORE if o.invalid_labels == "ignore" else C.INVALID_LABELS_REPORT
    return d


def row_shape(x):
    """The shape of per-row values (loss with 'none', lse): x without dim 1."""
    return x.shape[:1] + x.shape[2:]


def ce_forward(x, target, weight, o, grad=None):
    """xent's forward on logits x ([N, C, d1..dk], contiguous): new (loss,
    lse) tensors. With grad (a tensor shaped like x, x itself for the
    in-place backward) the fused call also writes there the gradient of a
    loss of 1."""
    d = _desc(x, target.is_floating_point(), target.dtype, o)
    loss = torch.empty(row_shape(x) if o.reduction == "none" else (), dtype=o.loss_dtype, device=x.device)
    lse = torch.empty(row_shape(x), dtype=R.accumulation_dtype(x.dtype), device=x.device)
    t = C.Tensors(logits=x.data_ptr(), labels=target.data_ptr(),
                  weights=weight.data_ptr() if weight is not None else None, loss=loss.data_ptr(),
                  lse=lse.data_ptr())
    if grad is not None:
        t.grad = grad.data_ptr()
    R.run(d, C.FORWARD_BACKWARD if grad is not None else C.FORWARD, t, x.device, o.shard)
    return loss, lse


def ce_backward(x, target, weight, lse, dloss, o, want_target):
    """xent's backward from the saved lse: new (grad, grad_target) tensors,
    grad_target None unless want_target (soft labels only)."""
    d = _desc(x, target.is_floating_point(), target.dtype, o)
    grad = torch.empty_like(x)
    grad_target = torch.empty_like(target) if want_target else None
    dloss = dloss.to(o.loss_dtype).contiguous()
    t = C.Tensors(logits=x.data_ptr(), labels=target.data_ptr(),
                  weights=weight.data_ptr() if weight is not None else None, lse_in=lse.data_ptr(),
                  dloss=dloss.data_ptr(), grad=grad.data_ptr(),
                  grad_labels=grad_target.data_ptr() if grad_target is not None else None)
    R.run(d, C.BACKWARD, t, x.device, o.shard)
    return grad, grad_target


def _softmax_desc(x, dim, kind):
    d = C.SoftmaxDesc()
    C.check(C.lib.xent_softmax_desc_init_nd(ctypes.byref(d), x.dim(), C.shape_array(list(x.shape)), dim,
                                            R.xent_dtype(x, "input"), kind))
    return d


def softmax_forward(x, dim, kind):
    """softmax or log_softmax (kind) of contiguous x along dim: a new tensor."""
    y = torch.empty_like(x)
    C.check(C.lib.xent_softmax_forward(R.handle(x.device), ctypes.byref(_softmax_desc(x, dim, kind)), R.ptr(x),
                                       R.ptr(y), R.stream(x.device)))
    return y


def softmax_backward(y, dy, dim, kind):
    """The input's gradient from the output y and its gradient dy."""
    dy = dy.to(y.dtype).contiguous()
    dx = torch.empty_like(y)
    C.check(C.lib.xent_softmax_backward(R.handle(y.device), ctypes.byref(_softmax_desc(y, dim, kind)), R.ptr(y),
                                        R.ptr(dy), R.ptr(dx), R.stream(y.device)))
    return dx


class CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, target, weight, o):
        in_place = o.inplace_backward and ctx.needs_input_grad[0]
        if in_place:
            # The gradient of a loss of 1 replaces the logits now; backward
            # only scales it by the incoming gradient.
            loss, lse = ce_forward(x, target, weight, o, grad=x)
            ctx.save_for_backward(x)
        else:
            loss, lse = ce_forward(x, target, weight, o)
            ctx.save_for_backward(x, target, weight, lse)
        ctx.options, ctx.in_place = o, in_place
        ctx.mark_non_differentiable(lse)
        return loss, lse

    @staticmethod
    @once_differentiable("xent.cross_entropy")
    def backward(ctx, dloss, _dlse):
        o = ctx.options
        if ctx.in_place:
            (g,) = ctx.saved_tensors
            if o.reduction == "none":
                scale = dloss.to(g.dtype).unsqueeze(1)
            else:
                scale = dloss.to(g.dtype)
            return g * scale, None, None, None
        x, target, weight, lse = ctx.saved_tensors
        want_x, want_target = ctx.needs_input_grad[0], ctx.needs_input_grad[1] and target.is_floating_point()
        if not want_x and not want_target:
            return None, None, None, None
        # The C call always writes the logits' gradient (a scratch one if
        # only the soft labels' is wanted).
        grad, grad_target = ce_backward(x, target, weight, lse, dloss, o, want_target)
        return grad if want_x else None, grad_target, None, None


class Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, kind):
        y = softmax_forward(x, dim, kind)
        ctx.save_for_backward(y)
        ctx.dim, ctx.kind = dim, kind
        return y

    @staticmethod
    @once_differentiable("xent.softmax / xent.log_softmax")
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return softmax_backward(y, dy, ctx.dim, ctx.kind), None, None
