"""bench/bench.py --dry-run on the CPU: every case runs (the generated kernels
under the emulator, PyTorch on the CPU), xent agrees with PyTorch on each,
and the JSON and the PNG plot are written with what docs/PERFORMANCE.md says
they hold. bench/bench_linear.py --dry-run likewise: every method of the
fused linear cross entropy's benchmark runs or says why not."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.environ["TEST_SRCDIR"], "xent")


class DryRun(unittest.TestCase):
    def dry_run(self, script, out, timeout, *extra):
        """bench/<script> --dry-run writing OUT.*; its JSON report."""
        env = dict(os.environ, XENT_EXTENSION=os.path.join(ROOT, "python", "xent", "_C.so"))
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), "--dry-run",
                               "--lib", os.path.join(ROOT, "runtime", "libxent_shared.so"), "--out", out,
                               "--commit", "test", *extra], capture_output=True, text=True, timeout=timeout, env=env)
        print(proc.stdout, proc.stderr)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out + ".json") as f:
            return json.load(f)

    def test_dry_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "dry")
            report = self.dry_run("bench.py", out, 1200)
            env = report["environment"]
            for key in ("device", "driver", "date", "commit", "torch", "timing"):
                self.assertIn(key, env)
            self.assertEqual(env["commit"], "test")
            self.assertIs(report["complete"], True)
            self.assertFalse(os.path.exists(out + ".json.tmp"))
            results = report["results"]
            self.assertGreaterEqual(len(results), 10)
            self.assertEqual({r["op"] for r in results}, {"fwd", "bwd", "fwd_bwd", "sm_fwd", "sm_bwd"})
            for r in results:
                name = f"{r['group']} {r['op']} {r['dtype']} {r['shape']}"
                self.assertTrue(r["ok"], f"{name}: {r['errors']}")
                self.assertTrue(r["errors"], name)
                for key in ("xent_s", "xent_tbps", "roofline_tbps", "fraction_of_roofline", "model_bytes"):
                    self.assertGreater(r[key], 0, f"{name}: {key}")
                self.assertEqual(r["roofline"], "read" if r["op"] == "fwd" else "copy")
                if r["group"] == "tune":
                    continue
                # Every other case: the package (the headline) and its C
                # call, PyTorch eager and compiled, Liger-Kernel and Quack,
                # each checked against PyTorch in float64 and timed
                # together, or named with the reason it did not run; an N-d
                # case also PyTorch's loss and xent's after a transpose.
                impls = r["impls"]
                nd = len(r["shape"]) > 2
                transposed = {"xent_transposed", "torch_transposed"} if nd else set()
                self.assertEqual(set(impls), {"xent", "xent_c", "torch_eager", "torch_compile", "liger", "quack"}
                                 | transposed, name)
                for impl in ("xent", "xent_c", "torch_eager") + tuple(sorted(transposed)):
                    one = impls[impl]
                    self.assertGreater(one["s"], 0, f"{name} {impl}")
                    self.assertTrue(one["errors"], f"{name} {impl}")
                    spread = one["spread"]
                    self.assertEqual(spread["n"], 3, name)
                    self.assertTrue(spread["min"] <= spread["p10"] <= spread["median"] <= spread["p90"]
                                    <= spread["max"], f"{name} {impl} {spread}")
                    self.assertGreater(one["host_s"], 0, f"{name} {impl}")
                self.assertEqual(r["xent_s"], impls["xent"]["s"], name)
                self.assertEqual(r["xent_c_s"], impls["xent_c"]["s"], name)
                self.assertTrue("s" in impls["torch_compile"] or "no torch.compile" in impls["torch_compile"].get(
                    "error", ""), name)
                # Liger-Kernel and Quack need a GPU and take [N, V] only:
                # named with the reason.
                if len(r["shape"]) > 2:
                    self.assertIn("takes [N, V] logits only", impls["liger"]["error"] + impls["quack"]["error"])
                else:
                    self.assertIn("CUDA only", impls["liger"]["error"], name)
                    self.assertIn("sm_90", impls["quack"]["error"], name)
                # The comparison: the package's and the C call's fractions of
                # the roofline, against the best peer that ran (here eager).
                self.assertEqual(r["best_peer"], "torch_eager", name)
                for key in ("package", "c_call"):
                    self.assertGreater(r[key]["fraction_of_roofline"], 0, name)
                    self.assertGreater(r[key]["vs_best_peer"], 0, name)
                    self.assertIn(r[key]["level_with_best_peer"], (True, False), name)
                if r["op"] in ("sm_fwd", "sm_bwd"):
                    self.assertEqual(r["group"], "softmax", name)
                    self.assertEqual(r["model_bytes"], (2 if r["op"] == "sm_fwd" else 3) * 7 * 3001 * 2, name)
            self.assertEqual(report["environment"]["package_path"], "C++ (xent._C)")
            # The comparison table renders from the run's file, a row a case.
            sys.path.insert(0, os.path.join(ROOT, "bench"))
            import results_tables
            os.rename(out + ".json", os.path.join(tmp, "bench.json"))
            table = results_tables.tables(tmp)
            rows = [r for r in results if r["group"] != "tune"]
            self.assertEqual(table.count("(torch_eager) |"), len(rows), table)
            os.rename(os.path.join(tmp, "bench.json"), out + ".json")
            self.assertTrue(any("fused_over_forward" in r for r in results))
            # The tune group: every launch shape of the sweep ran on the same
            # tensors, agreed with PyTorch and was timed, the table's first.
            tune = [r for r in results if r["group"] == "tune"]
            self.assertEqual({r["op"] for r in tune}, {"fwd", "bwd", "fwd_bwd", "sm_fwd", "sm_bwd"})
            for r in tune:
                if "column_slices" in r:
                    # bench.py's dry run's class slices: the runtime's, none,
                    # 3, each against PyTorch (emulated CUDA: they run).
                    self.assertEqual([o["column_slices"] for o in r["shapes"]], [None, 1, 3])
                    for o in r["shapes"]:
                        self.assertTrue(o["ok"], f"tune {r['op']} {o}")
                        self.assertGreater(o["xent_s"], 0)
                    continue
                asked = [o["row_shape"] for o in r["shapes"]]
                if list(r["shape"]) == [4097, 10]:
                    # bench.py's SHORT_TUNE_SHAPES: the table's (the tile
                    # shape on a GPU), then 1 to 32 threads a row.
                    self.assertEqual(asked, [None, [1, 256], [4, 256], [8, 256], [32, 256]])
                elif list(r["shape"]) == [3, 20000]:
                    # The fused pass's row on chip, asked for: it runs.
                    self.assertEqual(asked, [None, [-1, 0]])
                else:
                    # bench.py's TUNE_SHAPES: the table's, 4 to 32 threads a
                    # row, a row a block of 128 to 512, the row on chip.
                    self.assertEqual(asked, [None, [4, 256], [8, 256], [16, 256], [32, 256], [32, 512],
                                             [0, 128], [0, 256], [0, 512], [-1, 0]])
                # A block past the row kernel's launch bounds is refused at
                # the launch, as on a GPU (xent_set_row_shape), reported and
                # not timed: the softmax forward's are 256 (specs/softmax.lua:
                # resident = 768), the others' 512.
                bound = 256 if r["op"] == "sm_fwd" else 512
                for o in r["shapes"]:
                    if o["row_shape"] == [-1, 0] and r["op"] not in ("fwd_bwd", "sm_fwd"):
                        # Only the fused pass and the softmax forward have
                        # an on-chip shape: the others refuse the row on chip.
                        self.assertFalse(o["ok"], f"tune {r['op']} {o}")
                        self.assertIn("the row on chip where no on-chip shape serves", o.get("error", ""))
                        continue
                    if o["row_shape"] and o["row_shape"][1] > bound:
                        self.assertFalse(o["ok"], f"tune {r['op']} {o}")
                        self.assertIn("past the kernel's launch bounds", o.get("error", ""), f"tune {r['op']} {o}")
                        continue
                    self.assertTrue(o["ok"], f"tune {r['op']} {o}")
                    self.assertGreater(o["xent_s"], 0)
                self.assertEqual(r["xent_s"], r["shapes"][0]["xent_s"])
            with open(out + ".png", "rb") as f:
                png = f.read()
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
            self.assertGreater(len(png), 10000)

    def test_a_peer_that_writes_its_input_gets_logits_of_its_own(self):
        """Liger-Kernel writes its gradient over its input logits: timed on
        the logits the others share, it fed them gradients (the sixth GPU
        run's Quack fused pass failed its check so)."""
        import torch
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import bench

        def writer(device, op):
            return lambda x, y: x.zero_()
        writer.writes_its_input = True

        def reader(device, op):
            return lambda x, y: x.sum()
        x = torch.ones(2, 3)
        impls = bench.peer_impls({"writer": writer, "reader": reader}, "cpu", "fwd_bwd", x,
                                 lambda fn, logits=x: (fn, logits))
        self.assertIs(impls["reader"][1], x)
        self.assertIsNot(impls["writer"][1], x)
        impls["writer"][0](impls["writer"][1], None)
        self.assertTrue(torch.equal(x, torch.ones(2, 3)))
        self.assertIs(bench.PEERS["liger"].writes_its_input, True)

    def test_linear_dry_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            # gemms_best's cuBLASLt calls go to the host stand-in.
            report = self.dry_run("bench_linear.py", os.path.join(tmp, "linear"), 600, "--cublaslt",
                                  os.path.join(ROOT, "tests", "libfake_cublaslt.so"))
            self.assertTrue(report["environment"]["cublaslt"].endswith("libfake_cublaslt.so"))
            self.assertEqual(report["environment"]["commit"], "test")
            self.assertIs(report["complete"], True)
            results = report["results"]
            self.assertEqual({r["dtype"] for r in results}, {"bf16", "f32"})
            for r in results:
                name = f"N {r['n']} H {r['h']} V {r['v']} {r['dtype']}"
                self.assertTrue(r["ok"], name)
                self.assertEqual(r["logits_bytes"], r["n"] * r["v"] * (2 if r["dtype"] == "bf16" else 4), name)
                methods = r["methods"]
                self.assertEqual(set(methods),
                                 {"xent", "xent_package", "xent_on_chip", "gemms", "gemms_best", "torch_eager",
                                  "torch_compile", "liger", "cce"})
                for m in ("xent", "xent_package", "torch_eager"):
                    self.assertGreater(methods[m]["s"], 0, f"{name} {m}")
                    self.assertEqual(set(methods[m]["errors"]), {"loss", "grad_hidden", "grad_weight"}, name)
                    self.assertLess(max(methods[m]["errors"].values()), 0.03, f"{name} {m}")
                    # The CPU has no allocator statistics: not measured, not zero.
                    self.assertIsNone(methods[m]["peak_extra_bytes"], name)
                self.assertGreater(methods["gemms"]["s"], 0, name)
                self.assertGreater(r["xent_over_gemms"], 0, name)
                # The GEMMs by cuBLASLt's fastest candidates (the stand-in
                # offers one): their products PyTorch's, each GEMM's search
                # kept.
                self.assertLess(max(methods["gemms_best"]["products_vs_torch"].values()), 0.03, name)
                self.assertGreater(r["package_over_gemms_best"], 0, name)
                self.assertEqual([(g["gemm"], g["m"], g["n"], g["k"], g["best"], len(g["candidates"]))
                                  for g in r["gemms_search"]],
                                 [("logits", r["n"], r["v"], r["h"], 0, 1), ("grad_hidden", r["n"], r["h"], r["v"], 0, 1),
                                  ("grad_weight", r["v"], r["h"], r["n"], 0, 1)], name)
                # Timed interleaved, each with its spread; the package is
                # the headline, every ratio to it.
                self.assertGreater(r["package_over_gemms"], 0, name)
                for m in ("xent_package", "xent", "gemms", "gemms_best", "torch_eager"):
                    t = methods[m]["spread"]
                    self.assertTrue(0 < t["min"] <= t["median"] <= t["max"], f"{name} {m}: {t}")
                    self.assertEqual(t["n"], report["environment"]["timing"]["reps"], f"{name} {m}")
                    self.assertAlmostEqual(methods[m]["gemm_tflops"], r["gemm_flops"] / methods[m]["s"] / 1e12,
                                           msg=f"{name} {m}")
                    if m != "xent_package":
                        self.assertGreater(methods[m]["over_package"], 0, f"{name} {m}")
                        self.assertIn("level_with_package", methods[m], f"{name} {m}")
                # The one-pass plan in chunks of 16 rows, with and without
                # the rows on chip (on the cpu backend's own code, which has
                # one shape: the call's path, not the kernel's), and the
                # tiled plans (tiles of 40 rows x 64 classes; AUTO takes
                # TILED_HIDDEN_SUM): each checked, then timed.
                self.assertEqual([(c.get("memory_mib"), c.get("chunk_rows"), c.get("chunk_classes"), c.get("plan"),
                                   c.get("on_chip")) for c in r["sweep"]],
                                 [(1 << 40, 16, None, None, None), (1 << 40, 16, None, None, True),
                                  (None, 40, 64, None, None), (None, 40, 64, 3, None)]
                                 if r["dtype"] == "bf16" else [], name)
                for c in r["sweep"]:
                    self.assertGreater(c["s"], 0, name)
                    self.assertLessEqual(c["spread"]["min"], c["spread"]["max"], name)
                    self.assertLess(max(c["errors"].values()), 0.03, f"{name} {c}")
                self.assertTrue("s" in methods["torch_compile"] or "error" in methods["torch_compile"], name)
                # Liger-Kernel and Cut Cross-Entropy need a GPU: each named
                # with the reason, never dropped.
                for peer in ("liger", "cce"):
                    self.assertIn("CUDA only", methods[peer].get("error", ""), f"{name} {peer}")
                # The ON_CHIP plan needs an H100/H200's sm_90a code (bf16;
                # f32 is refused before the device is asked).
                self.assertIn("sm_90 GPU" if r["dtype"] == "bf16" else "desc->ce.dtype XENT_BF16",
                              methods["xent_on_chip"].get("error", ""), name)


if __name__ == "__main__":
    unittest.main()
