"""libxent through ctypes: the library, the structs of xent.h and its enum
values, and the call wrapper that turns a failed status into an exception
carrying xent's own message. Nothing here knows about torch."""

import ctypes
import os

F32, F16, BF16, F64 = 0, 1, 2, 3
I32, I64, PROB = 0, 1, 2
NONE, SUM, MEAN = 0, 1, 2
FORWARD, BACKWARD, FORWARD_BACKWARD = 0, 1, 2
BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP = 0, 1, 2, 3
NO_IGNORE_INDEX = -(2**63)
INVALID_LABELS_REPORT, INVALID_LABELS_IGNORE = 0, 1
TOKEN_WEIGHT_MEAN_WEIGHTS, TOKEN_WEIGHT_MEAN_COUNT = 0, 1
SOFTMAX, LOG_SOFTMAX = 0, 1
ERROR_INVALID_LABEL = 8
ERROR_WORKSPACE_TOO_SMALL, ERROR_BACKEND_UNAVAILABLE, ERROR_BLAS = 5, 4, 10

P = ctypes.c_void_p

# xent_all_gather_fn
ALL_GATHER = ctypes.CFUNCTYPE(ctypes.c_int, P, P, P, ctypes.c_size_t, P)


class VocabShard(ctypes.Structure):
    """xent_vocab_shard."""

    _fields_ = [
        ("class_offset", ctypes.c_int64),
        ("global_classes", ctypes.c_int64),
        ("rank", ctypes.c_int),
        ("ranks", ctypes.c_int),
        ("all_gather", ALL_GATHER),
        ("ctx", P),
        ("gathered", P),
        ("class_offset_at", P),
    ]


