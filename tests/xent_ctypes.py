"""ctypes mirrors of runtime/xent.h for the Python tests: the descriptor and
tensors structs and the enum values. The descriptor's layout is pinned on
both sides: DESC_LAYOUT here (checked by the tests that import it) and in
tests/runtime_test.c."""

import ctypes

F32, F16, BF16, F64 = 0, 1, 2, 3
I32, I64, PROB = 0, 1, 2
NONE, SUM, MEAN = 0, 1, 2
FORWARD, BACKWARD, FORWARD_BACKWARD = 0, 1, 2
BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP = 1, 2, 3
NO_IGNORE_INDEX = -(2**63)
INVALID_LABELS_REPORT, INVALID_LABELS_IGNORE = 0, 1
SOFTMAX, LOG_SOFTMAX = 0, 1


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
        ("vocab_shard", ctypes.c_void_p),
    ]


def make_desc(rows, classes, dtype, label_type, reduction, ignore_index=-100, smoothing=0.0, all_ignored_zero=0,
              z_loss=0.0, softcap=0.0, invalid_labels=INVALID_LABELS_REPORT, inner=1, loss_dtype=None,
              grad_dtype=None):
    """A descriptor with xent_ce_desc_init's defaults for what is not given."""
    return Desc(rows, classes, inner, dtype, dtype if loss_dtype is None else loss_dtype,
                dtype if grad_dtype is None else grad_dtype, label_type, reduction, ignore_index, smoothing,
                int(all_ignored_zero), z_loss, softcap, invalid_labels)


# xent_all_gather_fn and xent_vocab_shard (desc.vocab_shard points at one).
ALL_GATHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_void_p)


class VocabShard(ctypes.Structure):
    """xent_vocab_shard."""

    _fields_ = [
        ("class_offset", ctypes.c_int64),
        ("global_classes", ctypes.c_int64),
        ("rank", ctypes.c_int),
        ("ranks", ctypes.c_int),
        ("all_gather", ALL_GATHER),
        ("ctx", ctypes.c_void_p),
    ]


class Tensors(ctypes.Structure):
    """xent_ce_tensors."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "logits", "labels", "weights", "lse_in", "dloss", "grad_bias", "loss", "lse", "log_prob", "softmax", "grad",
        "grad_labels")]


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
# runtime_test.c asserts for the C struct.
DESC_LAYOUT = (104, 64, 80, 96)
assert (ctypes.sizeof(Desc), Desc.all_ignored_zero.offset, Desc.softcap.offset,
        Desc.vocab_shard.offset) == DESC_LAYOUT
assert ctypes.sizeof(Tensors) == 12 * 8
assert ctypes.sizeof(VocabShard) == 40
