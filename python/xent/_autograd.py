"""The autograd functions: cross entropy (the forward saves the per-row lse,
or with inplace_backward computes the gradient in the forward, Liger-style)
and softmax / log_softmax (the forward saves its output). Their backward
passes call xent's; they are not differentiable twice. The calls
themselves (ce_forward, ce_backward, softmax_forward, softmax_backward) are
plain functions, which the custom ops of _ops.py call too.

Cross entropy's per-token outputs (Stats: entropy, the label's log-prob,
argmax) come from the forward's pass. Their gradients reach the logits in
the backward's: the entropy's through xent's dentropy input; the label's
log-prob's, d logp_n / dz = onehot(y_n) - p, folded into the loss's where
that is -dloss_n / dz (no class weights, smoothing or z-loss: one call over
the rows with reduction 'none' and dloss_n - dlogp_n), else a second call
of the plain loss with dloss = -dlogp, added."""

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
# temperature: tau, the logits (after the soft cap) divided by it.
# row_temperature, token_weight: None, or each row's tau and loss weight
# (rows-shaped tensors of the accumulation type, contiguous; constants to
# autograd); token_weight_count: the mean's divisor leaves the weights out.
Options = namedtuple("Options", "ignore_index reduction label_smoothing z_loss softcap all_ignored_zero "
                                "invalid_labels loss_dtype inplace_backward shard temperature row_temperature "
                                "token_weight token_weight_count", defaults=(None, None, False))

# The per-token outputs a forward is asked for.
Stats = namedtuple("Stats", "entropy logprob argmax")
NO_STATS = Stats(False, False, False)


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
    d.temperature = o.temperature
    d.token_weight_mean = C.TOKEN_WEIGHT_MEAN_COUNT if o.token_weight_count else C.TOKEN_WEIGHT_MEAN_WEIGHTS
    return d


def set_rows(t, o):
    """The call's per-row inputs (o.row_temperature, o.token_weight) into
    its C tensors."""
    t.temperature = R.ptr(o.row_temperature)
    t.token_weight = R.ptr(o.token_weight)
    return t


def row_shape(x):
    """The shape of per-row values (loss with 'none', lse): x without dim 1."""
    return x.shape[:1] + x.shape[2:]


def ce_forward(x, target, weight, o, grad=None, stats=NO_STATS):
    """xent's forward on logits x ([N, C, d1..dk], contiguous): new (loss,
    lse, entropy, logprob, argmax) tensors, the last three empty unless
    asked for in stats (rows-shaped: the accumulation type, int64 for
    argmax). With grad (a tensor shaped like x, x itself for the in-place
    backward) the fused call also writes there the gradient of a loss of
    1."""
    d = _desc(x, target.is_floating_point(), target.dtype, o)
    rows, acc = row_shape(x), R.accumulation_dtype(x.dtype)
    loss = torch.empty(rows if o.reduction == "none" else (), dtype=o.loss_dtype, device=x.device)
    lse = torch.empty(rows, dtype=acc, device=x.device)
    entropy, logprob, argmax = [torch.empty(rows if want else (0,), dtype=dt, device=x.device)
                                for want, dt in zip(stats, (acc, acc, torch.int64))]
    t = C.Tensors(logits=x.data_ptr(), labels=target.data_ptr(),
                  weights=weight.data_ptr() if weight is not None else None, loss=loss.data_ptr(),
                  lse=lse.data_ptr(), entropy=R.ptr_if(entropy, stats.entropy),
                  label_logprob=R.ptr_if(logprob, stats.logprob), argmax=R.ptr_if(argmax, stats.argmax))
    set_rows(t, o)
    if grad is not None:
        t.grad = grad.data_ptr()
    R.run(d, C.FORWARD_BACKWARD if grad is not None else C.FORWARD, t, x.device, o.shard)
    return loss, lse, entropy, logprob, argmax


def _backward_call(x, target, weight, lse, dloss, o, want_target, dentropy):
    d = _desc(x, target.is_floating_point(), target.dtype, o)
    grad = torch.empty_like(x)
    grad_target = torch.empty_like(target) if want_target else None
    dloss = dloss.to(o.loss_dtype).contiguous()
    t = C.Tensors(logits=x.data_ptr(), labels=target.data_ptr(),
                  weights=weight.data_ptr() if weight is not None else None, lse_in=lse.data_ptr(),
                  dloss=dloss.data_ptr(), grad=grad.data_ptr(),
                  grad_labels=grad_target.data_ptr() if grad_target is not None else None,
                  dentropy=R.ptr(dentropy))
    set_rows(t, o)
    R.run(d, C.BACKWARD, t, x.device, o.shard)
    return grad, grad_target


def folds_logprob(weight, o):
    """Whether each row's loss is -logp (0 where ignored), so that the
    label's log-prob's gradient folds into the loss's, row by row."""
    return weight is None and o.label_smoothing == 0 and o.z_loss == 0 and o.token_weight is None


