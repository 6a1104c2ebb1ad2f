"""ctypes mirrors of runtime/xent.h for the Python tests: the descriptor
struct and the enum values. Its layout is pinned on both sides: DESC_LAYOUT
here (checked by the tests that import it) and in tests/runtime_test.c."""

import ctypes

F32, F16, BF16, F64 = 0, 1, 2, 3
I32, I64 = 0, 1
NONE, SUM, MEAN = 0, 1, 2
BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP = 1, 2, 3
NO_IGNORE_INDEX = -(2**63)
INVALID_LABELS_REPORT, INVALID_LABELS_IGNORE = 0, 1


class Desc(ctypes.Structure):
    """xent_ce_desc."""

    _fields_ = [
        ("rows", ctypes.c_int64),
        ("classes", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("label_type", ctypes.c_int),
        ("reduction", ctypes.c_int),
        ("ignore_index", ctypes.c_int64),
        ("label_smoothing", ctypes.c_double),
        ("all_ignored_zero", ctypes.c_int),
        ("z_loss", ctypes.c_double),
        ("softcap", ctypes.c_double),
        ("invalid_labels", ctypes.c_int),
    ]


# sizeof and the offsets of all_ignored_zero and softcap, as runtime_test.c
# asserts for the C struct.
DESC_LAYOUT = (80, 48, 64)
assert (ctypes.sizeof(Desc), Desc.all_ignored_zero.offset, Desc.softcap.offset) == DESC_LAYOUT
