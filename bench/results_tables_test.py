"""docs/PERFORMANCE.md's results are the committed files' numbers: the block
between its results markers is what bench/results_tables.py renders from the
folder the block names, byte for byte (a number edited by hand, or a file
changed without rerunning the script, fails here)."""

import os
import re
import sys
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


if __name__ == "__main__":
    unittest.main()
