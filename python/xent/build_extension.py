"""Builds the package's C++ calls (xent/_C.cpp) against the PyTorch of this
Python: what pip does when it installs from source, for an install that has
no xent._C (the wheel, which keeps the user's PyTorch and so cannot carry an
extension built for one). It needs a C++ compiler and PyTorch's headers
(PyPI's torch wheels have them) and takes about a minute; without it every
call takes the Python path, which costs more per call (docs/PERFORMANCE.md,
"Host overhead").

    python -m xent.build_extension           # into the cache xent looks in
    python xent/build_extension.py --out F   # a _C.so at F (the GPU run's)

The cache is $XENT_CACHE_DIR, else $XDG_CACHE_HOME/xent, else ~/.cache/xent,
one directory per PyTorch, Python and source (cache_dir()): an upgraded
torch, or another xent, finds no stale build. Runs as a file as well as a
module, importing nothing of the package (the package imports it)."""

import argparse
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def sources(include=None):
    """_C.cpp and the xent.h it includes: the package's copies (installed
    beside it), else the checkout's (runtime/xent.h)."""
    header = os.path.join(include or HERE, "xent.h")
    if include is None and not os.path.exists(header):
        header = os.path.join(os.path.dirname(os.path.dirname(HERE)), "runtime", "xent.h")
    return os.path.join(HERE, "_C.cpp"), header


def cache_dir(torch):
    """Where a build for this torch, Python and source lives, or None when
    the package has no source to build (an install without _C.cpp)."""
    source, header = sources()
    if not (os.path.exists(source) and os.path.exists(header)):
        return None
    digest = hashlib.sha256()
    for path in (source, header):
        with open(path, "rb") as f:
            digest.update(f.read())
    root = os.environ.get("XENT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xent")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    name = f"ext-torch{torch.__version__}-{sys.implementation.cache_tag}-abi{abi}-{digest.hexdigest()[:12]}"
    return os.path.join(root, name.replace("+", "_"))


def cached(torch):
    """The cached _C for this torch, or None."""
    where = cache_dir(torch)
    path = os.path.join(where, "_C.so") if where else None
    return path if path and os.path.exists(path) else None


def command(torch, out, include=None):
    """The compiler's command line, as torch.utils.cpp_extension builds it."""
    from torch.utils import cpp_extension
    source, header = sources(include)
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=_C",
             "-I" + os.path.dirname(header), "-isystem", sysconfig.get_paths()["include"]]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, "_PYBIND11_" + name, None)
        if value is not None:
            flags.append(f'-DPYBIND11_{name}="{value}"')
    flags += [a for p in cpp_extension.include_paths() for a in ("-isystem", p)]
    libs = ["-L" + p for p in cpp_extension.library_paths()] + ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    compiler = os.environ.get("CXX", "c++")
    return [compiler, *flags, source, "-o", out, *libs]


def build(out=None, include=None, quiet=False):
    """Compiles _C into out (default: the cache) and returns its path. The
    file appears whole or not at all (written beside it, then renamed)."""
    import torch
    if out is None:
        where = cache_dir(torch)
        if where is None:
            raise RuntimeError("xent: this install has no _C.cpp and xent.h to build the extension from")
        os.makedirs(where, exist_ok=True)
        out = os.path.join(where, "_C.so")
    out = os.path.abspath(out)
    fd, partial = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(out))
    os.close(fd)
    try:
        cmd = command(torch, partial, include)
        if not quiet:
            print(" ".join(cmd), flush=True)
        try:
            subprocess.run(cmd, check=True)
        except FileNotFoundError as e:
            raise RuntimeError(f"xent: no C++ compiler ({cmd[0]}; set CXX): {e}") from None
        os.replace(partial, out)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    if not quiet:
        print(f"built {out} for PyTorch {torch.__version__}")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the _C.so to write (default: the cache xent looks in)")
    parser.add_argument("--include", help="the directory of xent.h (default: beside _C.cpp, else the checkout's)")
    parser.add_argument("positional_out", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        build(args.out or args.positional_out, args.include)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
