"""xentgen --check: each rule fires on a planted bug at the right source
line, with nothing written, and stays quiet on the corrected code; the real
specs and templates pass in both renderings.

A bug is planted by copying templates/ and kernels/ and inserting one line
of C++ after a known line: of the cross entropy's kernels
(kernels/cross_entropy/cross_entropy.h, inside the rows kernel), reported at
the header's line, once; or of cross_entropy.tmpl (the variant's launcher),
reported at the template's line through the rendered file's #line
directives. A bug planted in the device library (kernels/device/) is
reported at its header's line, once."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
XENTGEN = os.path.join(RUNFILES, "gen", "xentgen")
SPECS = [os.path.join(RUNFILES, "specs", name) for name in ("cross_entropy.lua", "linear_cross_entropy.lua", "softmax.lua")]
TEMPLATES = os.path.join(RUNFILES, "templates")
KERNELS = os.path.join(RUNFILES, "kernels")
CUDA_HEADERS = os.path.join(RUNFILES, "gen", "check", "cuda")
HIP_ON_CUDA = os.path.join(RUNFILES, "runtime", "hip_on_cuda")

# Inside the rows kernel (kernels/cross_entropy/cross_entropy.h): row, C, x,
# a, lane, group, scratch and the atomics are in scope.
IN_KERNEL = "    const int64_t base = xent_row_base(row - tile_first, kColumn ? a.classes : C, inner);\n"
KERNEL_HEADER = "cross_entropy/cross_entropy.h"
# The top of the launcher (templates/cross_entropy.tmpl).
IN_LAUNCHER = 'extern "C" int XENT_LAUNCHER({{ launcher }})(const void* args) {\n'
KERNEL = "ce_fwd_f32_i64_none"


def xentgen_check(target, templates, out, kernels=KERNEL):
    args = [XENTGEN, "--check", "--target", target, "--templates", templates, "--out", out, "--kernels", kernels,
            "--check-cuda-headers", CUDA_HEADERS]
    for spec in SPECS:
        args += ["--spec", spec]
    return subprocess.run(args, capture_output=True, text=True)


class Rules(unittest.TestCase):
    def copies(self):
        """Copies of templates/ and kernels/ side by side (xentgen finds the
        device library beside the templates); returns the templates'."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        shutil.copytree(KERNELS, os.path.join(tmp, "kernels"))
        copy = os.path.join(tmp, "templates")
        shutil.copytree(TEMPLATES, copy)
        return copy

    def planted_header(self, header, anchor, fragment):
        """Copies (above) with `fragment` on the line before `anchor` in the
        device library's `header`; returns (templates, the fragment's line)."""
        copy = self.copies()
        path = os.path.join(os.path.dirname(copy), "kernels", header)
        with open(path) as f:
            lines = f.readlines()
        at = lines.index(anchor)
        lines.insert(at, fragment + "\n")
        with open(path, "w") as f:
            f.writelines(lines)
        return copy, at + 1

    def source(self, anchor):
        """Where `anchor` is: the file under the copies' directory, as a
        finding names it (a template's path, or a header's tail)."""
        if anchor == IN_LAUNCHER:
            return "templates/cross_entropy.tmpl", "templates/cross_entropy.tmpl"
        return "kernels/" + KERNEL_HEADER, "kernels/" + KERNEL_HEADER

    def planted(self, anchor, fragment, replace=False):
        """Copies (above) with `fragment` on the line after `anchor` in its
        source (or in its place); returns (templates, the fragment's line)."""
        copy = self.copies()
        path = os.path.join(os.path.dirname(copy), self.source(anchor)[0])
        with open(path) as f:
            lines = f.readlines()
        at = lines.index(anchor)
        if replace:
            lines[at] = fragment + "\n"
        else:
            lines.insert(at + 1, fragment + "\n")
        with open(path, "w") as f:
            f.writelines(lines)
        return copy, at + 1 if replace else at + 2

    def expect(self, target, anchor, bad, good, rule, what, replace=False, kernel=KERNEL):
        templates, line = self.planted(anchor, bad, replace)
        out = os.path.join(os.path.dirname(templates), "out")
        r = xentgen_check(target, templates, out, kernel)
        self.assertEqual(r.returncode, 1, r.stderr)
        # At the start of a line: the template's path as the #line directive
        # names it, not made absolute; a header's, once, as the run found it.
        where = self.source(anchor)[1]
        if anchor == IN_LAUNCHER:
            self.assertRegex(r.stderr, re.compile("^" + re.escape(f"{where}:{line}: {rule}: "), re.M))
        else:
            found = re.findall("^\\S*" + re.escape(f"{where}:{line}: {rule}: "), r.stderr, re.M)
            self.assertEqual(len(found), 1, r.stderr)
        self.assertIn(what, r.stderr)
        self.assertIn("nothing written", r.stderr)
        self.assertFalse(os.path.exists(out), "a rendering that breaks a rule must write nothing")
        templates, line = self.planted(anchor, good, replace)
        r = xentgen_check(target, templates, out, kernel)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, kernel + (".cu" if target == "cuda" else ".hip"))))

    def test_index_width_product_widened_too_late(self):
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_KERNEL,
                            "{ const int r32 = (int)row, c32 = (int)C; (void)XENT_LD(x + (int64_t)(r32 * c32)); }",
                            "{ const int r32 = (int)row, c32 = (int)C; (void)XENT_LD(x + (int64_t)r32 * c32); }",
                            "index-width", "'r32 * c32' is computed in 32 bits (int) before it is widened")

    def test_index_width_narrow_offset(self):
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_KERNEL, "(void)x[(unsigned)row];", "(void)x[row];",
                            "index-width", "the offset '( unsigned ) row' into a pointer is 32-bit")

    def test_deterministic_float_atomic(self):
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_KERNEL, "if (ws) atomicAdd((float*)ws, 1.0f);",
                            "if (a.bad_label_row) atomicMin(a.bad_label_row, (unsigned long long)row);",
                            "deterministic", "atomicAdd on float: a floating-point atomic")

    def test_deterministic_unlisted_integer_atomic(self):
        self.expect("hip", IN_KERNEL, "if (a.bad_label_row) atomicAdd(a.bad_label_row, 1ull);",
                    "if (a.bad_label_row) atomicMin(a.bad_label_row, 1ull);",
                    "deterministic", "atomicAdd on unsigned long long is not an integer atomic the rule lists")

    def test_graph_safe(self):
        # Both renderings are parsed as what the GPU compilers get (HIP with
        # ROCm's headers, CUDA with the stand-in ones), so the launchers'
        # runtime calls are the real ones.
        for target, api in (("cuda", "cuda"), ("hip", "hip")):
            with self.subTest(target=target):
                self.expect(target, IN_LAUNCHER, f"  (void){api}DeviceSynchronize();", f"  (void){api}GetLastError();",
                            "graph-safe", f"{api}DeviceSynchronize synchronises or allocates")

    def test_graph_safe_cuda_cluster_launch(self):
        # The CUDA launch path of the device library (cudaLaunchKernelEx with
        # a cluster dimension), which only the CUDA target has.
        copy, line = self.planted_header("device/target_cuda.h", "  cudaLaunchConfig_t config = {};\n",
                                         "  (void)cudaStreamSynchronize(stream);")
        r = xentgen_check("cuda", copy, os.path.join(os.path.dirname(copy), "out"),
                          "ce_fwd_bwd_f32_i64_none,ce_bwd_f32_i64_none")
        self.assertEqual(r.returncode, 1, r.stderr)
        want = f"kernels/device/target_cuda.h:{line}: graph-safe: cudaStreamSynchronize synchronises or allocates"
        self.assertEqual(len(re.findall("^\\S*" + re.escape(want), r.stderr, re.M)), 1, r.stderr)

    def test_warp_sync_maskless_shuffle(self):
        self.expect("cuda", IN_KERNEL, "{ float v = 1.0f; v += __shfl_xor(v, 1, 32); (void)v; }",
                    "{ float v = 1.0f; v += __shfl_xor_sync(0xffffffffu, v, 1); (void)v; }",
                    "warp-sync", "a maskless warp shuffle (__shfl_xor)")

    def test_warp_sync_maskless_vote(self):
        self.expect("cuda", IN_KERNEL, "(void)__ballot(row > 0);", "(void)__ballot_sync(0xffffffffu, row > 0);",
                    "warp-sync", "a maskless warp vote (__ballot)")

    def test_warp_sync_barrier_in_thread_branch(self):
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_KERNEL, "if (lane == 0) __syncthreads();", "if (group > 1) __syncthreads();",
                            "warp-sync", "__syncthreads is reached under a condition that differs between the "
                            "threads of a block ('lane == 0' varies by thread)")

    def test_warp_sync_barrier_after_thread_return(self):
        # An early return some threads take: the block reduction after it
        # (two calls down) is not reached by them. It is reported where the
        # reduction is called, naming the return's condition.
        reduce_call = "xent_group_reduce(m, s, sum_a, sum_b, group, scratch);"
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                templates, line = self.planted(IN_KERNEL, "if (lane == 1) return;")
                with open(os.path.join(os.path.dirname(templates), "kernels", KERNEL_HEADER)) as f:
                    lines = [text.strip() for text in f]
                # The forward's reduction: the first after the return, in
                # the walk that the spec's run-time temperature and
                # token_stats axes take (one call serves every shape).
                at = lines.index(reduce_call, line) + 1
                r = xentgen_check(target, templates, os.path.join(os.path.dirname(templates), "out"))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(f"kernels/{KERNEL_HEADER}:{at}: warp-sync: xent_group_reduce -> xent_block_reduce "
                              "-> __syncthreads is reached under a condition that differs between the threads of a "
                              "block ('lane == 1' varies by thread)", r.stderr)
                templates, _ = self.planted(IN_KERNEL, "if (C < 0) return;")
                r = xentgen_check(target, templates, os.path.join(os.path.dirname(templates), "out"))
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_warp_sync_barrier_argument(self):
        # group decides whether xent_group_reduce reaches its block barrier.
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_KERNEL,
                            "{ float u = 0, v = 0, p = 0, q = 0; xent_group_reduce(u, v, p, q, lane + 1, scratch); }",
                            "{ float u = 0, v = 0, p = 0, q = 0; xent_group_reduce(u, v, p, q, group, scratch); }",
                            "warp-sync", "argument 5 of xent_group_reduce ('lane + 1') decides whether it reaches "
                            "xent_block_reduce -> __syncthreads, and it differs between the threads of a block")

    def test_warp_sync_cluster_sync_in_block_branch(self):
        # A cluster sync needs every block of the cluster: a branch on the
        # block's rank is not uniform enough, one on the cluster's size is.
        # So is one on the grid's row, the same in a cluster along x.
        self.expect("cuda", IN_KERNEL, "if (blockIdx.x == 0) XENT_CLUSTER_SYNC();",
                    "if (xent_grid_row() == 0) XENT_CLUSTER_SYNC();", "warp-sync",
                    "xent_cluster_sync is reached under a condition that differs between the threads of a cluster "
                    "('blockIdx . x == 0' varies by block)", kernel="ce_fwd_bwd_f32_i64_none")
        self.expect("cuda", IN_KERNEL, "if (xent_cluster_rank() == 0) XENT_CLUSTER_SYNC();",
                    "if (xent_cluster_size() > 1) XENT_CLUSTER_SYNC();", "warp-sync",
                    "xent_cluster_sync is reached under a condition that differs between the threads of a cluster "
                    "('xent_cluster_rank ( ) == 0' varies by block)", kernel="ce_fwd_bwd_f32_i64_none")

    def test_warp_sync_pipeline_wait_in_thread_branch(self):
        # The on-chip pipeline's turn (kernels/device/pipeline.h: a barrier,
        # the next copy, the wait) needs every thread of the block.
        self.expect("cuda", IN_KERNEL, "if constexpr (kShape == XENT_ON_CHIP) { if (lane == 0) (void)pipe.take(tile); }",
                    "if constexpr (kShape == XENT_ON_CHIP) { if (group > 1) (void)pipe.take(tile); }", "warp-sync",
                    "take -> __syncthreads is reached under a condition that differs between the threads of a block",
                    kernel="ce_fwd_bwd_f32_i64_none")

    def test_abi_launcher_signature(self):
        for target in ("cuda", "hip"):
            with self.subTest(target=target):
                self.expect(target, IN_LAUNCHER, IN_LAUNCHER.rstrip("\n").replace("(const void* args)", "(const void* args, int extra = 0)"),
                            IN_LAUNCHER.rstrip("\n"), "abi", "has type int (const void *, int); xent_launch.h's "
                            "xent_launcher points to int (const void *)", replace=True)

    def test_abi_launcher_name(self):
        # The kernel file defines a launcher the dispatch table does not name,
        # and the table names one that nothing defines (reported in the table).
        self.expect("hip", IN_LAUNCHER, IN_LAUNCHER.rstrip("\n").replace("{{ launcher }}", "{{ launcher }}_v2"),
                    IN_LAUNCHER.rstrip("\n"), "abi", "defines 1 launcher (xent_hip_launch_ce_fwd_f32_i64_none_v2), "
                    "not exactly xent_hip_launch_ce_fwd_f32_i64_none", replace=True)
        templates, _ = self.planted(IN_LAUNCHER, IN_LAUNCHER.rstrip("\n").replace("{{ launcher }}", "{{ launcher }}_v2"), True)
        with tempfile.TemporaryDirectory() as tmp:
            r = xentgen_check("hip", templates, os.path.join(tmp, "out"))
        self.assertIn("xent_dispatch_hip.c:", r.stderr)
        self.assertIn("abi: the dispatch table names xent_hip_launch_ce_fwd_f32_i64_none, which no kernel file "
                      "defines", r.stderr)

    def test_shared_header_checked_once(self):
        # A bug in the device library (in the precompiled header every file
        # shares) is reported once, at its header's line.
        copy, line = self.planted_header(
            "device/target.h", "// The largest block any launcher uses; sizes the cross-warp scratch arrays.\n",
            "XENT_DEVICE float xent_bad_at(const float* p, int r, int c) { return p[(int64_t)(r * c)]; }")
        r = xentgen_check("hip", copy, os.path.join(os.path.dirname(copy), "out"), "ce_fwd_f32_i64_none,ce_bwd_f32_i64_none")
        self.assertEqual(r.returncode, 1, r.stderr)
        want = f"kernels/device/target.h:{line}: index-width: 'r * c' is computed in 32 bits"
        self.assertEqual(len(re.findall("^\\S*" + re.escape(want), r.stderr, re.M)), 1, r.stderr)

    def test_hip_on_cuda_wavefront_shuffle_behind_a_block_barrier(self):
        # The HIP rendering as built for NVIDIA (runtime/hip_on_cuda): a
        # 64-lane wavefront is two warps, and the xor-32 step of its
        # shuffles meets them at a barrier. With a block barrier there (the
        # headers before the fix), the backward's second pass, reached
        # under a wavefront's vote, hangs a block whose wavefronts vote
        # differently: the rule finds it. With the wavefront's own barrier,
        # nothing.
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        shim = os.path.join(tmp, "hip_on_cuda")
        shutil.copytree(HIP_ON_CUDA, shim)
        path = os.path.join(shim, "hip", "hip_runtime.h")
        with open(path) as f:
            text = f.read()
        self.assertEqual(text.count("  xent_hip_on_cuda_wave_barrier();\n"), 2)
        with open(path, "w") as f:
            f.write(text.replace("  xent_hip_on_cuda_wave_barrier();\n", "  __syncthreads();\n"))
        kernels = "ce_bwd_bf16_i64_mean,ce_fwd_bwd_f32_i64_mean,sm_fwd_f16_softmax"
        for headers, findings in ((shim, 1), (HIP_ON_CUDA, 0)):
            with self.subTest(headers=headers):
                r = subprocess.run([XENTGEN, "--check", "--target", "hip", "--templates", TEMPLATES, "--out",
                                    os.path.join(tmp, "out"), "--kernels", kernels, "--check-cuda-headers",
                                    CUDA_HEADERS, "--check-hip-on-cuda", headers] +
                                   [a for spec in SPECS for a in ("--spec", spec)], capture_output=True, text=True)
                self.assertIn("xentgen --check: 3 hip files in", r.stderr)
                if findings:
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertRegex(r.stderr, r"kernels/cross_entropy/cross_entropy.h:\d+: warp-sync: xent_lanes_reduce -> "
                                     r"xent_shfl_xor -> __shfl_xor -> xent_hip_on_cuda_exchange32 -> __syncthreads is "
                                     r"reached under a condition that differs between the threads of a block "
                                     r"\('xent_warp_any \( again \)' varies by warp\)")
                    self.assertIn("in the hip rendering as built for NVIDIA", r.stderr)
                else:
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("xentgen --check: 3 hip (on cuda) files in", r.stderr)

    def test_real_templates_pass(self):
        kernels = "ce_fwd_bwd_bf16_i64_mean,ce_bwd_f16_prob_sum,ce_fwd_f32_i32_none,sm_fwd_f16_softmax,sm_bwd_f32_log_softmax"
        for target in ("cuda", "hip"):
            with self.subTest(target=target), tempfile.TemporaryDirectory() as tmp:
                r = xentgen_check(target, TEMPLATES, os.path.join(tmp, "out"), kernels)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"xentgen --check: 5 {target} files in", r.stderr)
                self.assertIn("0 findings", r.stderr)


if __name__ == "__main__":
    unittest.main()
