#!/usr/bin/env bash
# The wheel as a user installs it: python/wheel_test.sh WHEEL (CI's wheel
# step, after python/build_wheel.py). Into a fresh venv made with
# --system-site-packages over Debian's python3-torch, with no package index
# and from outside the checkout: pip keeps the user's torch, the installed
# package's cross entropy and gradient match F.cross_entropy in float64 on
# the Python path (the wheel has no xent._C), `python -m
# xent.build_extension` builds the C++ path against this torch into the
# cache and the package then takes it, and the installed libraries need
# nothing manylinux does not allow (no libgomp, no CUDA runtime in libxent).
set -euo pipefail
wheel="$(readlink -f "$1")"
python=/usr/bin/python3
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"  # nothing of the checkout on the path

"$python" -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
export XENT_CACHE_DIR="$work/cache"  # not the user's cache
before="$("$py" -c 'import torch; print(torch.__version__, torch.__file__)')"
"$work/venv/bin/pip" install --no-index --no-cache-dir --quiet "$wheel"
after="$("$py" -c 'import torch; print(torch.__version__, torch.__file__)')"
[ "$before" = "$after" ] || { echo "FAIL: installing the wheel changed PyTorch: $before -> $after"; exit 1; }
echo "torch kept: $after"

lib="$("$py" -c 'import os, xent; print(os.path.join(os.path.dirname(xent.__file__), "libxent_shared.so"))')"
case "$lib" in "$work/venv/"*) ;; *) echo "FAIL: xent imported from $lib, not the venv"; exit 1 ;; esac
if readelf -d "$lib" | grep -E 'NEEDED.*(libgomp|libcudart|libamdhip)'; then
  echo "FAIL: the wheel's libxent needs a library the wheel does not carry"
  exit 1
fi

check() {  # $1: which path the package must take (python or C++)
  XENT_EXPECT="$1" "$py" - << 'PY'
import os
import sys

import torch
import torch.nn.functional as F
import xent

assert xent.__file__.startswith(sys.prefix), xent.__file__
native = xent._native.module
if os.environ["XENT_EXPECT"] == "python":
    assert native is None, native
    assert "python -m xent.build_extension" in xent._native.why, xent._native.why
else:
    assert native is not None, xent._native.why
    assert native.__file__.startswith(os.environ["XENT_CACHE_DIR"]), native.__file__
torch.manual_seed(0)
x = torch.randn(7, 33, dtype=torch.float64, requires_grad=True)
y = torch.randint(0, 33, (7,))
y[3] = -100
got = xent.cross_entropy(x, y, label_smoothing=0.1)
want = F.cross_entropy(x, y, label_smoothing=0.1)
assert abs(got.item() - want.item()) <= 1e-12 * abs(want.item()), (got.item(), want.item())
(g,) = torch.autograd.grad(got, x)
(w,) = torch.autograd.grad(want, x)
assert (g - w).abs().max().item() <= 1e-12, (g - w).abs().max().item()
big = torch.randn(512, 1000, dtype=torch.float32)  # past one thread's share: the wheel's own threads
yb = torch.randint(0, 1000, (512,))
got = xent.cross_entropy(big, yb, reduction="none").double()
want = F.cross_entropy(big.double(), yb, reduction="none")
assert (got - want).abs().max().item() <= 1e-5 * want.abs().max().item(), (got - want).abs().max().item()
print(f"installed wheel, {os.environ['XENT_EXPECT']} path: cross_entropy and its gradient match F.cross_entropy")
PY
}
check python
"$py" -m xent.build_extension > "$work/build.log" 2>&1 || { cat "$work/build.log"; echo "FAIL: python -m xent.build_extension"; exit 1; }
check C++

"$py" - << 'PY'
import ctypes
from xent import _capi
h = ctypes.c_void_p()
status = _capi.lib.xent_create(ctypes.byref(h), _capi.BACKEND_CUDA)
message = _capi.lib.xent_last_error().decode()
assert status != 0 and "libxent_cuda.so" in message, (status, message)
print("installed wheel without the CUDA plugin: a CUDA handle is refused naming it: " + message)
PY
echo "1 passed, 0 failed"
