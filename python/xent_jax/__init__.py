"""xent from JAX: the fused cross entropy as XLA FFI calls, differentiable
(jax.custom_vjp: the forward saves the lse, the backward is xent's), under
jax.jit with no host synchronization, shapes and dtypes from abstract
evaluation. Needs xent's library (its wheel, or XENT_LIBRARY) and jax; not
PyTorch.

    import xent_jax
    loss = xent_jax.cross_entropy(logits, labels)      # [..., C], labels [...]
    loss, grad = jax.value_and_grad(lambda x: xent_jax.cross_entropy(x, labels, reduction="mean"))(logits)

optax's conventions (optax.softmax_cross_entropy_with_integer_labels): the
class axis last (axis=-1, any axis in place), integer labels (or
probabilities of the logits' shape, optax.softmax_cross_entropy), no
reduction by default. Beyond optax: PyTorch's ignore_index (-100: such a row
has loss 0 and no gradient), class weights, label smoothing, the reductions,
z-loss, the soft cap, a temperature (a number, or one per row) and token
weights (docs/API.md, "A temperature per row and token weights"). The
per-row inputs get no gradient. On the cpu platform a label outside [0, C)
that is not ignore_index raises; on a GPU its row is NaN."""

import ctypes
import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import _build

__all__ = ["cross_entropy", "linear_cross_entropy", "softmax", "log_softmax"]

_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}  # xent_reduction
_registered = False


def _register():
    """Builds (once, cached) and registers the FFI handlers for JAX's cpu,
    CUDA and ROCm platforms (xent's cpu, CUDA and HIP backends)."""
    global _registered
    if _registered:
        return
    import jaxlib
    version = getattr(getattr(jaxlib, "version", None), "__version__", None) or jax.__version__
    path = _build.build(jax.ffi.include_dir(), version)
    lib = ctypes.CDLL(path)
    for name in ("xent_ce_fwd", "xent_ce_bwd", "xent_ce_records", "xent_softmax_fwd", "xent_softmax_bwd", "xent_lce"):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, name + "_cpu")), platform="cpu")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, name + "_gpu")), platform="CUDA")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, name + "_rocm")), platform="ROCM")
    _registered = True


def _acc(dtype):
    return jnp.float64 if dtype == jnp.float64 else jnp.float32


def _optional(x, rows_shape, dtype, name):
    """A per-row or per-class input as the handler takes it: the array in the
    accumulation type, or an empty one for none."""
    if x is None:
        return jnp.zeros((0,), dtype)
    x = jnp.asarray(x)
    if rows_shape is not None and x.shape != rows_shape:
        raise ValueError(f"xent_jax: {name} has shape {x.shape}; the rows' {rows_shape} expected")
    return jax.lax.stop_gradient(x.astype(dtype))


def _attrs(o, acc_loss=False):
    axis, reduction, ignore_index, smoothing, z_loss, softcap, tau, all_ignored_zero, ignore_invalid, count = o
    return dict(axis=np.int64(axis), reduction=np.int64(reduction), ignore_index=np.int64(ignore_index),
                label_smoothing=np.float64(smoothing), z_loss=np.float64(z_loss), softcap=np.float64(softcap),
                temperature=np.float64(tau), all_ignored_zero=np.bool_(all_ignored_zero),
                ignore_invalid_labels=np.bool_(ignore_invalid), token_weight_count=np.bool_(count),
                acc_loss=np.bool_(acc_loss))


def _axis_size(name):
    """A mesh axis's size under shard_map (static)."""
    size = getattr(jax.lax, "axis_size", None)
    return int(size(name)) if size is not None else int(jax.lax.psum(1, name))


def _rows_shape(shape, axis):
    axis %= len(shape)
    return shape[:axis] + shape[axis + 1:]


def _vmap_method(o):
    # Per-row outputs batch by folding the leading axis into the rows; a
    # reduction over the rows would sum across the batch, so it loops.
    return "broadcast_all" if o[1] == _REDUCTIONS["none"] else "sequential"


_NO_VOCAB = (None, 0, 1)  # (mesh axis, global classes, ranks) of a vocabulary split, or none


