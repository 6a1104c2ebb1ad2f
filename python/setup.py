"""Builds the package with libxent_shared.so inside it, and beside it the GPU
plugins (libxent_cuda.so, libxent_hip.so) it loads where their device is:
the library given by $XENT_LIBRARY with the plugins found beside it, or all
built here with the checkout's ./bazelw (flags from $XENT_BAZEL_FLAGS:
--config=cuda adds the CUDA plugin, --config=rocm the HIP one). The same
wheel serves a CPU-only machine (the cpu backend) and a GPU one. Beside
them, the extension xent._C (extension() below) for the PyTorch it is
built against."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


PLUGINS = {"--config=cuda": "libxent_cuda.so", "--config=rocm": "libxent_hip.so"}


def library():
    """libxent_shared.so and the plugins to ship beside it."""
    given = os.environ.get("XENT_LIBRARY")
    if given:
        here = os.path.dirname(os.path.abspath(given))
        return given, [os.path.join(here, p) for p in sorted(PLUGINS.values()) if os.path.exists(os.path.join(here, p))]
    bazelw = os.path.join(ROOT, "bazelw")
    if not os.path.exists(bazelw):
        raise RuntimeError("xent: set XENT_LIBRARY to a libxent_shared.so, or install from a checkout of xent "
                           "(pip install ./python) so that ./bazelw can build it")
    flags = os.environ.get("XENT_BAZEL_FLAGS", "").split()
    subprocess.check_call([bazelw, "build", *flags, "//runtime:libxent_shared.so", "//runtime:plugins"], cwd=ROOT)
    out = os.path.join(ROOT, "bazel-bin", "runtime")
    # Only the plugins these flags built: bazel-bin may hold others from
    # earlier builds.
    return os.path.join(out, "libxent_shared.so"), [os.path.join(out, p) for f, p in PLUGINS.items() if f in flags]


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib, plugins = library()
        for src in [lib] + plugins:
            dest = os.path.join(self.build_lib, "xent", os.path.basename(src))
            shutil.copyfile(src, dest)
            os.chmod(dest, 0o755)
        # xent.h beside _C.cpp: python -m xent.build_extension builds the
        # extension from them where the install has none (the wheel).
        header = os.path.join(os.environ.get("XENT_INCLUDE", os.path.join(ROOT, "runtime")), "xent.h")
        if os.path.exists(header):
            shutil.copyfile(header, os.path.join(self.build_lib, "xent", "xent.h"))


def wheel_command():
    """bdist_wheel tagging the wheel py3-none-$XENT_WHEEL_PLATFORM where
    python/build_wheel.py sets it (a wheel with no Python extension, its
    platform checked there); pip's own elsewhere."""
    if not os.environ.get("XENT_WHEEL_PLATFORM"):
        return {}
    try:  # setuptools 70.1 has it; before, the wheel package
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class PortableWheel(bdist_wheel):
        def get_tag(self):
            return "py3", "none", os.environ["XENT_WHEEL_PLATFORM"]

    return {"bdist_wheel": PortableWheel}


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for the platform."""

    def has_ext_modules(self):
        return True


def extension():
    """The package's calls in C++ (xent/_C.cpp), compiled against the PyTorch
    this install sees (pip install --no-build-isolation keeps yours), with
    xent.h from the checkout ($XENT_INCLUDE: its directory, elsewhere).
    Without PyTorch's C++ headers or a compiler the package installs without
    it and runs every call through its Python path, which costs more per
    call (docs/PERFORMANCE.md, "Host overhead"); XENT_NO_EXTENSION=1 skips
    it."""
    if os.environ.get("XENT_NO_EXTENSION") == "1":
        return {}
    include = os.environ.get("XENT_INCLUDE", os.path.join(ROOT, "runtime"))
    try:
        from torch.utils import cpp_extension
    except ImportError:
        print("xent: no PyTorch at build time (pip's build isolation?): the package installs without xent._C; "
              "pip install --no-build-isolation builds it against your PyTorch")
        return {}
    if not os.path.exists(os.path.join(include, "xent.h")):
        print(f"xent: no xent.h in {include}: the package installs without xent._C (set XENT_INCLUDE)")
        return {}
    ext = cpp_extension.CppExtension("xent._C", ["xent/_C.cpp"], include_dirs=[include],
                                     extra_compile_args=["-std=c++17", "-O2"], optional=True)
    return {"ext_modules": [ext], "cmdclass": {"build_ext": cpp_extension.BuildExtension.with_options(
        use_ninja=False)}}


native = extension()
setup(cmdclass={"build_py": BuildWithLibrary, **wheel_command(), **native.get("cmdclass", {})},
      ext_modules=native.get("ext_modules", []), distclass=BinaryDistribution)
