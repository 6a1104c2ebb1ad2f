"""bench/host_overhead.py on a few calls: both paths run, the C++ one is
the one measured (its library time is counted), and every case has its
figures, each with min <= median <= max."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")


class HostOverhead(unittest.TestCase):
    def test_runs(self):
        env = dict(os.environ,
                   XENT_LIBRARY=os.path.join(RUNFILES, "runtime", "libxent_shared.so"),
                   XENT_EXTENSION=os.path.join(RUNFILES, "python", "xent", "_C.so"),
                   PYTHONPATH=os.path.join(RUNFILES, "python"))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "overhead")
            subprocess.run([sys.executable, os.path.join(RUNFILES, "bench", "host_overhead.py"), "--out", out,
                            "--reps", "5", "--warmup", "2", "--rounds", "1"], env=env, check=True)
            with open(out + ".json") as f:
                result = json.load(f)
        self.assertTrue(result["paths"][0].startswith("C++"), result["paths"])
        self.assertTrue(result["paths"][1].startswith("Python"), result["paths"])
        self.assertEqual(len(result["cases"]), 6)
        for name, case in result["cases"].items():
            self.assertGreater(case["forward_library_us"]["min"], 0, name)
            for key, s in case.items():
                self.assertLessEqual(s["min"], s["median"], (name, key))
                self.assertLessEqual(s["median"], s["max"], (name, key))


if __name__ == "__main__":
    unittest.main()
