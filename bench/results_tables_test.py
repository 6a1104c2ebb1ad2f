"""docs/PERFORMANCE.md's results are the committed files' numbers: the block
between its results markers is what bench/results_tables.py renders from the
folder the block names, byte for byte (a number edited by hand, or a file
changed without rerunning the script, fails here)."""

import json
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import results_tables  # noqa: E402


class ResultsTables(unittest.TestCase):
    def test_performance_md_matches_the_files(self):
        with open(os.path.join(ROOT, "docs", "PERFORMANCE.md")) as f:
            doc = f.read()
        self.assertIn("<!-- results begin -->\n", doc)
        block = doc.split("<!-- results begin -->\n", 1)[1].split("<!-- results end -->", 1)[0]
        named = re.search(r"`bench/results_tables\.py (bench/results/[^`]+)`", block)
        self.assertIsNotNone(named, "the results block names no folder")
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            want = results_tables.tables(named.group(1))
        finally:
            os.chdir(cwd)
        self.assertEqual(block, want + "\n")
        # Every measured case of the files is a row of the block.
        self.assertGreaterEqual(block.count("| large |"), 9)

    def test_tune_table(self):
        """The `tune` group's table, from a tune.json made here: a column per
        launch shape in the order first met, the table's first, the best
        correct shape of a row in bold, a wrong one marked, a refused one
        named, a shape a row lacks as '-'."""
        env = dict(device="GPU X", commit="abcdef0123", date="2026-01-02T00:00:00")
        shapes = lambda *cells: [dict(row_shape=k, ok=ok, **({"xent_tbps": t} if t else {"error": "refused"}))  # noqa: E731
                                 for k, ok, t in cells]
        results = [
            dict(op="fwd", shape=[16, 4096], shapes=shapes((None, True, 1.5), ([32, 256], True, 2.25),
                                                         ([0, 512], False, 3.0))),
            dict(op="bwd", shape=[16, 4096], shapes=shapes((None, True, 1.0), ([0, 512], False, None))),
        ]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "tune.json"), "w") as f:
                json.dump(dict(environment=env, complete=True, results=results), f)
            text = results_tables.tables(d)
        self.assertIn("**Launch shapes** (bf16): GPU X, commit abcdef0, 2026-01-02", text)
        self.assertIn("| pass | shape | table's | 32 a row, 256 | a row a block of 512 |", text)
        self.assertIn("| fwd | 16x4096 | 1.50 | **2.25** | wrong (3.00) |", text)
        self.assertIn("| bwd | 16x4096 | **1.00** | - | refused |", text)


if __name__ == "__main__":
    unittest.main()