def _record_bytes(dtype, wide):
    """One row's record in a vocabulary split (xent_shard_record_bytes)."""
    acc = 8 if dtype == jnp.float64 else 4
    return 8 * acc + 8 if wide else 4 * acc


def _forward(logits, labels, weight, tau_rows, token_weight, offset, o, stats, vocab):
    """(loss, lse, entropy, logprob, argmax, gathered) from one forward call;
    the per-token outputs empty unless asked (stats), argmax as int32
    (int64 with x64). With a vocabulary split (vocab), this slice's records
    first, gathered over the mesh axis by JAX (the call's one collective)."""
    rows = _rows_shape(logits.shape, o[0])
    acc = _acc(logits.dtype)
    loss_shape = rows if o[1] == _REDUCTIONS["none"] else ()
    want_entropy, want_logprob, want_argmax = stats
    axis_name, global_classes, ranks = vocab
    shard = dict(global_classes=np.int64(global_classes), ranks=np.int64(ranks))
    if axis_name is None:
        gathered = jnp.zeros((0,), jnp.uint8)
    else:
        wide = any(stats)
        nbytes = int(np.prod(rows, dtype=np.int64)) * _record_bytes(logits.dtype, wide)
        attrs = {k: v for k, v in _attrs(o).items() if k != "acc_loss"}
        records = jax.ffi.ffi_call("xent_ce_records", jax.ShapeDtypeStruct((nbytes,), jnp.uint8))(
            logits, labels, weight, tau_rows, token_weight, offset, **attrs, **shard, wide=np.bool_(wide))
        gathered = jax.lax.all_gather(records, axis_name).reshape(-1)
    call = jax.ffi.ffi_call("xent_ce_fwd", (jax.ShapeDtypeStruct(loss_shape, logits.dtype),
                                            jax.ShapeDtypeStruct(rows, acc),
                                            jax.ShapeDtypeStruct(rows if want_entropy else (0,), acc),
                                            jax.ShapeDtypeStruct(rows if want_logprob else (0,), acc),
                                            jax.ShapeDtypeStruct(rows + (2,) if want_argmax else (0,), jnp.uint32)),
                            vmap_method=_vmap_method(o))
    loss, lse, entropy, logprob, words = call(logits, labels, weight, tau_rows, token_weight, offset, gathered,
                                              **_attrs(o), **shard)
    return loss, lse, entropy, logprob, _argmax(words, want_argmax), gathered


def _argmax(words, wanted):
    """The int64 class indices the call wrote as two uint32 words a row:
    the low word (little-endian) as int32, or the whole as int64 with x64."""
    if not wanted:
        return words
    if jax.config.jax_enable_x64:
        return jax.lax.bitcast_convert_type(words, jnp.int64)
    return jax.lax.bitcast_convert_type(words[..., 0], jnp.int32)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6, 7, 8))
def _ce(logits, labels, weight, tau_rows, token_weight, offset, o, stats, vocab):
    loss, _, entropy, logprob, argmax, _ = _forward(logits, labels, weight, tau_rows, token_weight, offset, o, stats,
                                                    vocab)
    return loss, entropy, logprob, argmax


def _ce_fwd(logits, labels, weight, tau_rows, token_weight, offset, o, stats, vocab):
    loss, lse, entropy, logprob, argmax, gathered = _forward(logits, labels, weight, tau_rows, token_weight, offset, o,
                                                             stats, vocab)
    return (loss, entropy, logprob, argmax), (logits, labels, weight, tau_rows, token_weight, offset, gathered, lse)


def _backward(logits, labels, weight, tau_rows, token_weight, offset, gathered, lse, dloss, dentropy, o, vocab,
              acc_loss=False):
    soft = jnp.issubdtype(labels.dtype, jnp.floating)
    call = jax.ffi.ffi_call("xent_ce_bwd", (jax.ShapeDtypeStruct(logits.shape, logits.dtype),
                                            jax.ShapeDtypeStruct(labels.shape if soft else (0,), logits.dtype)),
                            vmap_method=_vmap_method(o))
    dloss = dloss.astype(_acc(logits.dtype) if acc_loss else logits.dtype)
    return call(logits, labels, weight, tau_rows, token_weight, offset, gathered, lse, dloss, dentropy,
                **_attrs(o, acc_loss), global_classes=np.int64(vocab[1]), ranks=np.int64(vocab[2]))


