"""xent's calls as PyTorch custom ops (torch.library.custom_op, PyTorch 2.4
and later), so that torch.compile traces a function calling
xent.cross_entropy or xent.softmax without a graph break: the ops are
opaque to the compiler, which learns their output shapes from the fake
implementations below and their gradients from register_autograd.

    xent::cross_entropy(x, target, weight?, options..., temperature, row_temperature?, token_weight?,
        token_weight_count, want_entropy, want_logprob, want_argmax)
        -> (loss, lse, entropy, logprob, argmax)     (empty where not wanted)
    xent::cross_entropy_backward(x, target, weight?, lse, dloss?, dentropy?, dlogprob?, options..., temperature,
        row_temperature?, token_weight?, token_weight_count, want_target) -> (grad, grad_target)
    xent::linear_cross_entropy(hidden, weight, bias?, target, ce_weight?, dloss?, dentropy?, options...,
        temperature, row_temperature?, token_weight?, token_weight_count, chunk_rows, memory_mib, plan,
        autocast?, want_hidden, want_weight, want_bias, grad_f32, want_entropy, want_logprob, want_argmax)
        -> (loss, grad_hidden, grad_weight, grad_bias, entropy, logprob, argmax)    (empty where not wanted)
    xent::softmax(x, dim, kind) -> y
    xent::softmax_backward(y, dy, dim, kind) -> dx

The inputs are what xent.cross_entropy / xent.softmax have already checked
and made contiguous. The package calls these ops while torch.compile traces
it (compiling()) and its autograd.Functions otherwise, which cost less per
call in eager mode; both run the same code (_autograd.ce_forward, ...). The
in-place backward (it writes over its input), the vocabulary-parallel
loss (a Python all-gather inside the call) and the linear cross entropy
with weight_main_grad (added to in place) stay eager. On older PyTorch
AVAILABLE is False and nothing is registered."""

from typing import Optional, Tuple

import torch

from . import _autograd as A
from . import _linear as L

AVAILABLE = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and hasattr(
    torch.library, "register_autograd")


