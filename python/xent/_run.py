"""Tensors in, xent calls out: the handle for a tensor's device, its stream,
the workspace from PyTorch's allocator, and the descriptors built from
torch dtypes and shapes. The autograd functions (_autograd.py) call these."""

import ctypes
import threading

import torch

from . import _capi as C
from . import _native

_DTYPE = {torch.float32: C.F32, torch.float16: C.F16, torch.bfloat16: C.BF16, torch.float64: C.F64}
_REDUCTION = {"none": C.NONE, "sum": C.SUM, "mean": C.MEAN}

_handles = {}
_handles_lock = threading.Lock()


def backend_of(device):
    """The xent backend for a torch device: cpu, cuda, or hip on ROCm builds."""
    if device.type == "cpu":
        return C.BACKEND_CPU
    if device.type == "cuda":
        return C.BACKEND_HIP if getattr(torch.version, "hip", None) else C.BACKEND_CUDA
    raise TypeError(f"xent: tensors on {device.type} are not supported (cpu, cuda)")


def handle(device):
    """One handle per backend and device, made on first use and kept. The
    handle is bound to its device (xent_create_on_device): libxent's GPU
    runtime keeps a current device of its own, apart from PyTorch's, and
    each call makes the handle's current for its duration only, so nothing
    here changes PyTorch's current device."""
    key = (device.type, device.index if device.index is not None else
           (torch.cuda.current_device() if device.type == "cuda" else -1))
    if _native.module is not None:
        # The C++ path's handles, so that xent.check() sees its calls too.
        return ctypes.c_void_p(_native.module.handle(backend_of(device), key[1]))
    with _handles_lock:
        h = _handles.get(key)
        if h is None:
            h = ctypes.c_void_p()
            C.check(C.lib.xent_create_on_device(ctypes.byref(h), backend_of(device), key[1]))
            _handles[key] = h
        return h


def stream(device):
    """The stream xent enqueues on: PyTorch's current one (None on the CPU)."""
    if device.type == "cuda":
        return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
    return None


def ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


def ptr_if(t, wanted):
    """t's address where the call is to write it, else NULL."""
    return t.data_ptr() if wanted else None


def xent_dtype(t, name):
    try:
        return _DTYPE[t.dtype]
    except KeyError:
        raise TypeError(f"xent: {name} has dtype {t.dtype}; float32, float16, bfloat16 or float64 expected") from None


def accumulation_dtype(dtype):
    """Weights, lse: float64 for float64 logits, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


# Whether autocast is on for any device: one call (0.2 us) that spares the
# per-device queries below on every call without autocast.
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None)


def autocast_dtype(device):
    """torch.autocast's dtype where it is on for the device's type, else None."""
    if _any_autocast is not None and not _any_autocast():
        return None
    if hasattr(torch, "get_autocast_dtype"):  # PyTorch 2.4 and later
        try:
            on = torch.is_autocast_enabled(device.type)
        except (TypeError, RuntimeError):  # a device type autocast does not know
            return None
        return torch.get_autocast_dtype(device.type) if on else None
    if device.type == "cuda" and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    if device.type == "cpu" and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


def loss_dtype_for(loss_dtype, x):
    """The loss's dtype: the one asked for; else float32 under torch.autocast
    (F.cross_entropy runs in float32 there), else x's."""
    if loss_dtype is not None:
        return loss_dtype
    if x.dtype != torch.float64 and autocast_dtype(x.device) is not None:
        return torch.float32
    return x.dtype


def autocast_operand(t, dtype):
    """t as torch.autocast gives it to F.linear: in dtype, unless it is
    float64 (or absent)."""
    return t if t is None or t.dtype in (dtype, torch.float64) else t.to(dtype)


def reduction_code(reduction):
    try:
        return _REDUCTION[reduction]
    except KeyError:
        raise ValueError(f"xent: reduction is {reduction!r}; 'none', 'mean' or 'sum' expected") from None


def workspace(h, desc, op, device):
    n = ctypes.c_size_t()
    C.check(C.lib.xent_ce_workspace_size(h, ctypes.byref(desc), op, ctypes.byref(n)))
    if n.value == 0:
        return None, 0
    return torch.empty(n.value, dtype=torch.uint8, device=device), n.value


def run(desc, op, tensors, device, shard=None):
    """One xent_ce_run on the device's handle and stream. With a shard (a
    vocabulary-parallel call, xent.distributed), desc gets its
    xent_vocab_shard, whose all-gather runs shard.all_gather on the gathered
    statistics' place in the workspace. On the CPU, a label out of range
    raises here, as PyTorch does (on a GPU the call does not wait for the
    device: see xent.check())."""
    h = handle(device)
    state = {}
    if shard is not None:
        def gather(_ctx, send, recv, nbytes, _stream):
            try:
                shard.all_gather(state["workspace"], send, recv, nbytes)
                return 0
            except Exception as e:  # the C caller gets a status; the error is raised below
                state["error"] = e
                return 1

        callback = C.ALL_GATHER(gather)
        vocab = C.VocabShard(shard.offset, shard.global_classes, shard.rank, shard.ranks, callback, None)
        desc.vocab_shard = ctypes.pointer(vocab)
    ws, nbytes = workspace(h, desc, op, device)
    state["workspace"] = ws
    status = C.lib.xent_ce_run(h, ctypes.byref(desc), op, ctypes.byref(tensors), ptr(ws), nbytes, stream(device))
    if "error" in state:
        raise C.XentError(9, f"xent: the vocabulary-parallel all-gather failed: {state['error']}") from state["error"]
    C.check(status)
    # On CPU tensors a bad label (or per-row temperature) is raised at once.
    if device.type == "cpu" and ((desc.invalid_labels == C.INVALID_LABELS_REPORT and desc.label_type != C.PROB)
                                 or tensors.temperature):
        C.check(C.lib.xent_check(h))