def _ce_bwd(o, stats, vocab, res, cotangents):
    logits, labels, weight, tau_rows, token_weight, offset, gathered, lse = res
    dloss, dentropy, dlogprob, _ = cotangents
    if vocab[0] is not None:
        # Every device's outputs are the same function of every slice: a
        # slice's gradient takes the cotangents of all of their copies.
        dloss, dentropy, dlogprob = (jax.lax.psum(v, vocab[0]) for v in (dloss, dentropy, dlogprob))
    soft = jnp.issubdtype(labels.dtype, jnp.floating)
    acc = _acc(logits.dtype)
    dentropy = dentropy.astype(acc) if stats[0] else jnp.zeros((0,), acc)
    grad, grad_labels = _backward(logits, labels, weight, tau_rows, token_weight, offset, gathered, lse, dloss,
                                  dentropy, o, vocab)
    if stats[1]:
        # d logp_y / dz = onehot(y) - p: the plain loss's gradient (no class
        # weights, smoothing, z-loss or token weights) with dloss = -dlogprob.
        plain = (o[0], _REDUCTIONS["none"], o[2], 0.0, 0.0, o[5], o[6], o[7], o[8], False)
        none = jnp.zeros((0,), acc)
        extra, _ = _backward(logits, labels, none, tau_rows, none, offset, gathered, lse, -dlogprob, none, plain,
                             vocab, acc_loss=True)
        grad = grad + extra
    return grad, grad_labels if soft else None, None, None, None, None


_ce.defvjp(_ce_fwd, _ce_bwd)


