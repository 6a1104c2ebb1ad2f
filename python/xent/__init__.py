"""xent from PyTorch: fused softmax cross-entropy and softmax kernels as
autograd ops with F.cross_entropy's semantics, on CPU tensors (xent's cpu
backend) and CUDA tensors (its CUDA backend; its HIP backend on ROCm builds
of PyTorch), on PyTorch's current stream. On PyTorch 2.4 and later they are
also custom ops (torch.ops.xent.*) that torch.compile traces without a graph
break.

    import xent
    loss = xent.cross_entropy(logits, target)          # like F.cross_entropy
    loss.backward()
"""

import torch

from . import _autograd as A
from . import _linear as L
from . import _capi
from . import _native
from . import _ops
from . import _run as R
from ._capi import InvalidLabelError, XentError

# The C++ path (xent/_C.cpp), or None: the calls it declines, and all calls
# without it, take the Python path below.
_fast = _native.module
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)

__all__ = ["cross_entropy", "linear_cross_entropy", "CrossEntropyLoss", "softmax", "log_softmax", "check", "XentError", "InvalidLabelError"]


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                  z_loss=0.0, softcap=0.0, all_ignored_zero=False, invalid_labels="raise", loss_dtype=None,
                  inplace_backward=False, return_lse=False, temperature=1.0, return_entropy=False,
                  return_logprob=False, return_argmax=False, token_weight=None, token_weight_mean="weights"):
    """torch.nn.functional.cross_entropy, fused.

    input: [C], [N, C] or [N, C, d1, ..., dk] (the class axis is 1; nothing
    is transposed), float32, float16, bfloat16 or float64. target: class
    indices (int64 or int32) of input's shape without the class axis, or
    probabilities of input's shape. weight: [C]. ignore_index, reduction and
    label_smoothing as in PyTorch. Beyond PyTorch:
      z_loss: each counted row adds z_loss * lse^2 (PaLM; Liger's lse_square_scale);
      softcap: the logits become softcap * tanh(logits / softcap) first (Gemma 2);
      all_ignored_zero: a 'mean' over no counted rows is 0, not NaN (ONNX Runtime);
      invalid_labels: 'raise' (a label outside [0, C) that is not ignore_index
        makes its row NaN; on CPU tensors the call raises InvalidLabelError, on
        a GPU xent.check() does, since the call does not wait for the device) or
        'ignore' (such a row counts as ignored);
      loss_dtype: torch.float32 for float16/bfloat16 input gives the loss in
        float32 (the default is input's dtype, and float32 under
        torch.autocast, as F.cross_entropy's there);
      inplace_backward: when input requires grad, its gradient is computed in
        the forward pass and written over input (Liger's memory saving: the
        logits' values are gone after the call); the backward scales it
        there by the incoming gradient, and leaves it unread where that is
        1, as the device decides;
      return_lse: also return the per-row log-sum-exp (float32; float64 for
        float64 input), shaped like the rows.
    For RL and LLM trainers (docs/API.md, "Per-token outputs"), computed in the
    pass that reads the logits:
      temperature: tau > 0; the logits (after softcap) are divided by it
        before everything else: every output is of z = logits / tau, every
        gradient with respect to input. A tensor shaped like the rows gives
        each row its own (a sampling temperature per sequence); a row's tau
        that is not finite and > 0 makes that row NaN and raises
        InvalidLabelError naming it (on CPU tensors at the call, on a GPU
        at xent.check());
      token_weight: a tensor shaped like the rows: each row's loss, and its
        gradient, times its weight (0: nothing, as an ignored row; the
        per-token outputs are not weighted). A 'mean' divides by the sum of
        weight[target] * token_weight over the counted rows (soft targets:
        of token_weight) with token_weight_mean="weights", or by what it
        would without token weights with "count" (for signed weights such
        as advantages; docs/API.md, "Token weights"). Neither tensor gets a
        gradient;
      return_entropy: also return each row's entropy H = lse - sum_c p_c z_c
        (0 for an ignored row), differentiable: its gradient joins the
        loss's in the same backward pass;
      return_logprob: also return the label's log-probability z_y - lse (0
        for an ignored row; hard labels), differentiable, whatever the
        weights, smoothing or z-loss make of the loss;
      return_argmax: also return the predicted class (int64, torch.argmax's
        first maximal index; hard labels): the token accuracy is
        (argmax == target) over the counted rows.
    The returned value is loss alone, or a tuple: loss, then lse, entropy,
    logprob, argmax, each only if asked, in that order; each per-row tensor
    shaped like the rows (float32; float64 for float64 input).
    """
    per_row = isinstance(temperature, torch.Tensor) or token_weight is not None
    if isinstance(input, torch.Tensor):
        loss_dtype = R.loss_dtype_for(loss_dtype, input)
    if _fast is not None and not (return_entropy or return_logprob or return_argmax or per_row) and not _compiling():
        try:
            out = _fast.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap,
                                      all_ignored_zero, invalid_labels, loss_dtype, inplace_backward, return_lse,
                                      temperature)
        except TypeError:  # an argument of another type: the Python path says what is wrong
            out = None
        if out is not None:
            return out
    return _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap,
                          all_ignored_zero, invalid_labels, loss_dtype, inplace_backward, return_lse, None,
                          temperature, A.Stats(bool(return_entropy), bool(return_logprob), bool(return_argmax)),
                          token_weight, token_weight_mean)