def per_row_dloss(dloss, dlogprob, rows, classes, target, o):
    """The rows' dloss of a 'none' call whose gradient is that of the loss
    (reduction o.reduction, its gradient dloss) and of the label's log-prob
    (dlogprob) together, where folds_logprob: float64, rows-shaped."""
    per_row = dloss.to(torch.float64)
    if o.reduction == "mean":
        # What the mean divides by: the rows that count (xent's and
        # PyTorch's count; no weights here); all of them for soft labels.
        if target.is_floating_point():
            divisor = per_row.new_tensor(float(rows.numel()))
        else:
            t = target.to(torch.int64)
            divisor = ((t != o.ignore_index) & (t >= 0) & (t < classes)).sum().to(torch.float64)
        # (No row counts: every row's gradient is 0 whatever it is scaled by.)
        per_row = per_row / torch.where(divisor == 0, torch.ones_like(divisor), divisor)
    return per_row.expand(rows) - dlogprob.to(torch.float64)


def ce_backward(x, target, weight, lse, dloss, o, want_target, dentropy=None, dlogprob=None):
    """xent's backward from the saved lse: new (grad, grad_target) tensors,
    grad_target None unless want_target (soft labels only). dloss: the
    loss's gradient (a zero one where None); dentropy, dlogprob: the
    per-token outputs' gradients, rows-shaped, or None."""
    rows, acc = row_shape(x), R.accumulation_dtype(x.dtype)
    if dloss is None:
        dloss = torch.zeros(rows if o.reduction == "none" else (), dtype=o.loss_dtype, device=x.device)
    if dentropy is not None:
        dentropy = dentropy.to(acc).contiguous()
    if dlogprob is None:
        return _backward_call(x, target, weight, lse, dloss, o, want_target, dentropy)
    if folds_logprob(weight, o):
        per_row = per_row_dloss(dloss, dlogprob, rows, x.shape[1], target, o).to(acc).contiguous()
        return _backward_call(x, target, weight, lse, per_row, o._replace(reduction="none", loss_dtype=acc),
                              want_target, dentropy)
    grad, grad_target = _backward_call(x, target, weight, lse, dloss, o, want_target, dentropy)
    plain = o._replace(reduction="none", label_smoothing=0.0, z_loss=0.0, loss_dtype=acc, token_weight=None)
    extra, _ = _backward_call(x, target, None, lse, (-dlogprob).to(acc).contiguous(), plain, False, None)
    return grad + extra, grad_target


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
    """(x, target, weight, options, stats) -> (loss, lse, entropy, logprob,
    argmax): the last three empty unless stats asks; loss, entropy and
    logprob differentiable."""

    @staticmethod
    def forward(ctx, x, target, weight, o, stats):
        in_place = o.inplace_backward and ctx.needs_input_grad[0]
        if in_place:
            # The gradient of a loss of 1 replaces the logits now; backward
            # only scales it by the incoming gradient.
            outs = ce_forward(x, target, weight, o, grad=x, stats=stats)
            ctx.save_for_backward(x)
            ctx.scale_desc = _desc(x, target.is_floating_point(), target.dtype, o)
        else:
            outs = ce_forward(x, target, weight, o, stats=stats)
            ctx.save_for_backward(x, target, weight, outs[1])
        ctx.options, ctx.in_place = o, in_place
        ctx.mark_non_differentiable(outs[1], outs[4])
        ctx.set_materialize_grads(False)
        return outs

    @staticmethod
    @once_differentiable("xent.cross_entropy")
    def backward(ctx, dloss, _dlse, dentropy, dlogprob, _dargmax):
        o = ctx.options
        none = (None,) * 4
        if ctx.in_place:
            # Scaled where it lies: a copy would take the logits' memory
            # again, which inplace_backward exists to save.
            # A dloss of 1 (the usual loss.backward()) leaves it unread, as
            # the device decides (xent_ce_scale_grad).
            (g,) = ctx.saved_tensors
            if dloss is None:
                return (g.zero_(),) + none
            d = dloss.to(o.loss_dtype).contiguous()
            C.check(C.lib.xent_ce_scale_grad(R.handle(g.device), ctypes.byref(ctx.scale_desc), R.ptr(d), R.ptr(g),
                                             R.stream(g.device)))
            return (g,) + none
        x, target, weight, lse = ctx.saved_tensors
        want_x, want_target = ctx.needs_input_grad[0], ctx.needs_input_grad[1] and target.is_floating_point()
        if not want_x and not want_target:
            return (None,) + none
        # The C call always writes the logits' gradient (a scratch one if
        # only the soft labels' is wanted).
        grad, grad_target = ce_backward(x, target, weight, lse, dloss, o, want_target, dentropy, dlogprob)
        return grad if want_x else None, grad_target, None, None, None


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
