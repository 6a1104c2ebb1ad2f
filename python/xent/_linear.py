"""xent.linear_cross_entropy: the fused linear cross entropy
(xent_linear_ce_run) as an autograd function. For a 'sum' or 'mean' the
forward computes the loss and every gradient in one call (Liger-Kernel's
way: the gradients of a loss of 1), and the backward scales them by the
incoming gradient, a scalar. For 'none' the incoming gradient weighs each row
differently inside grad_weight, so the backward makes the call again with it
(the logits' GEMM runs twice); so it does when the entropy or the label's
log-prob is asked for, whose gradients are known only then (dentropy goes
to the call; the log-prob's as in _autograd.ce_backward)."""

import ctypes
import warnings

import torch

from . import _autograd as A
from . import _capi as C
from . import _run as R


def _desc(hidden, weight, target, o, plan):
    n, h = hidden.shape
    d = C.LinearDesc()
    label = C.PROB if target.is_floating_point() else (C.I64 if target.dtype == torch.int64 else C.I32)
    C.lib.xent_linear_ce_desc_init(ctypes.byref(d), n, h, weight.shape[0], R.xent_dtype(hidden, "hidden"), label,
                                   R.reduction_code(o.reduction))
    ce = A._desc(torch.empty(n, weight.shape[0], dtype=hidden.dtype, device="meta"), target.is_floating_point(),
                 target.dtype, o)
    ce.rows = n
    d.ce = ce
    d.chunk_rows, d.memory_mib, d.plan = plan
    return d


def _alert_not_deterministic():
    """PyTorch's rule for an op whose sums depend on the order the hardware
    serves its atomics: under torch.use_deterministic_algorithms(True) an
    error, or a warning where warn_only."""
    if not torch.are_deterministic_algorithms_enabled():
        return
    msg = ("xent.linear_cross_entropy's gradients with plan='on_chip' do not have a deterministic implementation "
           "(atomics sum them in no fixed order), but you set 'torch.use_deterministic_algorithms(True)'. Take "
           "another plan ('auto' or a named one: each sums in a fixed order), or turn determinism off.")
    if torch.is_deterministic_algorithms_warn_only_enabled():
        warnings.warn(msg)
    else:
        raise RuntimeError(msg)


def _call(hidden, weight, bias, target, ce_weight, o, plan, dloss, want, stats=A.NO_STATS, dentropy=None,
          main_grad=None, grad_f32=False):
    """One xent_linear_ce_run: (loss, grad_hidden, grad_weight, grad_bias,
    entropy, logprob, argmax), the gradients None unless in `want`, the
    per-token outputs empty unless in stats. plan: (chunk_rows, memory_mib,
    plan kind).
    With main_grad (f32, weight's shape) the weight's gradient is added to it
    instead. grad_f32: the gradients in float32 (each its own f32 sum)."""
    if plan[2] == C.PLAN_ON_CHIP and want:
        _alert_not_deterministic()
    d = _desc(hidden, weight, target, o, plan)
    n, dev = hidden.shape[0], hidden.device
    acc = R.accumulation_dtype(hidden.dtype)
    loss = torch.empty((n,) if o.reduction == "none" else (), dtype=o.loss_dtype, device=dev)
    gd = torch.float32 if grad_f32 else hidden.dtype
    if grad_f32:
        d.ce.grad_dtype = C.F32
    gh = torch.empty(hidden.shape, dtype=gd, device=dev) if "hidden" in want else None
    gw = torch.empty(weight.shape, dtype=gd, device=dev) if "weight" in want and main_grad is None else None
    gb = None
    if bias is not None and "bias" in want:
        # The call adds to main_grad (accumulate), and so to grad_bias.
        gb = (torch.zeros if main_grad is not None else torch.empty)(bias.shape, dtype=gd, device=dev)
    if main_grad is not None:
        d.main_grad, d.accumulate = 1, 1
    entropy, logprob, argmax = [torch.empty((n,) if wanted else (0,), dtype=dt, device=dev)
                                for wanted, dt in zip(stats, (acc, acc, torch.int64))]
    t = C.LinearTensors(hidden=hidden.data_ptr(), weight=weight.data_ptr(), bias=R.ptr(bias), labels=target.data_ptr(),
                        weights=R.ptr(ce_weight), dloss=R.ptr(dloss), loss=loss.data_ptr(), grad_hidden=R.ptr(gh),
                        grad_weight=R.ptr(gw), grad_bias=R.ptr(gb), entropy=R.ptr_if(entropy, stats.entropy),
                        label_logprob=R.ptr_if(logprob, stats.logprob), argmax=R.ptr_if(argmax, stats.argmax),
                        dentropy=R.ptr(dentropy), main_grad=R.ptr(main_grad))
    A.set_rows(t, o)
    h = R.handle(dev)
    size = ctypes.c_size_t()
    C.check(C.lib.xent_linear_ce_workspace_size(h, ctypes.byref(d), ctypes.byref(size)))
    ws = torch.empty(size.value + 64, dtype=torch.uint8, device=dev)
    base = (ws.data_ptr() + 63) // 64 * 64
    C.check(C.lib.xent_linear_ce_run(h, ctypes.byref(d), ctypes.byref(t), base, size.value, R.stream(dev)))
    if dev.type == "cpu" and ((d.ce.invalid_labels == C.INVALID_LABELS_REPORT and d.ce.label_type != C.PROB)
                              or t.temperature):
        C.check(C.lib.xent_check(h))
    return loss, gh, gw, gb, entropy, logprob, argmax


def _add(a, b):
    return a + b if a is not None else None


NAMES = ("hidden", "weight", "bias")


