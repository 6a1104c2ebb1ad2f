#!/usr/bin/env bash
# `pip install ./python` as a user with PyTorch already installed does it:
# into a venv made with --system-site-packages over Debian's python3-torch
# (1.13.0a0, a pre-release version number), with no package index, so that
# any requirement the installed PyTorch does not meet fails here instead of
# downloading another PyTorch. Then: the same torch, from the same place,
# and the installed package's cross entropy against F.cross_entropy in
# float64. The library given (XENT_LIBRARY) has the CUDA plugin beside it,
# as a build with --config=cuda does: the wheel ships it, and on a machine
# without a GPU the package runs on the cpu backend while a CUDA handle is
# refused with the installed plugin's path and reason.
set -euo pipefail
python=/usr/bin/python3
if ! "$python" -c "import torch, setuptools, wheel" 2>/dev/null || ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "SKIPPED: $python lacks torch, setuptools, wheel or venv (./bazelw installs them)"
  exit 0
fi
runfiles="${TEST_SRCDIR:-$PWD/..}/xent"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/lib"
cp -L "$runfiles/runtime/libxent_shared.so" "$runfiles/runtime/libxent_cuda.so" "$work/lib/"
lib="$work/lib/libxent_shared.so"
# The package as a user's checkout has it (runfiles are links).
mkdir "$work/python"
cp -L "$runfiles/python/pyproject.toml" "$runfiles/python/setup.py" "$work/python/"
cp -rL "$runfiles/python/xent" "$work/python/xent"
cp -rL "$runfiles/python/xent_jax" "$work/python/xent_jax"
rm -f "$work/python/xent/_C.so"  # the build's; pip compiles its own
mkdir "$work/runtime"
cp -L "$runfiles/runtime/xent.h" "$work/runtime/"

"$python" -m venv --system-site-packages "$work/venv"
before="$("$work/venv/bin/python" -c 'import torch; print(torch.__version__, torch.__file__)')"
XENT_LIBRARY="$lib" "$work/venv/bin/pip" install --no-index --no-build-isolation --no-cache-dir --quiet "$work/python" \
  > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "FAIL: pip install ./python needs more than the installed torch ($before)"; exit 1; }
after="$("$work/venv/bin/python" -c 'import torch; print(torch.__version__, torch.__file__)')"
if [ "$before" != "$after" ]; then
  echo "FAIL: pip install ./python changed PyTorch: $before -> $after"
  exit 1
fi
echo "torch kept: $after"

cd "$work"
"$work/venv/bin/python" - <<'PY'
import torch
import torch.nn.functional as F
import xent

assert xent.__file__.startswith(__import__("sys").prefix), xent.__file__
# The C++ path, compiled by pip against this torch.
assert xent._native.module is not None, xent._native.why
assert xent._native.module.__file__.startswith(__import__("sys").prefix), xent._native.module.__file__
torch.manual_seed(0)
x = torch.randn(7, 33, dtype=torch.float64, requires_grad=True)
y = torch.randint(0, 33, (7,))
got = xent.cross_entropy(x, y)
want = F.cross_entropy(x, y)
assert abs(got.item() - want.item()) <= 1e-12 * abs(want.item()), (got.item(), want.item())
(g,) = torch.autograd.grad(got, x)
(w,) = torch.autograd.grad(want, x)
assert (g - w).abs().max().item() <= 1e-12, (g - w).abs().max().item()
print("installed package: cross_entropy and its gradient match F.cross_entropy in float64 (through xent._C)")

import ctypes, os
from xent import _capi
here = os.path.dirname(xent.__file__)
plugin = os.path.join(here, "libxent_cuda.so")
assert os.path.exists(plugin), sorted(os.listdir(here))
h = ctypes.c_void_p()
status = _capi.lib.xent_create(ctypes.byref(h), _capi.BACKEND_CUDA)
message = _capi.lib.xent_last_error().decode()
if status == 0:
    print("installed package: the CUDA plugin opened a GPU")
    _capi.lib.xent_destroy(h)
else:
    assert plugin in message and ("no CUDA device" in message or "could not be loaded" in message), message
    print("installed package: a CUDA handle is refused as it should be here: " + message)
PY
echo "1 passed, 0 failed"
