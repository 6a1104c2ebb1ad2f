"""xentgen: spec mistakes (one test per kind, each checking the file:line
message and that nothing is written), expansion, filtering, canonical keys,
determinism and all-or-nothing output, and golden files for a few variants.

Regenerate the golden files after an intended template change with
  ./bazelw run //tests:update_golden
and review the diff like any other code change."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
XENTGEN = os.path.join(RUNFILES, "gen", "xentgen")
SPEC = os.path.join(RUNFILES, "specs", "cross_entropy.lua")
TEMPLATES = os.path.join(RUNFILES, "templates")
GOLDEN = os.path.join(RUNFILES, "tests", "golden")
README = os.path.join(RUNFILES, "README.md")
GOLDEN_VARIANTS = ["ce_fwd_bf16_i64_mean", "ce_bwd_f32_i32_none", "ce_fwd_bwd_f16_i64_sum", "ce_fwd_bwd_bf16_prob_mean"]

HEADER = 'family "cross_entropy"\nops { "fwd", "bwd" }\n'
AXES = ('specialize "dtype" { "f32" }\nspecialize "label" { "i64" }\nspecialize "reduction" { "mean" }\n'
        'runtime "weights"\nruntime "label_smoothing"\nruntime "ignore_index"\nruntime "z_loss"\nruntime "softcap"\nruntime "temperature"\nruntime "token_stats" runtime "token_weight"\n'
        'tune "cuda" { strided = 256, { classes = 64, row_threads = 4, block = 256 }, { row_threads = "block", block = 1024 } }\n'
        'tune "hip" { strided = 256, { row_threads = "block", block = 256 } }\n')
# The first line after HEADER + AXES, and the lines of its tune statements
# (a linear_cross_entropy spec's own tune statement is at TUNE_HIP).
NEXT = 15
TUNE_CUDA, TUNE_HIP = NEXT - 2, NEXT - 1


def xentgen(*args, cwd=None):
    return subprocess.run([XENTGEN, *args], capture_output=True, text=True, cwd=cwd)


class SpecErrors(unittest.TestCase):
    """Each kind of mistake: exit status 1, "specs/bad.lua:<line>: <what>",
    and the output directory is not created."""

    def check(self, text, line, what):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "specs"))
            with open(os.path.join(tmp, "specs", "bad.lua"), "w") as f:
                f.write(text)
            out = os.path.join(tmp, "out")
            r = xentgen("--spec", "specs/bad.lua", "--target", "cuda", "--templates", TEMPLATES, "--out", out, cwd=tmp)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"specs/bad.lua:{line}: ", r.stderr)
            self.assertIn(what, r.stderr)
            self.assertFalse(os.path.exists(out), "a bad spec must write nothing")
            self.assertEqual(r.stdout, "")

    def rendered(self, text, target, *keys):
        """{key: the generated source} of variants `keys` of the spec `text`,
        which must load and render for `target`."""
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "ce.lua")
            with open(spec, "w") as f:
                f.write(text)
            out = os.path.join(tmp, target)
            r = xentgen("--spec", spec, "--target", target, "--templates", TEMPLATES, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            ext = ".cu" if target == "cuda" else ".hip"
            sources = {}
            for key in keys:
                with open(os.path.join(out, key + ext)) as f:
                    sources[key] = f.read()
            return sources

    def test_unknown_value(self):
        self.check(HEADER + AXES.replace('{ "f32" }', '{ "f32", "f8" }'), 3, "unknown dtype 'f8'")

    def test_unknown_axis(self):
        self.check(HEADER + AXES + 'runtime "precision"\n', NEXT, "unknown axis 'precision'")

    def test_unknown_op(self):
        self.check('family "cross_entropy"\nops { "fwd", "fwdd" }\n' + AXES, 2, "unknown op 'fwdd'")

    def test_unknown_family(self):
        self.check('family "crossentropy"\n', 1, "unknown family 'crossentropy'")

    def test_typo_is_an_error_not_nil(self):
        self.check(HEADER + 'specialise "dtype" { "f32" }\n', 3, "unknown name 'specialise'")

    def test_global_assignment(self):
        self.check(HEADER + "dtypes = 1\n", 3, "assignment to global 'dtypes'")

    def test_no_io_in_the_sandbox(self):
        self.check(HEADER + 'local f = io.open("/etc/passwd")\n', 3, "unknown name 'io'")

    def test_syntax_error(self):
        self.check(HEADER + 'specialize "dtype" { "f32"\n', 4, "expected")

    def test_axis_declared_twice(self):
        self.check(HEADER + AXES + 'runtime "weights"\n', NEXT, "axis 'weights' declared twice (first at line 6)")

    def test_missing_type_axis(self):
        self.check(HEADER + AXES.replace('specialize "label" { "i64" }\n', ""), 1,
                   "axis 'label' is not declared: add specialize \"label\" { ... }")

    def test_type_axis_at_run_time(self):
        self.check(HEADER + 'runtime "dtype"\n', 3, "cannot be a run-time parameter")

    def test_value_listed_twice(self):
        self.check(HEADER + 'specialize "label" { "i32", "i32" }\n', 3, "lists 'i32' twice")

    def test_statement_before_family(self):
        self.check('ops { "fwd" }\n', 1, "'ops' before 'family'")

    def test_stale_exclude(self):
        self.check(HEADER + AXES + 'exclude { dtype = "f64" }\n', NEXT, "exclude matches no variant")

    def test_exclude_unknown_value(self):
        self.check(HEADER + AXES + 'exclude { reduction = "avg" }\n', NEXT, "exclude: unknown reduction 'avg'")

    def test_everything_excluded(self):
        self.check(HEADER + AXES + 'exclude { dtype = "f32" }\n', 1, "every variant is excluded")

    def test_bad_min_arch(self):
        self.check(HEADER + AXES + "min_arch { cuda = 7.5 }\n", NEXT, "min_arch.cuda must be an SM number")
        # Upper-case hex passed the DSL and failed in the C half with an
        # internal error naming no spec (the fuzzer's find, stop 52).
        # And a name past the C half's 15 characters (the fuzzer's find, this stop).
        for bad in ('"gfxB0a"', '"gfx"', '"GFX90A"', "90", '"gfx90a6666666666666"'):
            self.check(HEADER + AXES + f"min_arch {{ hip = {bad} }}\n", NEXT, "min_arch.hip must be a gfx name")

    def test_tune_unknown_target(self):
        self.check(HEADER + AXES + 'tune "sycl" { strided = 256 }\n', NEXT, 'tune expects a target in quotes (cuda, hip)')

    def test_tune_block_not_whole_warps(self):
        self.check(HEADER + AXES.replace('strided = 256, { row_threads = "block", block = 256 }',
                                         'strided = 256, { row_threads = "block", block = 96 }'),
                   TUNE_HIP, "shape 1 block must be a whole number of 64-lane warps up to 1024 threads, got 96")

    def test_tune_row_threads_not_a_power_of_two(self):
        self.check(HEADER + AXES.replace("row_threads = 4", "row_threads = 6"), TUNE_CUDA,
                   'tune "cuda", shape 1: row_threads must be a power of two up to the warp (32) or "block", got 6')

    def test_tune_row_threads_wider_than_the_warp(self):
        self.check(HEADER + AXES.replace("row_threads = 4", "row_threads = 64"), TUNE_CUDA, "got 64")

    def tune_cuda(self, *shapes):
        return (HEADER + AXES + 'tune "cuda" {\n  when = { dtype = "f32" },\n  strided = 256,\n' +
                "".join("  %s,\n" % shape for shape in shapes) + '  { row_threads = "block", block = 256 },\n}\n')

    def test_tune_shape_never_taken(self):
        """A shape that an earlier one serves wholly (a classes bound as large,
        a rows floor as low) is never taken; an on-chip one may be passed
        over, so it shadows nothing."""
        self.check(self.tune_cuda("{ classes = 64, row_threads = 4, block = 256 }",
                                  "{ classes = 64, row_threads = 8, block = 256 }"), NEXT,
                   "shape 2 is never taken: shape 1 before it serves every call it does (classes 64, rows >= 0)")
        self.check(self.tune_cuda("{ classes = 640, row_threads = 4, block = 256 }",
                                  "{ classes = 64, row_threads = 8, block = 256, rows = 100 }"), NEXT,
                   "shape 2 is never taken: shape 1 before it serves every call it does (classes 640, rows >= 0)")
        self.check(self.tune_cuda("{ row_threads = 32, block = 256, rows = 100 }",
                                  "{ classes = 64, row_threads = 8, block = 256, rows = 200 }"), NEXT,
                   "shape 2 is never taken: shape 1 before it serves every call it does (classes any, rows >= 100)")

    def test_tune_rows_must_be_positive(self):
        self.check(self.tune_cuda("{ row_threads = 32, block = 256, rows = 0 }"), NEXT,
                   "shape 1: rows must be a positive whole number (the fewest rows it serves)")
        self.check(self.tune_cuda("{ row_threads = 32, block = 256, rows = 1.5 }"), NEXT, "rows must be")

    def test_tune_only_the_last_shape_serves_every_call(self):
        self.check(self.tune_cuda("{ row_threads = 32, block = 256 }"), NEXT,
                   "shape 1: only the last shape serves every call")

    def test_tune_last_shape_serves_any_classes(self):
        self.check(HEADER + AXES.replace('{ row_threads = "block", block = 1024 }',
                                         '{ classes = 4096, row_threads = "block", block = 1024 }'),
                   TUNE_CUDA, "the last shape serves every call (every larger C, any rows) and takes no classes bound")
        self.check(HEADER + AXES.replace('{ row_threads = "block", block = 1024 }',
                                         '{ row_threads = "block", block = 1024, rows = 8 }'),
                   TUNE_CUDA, "takes no rows bound")

    def test_tune_rows_reach_the_launcher(self):
        """A shape's rows floor is the fifth field of the launcher's shape
        table (the emulator's launch rules test runs it); shapes after a
        floored one may have any classes bound."""
        text = self.rendered(HEADER + AXES.replace(
            '{ classes = 64, row_threads = 4, block = 256 }, { row_threads = "block", block = 1024 }',
            '{ classes = 4096, row_threads = 8, block = 256 }, { row_threads = 32, block = 512, rows = 2048 }, '
            '{ classes = 16384, row_threads = "block", block = 256 }, { row_threads = "block", block = 256 }'),
            "cuda", "ce_fwd_f32_i64_mean")["ce_fwd_f32_i64_mean"]
        self.assertIn("_shapes[] = {{4096, 8, 256, 0, 0, 0}, {-1, 32, 512, 0, 2048, 0}, {16384, 0, 256, 0, 0, 0}, "
                      "{-1, 0, 256, 0, 0, 0}};", text)

    def test_tune_tile_reaches_the_launcher(self):
        """A tile shape is the sixth field of the launcher's table, and a
        variant with one launches the tile kernel before the plain one (the
        same shape from memory, for the calls the tile cannot take). Soft
        labels' kernels have no tile shape."""
        sources = self.rendered(
            HEADER + AXES.replace('specialize "label" { "i64" }', 'specialize "label" { "i64", "prob" }').replace(
                '{ classes = 64, row_threads = 4, block = 256 },',
                '{ classes = 64, row_threads = 4, block = 256, tile = true },'),
            "cuda", "ce_fwd_f32_i64_mean", "ce_fwd_f32_prob_mean")
        text = sources["ce_fwd_f32_i64_mean"]
        self.assertIn("_shapes[] = {{64, 4, 256, 0, 0, 1}, {-1, 0, 1024, 0, 0, 0}};", text)
        self.assertIn("XENT_LAUNCH_ROWS_TILE(", text)
        self.assertNotIn("XENT_LAUNCH_ROWS_TILE(", sources["ce_fwd_f32_prob_mean"])

    def test_tune_tile_rules(self):
        self.check(HEADER + AXES.replace("row_threads = 4, block = 256 }", "row_threads = 4, block = 256, tile = 1 }"),
                   TUNE_CUDA, "shape 1: tile must be true or false, got 1")
        self.check(HEADER + AXES.replace("row_threads = 4, block = 256 }", 'row_threads = "block", block = 256, tile = true }'),
                   TUNE_CUDA, 'shape 1: tile needs row_threads of a power of two, not "block"')
        spec = ('family "softmax"\nops { "fwd", "bwd" }\nspecialize "dtype" { "f32" }\nspecialize "kind" { "softmax" }\n'
                'tune "cuda" { strided = 256, { classes = 64, row_threads = 4, block = 256, tile = true }, '
                '{ row_threads = "block", block = 1024 } }\ntune "hip" { strided = 256, { row_threads = "block", block = 256 } }\n')
        self.check(spec, 5, "shape 1: tile is not supported by family softmax")

    def test_tune_needs_strided(self):
        self.check(HEADER + AXES.replace('tune "hip" { strided = 256, ', 'tune "hip" { '), TUNE_HIP, "missing strided")

    def test_tune_on_chip_for_hip(self):
        def hip(on_chip, block):
            return HEADER + AXES.replace('tune "hip" { strided = 256, { row_threads = "block", block = 256 } }',
                                         'tune "hip" { strided = 256, { classes = 9000, row_threads = "block", block = %d, '
                                         'on_chip = %d }, { row_threads = "block", block = 256 } }' % (block, on_chip))
        # A workgroup's 64 KiB of LDS at most, and threads enough to hold
        # the next row's slice in 4 vectors of 16 bytes each.
        self.check(hip(128, 1024), TUNE_HIP, "shape 1: on_chip must be KiB of shared memory per block, 1 to 64, got 128")
        self.check(hip(32, 256), TUNE_HIP,
                   "shape 1: on_chip = 32 needs a block of at least 512 threads on hip (each holds 4 16-byte vectors "
                   "of the next row), got 256")

    def test_tune_on_chip_launch_bounds(self):
        """The on-chip kernel's launch bounds are its own shapes' block: on
        CUDA with the row shapes' register cap (1024 threads a block: 256 x
        4), on HIP one workgroup (the other shapes' 256 would leave its 512
        threads no kernel)."""
        spec = ('family "cross_entropy"\nops { "fwd_bwd" }\n' + AXES).replace(
            '{ classes = 64, row_threads = 4, block = 256 }',
            '{ classes = 64, row_threads = 4, block = 256 }, '
            '{ classes = 9000, row_threads = "block", block = 256, on_chip = 64 }').replace(
            'tune "hip" { strided = 256, { row_threads = "block", block = 256 } }',
            'tune "hip" { strided = 256, { classes = 9000, row_threads = "block", block = 512, on_chip = 32 }, '
            '{ row_threads = "block", block = 256 } }')
        for target, bounds in (("cuda", (1024, 1, 256, 4)), ("hip", (512, 1, 512, 1))):
            text = self.rendered(spec, target, "ce_fwd_bwd_f32_i64_mean")["ce_fwd_bwd_f32_i64_mean"]
            self.assertIn("static constexpr int kRowThreads = %d, kRowMinBlocks = %d;\n"
                          "  static constexpr int kChipThreads = %d, kChipMinBlocks = %d;" % bounds, text)
            self.assertIn("XENT_LAUNCH_ROWS_ON_CHIP(", text)

    def test_tune_on_chip_needs_a_block_per_row(self):
        self.check(HEADER + AXES.replace("row_threads = 4, block = 256 }", "row_threads = 4, block = 256, on_chip = 64 }"),
                   TUNE_CUDA, 'shape 1: on_chip needs row_threads = "block"')

    def test_tune_on_chip_over_the_shared_memory(self):
        self.check(HEADER + AXES.replace("row_threads = 4, block = 256 }", 'row_threads = "block", block = 256, on_chip = 300 }'),
                   TUNE_CUDA, "shape 1: on_chip must be KiB of shared memory per block, 1 to 227, got 300")

    def test_tune_on_chip_not_the_last_shape(self):
        self.check(HEADER + AXES.replace('{ row_threads = "block", block = 1024 }',
                                         '{ row_threads = "block", block = 1024, on_chip = 64 }'),
                   TUNE_CUDA, "shape 2: the last shape cannot be on_chip")

    def test_tune_on_chip_only_for_fused_kernels(self):
        self.check(HEADER + AXES.replace("row_threads = 4, block = 256 }", 'row_threads = "block", block = 256, on_chip = 64 }'),
                   TUNE_CUDA, 'on_chip serves op fwd_bwd only in family cross_entropy, and variant ce_fwd_f32_i64_mean is op fwd '
                   '(limit this tune with when = { op = "fwd_bwd" })')

    def test_tune_on_chip_in_softmax_forward_only(self):
        spec = ('family "softmax"\nops { "fwd", "bwd" }\nspecialize "dtype" { "f32" }\nspecialize "kind" { "softmax" }\n'
                'tune "cuda" { strided = 256, { classes = 64, row_threads = "block", block = 256, on_chip = 64 }, '
                '{ row_threads = "block", block = 1024 } }\ntune "hip" { strided = 256, { row_threads = "block", block = 256 } }\n')
        self.check(spec, 5, 'on_chip serves op fwd only in family softmax, and variant sm_bwd_f32_softmax is op bwd '
                   '(limit this tune with when = { op = "fwd" })')

    def test_tune_unknown_field(self):
        self.check(HEADER + AXES.replace("block = 1024 }", "block = 1024, unroll = 4 }"), TUNE_CUDA,
                   "shape 2: unknown field 'unroll'")

    def test_tune_loads_out_of_range(self):
        for bad in ("0", "17", "2.5", '"many"'):
            self.check(HEADER + AXES.replace("strided = 256, { classes = 64", f"strided = 256, loads = {bad}, {{ classes = 64"),
                       TUNE_CUDA, "loads must be a whole number of 16-byte loads per thread, 1 to 16, got")

    def test_tune_loads_reach_the_kernel(self):
        """A tune's loads is the row walks' batch in the rendered kernel (4
        where the tune gives none), per target."""
        spec = HEADER + AXES.replace("strided = 256, { classes = 64", "strided = 256, loads = 7, { classes = 64")
        for target, loads in (("cuda", 7), ("hip", 4)):
            text = self.rendered(spec, target, "ce_fwd_f32_i64_mean")["ce_fwd_f32_i64_mean"]
            # The rows kernel's traits (kernels/cross_entropy/cross_entropy.h
            # walks a row with V::kRowLoads in flight).
            self.assertIn(f"static constexpr int kRowLoads = {loads};", text)

    def test_tune_resident_mistakes(self):
        """resident: threads per SM, CUDA's only, a whole number of the
        largest block (1024 in AXES's CUDA tune)."""
        def with_resident(value, target="cuda"):
            line = 'tune "%s" { strided = 256, ' % target
            return HEADER + AXES.replace(line, line + f"resident = {value}, ")
        for bad in ("0", "2049", "1.5", '"full"'):
            self.check(with_resident(bad), TUNE_CUDA, "resident must be a whole number of threads per SM, 1 to 2048, got")
        self.check(with_resident(1536), TUNE_CUDA, "resident must be a whole number of the largest block (1024 threads), got 1536")
        self.check(with_resident(512, "hip"), TUNE_HIP, "resident is CUDA's (ptxas's launch bounds)")

    def test_tune_resident_reaches_the_launch_bounds(self):
        """A CUDA tune's resident / largest block is the row kernels' minimum
        blocks per SM in __launch_bounds__ (1 without it, and on HIP)."""
        for resident, blocks in (("", 1), ("resident = 2048, ", 2)):
            spec = HEADER + AXES.replace('tune "cuda" { strided = 256, ', 'tune "cuda" { strided = 256, ' + resident)
            for target, want in (("cuda", blocks), ("hip", 1)):
                text = self.rendered(spec, target, "ce_fwd_f32_i64_mean")["ce_fwd_f32_i64_mean"]
                # The rows kernel's traits, which its __launch_bounds__ reads
                # (XENT_ROWS_THREADS, XENT_ROWS_MIN_BLOCKS).
                self.assertIn("static constexpr int kRowThreads = %d, kRowMinBlocks = %d;"
                              % (1024 if target == "cuda" else 256, want), text)
                self.assertIn("static constexpr int kColumnThreads = 256, kColumnResident = ", text)
                self.assertRegex(text, r"__launch_bounds__\(XENT_ROWS_THREADS\((\w+), kShape\), "
                                 r"XENT_ROWS_MIN_BLOCKS\(\1, kShape\)\)")

    def test_tune_when_unknown_value(self):
        self.check(HEADER + AXES + 'tune "cuda" { when = { dtype = "f8" }, strided = 256, { row_threads = 1, block = 32 } }\n',
                   NEXT, "tune \"cuda\" when: unknown dtype 'f8'")

    def test_tune_shadowed_by_an_earlier_one(self):
        self.check(HEADER + AXES + 'tune "cuda" { strided = 256, { row_threads = 1, block = 32 } }\n', NEXT,
                   'tune "cuda" serves no variant')

    def test_tune_missing_for_a_target(self):
        self.check(HEADER + AXES.replace('tune "hip" { strided = 256, { row_threads = "block", block = 256 } }\n', ""),
                   1, 'no tune "hip" statement matches variant ce_fwd_f32_i64_mean')

    def test_runtime_error_in_spec(self):
        self.check(HEADER + "local x = nil + 1\n", 3, "attempt to perform arithmetic")

    # linear_cross_entropy tunes the chunk of logits, not launch shapes.
    LCE = ('family "linear_cross_entropy"\nops { "fwd_bwd" }\n' + AXES.split('tune "cuda"')[0] +
           'tune "hip" { chunk_mib = 256 }\n')

    def test_chunk_tune_out_of_range(self):
        self.check(self.LCE + 'tune "cuda" { chunk_mib = 0 }\n', TUNE_HIP, "chunk_mib must be a whole number of MiB, 1 to 65536, got 0")
        self.check(self.LCE + 'tune "cuda" { chunk_mib = 1.5 }\n', TUNE_HIP, "got 1.5")

    def test_chunk_tune_takes_no_launch_shapes(self):
        self.check(self.LCE + 'tune "cuda" { strided = 256 }\n', TUNE_HIP,
                   "unknown field 'strided' (family linear_cross_entropy tunes chunk_mib, optionally with when)")

    def test_chunk_tune_needs_chunk_mib(self):
        self.check(self.LCE + 'tune "cuda" { when = { dtype = "f32" } }\n', TUNE_HIP, "missing chunk_mib")

    def test_chunk_tune_missing_for_a_target(self):
        self.check(self.LCE, 1, 'no tune "cuda" statement matches variant lce_fwd_bwd_f32_i64_mean')


class Expansion(unittest.TestCase):
    def list_keys(self, *extra, spec=SPEC):
        r = xentgen("--spec", spec, "--list", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_the_readme_spec_generates_its_variants(self):
        """The README's "Adding a variant" spec, as a user would paste it:
        every combination of its ops and specialized axes, and both
        renderings written."""
        with open(README) as f:
            text = f.read()
        section = text.split("## Adding a variant", 1)[1]
        spec_text = section.split("```lua\n", 1)[1].split("```", 1)[0]
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "readme.lua")
            with open(spec, "w") as f:
                f.write(spec_text)
            keys = self.list_keys(spec=spec)
            for target in ("cuda", "hip"):
                r = xentgen("--spec", spec, "--target", target, "--out", os.path.join(tmp, target))
                self.assertEqual(r.returncode, 0, r.stderr)
        prefixes = sorted(f"ce_{op}_{dt}_i64_{red}" for op in ("fwd", "bwd", "fwd_bwd") for dt in ("bf16", "f32")
                          for red in ("mean", "none"))
        self.assertEqual(sorted(re.sub(r"_unweighted_nozloss_nocap_notemp_nostats_notokw$", "", k) for k in keys), prefixes)

    def test_default_spec_has_every_combination_once_sorted(self):
        keys = self.list_keys()
        expected = sorted(f"ce_{op}_{dt}_{lt}_{red}" for op in ("fwd", "bwd", "fwd_bwd")
                          for dt in ("f32", "f16", "bf16", "f64") for lt in ("i32", "i64", "prob")
                          for red in ("none", "sum", "mean"))
        self.assertEqual(keys, expected)

    def test_an_option_the_spec_does_not_name_is_compiled_out(self):
        """A spec written before an option axis existed still generates: the
        option is specialized to its first value (off), in the key, so that
        a call asking for it finds no kernel; rendered, the kernels compile
        it out as they do a spec that specializes it so."""
        with tempfile.TemporaryDirectory() as tmp:
            older = os.path.join(tmp, "older.lua")
            with open(older, "w") as f:
                f.write(HEADER + AXES.replace('runtime "temperature"\nruntime "token_stats" runtime "token_weight"\n', ""))
            explicit = os.path.join(tmp, "explicit.lua")
            with open(explicit, "w") as f:
                f.write(HEADER + AXES.replace('runtime "temperature"\nruntime "token_stats" runtime "token_weight"\n',
                                              'specialize "temperature" { "notemp" }\n'
                                              'specialize "token_stats" { "nostats" }\n'
                                              'specialize "token_weight" { "notokw" }\n'))
            keys = self.list_keys(spec=older)
            self.assertEqual(keys, ["ce_bwd_f32_i64_mean_notemp_nostats_notokw",
                                   "ce_fwd_f32_i64_mean_notemp_nostats_notokw"])
            self.assertEqual(self.list_keys(spec=explicit), keys)
            for spec in (older, explicit):
                out = os.path.join(tmp, os.path.basename(spec) + ".out")
                r = xentgen("--spec", spec, "--target", "cuda", "--templates", TEMPLATES, "--out", out,
                            "--no-line-directives")
                self.assertEqual(r.returncode, 0, r.stderr)
            for key in keys:
                with open(os.path.join(tmp, "older.lua.out", key + ".cu")) as f:
                    a = f.read().split("\n", 3)[3]  # past the banner, which names the spec
                with open(os.path.join(tmp, "explicit.lua.out", key + ".cu")) as f:
                    b = f.read().split("\n", 3)[3]
                self.assertEqual(a, b, key)

    def test_linear_cross_entropy_spec_pairs_with_fused_kernels(self):
        """Every linear cross entropy variant runs around the fused kernel of
        the same axes, which the cross_entropy spec generates."""
        lce = self.list_keys(spec=os.path.join(RUNFILES, "specs", "linear_cross_entropy.lua"))
        self.assertEqual(len(lce), 36)
        ce = set(self.list_keys())
        for key in lce:
            self.assertTrue(key.startswith("lce_fwd_bwd_"), key)
            self.assertIn(key[1:], ce)

    def test_chunk_tune_reaches_the_plan(self):
        """The chunk's bytes (tune data by target) are what the rendered PLAN
        step compares with."""
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "lce.lua")
            with open(spec, "w") as f:
                f.write(SpecErrors.LCE + 'tune "cuda" { chunk_mib = 3 }\n')
            for target, bytes_ in (("cuda", 3 << 20), ("hip", 256 << 20)):
                out = os.path.join(tmp, target)
                r = xentgen("--spec", spec, "--target", target, "--templates", TEMPLATES, "--out", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                ext = ".cu" if target == "cuda" else ".hip"
                with open(os.path.join(out, "lce_fwd_bwd_f32_i64_mean" + ext)) as f:
                    self.assertIn(f"static constexpr int64_t kChunkBytes = {bytes_}ll;", f.read())

    def test_kernels_and_exclude_patterns(self):
        keys = self.list_keys("--kernels", "ce_fwd_bf16_*,ce_bwd_*_i32_mean", "--exclude", "*_sum")
        self.assertEqual(keys, ["ce_bwd_bf16_i32_mean", "ce_bwd_f16_i32_mean", "ce_bwd_f32_i32_mean",
                                "ce_bwd_f64_i32_mean", "ce_fwd_bf16_i32_mean", "ce_fwd_bf16_i32_none",
                                "ce_fwd_bf16_i64_mean", "ce_fwd_bf16_i64_none", "ce_fwd_bf16_prob_mean",
                                "ce_fwd_bf16_prob_none"])

    def test_filter_matching_nothing_is_an_error(self):
        r = xentgen("--spec", SPEC, "--list", "--kernels", "nothing*")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no variant left", r.stderr)

    def test_specialized_option_axes_appear_in_keys(self):
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "s.lua")
            with open(spec, "w") as f:
                f.write(HEADER + AXES.replace('runtime "weights"', 'specialize "weights" { "unweighted", "weighted" }')
                        + 'exclude { op = "bwd", weights = "weighted" }\n')
            self.assertEqual(self.list_keys(spec=spec),
                             ["ce_bwd_f32_i64_mean_unweighted", "ce_fwd_f32_i64_mean_unweighted",
                              "ce_fwd_f32_i64_mean_weighted"])

    def test_two_specs_generating_one_key_is_an_error(self):
        r = xentgen("--spec", SPEC, "--spec", SPEC, "--list")
        self.assertEqual(r.returncode, 1)
        self.assertIn("is also generated by", r.stderr)


