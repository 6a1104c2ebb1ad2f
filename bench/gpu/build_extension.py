#!/usr/bin/env python3
"""Builds the package's extension (python/xent/_C.cpp) against the PyTorch
of this Python, as pip's build would, into OUT (a _C.so that
XENT_EXTENSION names): the GPU run compiles it on the device, whose PyTorch
and Python differ from this machine's."""

import os
import subprocess
import sys
import sysconfig

import torch
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    out = sys.argv[1]
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             "-DTORCH_API_INCLUDE_EXTENSION_H", "-I" + os.path.join(ROOT, "runtime"),
             "-isystem", sysconfig.get_paths()["include"]]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, "_PYBIND11_" + name, None)
        if value is not None:
            flags.append(f'-DPYBIND11_{name}="{value}"')
    flags += [a for p in cpp_extension.include_paths() for a in ("-isystem", p)]
    libs = ["-L" + p for p in cpp_extension.library_paths()] + ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    cmd = ["g++", *flags, os.path.join(ROOT, "python", "xent", "_C.cpp"), "-o", out, *libs]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    print(f"built {out} for PyTorch {torch.__version__}")


if __name__ == "__main__":
    main()
