"""The package's calls in C++ (xent/_C.cpp), where the extension was built
for this PyTorch: `module` is it, initialised with libxent's functions, or
None with `why` saying what is missing. It is looked for in the package
(pip install ./python compiles it), else in the cache `python -m
xent.build_extension` builds it into for this torch (the wheel ships none);
$XENT_EXTENSION names a build's _C.so instead. XENT_NATIVE=0 turns it off,
XENT_NATIVE=1 makes its absence an ImportError (the tests run both paths).
Every call the extension declines, and every call when it is absent, takes
the Python path (_autograd.py)."""

import ctypes
import importlib.machinery
import importlib.util
import os

import torch

from . import _capi as C

module = None
why = None


def _import(path):
    """xent._C from the package, else from the cache, or from path
    ($XENT_EXTENSION: a build's _C.so, as $XENT_LIBRARY names a build's
    libxent)."""
    if not path:
        try:
            from . import _C
            return _C
        except ImportError as e:
            from . import build_extension
            path = build_extension.cached(torch)
            if path is None:
                raise ImportError(f"{e}; python -m xent.build_extension builds it (a C++ compiler and "
                                  "PyTorch's headers)") from None
    loader = importlib.machinery.ExtensionFileLoader("xent._C", path)
    spec = importlib.util.spec_from_file_location("xent._C", path, loader=loader)
    if spec is None or not os.path.exists(path):
        raise ImportError(f"XENT_EXTENSION is {path}, which does not exist")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _load():
    global module, why
    if os.environ.get("XENT_NATIVE") == "0":
        why = "turned off (XENT_NATIVE=0)"
        return
    try:
        _C = _import(os.environ.get("XENT_EXTENSION"))
    except ImportError as e:
        why = f"xent._C is not built for this PyTorch ({torch.__version__}): {e}"
        return
    try:
        functions = {name: ctypes.cast(getattr(C.lib, name), ctypes.c_void_p).value for name in _C.FUNCTIONS}
    except (ImportError, OSError) as e:  # no libxent: the Python path raises it at the first call
        why = f"libxent is not loaded: {e}"
        return
    gpu = C.BACKEND_HIP if getattr(torch.version, "hip", None) else C.BACKEND_CUDA
    _C.init(functions, C.XentError, C.InvalidLabelError, gpu, torch.Tensor, torch.nn.Parameter)
    module = _C


_load()
if module is None and os.environ.get("XENT_NATIVE") == "1":
    raise ImportError(f"xent: XENT_NATIVE=1, but the C++ path is unavailable: {why}")
