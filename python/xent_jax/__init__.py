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

__all__ = ["cross_entropy", "softmax", "log_softmax"]

_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}  # xent_reduction
_registered = False


def _register():
    """Builds (once, cached) and registers the FFI handlers for the host and,
    where the plugin is in use, CUDA."""
    global _registered
    if _registered:
        return
    import jaxlib
    version = getattr(getattr(jaxlib, "version", None), "__version__", None) or jax.__version__
    path = _build.build(jax.ffi.include_dir(), version)
    lib = ctypes.CDLL(path)
    for name in ("xent_ce_fwd", "xent_ce_bwd", "xent_softmax_fwd", "xent_softmax_bwd"):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, name + "_cpu")), platform="cpu")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, name + "_gpu")), platform="CUDA")
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


def _attrs(o):
    axis, reduction, ignore_index, smoothing, z_loss, softcap, tau, all_ignored_zero, ignore_invalid, count = o
    return dict(axis=np.int64(axis), reduction=np.int64(reduction), ignore_index=np.int64(ignore_index),
                label_smoothing=np.float64(smoothing), z_loss=np.float64(z_loss), softcap=np.float64(softcap),
                temperature=np.float64(tau), all_ignored_zero=np.bool_(all_ignored_zero),
                ignore_invalid_labels=np.bool_(ignore_invalid), token_weight_count=np.bool_(count))


def _rows_shape(shape, axis):
    axis %= len(shape)
    return shape[:axis] + shape[axis + 1:]


def _vmap_method(o):
    # Per-row outputs batch by folding the leading axis into the rows; a
    # reduction over the rows would sum across the batch, so it loops.
    return "broadcast_all" if o[1] == _REDUCTIONS["none"] else "sequential"


def _forward(logits, labels, weight, tau_rows, token_weight, o):
    rows = _rows_shape(logits.shape, o[0])
    loss_shape = rows if o[1] == _REDUCTIONS["none"] else ()
    call = jax.ffi.ffi_call("xent_ce_fwd", (jax.ShapeDtypeStruct(loss_shape, logits.dtype),
                                            jax.ShapeDtypeStruct(rows, _acc(logits.dtype))),
                            vmap_method=_vmap_method(o))
    return call(logits, labels, weight, tau_rows, token_weight, **_attrs(o))


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _ce(logits, labels, weight, tau_rows, token_weight, o):
    return _forward(logits, labels, weight, tau_rows, token_weight, o)[0]


def _ce_fwd(logits, labels, weight, tau_rows, token_weight, o):
    loss, lse = _forward(logits, labels, weight, tau_rows, token_weight, o)
    return loss, (logits, labels, weight, tau_rows, token_weight, lse)


def _ce_bwd(o, res, dloss):
    logits, labels, weight, tau_rows, token_weight, lse = res
    soft = jnp.issubdtype(labels.dtype, jnp.floating)
    call = jax.ffi.ffi_call("xent_ce_bwd", (jax.ShapeDtypeStruct(logits.shape, logits.dtype),
                                            jax.ShapeDtypeStruct(labels.shape if soft else (0,), logits.dtype)),
                            vmap_method=_vmap_method(o))
    grad, grad_labels = call(logits, labels, weight, tau_rows, token_weight, lse, dloss.astype(logits.dtype),
                             **_attrs(o))
    return grad, grad_labels if soft else None, None, None, None


_ce.defvjp(_ce_fwd, _ce_bwd)


def cross_entropy(logits, labels, *, weight=None, ignore_index=-100, reduction="none", label_smoothing=0.0,
                  z_loss=0.0, softcap=0.0, temperature=1.0, token_weight=None, token_weight_mean="weights",
                  axis=-1, all_ignored_zero=False, invalid_labels="raise"):
    """Softmax cross entropy of logits (float32, float16, bfloat16 or float64;
    the class axis at `axis`, every other axis a row) against integer labels
    (the rows' shape) or probabilities (the logits' shape). reduction: 'none'
    (the rows' shape, the logits' dtype), 'sum' or 'mean' (PyTorch's weighted
    mean). Differentiable in logits and soft labels."""
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
    acc = _acc(logits.dtype)
    weight = _optional(weight, None, acc, "weight")
    per_row_tau = not isinstance(temperature, (int, float))
    tau_rows = _optional(temperature if per_row_tau else None, rows, acc, "temperature")
    tw = _optional(token_weight, rows, acc, "token_weight")
    # The class axis counted from the end: vmap's batch axes go in front.
    o = (ax - logits.ndim, _REDUCTIONS[reduction], int(ignore_index), float(label_smoothing), float(z_loss), float(softcap),
         1.0 if per_row_tau else float(temperature), bool(all_ignored_zero), invalid_labels == "ignore",
         token_weight_mean == "count")
    return _ce(logits, labels, weight, tau_rows, tw, o)


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
