"""Finds libxent and builds xent_jax's XLA FFI handlers (_ffi.cc) against the
installed jaxlib's headers, at first use, into a cache: one directory per
jaxlib, Python and source (a C++ compiler is needed once; about 15 s).

The cache is $XENT_CACHE_DIR, else $XDG_CACHE_HOME/xent, else ~/.cache/xent,
as for xent's PyTorch extension. libxent is $XENT_LIBRARY, else the xent
package's own libxent_shared.so (found without importing xent, which needs
PyTorch)."""

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    """The libxent_shared.so the handlers call."""
    explicit = os.environ.get("XENT_LIBRARY")
    if explicit:
        return explicit
    spec = importlib.util.find_spec("xent")
    for where in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(where, "libxent_shared.so")
        if os.path.exists(path):
            return path
    raise ImportError("xent_jax: libxent_shared.so not found: install xent's wheel (python/build_wheel.py) or point "
                      "XENT_LIBRARY at a libxent_shared.so")


def header_dir():
    """The directory of xent.h: the xent package's copy, else the checkout's."""
    spec = importlib.util.find_spec("xent")
    for where in (spec.submodule_search_locations or []) if spec else []:
        if os.path.exists(os.path.join(where, "xent.h")):
            return where
    checkout = os.path.join(os.path.dirname(os.path.dirname(HERE)), "runtime")
    if os.path.exists(os.path.join(checkout, "xent.h")):
        return checkout
    raise ImportError("xent_jax: xent.h not found beside the xent package or in a checkout")


def cache_path(jaxlib_version):
    source = os.path.join(HERE, "_ffi.cc")
    digest = hashlib.sha256()
    for path in (source, os.path.join(header_dir(), "xent.h")):
        with open(path, "rb") as f:
            digest.update(f.read())
    root = os.environ.get("XENT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xent")
    name = f"jax-ffi-jaxlib{jaxlib_version}-{sys.implementation.cache_tag}-{digest.hexdigest()[:12]}"
    return os.path.join(root, name.replace("+", "_"), "xent_jax_ffi.so")


def build(include_dir, jaxlib_version):
    """The handlers' shared library: the cached one, or compiled now."""
    out = cache_path(jaxlib_version)
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    lib = library_path()
    compiler = os.environ.get("CXX", "c++")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        tmp_out = os.path.join(tmp, "xent_jax_ffi.so")
        cmd = [compiler, "-O2", "-std=c++17", "-shared", "-fPIC",
               "-I" + header_dir(), "-isystem", include_dir, os.path.join(HERE, "_ffi.cc"), "-o", tmp_out,
               lib, "-Wl,-rpath," + os.path.dirname(os.path.abspath(lib))]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ImportError(f"xent_jax: compiling the XLA FFI handlers failed ({' '.join(cmd)}):\n{r.stderr}")
        os.replace(tmp_out, out)  # atomic: a concurrent build finds one whole file
    return out
