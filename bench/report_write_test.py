"""sass_report.write_report, which both machine-code reports write with:
docs/PERFORMANCE.md's tables change only when the report goes to its
committed place (bench/results/<marker>.md, given relative or absolute), so
that a report written elsewhere (an experiment's, or one architecture's)
leaves the page as it was."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_report  # noqa: E402

PAGE = "intro\n<!-- isa_report begin -->\nold tables\n<!-- isa_report end -->\nrest\n"


class WriteReportTest(unittest.TestCase):

    def write(self, out):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "docs"))
            with open(os.path.join(root, "docs", "PERFORMANCE.md"), "w") as f:
                f.write(PAGE)
            os.environ["BUILD_WORKSPACE_DIRECTORY"] = root
            try:
                with redirect_stdout(io.StringIO()):
                    sass_report.write_report(out.replace("ROOT", root), "the report\n", "isa_report", "new tables")
            finally:
                del os.environ["BUILD_WORKSPACE_DIRECTORY"]
            with open(os.path.join(root, "docs", "PERFORMANCE.md")) as f:
                page = f.read()
            with open(os.path.join(root, out.replace("ROOT/", ""))) as f:
                self.assertEqual(f.read(), "the report\n")
            return page

    def test_committed_place_updates_the_page(self):
        for out in ["bench/results/isa_report.md", "ROOT/bench/results/isa_report.md", "./bench/results/isa_report.md"]:
            self.assertEqual(self.write(out), PAGE.replace("old tables", "new tables"), out)

    def test_elsewhere_leaves_the_page(self):
        for out in ["scratch/isa_report.md", "ROOT/bench/results/isa_gfx942.md", "bench/results/sass_report.md"]:
            self.assertEqual(self.write(out), PAGE, out)


if __name__ == "__main__":
    unittest.main()
