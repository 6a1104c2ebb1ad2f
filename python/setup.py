"""Builds the package with libxent_shared.so inside it, and beside it the GPU
plugins (libxent_cuda.so, libxent_hip.so) it loads where their device is:
the library given by $XENT_LIBRARY with the plugins found beside it, or all
built here with the checkout's ./bazelw (flags from $XENT_BAZEL_FLAGS:
--config=cuda adds the CUDA plugin, --config=rocm the HIP one). The same
wheel serves a CPU-only machine (the cpu backend) and a GPU one."""

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


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for the platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
