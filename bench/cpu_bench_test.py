"""docs/PERFORMANCE.md's CPU table is the newest committed result of
bench/cpu_bench.py, rendered by its --table; and --table renders a made-up
result as a table that names each case with its medians."""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
BENCH = os.path.join(ROOT, "bench", "cpu_bench.py")


def render(path):
    return subprocess.run([sys.executable, BENCH, "--table", path], capture_output=True, text=True,
                          check=True).stdout.rstrip("\n")


class CpuBenchTable(unittest.TestCase):
    def test_the_page_holds_the_newest_result(self):
        # bench/cpu_bench.py's files are <date>-cpu-<commit>.json (not the
        # host-overhead files, <date>-cpu-host-overhead*.json).
        results = sorted(p for p in glob.glob(os.path.join(ROOT, "bench", "results", "*-cpu-*.json"))
                         if re.fullmatch(r"\d{4}-\d\d-\d\d-cpu-[0-9a-f]+\.json", os.path.basename(p)))
        self.assertTrue(results, "no committed CPU result")
        with open(os.path.join(ROOT, "docs", "PERFORMANCE.md")) as f:
            page = f.read()
        begin, end = "<!-- cpu_bench begin -->\n", "\n<!-- cpu_bench end -->"
        self.assertIn(begin, page)
        block = page[page.index(begin) + len(begin):page.index(end)]
        self.assertEqual(block, render(results[-1]))

    def test_table_of_a_made_up_result(self):
        stats = {"min": 1.0, "median": 2.0, "max": 3.0}
        result = {"date": "2000-01-01", "commit": "abc1234", "machine": "a CPU, 2 CPUs", "threads": 2,
                  "torch": "9.9", "path": "C++", "rounds": 5,
                  "cases": {"forward 8 x 4": {"xent_ms": stats, "torch_ms": dict(stats, median=4.0),
                                              "xent_over_torch": 0.5}}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(result, f)
            table = render(path)
        self.assertIn("commit abc1234", table)
        self.assertIn("| forward 8 x 4 | 2.00 (1.00-3.00) | 4.00 (1.00-3.00) | 0.50 |", table)


if __name__ == "__main__":
    unittest.main()