class Output(unittest.TestCase):
    def generate(self, out, target="cuda", *extra):
        # Relative paths, as a user (and the Bazel build) runs it: the banner
        # and #line directives name specs/... and templates/...
        r = xentgen("--spec", "specs/cross_entropy.lua", "--target", target, "--templates", "templates", "--out", out,
                    *extra, cwd=RUNFILES)
        self.assertEqual(r.returncode, 0, r.stderr)

    def read_tree(self, root):
        tree = {}
        for name in sorted(os.listdir(root)):
            with open(os.path.join(root, name), "rb") as f:
                tree[name] = f.read()
        return tree

    def test_byte_identical_run_to_run(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for target in ("cuda", "hip"):
                self.generate(os.path.join(a, target), target)
                self.generate(os.path.join(b, target), target)
                self.assertEqual(self.read_tree(os.path.join(a, target)), self.read_tree(os.path.join(b, target)))

    def test_manifest_and_dispatch_list_every_variant(self):
        with tempfile.TemporaryDirectory() as tmp:
            for target, ext in (("cuda", ".cu"), ("hip", ".hip")):
                out = os.path.join(tmp, target)
                self.generate(out, target)
                keys = xentgen("--spec", SPEC, "--list").stdout.split()
                with open(os.path.join(out, "manifest.tsv")) as f:
                    rows = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
                self.assertEqual([r[0] for r in rows], keys)
                for key, tgt, arch, file, symbol, spec in rows:
                    self.assertEqual(tgt, target)
                    self.assertEqual(file, key + ext)
                    self.assertEqual(symbol, f"xent_{target}_launch_{key}")
                    self.assertTrue(os.path.exists(os.path.join(out, file)))
                    self.assertEqual(arch, "sm_70" if target == "cuda" else "gfx90a")
                with open(os.path.join(out, f"xent_dispatch_{target}.c")) as f:
                    table = f.read()
                positions = [table.index(f'{{"{k}", XENT_LAUNCHER(xent_{target}_launch_{k}),') for k in keys]
                self.assertEqual(positions, sorted(positions), "dispatch table must be sorted by key")

    def test_failed_run_leaves_previous_output_untouched(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            self.generate(out)
            before = self.read_tree(out)
            bad_templates = os.path.join(tmp, "templates")
            shutil.copytree(TEMPLATES, bad_templates)
            with open(os.path.join(bad_templates, "cross_entropy.tmpl"), "a") as f:
                f.write("{{ no_such_name }}\n")
            r = xentgen("--spec", SPEC, "--target", "cuda", "--templates", bad_templates, "--out", out)
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr, r"templates/cross_entropy\.tmpl:\d+: unknown name 'no_such_name'")
            self.assertEqual(self.read_tree(out), before)

    def test_dropped_variant_file_is_removed(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            self.generate(out)
            self.assertTrue(os.path.exists(os.path.join(out, "ce_fwd_f64_i64_sum.cu")))
            self.generate(out, "cuda", "--exclude", "ce_fwd_f64_*")
            self.assertFalse(os.path.exists(os.path.join(out, "ce_fwd_f64_i64_sum.cu")))
            self.assertTrue(os.path.exists(os.path.join(out, "ce_fwd_f32_i64_sum.cu")))

    def test_rendered_device_header_of_an_earlier_xentgen_is_removed(self):
        # Beside the kernels it would shadow the device library (kernels/);
        # a file of that name that xentgen did not write stays.
        for text, kept in (("// Generated by xentgen from templates/xent_device.h.tmpl.\n", False),
                           ("// The user's own.\n", True)):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "out")
                os.makedirs(out)
                with open(os.path.join(out, "xent_device.h"), "w") as f:
                    f.write(text)
                self.generate(out, "cuda", "--kernels", "ce_fwd_f32_i64_mean")
                self.assertEqual(os.path.exists(os.path.join(out, "xent_device.h")), kept)

    def test_line_directives_point_at_the_template(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.generate(tmp, "cuda", "--kernels", "ce_fwd_f32_i64_mean")
            with open(os.path.join(tmp, "ce_fwd_f32_i64_mean.cu")) as f:
                lines = f.read().split("\n")
            with open(os.path.join(TEMPLATES, "cross_entropy.tmpl")) as f:
                template = f.read().split("\n")
            # Follow the #line directives: every non-directive line must be the
            # template line it claims to be (modulo {{ }} substitutions).
            current, checked = None, 0
            for line in lines:
                if line.startswith("#line "):
                    current = int(line.split()[1])
                    continue
                if current is not None:
                    src = template[current - 1]
                    if "{{" not in src:
                        self.assertEqual(line, src, f"output line claims template line {current}")
                        checked += 1
                    current += 1
            self.assertGreater(checked, 15)

    @staticmethod
    def guarded_rows_kernels(out):
        """{guard: {file: the text it guards}}: each rows kernel as every file
        that holds it defines it (cross_entropy.tmpl's XENT_DEFINED_ guard)."""
        defs = {}
        for name in sorted(os.listdir(out)):
            if name.endswith((".cu", ".hip")):
                with open(os.path.join(out, name)) as f:
                    text = f.read()
                for m in re.finditer(r"^#ifndef (XENT_DEFINED_(\w+))\n#define \1\n(.*?)^#endif\n", text, re.S | re.M):
                    defs.setdefault(m.group(2), {})[name] = m.group(3)
        return defs

    def test_reductions_and_label_widths_share_rows_kernels(self):
        """The mean and sum, i32 and i64 variants of the same other axes
        share one rows kernel, byte for byte the same in every file (a unit
        compiles it once, whichever comes first); soft labels and 'none'
        share only across what they differ in."""
        with tempfile.TemporaryDirectory() as tmp:
            for target, ext in (("cuda", ".cu"), ("hip", ".hip")):
                out = os.path.join(tmp, target)
                self.generate(out, target)
                keys = [k for k in xentgen("--spec", SPEC, "--list").stdout.split() if k.startswith("ce_")]
                defs = self.guarded_rows_kernels(out)
                self.assertEqual(sorted(f for files in defs.values() for f in files), sorted(k + ext for k in keys))
                for kernel, files in defs.items():
                    key = kernel[len(f"xent_{target}_"):-len("_rows")]
                    want = [key]
                    for shared, each in (("_reduced", ("_mean", "_sum")), ("_int_", ("_i32_", "_i64_"))):
                        want = [k.replace(shared, e) for k in want for e in each] if shared in key else want
                    self.assertEqual(sorted(files), sorted(k + ext for k in want), kernel)
                    self.assertEqual(len(set(files.values())), 1, f"{kernel} differs between {sorted(files)}")
                    self.assertIn(f"{kernel}(const xent_ce_args a, int row_group)", next(iter(files.values())))
                # Per dtype and op: int_reduced, int_none, prob_reduced, prob_none.
                self.assertEqual(sum("_int_reduced" in k for k in defs), 12, "every dtype and op")
                self.assertEqual(len(defs), 12 * 4, "four rows kernels per dtype and op")

    def test_mean_and_sum_tuned_apart_keep_their_own_rows_kernels(self):
        """Where the spec tunes a mean and a sum variant differently for a
        target, each keeps its own rows kernel there; the other target still
        shares one."""
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "ce.lua")
            with open(spec, "w") as f:
                f.write(HEADER + AXES.replace('{ "mean" }', '{ "sum", "mean" }').replace(
                    'tune "cuda" { strided = 256,',
                    'tune "cuda" { when = { reduction = "sum" }, strided = 128, { row_threads = "block", block = 256 } }\n'
                    'tune "cuda" { strided = 256,'))
            for target, ext, shared in (("cuda", ".cu", False), ("hip", ".hip", True)):
                out = os.path.join(tmp, target)
                r = xentgen("--spec", spec, "--target", target, "--templates", TEMPLATES, "--out", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                defs = self.guarded_rows_kernels(out)
                if shared:
                    want = {f"xent_{target}_ce_{op}_f32_i64_reduced_rows": [f"ce_{op}_f32_i64_mean{ext}", f"ce_{op}_f32_i64_sum{ext}"]
                            for op in ("fwd", "bwd")}
                else:
                    want = {f"xent_{target}_ce_{op}_f32_i64_{red}_rows": [f"ce_{op}_f32_i64_{red}{ext}"]
                            for op in ("fwd", "bwd") for red in ("mean", "sum")}
                self.assertEqual({k: sorted(v) for k, v in defs.items()}, want)

    def test_golden(self):
        with tempfile.TemporaryDirectory() as tmp:
            for target, ext in (("cuda", ".cu"), ("hip", ".hip")):
                self.generate(tmp, target, "--kernels", ",".join(GOLDEN_VARIANTS))
                for name in [k + ext for k in GOLDEN_VARIANTS]:
                    with open(os.path.join(tmp, name)) as f:
                        got = f.read()
                    golden = os.path.join(GOLDEN, target, name)
                    with open(golden) as f:
                        self.assertEqual(got, f.read(), f"{target}/{name} differs from tests/golden "
                                         "(./bazelw run //tests:update_golden after an intended change)")


if __name__ == "__main__":
    unittest.main(verbosity=1)
