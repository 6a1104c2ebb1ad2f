"""bench/same_code.py: a build compared with itself is the same in every
mode, and a one-token change planted in a copy of the device library is
found, in the units and modes that compile it."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
TOOL = os.path.join(RUNFILES, "bench", "same_code.py")
GEN = os.path.join(RUNFILES, "gen")
KERNELS = os.path.join(RUNFILES, "kernels")
UNIT = "sm_bwd_f16_log_softmax"


def same_code(*args):
    return subprocess.run([sys.executable, TOOL, "--kernels", UNIT, *args], capture_output=True, text=True)


class SameCode(unittest.TestCase):
    def test_a_build_is_the_same_as_itself(self):
        r = same_code("--before", GEN, "--before-kernels", KERNELS, "--after", GEN, "--after-kernels", KERNELS)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for mode in ("cuda_sm90", "cuda_sm100", "cuda_host", "hip_gfx942", "hip_host", "hip_on_cuda", "emu_cuda",
                     "emu_hip"):
            self.assertIn(f"{mode}: 1 units, 1 the same, 0 differ", r.stdout)

    def test_a_planted_change_is_found(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "kernels")
            shutil.copytree(KERNELS, copy)
            path = os.path.join(copy, "device", "reduce.h")
            with open(path) as f:
                text = f.read()
            self.assertEqual(text.count("while (width < warps) width *= 2;"), 1)
            with open(path, "w") as f:
                f.write(text.replace("while (width < warps) width *= 2;", "while (width < warps) width *= 4;"))
            r = same_code("--before", GEN, "--before-kernels", KERNELS, "--after", GEN, "--after-kernels", copy,
                          "--modes", "cuda_sm90,emu_hip")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(f"DIFFERS cuda_sm90 {UNIT}.cu", r.stdout)
            self.assertIn(f"DIFFERS emu_hip {UNIT}.hip", r.stdout)
            self.assertIn("width *= 4", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