class Desc(ctypes.Structure):
    """xent_ce_desc."""

    _fields_ = [
        ("rows", ctypes.c_int64),
        ("classes", ctypes.c_int64),
        ("inner", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("loss_dtype", ctypes.c_int),
        ("grad_dtype", ctypes.c_int),
        ("label_type", ctypes.c_int),
        ("reduction", ctypes.c_int),
        ("ignore_index", ctypes.c_int64),
        ("label_smoothing", ctypes.c_double),
        ("all_ignored_zero", ctypes.c_int),
        ("z_loss", ctypes.c_double),
        ("softcap", ctypes.c_double),
        ("invalid_labels", ctypes.c_int),
        ("vocab_shard", ctypes.POINTER(VocabShard)),
        ("temperature", ctypes.c_double),
        ("token_weight_mean", ctypes.c_int),
    ]


class Tensors(ctypes.Structure):
    """xent_ce_tensors."""

    _fields_ = [(name, P) for name in (
        "logits", "labels", "weights", "lse_in", "dloss", "grad_bias", "loss", "lse", "log_prob", "softmax", "grad",
        "grad_labels", "entropy", "label_logprob", "argmax", "dentropy", "temperature", "token_weight")]


# xent_linear_ce_plan_kind
PLAN_AUTO, PLAN_ONE_PASS, PLAN_TILED_HIDDEN_SUM, PLAN_TILED, PLAN_ON_CHIP = 0, 1, 2, 3, 4


class LinearDesc(ctypes.Structure):
    """xent_linear_ce_desc."""

    _fields_ = [
        ("ce", Desc),
        ("hidden", ctypes.c_int64),
        ("chunk_rows", ctypes.c_int64),
        ("accumulate", ctypes.c_int),
        ("main_grad", ctypes.c_int),
        ("chunk_classes", ctypes.c_int64),
        ("memory_mib", ctypes.c_int64),
        ("plan", ctypes.c_int),
    ]


class LinearTensors(ctypes.Structure):
    """xent_linear_ce_tensors."""

    _fields_ = [(name, P) for name in (
        "hidden", "weight", "bias", "labels", "weights", "dloss", "loss", "lse", "grad_hidden", "grad_weight",
        "grad_bias", "entropy", "label_logprob", "argmax", "dentropy", "temperature", "token_weight", "main_grad")]


class SoftmaxDesc(ctypes.Structure):
    """xent_softmax_desc."""

    _fields_ = [
        ("rows", ctypes.c_int64),
        ("classes", ctypes.c_int64),
        ("inner", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("kind", ctypes.c_int),
    ]


# sizeof and the offsets of all_ignored_zero, softcap and vocab_shard, as
# tests/runtime_test.c asserts for the C struct.
DESC_LAYOUT = (120, 64, 80, 96, 104)
assert (ctypes.sizeof(Desc), Desc.all_ignored_zero.offset, Desc.softcap.offset,
        Desc.vocab_shard.offset, Desc.temperature.offset) == DESC_LAYOUT
assert ctypes.sizeof(Tensors) == 18 * 8 and ctypes.sizeof(VocabShard) == 56
assert (ctypes.sizeof(LinearDesc), LinearDesc.main_grad.offset, LinearDesc.plan.offset) == (168, 140, 160)
assert ctypes.sizeof(LinearTensors) == 18 * 8


class XentError(RuntimeError):
    """A failed xent call; the message is xent's (it names the argument)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class InvalidLabelError(XentError, IndexError):
    """A label outside [0, classes) that is not ignore_index (xent_check)."""


def _library_path():
    explicit = os.environ.get("XENT_LIBRARY")
    if explicit:
        return explicit
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libxent_shared.so")
    if os.path.exists(here):
        return here
    raise ImportError("xent: libxent_shared.so is not in the package and XENT_LIBRARY is not set; install the package "
                      "with `pip install ./python` from a checkout (it builds the library with ./bazelw), or point "
                      "XENT_LIBRARY at a libxent_shared.so")


class _Lib:
    """The loaded library with its functions typed (loaded on first use)."""

    def __init__(self):
        self._dll = None

    def __getattr__(self, name):
        if self._dll is None:
            self._load()
        return getattr(self._dll, name)

    def _load(self):
        dll = ctypes.CDLL(_library_path())
        i, i64, sz = ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
        dll.xent_last_error.restype = ctypes.c_char_p
        dll.xent_status_string.restype = ctypes.c_char_p
        dll.xent_status_string.argtypes = [i]
        dll.xent_create.argtypes = [ctypes.POINTER(P), i]
        dll.xent_create_on_device.argtypes = [ctypes.POINTER(P), i, i]
        dll.xent_destroy.argtypes = [P]
        dll.xent_destroy.restype = None
        dll.xent_handle_backend.argtypes = [P]
        dll.xent_ce_desc_init_nd.argtypes = [ctypes.POINTER(Desc), i, ctypes.POINTER(i64), i, i, i, i]
        dll.xent_ce_workspace_size.argtypes = [P, ctypes.POINTER(Desc), i, ctypes.POINTER(sz)]
        dll.xent_ce_run.argtypes = [P, ctypes.POINTER(Desc), i, ctypes.POINTER(Tensors), P, sz, P]
        dll.xent_ce_scale_grad.argtypes = [P, ctypes.POINTER(Desc), P, P, P]
        dll.xent_softmax_desc_init_nd.argtypes = [ctypes.POINTER(SoftmaxDesc), i, ctypes.POINTER(i64), i, i, i]
        dll.xent_softmax_forward.argtypes = [P, ctypes.POINTER(SoftmaxDesc), P, P, P]
        dll.xent_softmax_backward.argtypes = [P, ctypes.POINTER(SoftmaxDesc), P, P, P, P]
        dll.xent_check.argtypes = [P]
        dll.xent_check_stream.argtypes = [P, P]
        dll.xent_linear_ce_workspace_size.argtypes = [P, ctypes.POINTER(LinearDesc), ctypes.POINTER(sz)]
        dll.xent_linear_ce_run.argtypes = [P, ctypes.POINTER(LinearDesc), ctypes.POINTER(LinearTensors), P, sz, P]
        self._dll = dll


lib = _Lib()


def check(status):
    """Raises the error a nonzero xent_status stands for, with xent's message."""
    if status != 0:
        message = (lib.xent_last_error() or b"").decode("utf-8", "replace")
        if not message:
            message = lib.xent_status_string(status).decode()
        cls = InvalidLabelError if status == ERROR_INVALID_LABEL else XentError
        raise cls(status, "xent: " + message)


def shape_array(shape):
    return (ctypes.c_int64 * len(shape))(*shape)
