"""A spec is untrusted input. Hostile specs and arguments, each as an
attacker or a careless user would write them: the spec cannot reach files,
commands or the generator's own tables (gen/lua/sandbox.lua); it cannot hang
the generator or take its memory (instruction, memory and CPU-time limits,
each reported at the spec line); malformed lists, duplicate statements, NUL
bytes, deep nesting, overlong patterns and paths, and control characters in
paths are errors. Every refused run exits 1, names what is wrong and writes
nothing; every message names the spec's file:line, never the generator's
(a recursion that overflows in the sandbox's own code, a DSL statement
reached through a library function such as string.gsub). Each case failed
(ran a command, hung, exited 0 with a wrong result, or named the
generator's line) before the sandbox was rebuilt."""

import os
import subprocess
import tempfile
import time
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
XENTGEN = os.path.join(RUNFILES, "gen", "xentgen")
TEMPLATES = os.path.join(RUNFILES, "templates")

HEADER = 'family "cross_entropy"\nops { "fwd", "bwd" }\n'
AXES = ('specialize "dtype" { "f32" }\nspecialize "label" { "i64" }\nspecialize "reduction" { "mean" }\n'
        'runtime "weights"\nruntime "label_smoothing"\nruntime "ignore_index"\nruntime "z_loss"\nruntime "softcap"\nruntime "temperature"\nruntime "token_stats" runtime "token_weight"\n'
        'tune "cuda" { strided = 256, { classes = 64, row_threads = 4, block = 256 }, { row_threads = "block", block = 1024 } }\n'
        'tune "hip" { strided = 256, { row_threads = "block", block = 256 } }\n')
GOOD = HEADER + AXES
KEYS = ["ce_bwd_f32_i64_mean", "ce_fwd_f32_i64_mean"]


