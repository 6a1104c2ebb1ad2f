"""The GPU run's plan without its archives (CI): every call fits the device
machine's limits on time, command length and carried paths, and a step's
verdict says what happened to it (bench/gpu/lib.sh). The archives' sizes and
what travels are checked by bench/gpu/dry_run.sh, which builds them (too long
for CI; docs/GPU_RUN.md)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gpu"))
import plan  # noqa: E402


class PlanTest(unittest.TestCase):
    def test_calls_fit(self):
        calls = plan.calls()
        self.assertEqual([c.split()[1] for c, _ in calls], ["correctness", "sanitize", "bench", "profile"])
        for command, carry in calls:
            self.assertLessEqual(len(command), plan.COMMAND_CHARS)
            self.assertLessEqual(len(carry), plan.CARRY_PATHS)
            self.assertIn(plan.LIBS, carry)
            steps, seconds = plan.stage_seconds(command)
            self.assertLessEqual(seconds, plan.STAGE_SECONDS, command)
            self.assertGreaterEqual(len(steps), 3, command)
            names = [s for s, _ in steps]
            self.assertEqual(len(names), len(set(names)), f"{command}: a step name twice: {names}")
        # The test binaries travel with the stages that run them only.
        self.assertIn(plan.TESTS, calls[0][1])
        self.assertNotIn(plan.TESTS, calls[2][1])

    def test_unknown_stage(self):
        r = subprocess.run(["bash", os.path.join(HERE, "gpu", "stage.sh"), "nonsense"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)


class VerdictTest(unittest.TestCase):
    """lib.sh's step: one VERDICT line and one JSON record per step."""

    def run_steps(self, script):
        with tempfile.TemporaryDirectory() as tmp:
            body = f"""
set -euo pipefail
. {os.path.join(HERE, 'gpu', 'lib.sh')}
STAGE=t LOG={tmp}/t.log VERDICTS={tmp}/v.jsonl
XENT_GPU_RUN_NO_GPU=1
{script}
echo "status $STAGE_STATUS"
"""
            r = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(tmp, "v.jsonl")) as f:
                records = [json.loads(line) for line in f]
            return r.stdout, records

    def test_verdicts(self):
        out, records = self.run_steps("""
step ok 10 true
step bad 10 false
step slow 1 sleep 5
step skips 10 echo "SKIPPED: nothing to do here"
step gpu 10 --gpu true
fn() { echo "from a function"; }
export -f fn
step function 10 fn
""")
        verdicts = {r["step"]: (r["verdict"], r["detail"]) for r in records}
        self.assertEqual(verdicts["ok"], ("PASSED", ""))
        self.assertEqual(verdicts["bad"], ("FAILED", "exit 1"))
        self.assertEqual(verdicts["slow"], ("TIMED OUT", "after 1 s"))
        self.assertEqual(verdicts["skips"], ("SKIPPED", "nothing to do here"))
        self.assertEqual(verdicts["gpu"], ("SKIPPED", "no GPU"))
        self.assertEqual(verdicts["function"], ("PASSED", ""))
        self.assertIn("VERDICT t/bad: FAILED (exit 1)", out)
        self.assertIn("VERDICT t/slow: TIMED OUT (after 1 s)", out)
        self.assertIn("from a function", out)
        self.assertIn("status 1", out)

    def test_all_passing_stage(self):
        out, records = self.run_steps("step ok 10 true\nstep gpu 10 --gpu false")
        self.assertEqual([r["verdict"] for r in records], ["PASSED", "SKIPPED"])
        self.assertIn("status 0", out)


if __name__ == "__main__":
    unittest.main()