def cross_entropy(logits, labels, *, weight=None, ignore_index=-100, reduction="none", label_smoothing=0.0,
                  z_loss=0.0, softcap=0.0, temperature=1.0, token_weight=None, token_weight_mean="weights",
                  axis=-1, all_ignored_zero=False, invalid_labels="raise", return_entropy=False,
                  return_logprob=False, return_argmax=False, vocab_axis=None):
    """Softmax cross entropy of logits (float32, float16, bfloat16 or float64;
    the class axis at `axis`, every other axis a row) against integer labels
    (the rows' shape) or probabilities (the logits' shape). reduction: 'none'
    (the rows' shape, the logits' dtype), 'sum' or 'mean' (PyTorch's weighted
    mean). Differentiable in logits and soft labels.

    For RL trainers, from the same pass over the logits (docs/API.md,
    "Per-token outputs"): return_entropy (each row's entropy of z = logits /
    temperature), return_logprob (the label's log-probability; integer
    labels), return_argmax (the first maximal class, int32, int64 with x64;
    integer labels), each rows-shaped and 0 for an ignored row (argmax for
    every row). The entropy and the log-prob are differentiable, their
    gradients joining the loss's in xent's backward. The result is the loss,
    or a tuple of the loss and what was asked, in that order.

    vocab_axis: inside shard_map, the mesh axis the class axis is split
    over (each device holds an equal slice, in the axis's order): every
    device gets the loss, lse and per-token outputs of the whole vocabulary
    and the gradient of its slice, through one all_gather of a few values a
    row (xent's vocabulary-parallel call, its collective JAX's). Integer
    labels hold global classes (probabilities: this slice's); weight is the
    whole vocabulary's."""
    _register()
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"xent_jax: reduction is {reduction!r}; 'none', 'sum' or 'mean' expected")
    if token_weight_mean not in ("weights", "count"):
        raise ValueError(f"xent_jax: token_weight_mean is {token_weight_mean!r}; 'weights' or 'count' expected")
    if invalid_labels not in ("raise", "ignore"):
        raise ValueError(f"xent_jax: invalid_labels is {invalid_labels!r}; 'raise' or 'ignore' expected")
    if logits.ndim < 1:
        raise ValueError("xent_jax: logits must have the class axis")
    ax = axis % logits.ndim
    rows = _rows_shape(logits.shape, ax)
    soft = jnp.issubdtype(labels.dtype, jnp.floating)
    if soft:
        if labels.shape != logits.shape:
            raise ValueError(f"xent_jax: labels (probabilities) have shape {labels.shape}; {logits.shape} expected")
        labels = labels.astype(logits.dtype)
    elif labels.dtype not in (jnp.int32, jnp.int64):
        raise TypeError(f"xent_jax: labels have dtype {labels.dtype}; int32, int64 or probabilities expected")
    elif labels.shape != rows:
        raise ValueError(f"xent_jax: labels have shape {labels.shape}; {rows} expected")
    if soft and (return_logprob or return_argmax):
        raise ValueError("xent_jax: return_logprob and return_argmax are for integer labels")
    acc = _acc(logits.dtype)
    weight = _optional(weight, None, acc, "weight")
    per_row_tau = not isinstance(temperature, (int, float))
    tau_rows = _optional(temperature if per_row_tau else None, rows, acc, "temperature")
    tw = _optional(token_weight, rows, acc, "token_weight")
    # The class axis counted from the end: vmap's batch axes go in front.
    o = (ax - logits.ndim, _REDUCTIONS[reduction], int(ignore_index), float(label_smoothing), float(z_loss), float(softcap),
         1.0 if per_row_tau else float(temperature), bool(all_ignored_zero), invalid_labels == "ignore",
         token_weight_mean == "count")
    stats = (bool(return_entropy), bool(return_logprob), bool(return_argmax))
    if vocab_axis is None:
        vocab, offset = _NO_VOCAB, jnp.zeros((0,), jnp.uint32)
    else:
        local = logits.shape[ax]
        ranks = _axis_size(vocab_axis)
        vocab = (vocab_axis, local * ranks, ranks)
        # This slice's first class, as the int64 the kernels read on the
        # device (two words: JAX without x64 has no int64).
        first = (jax.lax.axis_index(vocab_axis) * local).astype(jnp.uint32)
        offset = jnp.stack([first, jnp.zeros((), jnp.uint32)])
    loss, entropy, logprob, argmax = _ce(logits, labels, weight, tau_rows, tw, offset, o, stats, vocab)
    extra = [v for v, want in zip((entropy, logprob, argmax), stats) if want]
    return (loss, *extra) if extra else loss


def _softmax_call(name, out_like, *args, axis, log):
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(out_like.shape, out_like.dtype), vmap_method="broadcast_all")
    return call(*args, axis=np.int64(axis), log=np.bool_(log))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _softmax(x, axis, log):
    return _softmax_call("xent_softmax_fwd", x, x, axis=axis, log=log)


def _softmax_fwd(x, axis, log):
    y = _softmax(x, axis, log)
    return y, y


def _softmax_bwd(axis, log, y, dy):
    return (_softmax_call("xent_softmax_bwd", y, y, dy.astype(y.dtype), axis=axis, log=log),)


_softmax.defvjp(_softmax_fwd, _softmax_bwd)


def _softmax_checked(x, axis, log):
    _register()
    x = jnp.asarray(x)
    if x.ndim < 1:
        raise ValueError("xent_jax: softmax's input must have an axis")
    if not jnp.issubdtype(x.dtype, jnp.floating) or x.dtype not in (jnp.float32, jnp.float16, jnp.bfloat16,
                                                                    jnp.float64):
        raise TypeError(f"xent_jax: softmax's input has dtype {x.dtype}; a float type expected")
    # The axis counted from the end: vmap's batch axes go in front.
    return _softmax(x, axis % x.ndim - x.ndim, log)


def softmax(x, axis=-1):
    """jax.nn.softmax(x, axis) for one axis (read in place), with its gradient."""
    return _softmax_checked(x, axis, False)


def log_softmax(x, axis=-1):
    """jax.nn.log_softmax(x, axis) for one axis (read in place), with its gradient."""
    return _softmax_checked(x, axis, True)