class Sandbox(unittest.TestCase):
    def run_spec(self, text, *extra, spec_name="specs/bad.lua", out_name="out", mode="w"):
        """Runs xentgen on `text` in a fresh directory; returns (result, the
        directory's files afterwards, out dir)."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", tmp])
        os.makedirs(os.path.join(tmp, os.path.dirname(spec_name)), exist_ok=True)
        with open(os.path.join(tmp, spec_name), mode) as f:
            f.write(text)
        out = os.path.join(tmp, out_name)
        start = time.monotonic()
        r = subprocess.run([XENTGEN, "--spec", spec_name, "--target", "cuda", "--templates", TEMPLATES, "--out", out,
                            *extra], capture_output=True, text=True, cwd=tmp, timeout=120)
        r.seconds = time.monotonic() - start
        files = sorted(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs)
        return r, files, out

    def refused(self, text, where, what, *extra, **kw):
        r, files, out = self.run_spec(text, *extra, **kw)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(where, r.stderr)
        self.assertIn(what, r.stderr)
        self.assertFalse(os.path.exists(out), "a refused run must write nothing")
        self.assertEqual([f for f in files if not f.startswith("specs/")], [], "nothing written anywhere")
        return r

    def generated(self, text, *extra):
        r, files, out = self.run_spec(text, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(f for f in files if not f.startswith(("specs/", "out/"))), [],
                         "nothing written outside --out")
        return sorted(f[len("out/"):-len(".cu")] for f in files if f.startswith("out/ce_"))

    # --- escapes: the spec's library is its own copy ---------------------------------------

    def test_replacing_table_concat_reaches_nothing(self):
        # table.concat builds the template compiler's code: a shared table
        # would hand the injected os.execute the generator's globals.
        evil = ('table.concat = function() return "os.execute(\'touch PWNED\') io.open(\'PWNED2\', \'w\')" end\n'
                'string.format = function() return "os.execute(\'touch PWNED3\')" end\n')
        self.assertEqual(self.generated(HEADER + evil + AXES), KEYS)

    def test_string_methods_use_the_sandboxed_library(self):
        self.refused(HEADER + 'local s = ("x"):rep(1 << 40)\n', "specs/bad.lua:3: ", "over the sandbox's 16 MiB")
        # Removing rep from the spec's copy removes the method too, and
        # nothing outside the spec.
        self.refused(HEADER + 'string.rep = nil\nlocal s = ("x"):rep(2)\n', "specs/bad.lua:4: ", "method 'rep'")

    def test_no_way_out_of_the_environment(self):
        for name in ["io", "os", "load", "require", "debug", "dofile", "loadstring", "getmetatable", "setmetatable",
                     "rawset", "rawget", "pcall", "coroutine", "package", "_G", "collectgarbage"]:
            with self.subTest(name=name):
                self.refused(HEADER + f"local x = {name}\n", "specs/bad.lua:3: ", f"unknown name '{name}'")
        self.refused(HEADER + "local x = math.random(6)\n", "specs/bad.lua:3: ", "field 'random'")
        self.refused(HEADER + "table.move({1}, 1, 1 << 40, 2)\n", "specs/bad.lua:3: ", "field 'move'")

    def test_lists_are_copied_when_checked(self):
        # Changing a list after the statement checked it would smuggle any
        # string into the variant keys, and a key is a file name.
        text = (HEADER.replace('ops { "fwd", "bwd" }', 'local l = { "fwd", "bwd" }\nops(l)\nl[1] = "../../PWNED"') +
                AXES.replace('specialize "dtype" { "f32" }', 'local d = { "f32" }\nspecialize "dtype" (d)\nd[1] = "../x"') +
                'local e = { "f32" }\nexclude { op = "bwd", dtype = e }\ne[1] = "f64"\n')
        self.assertEqual(self.generated(text), ["ce_fwd_f32_i64_mean"])

    # --- limits ------------------------------------------------------------------------------

    def test_endless_loop(self):
        r = self.refused(HEADER + "local n = 0\nwhile true do n = n + 1 end\n", "specs/bad.lua:4: ",
                         "limit of 50000000 instructions")
        self.assertLess(r.seconds, 30)

    def test_unbounded_recursion(self):
        self.refused(HEADER + "local function f(n) return 1 + f(n + 1) end\nf(1)\n", "specs/bad.lua:3: ", "stack overflow")

    def test_unbounded_recursion_before_any_statement(self):
        # The stack overflows inside the sandbox's own hook, not the spec's
        # code: still the spec's line, never the generator's.
        r = self.refused("local function f(n) return f(n + 1) + 1 end f(1)\n", "specs/bad.lua:1: ", "stack overflow")
        self.assertNotIn("gen/lua/", r.stderr)

    def test_statement_called_from_a_library_function(self):
        # family reached through string.gsub, a C function whose frame has
        # no line: the spec's line that called gsub, and the DSL's own
        # message, not an internal error.
        r = self.refused('string.gsub("cross_entropy", ".+", family)\nfamily "cross_entropy"\n', "specs/bad.lua:2: ",
                         "a spec declares one family; 'cross_entropy' was declared at line 1")
        self.assertNotIn("gen/lua/", r.stderr)
        r = self.refused('string.gsub("cross_entropy cross_entropy", "%S+", family)\n', "specs/bad.lua:1: ",
                         "a spec declares one family")
        self.assertNotIn("gen/lua/", r.stderr)

    def test_memory_bombs(self):
        self.refused(HEADER + 'local s = "xxxxxxxxxxxxxxxx"\nfor i = 1, 40 do s = s .. s end\n', "specs/bad.lua:4: ",
                     "MiB of memory")
        self.refused(HEADER + "local t = {}\nfor i = 1, 1e9 do t[i] = i end\n", "specs/bad.lua:4: ", "MiB of memory")
        self.refused(HEADER + 'local s = string.rep("ab", 1e9, ",")\n', "specs/bad.lua:3: ", "over the sandbox's 16 MiB")
        self.refused(HEADER + 'local s = string.rep("", 1 << 50)\n', "specs/bad.lua:3: ", "string.rep")
        # Found by the fuzzer: a wrong argument was reported inside the
        # sandbox (gen/lua/sandbox.lua), not at the spec's line.
        self.refused(HEADER + 'local s = ("x"):rep"weights"\n', "specs/bad.lua:3: ", "bad argument #2 to 'rep'")
        self.refused(HEADER + 'local s = string.rep({}, 2)\n', "specs/bad.lua:3: ", "bad argument #1 to 'rep'")

    def test_pathological_pattern_hits_the_cpu_time_limit(self):
        # Backtracking inside one C call: no Lua hook runs there.
        r = self.refused(HEADER + 'local s = string.find(string.rep("a", 30000), string.rep("a*", 20) .. "b")\n',
                         "specs/bad.lua:3: ", "CPU-time limit", "--spec-time-limit", "1")
        self.assertLess(r.seconds, 30)

    def test_cpu_time_limit_in_lua_code(self):
        # Each call stays short; together they pass the time limit before the
        # instruction limit.
        self.refused(HEADER + 'local s = string.rep("a", 1 << 20)\nfor i = 1, 1e6 do s:find("b", 1, true) end\n',
                     "specs/bad.lua:4: ", "limit of 1 s of CPU time", "--spec-time-limit", "1")

    def test_time_limit_argument(self):
        for bad in ["0", "x", "9999", ""]:
            with self.subTest(bad=bad):
                self.refused(GOOD, "--spec-time-limit", "whole number of seconds", "--spec-time-limit", bad)

    # --- malformed specs ---------------------------------------------------------------------

    def test_list_holes_and_odd_keys(self):
        for body, what in [('"fwd", nil, "bwd"', "has a hole"), ('[3] = "fwd"', "has a hole"),
                           ('[0] = "fwd", "bwd"', "an entry at index 0"), ('[1.5] = "fwd", "bwd"', "a field '1.5'")]:
            with self.subTest(body=body):
                self.refused(f'family "cross_entropy"\nops {{ {body} }}\n' + AXES, "specs/bad.lua:2: ", what)
        self.refused(HEADER + AXES + 'exclude { dtype = { "f32", nil, "f64" } }\n', "specs/bad.lua:15: ", "has a hole")
        self.refused(HEADER + AXES + 'exclude { dtype = {} }\n', "specs/bad.lua:15: ", "matches nothing")

    def test_nil_hole_in_tune_shapes(self):
        self.refused(HEADER + AXES.replace('block = 256 }, { row_threads = "block", block = 1024 }',
                                           'block = 256 }, nil, { row_threads = "block", block = 1024 }'),
                     "specs/bad.lua:13: ", "has a hole (a nil entry) in its list of shapes")

    def test_statements_given_twice(self):
        self.refused(HEADER + AXES + "min_arch { cuda = 70 }\nmin_arch { cuda = 80 }\n", "specs/bad.lua:16: ",
                     "min_arch declared twice (first at line 15)")
        self.refused(HEADER + AXES.replace('specialize "dtype" { "f32" }',
                                           'local f = specialize "dtype"\nf { "f32" }\nf { "f64" }'),
                     "specs/bad.lua:5: ", "axis 'dtype' declared twice")

    def test_nul_byte(self):
        self.refused(HEADER + AXES + '-- a comment\0 with a NUL\n', "specs/bad.lua:15: ", "NUL byte")
        self.refused(HEADER + 'local s = "\0"\n' + AXES, "specs/bad.lua:3: ", "NUL byte")

    def test_deep_nesting_names_the_line(self):
        self.refused(HEADER + "local x = 1\nlocal y = " + "{" * 400 + "}" * 400 + "\n", "specs/bad.lua:4: ",
                     "nested too deep")
        self.refused(HEADER + "local y = " + "(" * 400 + "1" + ")" * 400 + "\n", "specs/bad.lua:3: ", "nested too deep")

    def test_spec_too_large(self):
        self.refused(HEADER + AXES + "-- " + "x" * (1 << 20) + "\n", "specs/bad.lua:1: ", "over the sandbox's 1 MiB")

    # --- arguments and paths -----------------------------------------------------------------

    def test_long_patterns_are_errors_not_ignored(self):
        self.refused(GOOD, "--kernels: a pattern of 300 characters", "at most 255", "--kernels", "*" * 300)
        self.refused(GOOD, "--exclude: a pattern of 256 characters", "at most 255", "--exclude", "x" * 256)
        self.refused(GOOD, "--kernels: an empty pattern", "", "--kernels", "ce_fwd_*,,ce_bwd_*")
        self.assertEqual(self.generated(GOOD, "--kernels", "ce_fwd_*," + "*" * 255), KEYS)

    def test_long_out_path_is_an_error_not_truncated(self):
        # A 4,085-character --out used to write files under truncated names.
        parts = ["d" * 200] * 20
        self.refused(GOOD, "output path too long", "", out_name=os.path.join(*parts, "x" * 80))

    def test_control_characters_in_the_spec_path(self):
        # A newline in the path would add lines (#error ...) to every
        # generated file and the manifest.
        self.refused(GOOD, "spec path has a control character", "", spec_name="specs/x\n#error pwned\n.lua")
        self.refused(GOOD, "spec path has a control character", "", spec_name="specs/a\tb.lua")


if __name__ == "__main__":
    unittest.main()
