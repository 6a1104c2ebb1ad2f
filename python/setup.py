"""Builds the package with libxent_shared.so inside it: the library given by
$XENT_LIBRARY, or built here with the checkout's ./bazelw (flags from
$XENT_BAZEL_FLAGS, e.g. --config=cuda for the CUDA backend)."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def library():
    given = os.environ.get("XENT_LIBRARY")
    if given:
        return given
    bazelw = os.path.join(ROOT, "bazelw")
    if not os.path.exists(bazelw):
        raise RuntimeError("xent: set XENT_LIBRARY to a libxent_shared.so, or install from a checkout of xent "
                           "(pip install ./python) so that ./bazelw can build it")
    flags = os.environ.get("XENT_BAZEL_FLAGS", "").split()
    subprocess.check_call([bazelw, "build", *flags, "//runtime:libxent_shared.so"], cwd=ROOT)
    return os.path.join(ROOT, "bazel-bin", "runtime", "libxent_shared.so")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "xent", "libxent_shared.so")
        shutil.copyfile(library(), dest)
        os.chmod(dest, 0o755)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for the platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