def operands(hidden, weight, bias, autocast):
    """The call's operands: under torch.autocast (its dtype, or None) cast
    to it, as F.linear's (float64 ones aside)."""
    if autocast is None:
        return hidden, weight, bias
    return tuple(R.autocast_operand(t, autocast) for t in (hidden, weight, bias))


def operand_dtype(dtype, autocast):
    """The dtype operands() gives an input of this dtype."""
    return dtype if autocast is None or dtype == torch.float64 else autocast


def grads_f32(dtypes, operand, want):
    """Whether the call makes its gradients in float32: f16/bf16 operands
    cast from a float32 input whose gradient is wanted (each its own f32
    sum, never rounded to the operands' dtype)."""
    return operand in (torch.float16, torch.bfloat16) and any(
        dt == torch.float32 for dt, name in zip(dtypes, NAMES) if name in want)


def again(o, stats, main_grad):
    """Whether the forward makes no gradient and the backward makes the call
    again: 'none' (each row's upstream gradient weighs grad_weight
    differently), the entropy or the label's log-prob (their gradients
    known only then), or a main_grad."""
    return o.reduction == "none" or stats.entropy or stats.logprob or main_grad is not None


def grads_again(o, saved, dloss, dentropy, dlogprob, call):
    """(grad_hidden, grad_weight, grad_bias) where the forward made none:
    saved is (hidden, weight, bias, target, ce_weight) as the call took
    them, call(opts, dloss, ce_weight, dentropy) the call's gradients."""
    hidden, weight, _, target, ce_weight = saved
    n, acc = hidden.shape[0], R.accumulation_dtype(hidden.dtype)
    if dloss is None:
        dloss = torch.zeros((n,) if o.reduction == "none" else (), dtype=o.loss_dtype, device=hidden.device)
    if dentropy is not None:
        dentropy = dentropy.to(acc).contiguous()

    def one(opts, dl, ce_w, dent):
        return call(opts, dl.to(opts.loss_dtype).reshape((n,) if opts.reduction == "none" else (1,)).contiguous(),
                    ce_w, dent)

    if dlogprob is None:
        return one(o, dloss, ce_weight, dentropy)
    if A.folds_logprob(ce_weight, o):
        per_row = A.per_row_dloss(dloss, dlogprob, (n,), weight.shape[0], target, o)
        return one(o._replace(reduction="none", loss_dtype=acc), per_row, ce_weight, dentropy)
    grads = one(o, dloss, ce_weight, dentropy)
    plain = o._replace(reduction="none", label_smoothing=0.0, z_loss=0.0, loss_dtype=acc, token_weight=None)
    extra = one(plain, -dlogprob.to(torch.float64), None, None)
    return tuple(_add(a, b) for a, b in zip(grads, extra))


class LinearCrossEntropy(torch.autograd.Function):
    """(hidden, weight, bias, target, ce_weight, options, plan, stats,
    main_grad, autocast) -> (loss, entropy, logprob, argmax), the last three
    empty unless asked; loss, entropy and logprob differentiable. With
    main_grad the weight's gradient is added to it in the backward, which
    makes the call again (the scale of the incoming gradient is known only
    then), and weight gets none. autocast: torch.autocast's dtype, to which
    the operands are cast (not float64 ones); each gradient is then in its
    input's dtype, a float32 input's made as a float32 sum, never rounded
    to the operands' dtype."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, target, ce_weight, o, plan, stats, main_grad=None, autocast=None):
        want = {name for i, name in enumerate(NAMES) if ctx.needs_input_grad[i]}
        ctx.dtypes = [t.dtype if t is not None else None for t in (hidden, weight, bias)]
        hidden, weight, bias = operands(hidden, weight, bias, autocast)
        ctx.grad_f32 = grads_f32(ctx.dtypes, hidden.dtype, want)
        ctx.main_grad = main_grad if "weight" in want else None
        ctx.again = again(o, stats, ctx.main_grad)
        if ctx.again:
            outs = _call(hidden, weight, bias, target, ce_weight, o, plan, None, set(), stats)
            ctx.save_for_backward(hidden, weight, bias, target, ce_weight)
        else:
            outs = _call(hidden, weight, bias, target, ce_weight, o, plan, None, want, stats, grad_f32=ctx.grad_f32)
            ctx.save_for_backward(*outs[1:4])
        ctx.options, ctx.plan, ctx.want = o, plan, want
        loss, entropy, logprob, argmax = outs[0], *outs[4:]
        ctx.mark_non_differentiable(argmax)
        ctx.set_materialize_grads(False)
        return loss, entropy, logprob, argmax

    @staticmethod
    @A.once_differentiable("xent.linear_cross_entropy")
    def backward(ctx, dloss, dentropy, dlogprob, _dargmax):
        o = ctx.options
        rest = (None,) * 7  # target, ce_weight, o, plan, stats, main_grad, autocast

        def typed(grads):  # each in its input's dtype
            return tuple(g.to(dt) if g is not None else None for g, dt in zip(grads, ctx.dtypes)) + rest

        if not ctx.again:  # (no main_grad: it makes the call again)
            gh, gw, gb = ctx.saved_tensors
            if dloss is None:
                return typed(torch.zeros_like(g) if g is not None else None for g in (gh, gw, gb))
            s = dloss.to(torch.float64).item() if dloss.device.type == "cpu" else dloss
            return typed(g * s if g is not None else None for g in (gh, gw, gb))
        saved = ctx.saved_tensors

        def call(opts, dl, ce_w, dent):
            return _call(*saved[:4], ce_w, opts, ctx.plan, dl, ctx.want, A.NO_STATS, dent, ctx.main_grad,
                         ctx.grad_f32)[1:4]

        grads = grads_again(o, saved, dloss, dentropy, dlogprob, call)
        return typed(grads)