_GRADS = ("hidden", "weight", "bias")
_LINEAR_PLANS = {"auto": 0, "one_pass": 1, "tiled_hidden_sum": 2, "tiled": 3, "on_chip": 4}


def _lce_call(inputs, dloss, dentropy, o, want, stats=(False, False, False), acc_loss=False):
    """One xent_linear_ce_run: (loss, grad_hidden, grad_weight, grad_bias,
    entropy, logprob, argmax), each gradient empty unless in want, each
    per-token output unless in stats; the gradients those of sum(dloss *
    loss) (+ sum(dentropy * entropy)). acc_loss: loss and dloss in the
    accumulation type."""
    hidden, weight, bias = inputs[:3]
    rows = hidden.shape[:-1]
    acc = _acc(hidden.dtype)
    empty = lambda dtype: jax.ShapeDtypeStruct((0,), dtype)
    out = lambda t, name: jax.ShapeDtypeStruct(t.shape, t.dtype) if name in want and t.size else empty(t.dtype)
    per_row = lambda wanted, dtype, shape=rows: jax.ShapeDtypeStruct(shape, dtype) if wanted else empty(dtype)
    shapes = (jax.ShapeDtypeStruct(rows if o[0] == _REDUCTIONS["none"] else (), acc if acc_loss else hidden.dtype),
              out(hidden, "hidden"), out(weight, "weight"), out(bias, "bias"), per_row(stats[0], acc),
              per_row(stats[1], acc), per_row(stats[2], jnp.uint32, rows + (2,)))
    reduction, ignore_index, smoothing, z_loss, softcap, tau, all_ignored_zero, ignore_invalid, count, chunk, mib, \
        plan = o
    dloss = jnp.zeros((0,), hidden.dtype) if dloss is None else dloss
    dentropy = jnp.zeros((0,), acc) if dentropy is None else dentropy
    call = jax.ffi.ffi_call("xent_lce", shapes, vmap_method="sequential")
    loss, gh, gw, gb, entropy, logprob, words = call(
        *inputs, dloss, dentropy, reduction=np.int64(reduction), ignore_index=np.int64(ignore_index),
        label_smoothing=np.float64(smoothing), z_loss=np.float64(z_loss), softcap=np.float64(softcap),
        temperature=np.float64(tau), all_ignored_zero=np.bool_(all_ignored_zero),
        ignore_invalid_labels=np.bool_(ignore_invalid), token_weight_count=np.bool_(count),
        chunk_rows=np.int64(chunk), memory_mib=np.int64(mib), plan=np.int64(plan), acc_loss=np.bool_(acc_loss))
    return loss, gh, gw, gb, entropy, logprob, _argmax(words, stats[2])


def _lce_again(o, stats):
    """Whether the forward makes no gradient and the backward calls again:
    'none' (each row's upstream gradient weighs grad_weight differently),
    or the entropy or the label's log-prob (their gradients known only then)."""
    return o[0] == _REDUCTIONS["none"] or stats[0] or stats[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(7, 8))
def _lce(hidden, weight, bias, labels, ce_weight, tau_rows, token_weight, o, stats):
    out = _lce_call((hidden, weight, bias, labels, ce_weight, tau_rows, token_weight), None, None, o, (), stats)
    return out[0], *out[4:]


def _lce_fwd(hidden, weight, bias, labels, ce_weight, tau_rows, token_weight, o, stats):
    # symbolic_zeros: each argument comes with whether its gradient is asked
    # for (.perturbed), so that a frozen weight (or hidden) costs no GEMM.
    args = (hidden, weight, bias, labels, ce_weight, tau_rows, token_weight)
    inputs = tuple(a.value for a in args)
    want = tuple(name for name, a in zip(_GRADS, args) if a.perturbed)
    if _lce_again(o, stats):
        # (The names wanted are the dict's keys: static, as residuals must be.)
        loss, _, _, _, entropy, logprob, argmax = _lce_call(inputs, None, None, o, (), stats)
        return (loss, entropy, logprob, argmax), (inputs, dict.fromkeys(want))
    # A sum or mean: every gradient wanted of a loss of 1 now (the logits'
    # GEMM once), scaled by the incoming scalar in the backward.
    loss, *grads, entropy, logprob, argmax = _lce_call(inputs, None, None, o, want, stats)
    return (loss, entropy, logprob, argmax), (inputs, {n: g for n, g in zip(_GRADS, grads) if n in want})