def compiling():
    """Whether torch.compile (Dynamo) is tracing the caller."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling()) if is_compiling is not None else False


def _options(ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels, loss_dtype,
             temperature, row_temperature, token_weight, token_weight_count):
    return A.Options(ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels,
                     loss_dtype, False, None, temperature, row_temperature, token_weight, token_weight_count)


if AVAILABLE:
    Tensor = torch.Tensor

    @torch.library.custom_op("xent::cross_entropy", mutates_args=())
    def cross_entropy(x: Tensor, target: Tensor, weight: Optional[Tensor], ignore_index: int, reduction: str,
                      label_smoothing: float, z_loss: float, softcap: float, all_ignored_zero: bool,
                      invalid_labels: str, loss_dtype: torch.dtype, temperature: float,
                      row_temperature: Optional[Tensor], token_weight: Optional[Tensor], token_weight_count: bool,
                      want_entropy: bool, want_logprob: bool,
                      want_argmax: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        o = _options(ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels,
                     loss_dtype, temperature, row_temperature, token_weight, token_weight_count)
        return A.ce_forward(x, target, weight, o, stats=A.Stats(want_entropy, want_logprob, want_argmax))

    @cross_entropy.register_fake
    def _(x, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero,
          invalid_labels, loss_dtype, temperature, row_temperature, token_weight, token_weight_count, want_entropy,
          want_logprob, want_argmax):
        rows = A.row_shape(x)
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        loss = x.new_empty(rows if reduction == "none" else (), dtype=loss_dtype)
        entropy, logprob, argmax = [x.new_empty(rows if want else (0,), dtype=dt)
                                    for want, dt in ((want_entropy, acc), (want_logprob, acc),
                                                     (want_argmax, torch.int64))]
        return loss, x.new_empty(rows, dtype=acc), entropy, logprob, argmax

    @torch.library.custom_op("xent::cross_entropy_backward", mutates_args=())
    def cross_entropy_backward(x: Tensor, target: Tensor, weight: Optional[Tensor], lse: Tensor,
                               dloss: Optional[Tensor], dentropy: Optional[Tensor], dlogprob: Optional[Tensor],
                               ignore_index: int, reduction: str, label_smoothing: float, z_loss: float,
                               softcap: float, all_ignored_zero: bool, invalid_labels: str, loss_dtype: torch.dtype,
                               temperature: float, row_temperature: Optional[Tensor], token_weight: Optional[Tensor],
                               token_weight_count: bool, want_target: bool) -> Tuple[Tensor, Tensor]:
        o = _options(ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels,
                     loss_dtype, temperature, row_temperature, token_weight, token_weight_count)
        grad, grad_target = A.ce_backward(x, target, weight, lse, dloss, o, want_target, dentropy, dlogprob)
        # An op returns tensors only: an empty one stands for no gradient.
        return grad, grad_target if grad_target is not None else target.new_empty(0)

    @cross_entropy_backward.register_fake
    def _(x, target, weight, lse, dloss, dentropy, dlogprob, ignore_index, reduction, label_smoothing, z_loss,
          softcap, all_ignored_zero, invalid_labels, loss_dtype, temperature, row_temperature, token_weight,
          token_weight_count, want_target):
        return torch.empty_like(x), torch.empty_like(target) if want_target else target.new_empty(0)

    def _ce_setup(ctx, inputs, output):
        x, target, weight = inputs[:3]
        # The per-row tensors (inputs 12, 13) are saved; the other options
        # and the temperature kept as they are; not which outputs were asked for.
        ctx.save_for_backward(x, target, weight, output[1], inputs[12], inputs[13])
        ctx.options = inputs[3:12]
        ctx.token_weight_count = inputs[14]
        ctx.n_inputs = len(inputs)
        ctx.mark_non_differentiable(output[1], output[4])
        ctx.set_materialize_grads(False)

    def _ce_backward(ctx, dloss, _dlse, dentropy, dlogprob, _dargmax):
        x, target, weight, lse, row_temperature, token_weight = ctx.saved_tensors
        want_x = ctx.needs_input_grad[0]
        want_target = bool(ctx.needs_input_grad[1]) and target.is_floating_point()
        none = (None,) * (ctx.n_inputs - 2)
        if not want_x and not want_target:
            return (None, None) + none
        grad, grad_target = torch.ops.xent.cross_entropy_backward(x, target, weight, lse, dloss, dentropy, dlogprob,
                                                                 *ctx.options, row_temperature, token_weight,
                                                                 ctx.token_weight_count, want_target)
        return (grad if want_x else None, grad_target if want_target else None) + none

    torch.library.register_autograd("xent::cross_entropy", _ce_backward, setup_context=_ce_setup)

    @torch.library.custom_op("xent::softmax", mutates_args=())
    def softmax(x: Tensor, dim: int, kind: int) -> Tensor:
        return A.softmax_forward(x, dim, kind)

    @softmax.register_fake
    def _(x, dim, kind):
        return torch.empty_like(x)

    @torch.library.custom_op("xent::softmax_backward", mutates_args=())
    def softmax_backward(y: Tensor, dy: Tensor, dim: int, kind: int) -> Tensor:
        return A.softmax_backward(y, dy, dim, kind)

    @softmax_backward.register_fake
    def _(y, dy, dim, kind):
        return torch.empty_like(y)

    def _softmax_setup(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.dim, ctx.kind = inputs[1], inputs[2]

    def _softmax_grad(ctx, dy):
        (y,) = ctx.saved_tensors
        return torch.ops.xent.softmax_backward(y, dy, ctx.dim, ctx.kind), None, None

    torch.library.register_autograd("xent::softmax", _softmax_grad, setup_context=_softmax_setup)

    @torch.library.custom_op("xent::linear_cross_entropy", mutates_args=())
    def linear_cross_entropy(hidden: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor,
                             ce_weight: Optional[Tensor], dloss: Optional[Tensor], dentropy: Optional[Tensor],
                             ignore_index: int, reduction: str, label_smoothing: float, z_loss: float,
                             softcap: float, all_ignored_zero: bool, invalid_labels: str, loss_dtype: torch.dtype,
                             temperature: float, row_temperature: Optional[Tensor], token_weight: Optional[Tensor],
                             token_weight_count: bool, chunk_rows: int, memory_mib: int, plan: int,
                             autocast: Optional[torch.dtype], want_hidden: bool, want_weight: bool, want_bias: bool,
                             grad_f32: bool, want_entropy: bool, want_logprob: bool,
                             want_argmax: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        o = _options(ignore_index, reduction, label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels,
                     loss_dtype, temperature, row_temperature, token_weight, token_weight_count)
        want = {name for name, w in zip(L.NAMES, (want_hidden, want_weight, want_bias)) if w}
        h, w, b = L.operands(hidden, weight, bias, autocast)
        loss, gh, gw, gb, entropy, logprob, argmax = L._call(
            h, w, b, target, ce_weight, o, (chunk_rows, memory_mib, plan), dloss, want,
            A.Stats(want_entropy, want_logprob, want_argmax), dentropy, None, grad_f32)
        # An op returns tensors only: an empty one stands for no gradient.
        return (loss, *(g if g is not None else hidden.new_empty(0) for g in (gh, gw, gb)), entropy, logprob,
                argmax)

    @linear_cross_entropy.register_fake
    def _(hidden, weight, bias, target, ce_weight, dloss, dentropy, ignore_index, reduction, label_smoothing, z_loss,
          softcap, all_ignored_zero, invalid_labels, loss_dtype, temperature, row_temperature, token_weight,
          token_weight_count, chunk_rows, memory_mib, plan, autocast, want_hidden, want_weight, want_bias, grad_f32,
          want_entropy, want_logprob, want_argmax):
        n = hidden.shape[0]
        operand = L.operand_dtype(hidden.dtype, autocast)
        gd = torch.float32 if grad_f32 else operand
        acc = torch.float64 if operand == torch.float64 else torch.float32
        grads = [hidden.new_empty(t.shape if want and t is not None else (0,), dtype=gd)
                 for t, want in ((hidden, want_hidden), (weight, want_weight), (bias, want_bias))]
        stats = [hidden.new_empty((n,) if want else (0,), dtype=dt)
                 for want, dt in ((want_entropy, acc), (want_logprob, acc), (want_argmax, torch.int64))]
        return (hidden.new_empty((n,) if reduction == "none" else (), dtype=loss_dtype), *grads, *stats)

    # The op's inputs by name, for its autograd.
    _LCE = {name: i for i, name in enumerate(
        ("hidden", "weight", "bias", "target", "ce_weight", "dloss", "dentropy", "ignore_index", "reduction",
         "label_smoothing", "z_loss", "softcap", "all_ignored_zero", "invalid_labels", "loss_dtype", "temperature",
         "row_temperature", "token_weight", "token_weight_count", "chunk_rows", "memory_mib", "plan", "autocast",
         "want_hidden", "want_weight", "want_bias", "grad_f32", "want_entropy", "want_logprob", "want_argmax"))}

    def _lce_setup(ctx, inputs, output):
        arg = lambda name: inputs[_LCE[name]]
        ctx.n_inputs = len(inputs)
        ctx.call_args = [arg(n) for n in ("chunk_rows", "memory_mib", "plan", "autocast", "grad_f32")]
        ctx.dtypes = [t.dtype if t is not None else None for t in inputs[:3]]
        ctx.options = _options(*(arg(n) for n in ("ignore_index", "reduction", "label_smoothing", "z_loss",
                                                   "softcap", "all_ignored_zero", "invalid_labels", "loss_dtype",
                                                   "temperature")), None, None, arg("token_weight_count"))
        made = (arg("want_hidden"), arg("want_weight"), arg("want_bias"))
        stats = A.Stats(arg("want_entropy"), arg("want_logprob"), arg("want_argmax"))
        # The backward calls again where the forward's gradients (those of a
        # loss of 1) cannot serve: L.again's cases, or one it did not make.
        ctx.stats = stats
        ctx.again = L.again(ctx.options, stats, None) or any(
            need and not m for need, m in zip(ctx.needs_input_grad[:3], made))
        if ctx.again:
            ctx.save_for_backward(*inputs[:5], arg("row_temperature"), arg("token_weight"))
        else:
            ctx.save_for_backward(*output[1:4])
        ctx.mark_non_differentiable(output[1], output[2], output[3], output[6])
        ctx.set_materialize_grads(False)

    def _lce_backward(ctx, dloss, _dgh, _dgw, _dgb, dentropy, dlogprob, _dargmax):
        wanted = ctx.needs_input_grad[:3]
        none = (None,) * (ctx.n_inputs - 3)

        def typed(grads):  # each in its input's dtype, None where not wanted
            return tuple(g.to(dt) if g is not None and w else None
                         for g, dt, w in zip(grads, ctx.dtypes, wanted)) + none

        if not ctx.again:
            grads = ctx.saved_tensors
            if dloss is None:
                return typed(torch.zeros_like(g) for g in grads)
            return typed(g * dloss for g in grads)
        # (An output not asked for is empty; so is any gradient it gets.)
        dentropy = dentropy if ctx.stats.entropy else None
        dlogprob = dlogprob if ctx.stats.logprob else None
        hidden, weight, bias, target, ce_weight, row_tau, tw = ctx.saved_tensors
        o = ctx.options._replace(row_temperature=row_tau, token_weight=tw)
        chunk_rows, memory_mib, plan, autocast, grad_f32 = ctx.call_args

        def call(opts, dl, ce_w, dent):
            out = torch.ops.xent.linear_cross_entropy(
                hidden, weight, bias, target, ce_w, dl, dent, opts.ignore_index, opts.reduction,
                opts.label_smoothing, opts.z_loss, opts.softcap, opts.all_ignored_zero, opts.invalid_labels,
                opts.loss_dtype, opts.temperature, opts.row_temperature, opts.token_weight, opts.token_weight_count,
                chunk_rows, memory_mib, plan, autocast, *wanted, grad_f32, False, False, False)
            return out[1:4]

        return typed(L.grads_again(o, (hidden, weight, bias, target, ce_weight), dloss, dentropy, dlogprob, call))

    torch.library.register_autograd("xent::linear_cross_entropy", _lce_backward, setup_context=_lce_setup)