def _row_input(t, name, rows, like):
    """A per-row tensor (temperature, token_weight) as the C call takes it:
    rows-shaped, the accumulation type, contiguous, on like's device."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"xent: {name} is {type(t).__name__}; a floating-point tensor shaped like the rows expected")
    if tuple(t.shape) != tuple(rows):
        raise ValueError(f"xent: {name} has shape {tuple(t.shape)}; the rows' {tuple(rows)} expected")
    if t.device != like.device:
        raise ValueError(f"xent: {name} is on {t.device}, input on {like.device}")
    return t.detach().to(R.accumulation_dtype(like.dtype)).contiguous()


def _per_row_options(temperature, token_weight, token_weight_mean, rows, like):
    """(tau, row_temperature, token_weight, token_weight_count) for Options."""
    if token_weight_mean not in ("weights", "count"):
        raise ValueError(f"xent: token_weight_mean is {token_weight_mean!r}; 'weights' or 'count' expected")
    row_tau = None
    if isinstance(temperature, torch.Tensor):
        row_tau, temperature = _row_input(temperature, "temperature", rows, like), 1.0
        if like.device.type == "cpu" and not _compiling():
            bad = ~(torch.isfinite(row_tau) & (row_tau > 0))
            if bool(bad.any()):
                row = int(bad.reshape(-1).nonzero()[0])
                raise ValueError(f"xent: temperature of row {row} is {float(row_tau.reshape(-1)[row])!r}; "
                                 "a finite number > 0 expected")
    tw = _row_input(token_weight, "token_weight", rows, like) if token_weight is not None else None
    return _temperature(temperature), row_tau, tw, token_weight_mean == "count"


def _temperature(temperature):
    try:
        tau = float(temperature)
    except (TypeError, ValueError):
        raise TypeError(f"xent: temperature is {temperature!r}; a number > 0 expected") from None
    if not (tau > 0 and tau != float("inf")):
        raise ValueError(f"xent: temperature is {tau!r}; a finite number > 0 expected")
    return tau


def _check_stats(stats, soft, inplace_backward, shard):
    """The per-token outputs a call may ask for, as xent_ce_run allows them."""
    if not any(stats):
        return
    if soft and (stats.logprob or stats.argmax):
        raise ValueError("xent: return_logprob and return_argmax are for class-index targets (target holds "
                         "probabilities; return_entropy and temperature serve those)")
    if inplace_backward and (stats.entropy or stats.logprob):
        raise ValueError("xent: inplace_backward computes the gradient in the forward pass, before the entropy's "
                         "or the log-prob's gradient is known: ask for them without it")


def _results(loss, lse, entropy, logprob, argmax, return_lse, stats):
    extra = [t for t, want in ((lse, return_lse), (entropy, stats.entropy), (logprob, stats.logprob),
                               (argmax, stats.argmax)) if want]
    return (loss, *extra) if extra else loss


def _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap,
                   all_ignored_zero, invalid_labels, loss_dtype, inplace_backward, return_lse, shard,
                   temperature=1.0, stats=A.NO_STATS, token_weight=None, token_weight_mean="weights"):
    """cross_entropy's checks and shapes, for one device or (shard) a
    vocabulary slice."""
    if not isinstance(input, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError("xent: input and target must be tensors")
    R.xent_dtype(input, "input")
    unbatched = input.dim() == 1
    if input.dim() == 0:
        raise ValueError("xent: input must have the class axis: [C], [N, C] or [N, C, d1, ...]")
    x = input.unsqueeze(0) if unbatched else input
    soft = target.is_floating_point()
    t = target.unsqueeze(0) if unbatched else target
    if soft:
        if t.shape != x.shape:
            raise ValueError(f"xent: target (probabilities) has shape {tuple(target.shape)}; "
                             f"input's {tuple(input.shape)} expected")
        t = t.to(x.dtype)
    else:
        if t.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"xent: target has dtype {target.dtype}; class indices (int64 or int32) or "
                            "probabilities (floating point) expected")
        want = x.shape[:1] + x.shape[2:]
        if t.shape != want:
            raise ValueError(f"xent: target (class indices) has shape {tuple(target.shape)}; {tuple(want)} expected "
                             f"for input of shape {tuple(input.shape)}")
    if t.device != x.device:
        raise ValueError(f"xent: target is on {t.device}, input on {x.device}")
    if weight is not None:
        classes = shard.global_classes if shard is not None else x.shape[1]
        if weight.shape != (classes,):
            raise ValueError(f"xent: weight has shape {tuple(weight.shape)}; ({classes},) expected")
        weight = weight.to(device=x.device, dtype=R.accumulation_dtype(x.dtype)).contiguous()
    if invalid_labels not in ("raise", "ignore"):
        raise ValueError(f"xent: invalid_labels is {invalid_labels!r}; 'raise' or 'ignore' expected")
    R.reduction_code(reduction)
    _check_stats(stats, soft, inplace_backward, shard)
    tau, row_tau, tw, tw_count = _per_row_options(
        temperature.unsqueeze(0) if unbatched and isinstance(temperature, torch.Tensor) else temperature,
        token_weight.unsqueeze(0) if unbatched and isinstance(token_weight, torch.Tensor) else token_weight,
        token_weight_mean, A.row_shape(x), x)
    o = A.Options(int(ignore_index) if ignore_index is not None else _capi.NO_IGNORE_INDEX, reduction,
                  float(label_smoothing), float(z_loss), float(softcap), bool(all_ignored_zero), invalid_labels,
                  R.loss_dtype_for(loss_dtype, x),
                  # (no gradient under no_grad, whose mode a Function's forward cannot see)
                  bool(inplace_backward) and torch.is_grad_enabled(), shard, tau, row_tau, tw, tw_count)
    x = x if inplace_backward else x.contiguous()
    if inplace_backward and not x.is_contiguous():
        raise ValueError("xent: inplace_backward needs a contiguous input (its storage takes the gradient)")
    t = t.contiguous()
    if shard is None and not inplace_backward and _ops.AVAILABLE and _ops.compiling():
        # Under torch.compile: the custom op, which it traces whole.
        outs = torch.ops.xent.cross_entropy(x, t, weight, o.ignore_index, reduction, o.label_smoothing, o.z_loss,
                                            o.softcap, o.all_ignored_zero, invalid_labels, o.loss_dtype,
                                            o.temperature, o.row_temperature, o.token_weight, o.token_weight_count,
                                            *stats)
    else:
        outs = A.CrossEntropy.apply(x, t, weight, o, stats)
    loss, lse, entropy, logprob, argmax = outs
    if unbatched:
        loss = loss.squeeze(0) if reduction == "none" else loss
        lse, entropy, logprob, argmax = [v.squeeze(0) if want else v
                                         for v, want in ((lse, True), (entropy, stats.entropy),
                                                         (logprob, stats.logprob), (argmax, stats.argmax))]
    return _results(loss, lse, entropy, logprob, argmax, bool(return_lse), stats)


# xent_linear_ce_plan_kind by name (xent.linear_cross_entropy's plan).
_LINEAR_PLANS = {"auto": _capi.PLAN_AUTO, "one_pass": _capi.PLAN_ONE_PASS,
                 "tiled_hidden_sum": _capi.PLAN_TILED_HIDDEN_SUM, "tiled": _capi.PLAN_TILED,
                 "on_chip": _capi.PLAN_ON_CHIP}


def linear_cross_entropy(hidden, weight, target, bias=None, ce_weight=None, ignore_index=-100, reduction="mean",
                         label_smoothing=0.0, *, z_loss=0.0, softcap=0.0, all_ignored_zero=False,
                         invalid_labels="raise", loss_dtype=None, chunk_rows=0, temperature=1.0,
                         return_entropy=False, return_logprob=False, return_argmax=False, token_weight=None,
                         token_weight_mean="weights", weight_main_grad=None, memory_mib=0, plan="auto"):
    """F.cross_entropy(F.linear(hidden, weight, bias), target, ...), fused:
    the [N, V] logits never exist whole (xent_linear_ce_run: rows are taken
    chunk_rows at a time, 0 = xent's default). hidden: [..., H]; weight:
    [V, H]; bias: [V]; target: class indices of hidden's shape without H, or
    probabilities [..., V]; ce_weight: class weights [V]. The other options
    are xent.cross_entropy's. Gradients flow to hidden, weight and bias. On
    CPU tensors OpenBLAS does the GEMMs; on CUDA (ROCm) tensors cuBLASLt
    (hipBLASLt), with the gradients in the inputs' dtype. temperature and
    return_entropy, return_logprob, return_argmax are xent.cross_entropy's
    (of z = logits / temperature, each chunk's in its fused pass; the
    result is loss, or a tuple of loss and what was asked, in that order,
    each shaped like hidden without H); the entropy's and log-prob's
    gradients flow to hidden, weight and bias. A temperature per row and
    token_weight, token_weight_mean are xent.cross_entropy's, shaped like
    hidden without H; the token weights reach all three gradients.
    weight_main_grad: an f32 tensor shaped like weight (Megatron-LM's
    main_grad) to which the backward adds the weight's gradient, summed in
    f32 and never rounded, with no [V, H] scratch; weight then gets no
    .grad. The backward runs the fused call again for it (one more logits
    GEMM: the incoming gradient's scale is known only then).
    Under torch.autocast the operands are cast to its dtype, as F.linear's
    (float64 ones aside), and the loss is float32 unless loss_dtype says
    otherwise; each gradient is in its input's dtype, a float32 input's
    made as a float32 sum.
    memory_mib: the scratch memory the call may take (0: xent's default, 64
    MiB). Where the one-pass plan (each chunk's logits over the whole
    vocabulary, and an f16/bf16 weight gradient's f32 sum) needs more, an
    f16/bf16 call with class indices takes a tiled plan: one or two more
    logits GEMMs, no [V, H] sum (xent.h, docs/LINEAR_CE.md). plan: "auto"
    (by memory_mib), or "one_pass", "tiled_hidden_sum", "tiled", "on_chip"
    (the logits made by the tensor cores and never stored: bf16 class
    indices on an H100/H200 with sm_90a code, or a B200/B300 with sm_100f
    code; its gradients are summed by atomics in no fixed order, refused
    under torch.use_deterministic_algorithms(True); xent.h says what each
    plan is)."""
    per_row = isinstance(temperature, torch.Tensor) or token_weight is not None
    if plan not in _LINEAR_PLANS:
        raise ValueError(f"xent: plan is {plan!r}; one of {', '.join(map(repr, _LINEAR_PLANS))} expected")
    if weight_main_grad is not None:
        if not isinstance(weight_main_grad, torch.Tensor) or weight_main_grad.dtype != torch.float32:
            raise TypeError("xent: weight_main_grad must be a float32 tensor")
        if isinstance(weight, torch.Tensor) and (weight_main_grad.shape != weight.shape or
                                                 weight_main_grad.device != weight.device):
            raise ValueError(f"xent: weight_main_grad has shape {tuple(weight_main_grad.shape)} on "
                             f"{weight_main_grad.device}; weight's {tuple(weight.shape)} on {weight.device} expected")
        if not weight_main_grad.is_contiguous():
            raise ValueError("xent: weight_main_grad must be contiguous (the call adds to it in place)")
        if isinstance(weight, torch.Tensor) and weight.dtype == torch.float64:
            raise TypeError("xent: weight_main_grad is for float32, float16 and bfloat16 weights; a float64 "
                            "weight's gradient is its own sum")
    autocast = R.autocast_dtype(hidden.device) if isinstance(hidden, torch.Tensor) else None
    if _fast is not None and weight_main_grad is None and plan == "auto" and autocast is None and not (
            return_entropy or return_logprob or return_argmax or per_row) and not _compiling():
        try:
            out = _fast.linear_cross_entropy(hidden, weight, target, bias, ce_weight, ignore_index, reduction,
                                             label_smoothing, z_loss, softcap, all_ignored_zero, invalid_labels,
                                             loss_dtype, chunk_rows, temperature, int(memory_mib))
        except TypeError:  # an argument of another type: the Python path says what is wrong
            out = None
        if out is not None:
            return out
    for name, t in (("hidden", hidden), ("weight", weight), ("target", target)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"xent: {name} must be a tensor")
    R.xent_dtype(hidden, "hidden")
    if hidden.dim() < 1 or weight.dim() != 2 or weight.shape[1] != hidden.shape[-1]:
        raise ValueError(f"xent: hidden {tuple(hidden.shape)} and weight {tuple(weight.shape)} do not make "
                         "[..., H] @ [V, H]^T")
    # Under torch.autocast the operands are cast to its dtype, as F.linear's.
    dtype_of = lambda t: t.dtype if autocast is None or t.dtype == torch.float64 else autocast
    operand = dtype_of(hidden)
    if dtype_of(weight) != operand or (bias is not None and dtype_of(bias) != operand):
        raise TypeError("xent: hidden, weight and bias must have one dtype"
                        + (f" (under torch.autocast, {autocast} or float64 each)" if autocast is not None else ""))
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"xent: bias has shape {tuple(bias.shape)}; ({weight.shape[0]},) expected")
    lead = hidden.shape[:-1]
    h2 = hidden.reshape(-1, hidden.shape[-1]).contiguous()
    if target.is_floating_point():
        if target.shape != lead + (weight.shape[0],):
            raise ValueError(f"xent: target (probabilities) has shape {tuple(target.shape)}; "
                             f"{tuple(lead + (weight.shape[0],))} expected")
        t2 = target.reshape(-1, weight.shape[0]).to(operand).contiguous()
    else:
        if target.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"xent: target has dtype {target.dtype}; class indices (int64 or int32) or "
                            "probabilities expected")
        if target.shape != lead:
            raise ValueError(f"xent: target has shape {tuple(target.shape)}; {tuple(lead)} expected")
        t2 = target.reshape(-1).contiguous()
    if ce_weight is not None:
        ce_weight = ce_weight.to(dtype=R.accumulation_dtype(hidden.dtype)).contiguous()
    if invalid_labels not in ("raise", "ignore"):
        raise ValueError(f"xent: invalid_labels is {invalid_labels!r}; 'raise' or 'ignore' expected")
    R.reduction_code(reduction)
    stats = A.Stats(bool(return_entropy), bool(return_logprob), bool(return_argmax))
    _check_stats(stats, target.is_floating_point(), False, None)
    tau, row_tau, tw, tw_count = _per_row_options(temperature, token_weight, token_weight_mean, lead, hidden)
    o = A.Options(int(ignore_index) if ignore_index is not None else _capi.NO_IGNORE_INDEX, reduction,
                  float(label_smoothing), float(z_loss), float(softcap), bool(all_ignored_zero), invalid_labels,
                  R.loss_dtype_for(loss_dtype, hidden), False, None, tau,
                  None if row_tau is None else row_tau.reshape(-1), None if tw is None else tw.reshape(-1), tw_count)
    weight, bias = weight.contiguous(), bias.contiguous() if bias is not None else None
    if not torch.is_grad_enabled():
        # A Function's needs_input_grad does not see no_grad: the forward
        # would make the gradients with the loss.
        h2, weight, bias = [v.detach() if v is not None else None for v in (h2, weight, bias)]
    plan_args = (int(chunk_rows), int(memory_mib), _LINEAR_PLANS[plan])
    if weight_main_grad is None and _ops.AVAILABLE and _ops.compiling():
        # Under torch.compile: the custom op, which it traces whole. Its
        # forward makes the gradients wanted, unless the backward must call
        # again (L.again).
        needs = [torch.is_grad_enabled() and v is not None and v.requires_grad for v in (h2, weight, bias)]
        grad_f32 = L.grads_f32([v.dtype if v is not None else None for v in (h2, weight, bias)], operand,
                               {name for name, need in zip(L.NAMES, needs) if need})
        outs = torch.ops.xent.linear_cross_entropy(
            h2, weight, bias, t2, ce_weight, None, None, o.ignore_index, reduction, o.label_smoothing, o.z_loss,
            o.softcap, o.all_ignored_zero, invalid_labels, o.loss_dtype, o.temperature, o.row_temperature,
            o.token_weight, o.token_weight_count, *plan_args, autocast,
            *((False,) * 3 if L.again(o, stats, None) else needs), grad_f32, *stats)
        loss, entropy, logprob, argmax = outs[0], *outs[4:]
    else:
        loss, entropy, logprob, argmax = L.LinearCrossEntropy.apply(
            h2, weight, bias, t2, ce_weight, o, plan_args, stats, weight_main_grad, autocast)
    loss = loss.reshape(lead) if reduction == "none" else loss
    entropy, logprob, argmax = [v.reshape(lead) if want else v for v, want in zip((entropy, logprob, argmax), stats)]
    return _results(loss, None, entropy, logprob, argmax, False, stats)


class CrossEntropyLoss(torch.nn.Module):
    """torch.nn.CrossEntropyLoss, fused (the options of xent.cross_entropy)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, *, z_loss=0.0,
                 softcap=0.0, all_ignored_zero=False, invalid_labels="raise", loss_dtype=None,
                 inplace_backward=False, temperature=1.0):
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing
        self.z_loss, self.softcap, self.all_ignored_zero = z_loss, softcap, all_ignored_zero
        self.invalid_labels, self.loss_dtype, self.inplace_backward = invalid_labels, loss_dtype, inplace_backward
        self.temperature = temperature

    def forward(self, input, target):
        return cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing,
                             z_loss=self.z_loss, softcap=self.softcap, all_ignored_zero=self.all_ignored_zero,
                             invalid_labels=self.invalid_labels, loss_dtype=self.loss_dtype,
                             inplace_backward=self.inplace_backward, temperature=self.temperature)


def _softmax(input, dim, kind):
    if _fast is not None and type(dim) is int and not _compiling():
        out = _fast.softmax(input, dim, kind)
        if out is not None:
            return out
    if not isinstance(input, torch.Tensor):
        raise TypeError("xent: input must be a tensor")
    R.xent_dtype(input, "input")
    if input.dim() == 0:
        raise ValueError("xent: softmax of a 0-d tensor")
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"xent: dim {dim} is out of range for a {input.dim()}-d input")
    if _ops.AVAILABLE and _ops.compiling():
        return torch.ops.xent.softmax(input.contiguous(), dim % input.dim(), kind)
    return A.Softmax.apply(input.contiguous(), dim % input.dim(), kind)


def softmax(input, dim):
    """torch.softmax(input, dim) (ONNX Runtime's Softmax, any axis), with its gradient."""
    return _softmax(input, dim, _capi.SOFTMAX)


def log_softmax(input, dim):
    """torch.log_softmax(input, dim), with its gradient."""
    return _softmax(input, dim, _capi.LOG_SOFTMAX)


def check(device=None, current_stream=False):
    """Waits for the device's xent work and raises InvalidLabelError naming the
    lowest row with a label outside [0, C) seen since the last check (the
    only call that synchronises with the host). With current_stream=True it
    waits for PyTorch's current stream on the device alone, not for other
    streams' work such as collectives (xent_check_stream): check each stream
    your xent calls ran on."""
    device = torch.device(device) if device is not None else (
        torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu"))
    h = R.handle(device)
    if current_stream:
        _capi.check(_capi.lib.xent_check_stream(h, R.stream(device)))
    else:
        _capi.check(_capi.lib.xent_check(h))