def _lce_grads_again(o, stats, inputs, want, dloss, dentropy, dlogprob):
    """The gradients wanted of sum(dloss * loss) + sum(dentropy * entropy) +
    sum(dlogprob * logprob), by the call made again (as the PyTorch
    package's _linear.grads_again): the log-prob's folded into each row's
    dloss where every row's loss is -logprob (no class or token weights,
    smoothing or z-loss), else one call more of the plain loss."""
    hidden, weight, bias, labels, ce_weight, tau_rows, token_weight = inputs
    rows, acc = hidden.shape[:-1], _acc(hidden.dtype)
    zero = lambda v: isinstance(v, jax.custom_derivatives.SymbolicZero)
    none = o[0] == _REDUCTIONS["none"]
    dloss = jnp.zeros(rows if none else (), hidden.dtype) if zero(dloss) else dloss
    dentropy = dentropy.astype(acc) if stats[0] and not zero(dentropy) else None
    call = lambda opts, ins, dl, dent, acc_loss: _lce_call(ins, dl, dent, opts, want, acc_loss=acc_loss)[1:4]
    if not stats[1] or zero(dlogprob):
        return call(o, inputs, dloss.astype(hidden.dtype), dentropy, False)
    if ce_weight.size == 0 and token_weight.size == 0 and o[2] == 0 and o[3] == 0:
        dl = dloss.astype(acc)
        if o[0] == _REDUCTIONS["mean"]:
            # What the mean divides by: the rows that count (no weights here).
            counted = (labels != o[1]) & (labels >= 0) & (labels < weight.shape[0])
            dl = dl / jnp.maximum(counted.sum(), 1).astype(acc)
        dl = jnp.broadcast_to(dl, rows) - dlogprob.astype(acc)
        return call((_REDUCTIONS["none"],) + o[1:], inputs, dl, dentropy, True)
    grads = call(o, inputs, dloss.astype(hidden.dtype), dentropy, False)
    # d logp_y / dz = onehot(y) - p: the plain loss's gradient (no class or
    # token weights, smoothing or z-loss) with dloss = -dlogprob.
    plain = (_REDUCTIONS["none"], o[1], 0.0, 0.0) + o[4:]
    empty = jnp.zeros((0,), acc)
    extra = call(plain, (hidden, weight, bias, labels, empty, tau_rows, empty), -dlogprob.astype(acc), None, True)
    return tuple(g + e if g.size else g for g, e in zip(grads, extra))


def _lce_bwd(o, stats, res, cotangents):
    inputs, grads = res
    dloss, dentropy, dlogprob, _ = cotangents
    zero = lambda v: isinstance(v, jax.custom_derivatives.SymbolicZero)
    if _lce_again(o, stats):
        made = _lce_grads_again(o, stats, inputs, tuple(grads), dloss, dentropy, dlogprob)
        grads = {name: v for name, v in zip(_GRADS, made) if name in grads}
    elif zero(dloss):
        grads = {}
    else:
        grads = {name: v * dloss.astype(v.dtype) for name, v in grads.items()}
    gh, gw, gb = (grads.get(name) for name in _GRADS)
    soft = jnp.issubdtype(inputs[3].dtype, jnp.floating)
    return gh, gw, gb if inputs[2].size else None, (jnp.zeros_like(inputs[3]) if soft else None), None, None, None


_lce.defvjp(_lce_fwd, _lce_bwd, symbolic_zeros=True)


