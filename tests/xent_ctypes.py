"""The Python tests' view of runtime/xent.h: the structs and enum values of
python/xent/_capi.py (the one ctypes mirror of the header; its DESC_LAYOUT
is pinned against tests/runtime_test.c), and make_desc. _capi.py is loaded
from its file, so that a test needs neither the package's __init__ nor an
installed package."""

import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "xent_capi", os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python", "xent", "_capi.py"))
_capi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_capi)

F32, F16, BF16, F64 = _capi.F32, _capi.F16, _capi.BF16, _capi.F64
I32, I64, PROB = _capi.I32, _capi.I64, _capi.PROB
NONE, SUM, MEAN = _capi.NONE, _capi.SUM, _capi.MEAN
FORWARD, BACKWARD, FORWARD_BACKWARD = _capi.FORWARD, _capi.BACKWARD, _capi.FORWARD_BACKWARD
BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP = _capi.BACKEND_CPU, _capi.BACKEND_CUDA, _capi.BACKEND_HIP
NO_IGNORE_INDEX = _capi.NO_IGNORE_INDEX
PLAN_AUTO, PLAN_ONE_PASS, PLAN_TILED_HIDDEN_SUM, PLAN_TILED, PLAN_ON_CHIP = (
    _capi.PLAN_AUTO, _capi.PLAN_ONE_PASS, _capi.PLAN_TILED_HIDDEN_SUM, _capi.PLAN_TILED, _capi.PLAN_ON_CHIP)
INVALID_LABELS_REPORT, INVALID_LABELS_IGNORE = _capi.INVALID_LABELS_REPORT, _capi.INVALID_LABELS_IGNORE
SOFTMAX, LOG_SOFTMAX = _capi.SOFTMAX, _capi.LOG_SOFTMAX
Desc, Tensors, SoftmaxDesc = _capi.Desc, _capi.Tensors, _capi.SoftmaxDesc
ALL_GATHER, VocabShard = _capi.ALL_GATHER, _capi.VocabShard
LinearDesc, LinearTensors = _capi.LinearDesc, _capi.LinearTensors
DESC_LAYOUT = _capi.DESC_LAYOUT


def make_desc(rows, classes, dtype, label_type, reduction, ignore_index=-100, smoothing=0.0, all_ignored_zero=0,
              z_loss=0.0, softcap=0.0, invalid_labels=INVALID_LABELS_REPORT, inner=1, loss_dtype=None,
              grad_dtype=None, temperature=1.0):
    """A descriptor with xent_ce_desc_init's defaults for what is not given."""
    return Desc(rows, classes, inner, dtype, dtype if loss_dtype is None else loss_dtype,
                dtype if grad_dtype is None else grad_dtype, label_type, reduction, ignore_index, smoothing,
                int(all_ignored_zero), z_loss, softcap, invalid_labels, None, temperature)
