#!/usr/bin/env python3
"""bench/ncu_source.py on a source page made here, whose counts are known by
construction: a kernel of a prologue run once a warp, a streaming loop (a
16-byte load, a backward branch) run 4 times a warp, and an epilogue; and a
loop without a 16-byte access, which is not a streaming loop."""

import lzma
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_source  # noqa: E402

HEADER = ['"Address"', '"Source"', '"Warp Stall Sampling (All Samples)"', '"Instructions Executed"']
BASE = 0x7F0000001000


def page(lines):
    """A source page of one kernel: lines are (text, executed, samples)."""
    out = ['"Kernel Name","void k(int)",', ",".join(HEADER)]
    for i, (text, n, s) in enumerate(lines):
        out.append(f'"{hex(BASE + 16 * i)}","{text}","{s}","{n}"')
    return "\n".join(out) + "\n"


WARPS = 100
KERNEL = [
    ("LDC R1, c[0x0][0x28]", WARPS, 1),          # 0: prologue, 3 instructions
    ("S2R R0, SR_TID.X", WARPS, 1),              # 1
    ("IADD3 R2, R0, 0x1, RZ", WARPS, 1),         # 2
    ("LDG.E.128 R4, desc[UR4][R2.64]", 4 * WARPS, 10),  # 3: loop head
    ("FADD R8, R4, R5", 4 * WARPS, 2),           # 4
    ("ISETP.GE.AND P0, PT, R2, 0x10, PT", 4 * WARPS, 2),  # 5
    (f"@!P0 BRA {hex(BASE + 16 * 3)}", 4 * WARPS, 2),     # 6: back to 3
    ("FADD R9, R8, R8", WARPS, 1),               # 7: epilogue
    ("MUFU.EX2 R9, R9", WARPS, 1),               # 8
    ("IADD3 R3, R3, 0x1, RZ", 2 * WARPS, 1),     # 9: a loop with no 16-byte access
    (f"@P1 BRA {hex(BASE + 16 * 9)}", 2 * WARPS, 1),      # 10
    ("EXIT", WARPS, 0),                          # 11
    ("BRA 0xc0", 0, 0),                          # 12: never run
]


class NcuSource(unittest.TestCase):
    def kernels(self, suffix):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ncu-source.csv" + suffix)
            opener = lzma.open if suffix else open
            with opener(path, "wt") as f:
                f.write("# a comment line\n" + page(KERNEL))
            return ncu_source.read_kernels(path)

    def test_counts(self):
        for suffix in ("", ".xz"):
            (k,) = self.kernels(suffix)
            vectors = 50.0
            a = ncu_source.analyse(k, vectors)
            total = 3 * WARPS + 4 * 4 * WARPS + 2 * WARPS + 2 * 2 * WARPS + WARPS
            self.assertEqual(a["total"], total)
            self.assertEqual(len(a["loops"]), 1, "only the loop with a 16-byte load streams")
            start, end, executed, samples, entered = a["loops"][0]
            self.assertEqual((start, end), (3, 6))
            self.assertEqual(executed, 16 * WARPS)
            self.assertEqual(samples, 16)
            self.assertEqual(entered, 4 * WARPS)
            self.assertEqual(a["outside"], total - 16 * WARPS)
            # The regions outside: runs of one executed count.
            spans = [(r["start"], r["end"], r["count"]) for r in a["regions"]]
            self.assertEqual(spans, [(0, 2, WARPS), (7, 8, WARPS), (9, 10, 2 * WARPS), (11, 11, WARPS)])
            text = ncu_source.render("x", [k], vectors)
            self.assertIn(f"**{total / vectors:.1f} per warp-vector**", text)

    def test_vector_accesses(self):
        for t in ("LDG.E.128 R4, desc[UR4][R2.64]", "@P0 STG.E.128 desc[UR6][R2.64], R4", "LDS.128 R4, [R2]",
                  "STS.128 [R2], R4", "LDG.E.EF.128 R4, desc[UR4][R2.64]"):
            self.assertTrue(ncu_source.is_vector_access(t), t)
        for t in ("LDG.E R4, desc[UR4][R2.64]", "LDG.E.64 R4, desc[UR4][R2.64]", "LDS R4, [R2]", "FADD R1, R2, R3"):
            self.assertFalse(ncu_source.is_vector_access(t), t)


if __name__ == "__main__":
    unittest.main()