def linear_cross_entropy(hidden, weight, labels, bias=None, *, ce_weight=None, ignore_index=-100, reduction="mean",
                         label_smoothing=0.0, z_loss=0.0, softcap=0.0, temperature=1.0, token_weight=None,
                         token_weight_mean="weights", all_ignored_zero=False, invalid_labels="raise", chunk_rows=0,
                         memory_mib=0, return_entropy=False, return_logprob=False, return_argmax=False,
                         plan="auto"):
    """cross_entropy(hidden @ weight.T + bias, labels), fused: the [N, V]
    logits are made a chunk of rows at a time (chunk_rows; 0 = xent's
    default) and never held whole; the scratch memory is at most memory_mib
    (0: xent's default, 64 MiB), where f16/bf16 calls with class indices
    make tiles of logits again rather than keep a [V, H] f32 sum (xent.h's
    plans, as xent.linear_cross_entropy). hidden [..., H], weight [V, H], bias
    [V]; labels integer [...] or probabilities [..., V]; ce_weight: class
    weights [V]. The other options are cross_entropy's (a temperature per
    row and token_weight shaped like labels' rows), and so are the
    per-token outputs return_entropy, return_logprob and return_argmax (of
    z = logits / temperature; the result is the loss, or a tuple of the loss
    and what was asked, in that order, each shaped like the rows).
    Gradients flow to hidden, weight and bias (soft labels get none), the
    entropy's and the log-prob's included; the call makes only those
    differentiated (a frozen weight costs no GEMM of its own). plan: "auto"
    (by memory_mib), or "one_pass", "tiled_hidden_sum", "tiled", "on_chip"
    (xent.h's xent_linear_ce_plan_kind; "on_chip" wants bf16 integer labels
    on an sm_90 or sm_100 GPU, and sums its gradients in no fixed order)."""
    _register()
    hidden, weight = jnp.asarray(hidden), jnp.asarray(weight)
    labels = jnp.asarray(labels)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"xent_jax: reduction is {reduction!r}; 'none', 'sum' or 'mean' expected")
    if token_weight_mean not in ("weights", "count"):
        raise ValueError(f"xent_jax: token_weight_mean is {token_weight_mean!r}; 'weights' or 'count' expected")
    if hidden.ndim < 1 or weight.ndim != 2 or weight.shape[1] != hidden.shape[-1]:
        raise ValueError(f"xent_jax: hidden {hidden.shape} and weight {weight.shape} do not make [..., H] @ [V, H]^T")
    if weight.dtype != hidden.dtype:
        raise TypeError("xent_jax: hidden and weight must have one dtype")
    if plan not in _LINEAR_PLANS:
        raise ValueError(f"xent_jax: plan is {plan!r}; one of {', '.join(map(repr, _LINEAR_PLANS))} expected")
    rows = hidden.shape[:-1]
    soft = jnp.issubdtype(labels.dtype, jnp.floating)
    if soft and (return_logprob or return_argmax):
        raise ValueError("xent_jax: return_logprob and return_argmax are for integer labels")
    want_labels = rows + (weight.shape[0],) if soft else rows
    if labels.shape != want_labels:
        raise ValueError(f"xent_jax: labels have shape {labels.shape}; {want_labels} expected")
    labels = labels.astype(hidden.dtype) if soft else labels
    acc = _acc(hidden.dtype)
    bias = jnp.zeros((0,), hidden.dtype) if bias is None else jnp.asarray(bias).astype(hidden.dtype)
    ce_weight = _optional(ce_weight, None, acc, "ce_weight")
    per_row_tau = not isinstance(temperature, (int, float))
    tau_rows = _optional(temperature if per_row_tau else None, rows, acc, "temperature")
    tw = _optional(token_weight, rows, acc, "token_weight")
    o = (_REDUCTIONS[reduction], int(ignore_index), float(label_smoothing), float(z_loss), float(softcap),
         1.0 if per_row_tau else float(temperature), bool(all_ignored_zero), invalid_labels == "ignore",
         token_weight_mean == "count", int(chunk_rows), int(memory_mib), _LINEAR_PLANS[plan])
    stats = (bool(return_entropy), bool(return_logprob), bool(return_argmax))
    loss, entropy, logprob, argmax = _lce(hidden, weight, bias, labels, ce_weight, tau_rows, tw, o, stats)
    extra = [v for v, want in zip((entropy, logprob, argmax), stats) if want]
    return (loss, *extra) if extra else loss
