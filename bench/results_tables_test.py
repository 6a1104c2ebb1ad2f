"""docs/PERFORMANCE.md's results and the README's headline table are the
committed files' numbers: the block between each file's markers is what
bench/results_tables.py renders from the folder the block names, byte for
byte (a number edited by hand, or a file changed without rerunning the
script, fails here)."""

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


def render(tables, name, env, results):
    """tables() or headline() of a folder holding one file, `name`, made
    here from env and results."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, name), "w") as f:
            json.dump(dict(environment=env, complete=True, results=results), f)
        return tables(d)


class ResultsTables(unittest.TestCase):
    def check_block(self, doc_path, marker, render, flag=""):
        """The block between doc_path's marker lines, against render() of
        the folder the block names; returns the block."""
        with open(os.path.join(ROOT, doc_path)) as f:
            doc = f.read()
        self.assertIn(f"<!-- {marker} begin -->\n", doc)
        block = doc.split(f"<!-- {marker} begin -->\n", 1)[1].split(f"<!-- {marker} end -->", 1)[0]
        named = re.search(r"`bench/results_tables\.py (bench/results/[^` ]+)" + re.escape(flag) + "`", block)
        self.assertIsNotNone(named, f"the {marker} block names no folder")
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            want = render(named.group(1))
        finally:
            os.chdir(cwd)
        self.assertEqual(block, want + "\n")
        return block

    def test_performance_md_matches_the_files(self):
        block = self.check_block(os.path.join("docs", "PERFORMANCE.md"), "results", results_tables.tables)
        # Every measured case of the files is a row of the block.
        self.assertGreaterEqual(block.count("| large |"), 9)

    def test_readme_headline_matches_the_files(self):
        block = self.check_block("README.md", "headline", results_tables.headline, flag=" --headline")
        self.assertIn("| fwd | bf16 | 16384x131072 |", block)

    def test_headline_table(self):
        """The headline from a run measured as users call it: the package's
        TB/s beside each peer's, '-' where a peer did not run, the fastest
        of Quack, Liger-Kernel, PyTorch and torch.compile over xent with the
        range of the spreads; a case no peer ran is left out."""
        env = dict(device="GPU X", torch="2.11", commit="abcdef0123", date="2026-01-02T00:00:00",
                   timing=dict(reps=25, clock="CUDA events"))
        ok = lambda s: dict(s=s, spread=dict(median=s, p10=s, p90=s))  # noqa: E731
        results = [
            dict(group="large", op="fwd", dtype="bf16", shape=[16, 4096], model_bytes=4e12,
                 impls=dict(xent=ok(1.0), quack=ok(1.25), liger=dict(error="no GPU"), torch_eager=ok(4.0),
                            torch_compile=ok(2.0))),
            dict(group="nd", op="fwd", dtype="bf16", shape=[2, 3, 4], model_bytes=4e12,
                 impls=dict(xent=ok(1.0), torch_eager=ok(4.0))),
            dict(group="small_vocab", op="fwd", dtype="bf16", shape=[64, 10], model_bytes=4e12,
                 impls=dict(xent=ok(2.0), liger=ok(8.0), torch_compile=ok(1.0))),
            dict(group="softmax", op="sm_fwd", dtype="bf16", shape=[8, 16], model_bytes=4e12,
                 impls=dict(xent=ok(1.0))),
        ]
        text = render(results_tables.headline, "bench.json", env, results)
        self.assertIn("GPU X, commit abcdef0, 2026-01-02, PyTorch 2.11; TB/s of model bytes, the median of 25 calls "
                      "of each, interleaved", text)
        self.assertIn("| fwd | bf16 | 16x4096 | 4.00 | 3.20 | - | 1.00 | 2.00 | 1.25x (1.25-1.25) (Quack) |", text)
        self.assertIn("| fwd | bf16 | 2x3x4 | 4.00 | - | - | 1.00 | - | 4.00x (4.00-4.00) (PyTorch) |", text)
        # torch.compile faster than xent: below 1, beside a slower peer
        self.assertIn("| fwd | bf16 | 64x10 | 2.00 | - | 0.50 | - | 4.00 | 0.50x (0.50-0.50) (torch.compile) |", text)
        self.assertNotIn("8x16", text)

    def test_tune_table(self):
        """The `tune` group's table, from a tune.json made here: a column per
        launch shape (or count of class slices) in the order first met, the
        table's first, the best correct shape of a row in bold, a wrong one
        marked, a refused one named, a shape a row lacks as '-'."""
        env = dict(device="GPU X", commit="abcdef0123", date="2026-01-02T00:00:00")
        shapes = lambda *cells: [dict(row_shape=k, ok=ok, **({"xent_tbps": t} if t else {"error": "refused"}))  # noqa: E731
                                 for k, ok, t in cells]
        results = [
            dict(op="fwd", shape=[16, 4096], shapes=shapes((None, True, 1.5), ([32, 256], True, 2.25),
                                                         ([0, 512], False, 3.0))),
            dict(op="bwd", shape=[16, 4096], shapes=shapes((None, True, 1.0), ([0, 512], False, None))),
            dict(op="fwd", shape=[8, 1000, 32, 32], shapes=[dict(column_slices=k, ok=True, xent_tbps=t)
                                                          for k, t in ((None, 2.0), (1, 0.5), (16, 2.5))]),
        ]
        text = render(results_tables.tables, "tune.json", env, results)
        self.assertIn("**Launch shapes** (bf16): GPU X, commit abcdef0, 2026-01-02", text)
        self.assertIn("| pass | shape | table's | 32 a row, 256 | a row a block of 512 | runtime's slices | 1 slices "
                      "| 16 slices |", text)
        self.assertIn("| fwd | 16x4096 | 1.50 | **2.25** | wrong (3.00) | - | - | - |", text)
        self.assertIn("| bwd | 16x4096 | **1.00** | - | refused | - | - | - |", text)
        self.assertIn("| fwd | 8x1000x32x32 | - | - | - | 2.00 | 0.50 | **2.50** |", text)

    def test_linear_table(self):
        """bench_linear.py's table, from a linear.json made here: the
        package first, each method's median (min-max) and peak, a peer that
        did not run as '-', the package over the faster GEMMs; each GEMM's
        first cuBLASLt candidate against its fastest; then the sweep
        beside the default's interleaved calls, a failed plan as '-'."""
        env = dict(device="GPU X", commit="abcdef0123", date="2026-01-02T00:00:00")
        t = lambda med, lo, hi, mib=None: dict(  # noqa: E731
            s=med, spread=dict(min=lo, median=med, max=hi), peak_extra_bytes=None if mib is None else mib << 20)
        methods = dict(xent_package=t(0.1, 0.09, 0.12, 48), xent=t(0.095, 0.09, 0.1, 48), gemms=t(0.08, 0.08, 0.081),
                       gemms_best=t(0.07, 0.069, 0.071), torch_eager=t(0.09, 0.089, 0.091, 4096),
                       liger=dict(error="not installed"))
        sweep = [dict(memory_mib=512, plan=3, **t(0.09, 0.089, 0.092, 300)), dict(memory_mib=1 << 40, error="OOM")]
        search = [dict(gemm="logits", m=16, n=32, k=8, best=1,
                       candidates=[dict(rank=0, **t(0.03, 0.029, 0.031)), dict(rank=1, **t(0.024, 0.023, 0.025))])]
        results = [dict(n=16, h=8, v=32, dtype="bf16", methods=methods, package_over_gemms=1.25,
                        package_over_gemms_best=1.43, gemms_search=search, sweep=sweep,
                        sweep_default_spread=dict(min=0.099, median=0.1, max=0.11))]
        text = render(results_tables.tables, "linear.json", env, results)
        self.assertIn("| N x H x V | xent (package) | xent (C call) | the GEMMs alone | the GEMMs, cuBLASLt's "
                      "fastest |", text)
        self.assertIn("| 16 x 8 x 32 bf16 | 100.0 ms (90.0-120.0), 48 MiB | 95.0 ms (90.0-100.0), 48 MiB | "
                      "80.0 ms (80.0-81.0) | 70.0 ms (69.0-71.0) | 90.0 ms (89.0-91.0), 4096 MiB | - | - | - | 1.43 |",
                      text)
        # Each GEMM's first candidate against the fastest.
        self.assertIn("| 16 x 8 x 32 bf16 | logits (16 x 32 x 8) | 30.0 ms (29.0-31.0) | 24.0 ms (23.0-25.0) "
                      "(candidate 1 of 2) | 1.25 |", text)
        self.assertIn("| 16 x 8 x 32 bf16 | default (64 MiB) | 100.0 ms (99.0-110.0), 48 MiB | 1.00 |", text)
        self.assertIn("| | 512 MiB, TILED | 90.0 ms (89.0-92.0), 300 MiB | 0.90 |", text)
        self.assertIn("| | one pass | - | - |", text)

    def test_comparison_table(self):
        """A run measured as users call it: the package's TB/s and fractions,
        the best peer, each ratio with its p10-p90 range and 'level' where the
        spreads overlap, the C call beside; an implementation that did not run
        is not a ratio."""
        env = dict(device="GPU X", driver="1", cuda="13", torch="2.11", commit="abcdef0123",
                   date="2026-01-02T00:00:00", package_path="C++ (xent._C)", peak_tbps=4.0,
                   timing=dict(reps=25, clock="CUDA events"))

        def impl(median, p10, p90, tbps):
            return dict(s=median, tbps=tbps, spread=dict(median=median, p10=p10, p90=p90))

        results = [
            dict(group="large", op="fwd", dtype="bf16", shape=[16, 4096], fraction_of_roofline=0.9, best_peer="quack",
                 impls=dict(xent=impl(1.0, 0.99, 1.01, 3.0), xent_c=impl(0.98, 0.97, 0.99, 3.06),
                            quack=impl(1.1, 1.09, 1.11, 2.73), liger=dict(error="no GPU"))),
            dict(group="large", op="bwd", dtype="bf16", shape=[16, 4096], fraction_of_roofline=0.5, best_peer="quack",
                 impls=dict(xent=impl(1.0, 0.9, 1.1, 2.0), xent_c=impl(1.0, 0.9, 1.1, 2.0),
                            quack=impl(0.95, 0.9, 1.0, 2.1))),
            dict(group="nd", op="fwd", dtype="bf16", shape=[2, 3, 4], fraction_of_roofline=0.5, best_peer=None,
                 impls=dict(xent=dict(error="disagrees"), xent_c=impl(1.0, 1.0, 1.0, 1.0))),
        ]
        text = render(results_tables.tables, "bench.json", env, results)
        self.assertIn("the package through C++ (xent._C); 25 calls of each implementation interleaved", text)
        self.assertIn("| large | fwd | bf16 | 16x4096 | 3.00 | 90% | 75% | 2.73 (quack) | 1.10x (1.08-1.12) | 3.06 "
                      "| 1.12x (1.10-1.14) |", text)
        self.assertIn("| large | bwd | bf16 | 16x4096 | 2.00 | 50% | 50% | 2.10 (quack) | 0.95x (0.82-1.11), level |",
                      text)
        self.assertIn("| nd | fwd | bf16 | 2x3x4 | not measured: disagrees |", text)


if __name__ == "__main__":
    unittest.main()
