"""bench/launch_shapes.py against the rule of xent_pick_launch, on a table
written here in the generated form: which shape a call takes by classes and
rows, the last shape for every call, the on-chip launch's cluster. The C
side of the rule is checked by tests/emu_launch_rules_test.c on the
rendered kernels; this holds the reports' copy of it to the same cases."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_shapes  # noqa: E402

# As rendered: one line; a row_threads of 0 is a block a row.
SOURCE = ("static const xent_row_shape xent_cuda_ce_fwd_bwd_bf16_i64_mean_shapes[] = {{16, 1, 128, 0, 0, 1}, "
          "{4096, 32, 256, 0, 0, 0}, {32768, 0, 256, 65536, 0, 0}, {-1, 32, 512, 0, 2048, 0}, "
          "{262144, 0, 256, 65536, 0, 0}, {-1, 0, 1024, 0, 0, 0}};\n")


class LaunchShapesTest(unittest.TestCase):

    def setUp(self):
        self.shapes = launch_shapes.table(SOURCE)

    def test_table(self):
        self.assertEqual(len(self.shapes), 6)
        self.assertEqual(self.shapes[0], (16, 1, 128, 0, 0, 1))
        self.assertEqual(self.shapes[3], (-1, 32, 512, 0, 2048, 0))
        self.assertEqual(self.shapes[5], (-1, 0, 1024, 0, 0, 0))

    def test_no_table(self):
        with self.assertRaises(ValueError):
            launch_shapes.table("int x;")

    def test_classes_bound(self):
        self.assertEqual(launch_shapes.pick(self.shapes, 16), (128, 0, 0))
        self.assertEqual(launch_shapes.pick(self.shapes, 17), (256, 0, 0))
        self.assertEqual(launch_shapes.pick(self.shapes, 4096), (256, 0, 0))
        self.assertEqual(launch_shapes.pick(self.shapes, 4097), (512, 0, 0))

    def test_rows_floor(self):
        # Past the on-chip bound, a warp a row serves 2048 rows or more; 2047
        # rows skip it to the last shape (the on-chip one is not a plain launch).
        self.assertEqual(launch_shapes.pick(self.shapes, 131072, rows=2048), (512, 0, 0))
        self.assertEqual(launch_shapes.pick(self.shapes, 131072, rows=2047), (1024, 0, 0))
        self.assertEqual(launch_shapes.pick(self.shapes, 1 << 20, rows=1), (1024, 0, 0))

    def test_on_chip(self):
        # A block holds two halves (one row walked, the next loading).
        # 8192 bf16 classes: 1024 vectors, 16 KB, twice in one block's 64 KiB.
        self.assertEqual(launch_shapes.pick(self.shapes, 8192, elem_size=2, on_chip=True), (256, 1, 32768))
        # 16384: 32 KB, twice fills one block.
        self.assertEqual(launch_shapes.pick(self.shapes, 16384, elem_size=2, on_chip=True), (256, 1, 65536))
        # 131072 bf16 classes with few rows: 256 KB, a cluster of 8.
        self.assertEqual(launch_shapes.pick(self.shapes, 131072, rows=1, elem_size=2, on_chip=True), (256, 8, 65536))
        # f32: 512 KB, twice 64 KB a block would take 16 blocks: not on chip.
        self.assertIsNone(launch_shapes.pick(self.shapes, 131072, rows=1, elem_size=4, on_chip=True))
        # Enough rows for a warp each: that shape comes first, no on-chip launch.
        self.assertIsNone(launch_shapes.pick(self.shapes, 131072, rows=4096, elem_size=2, on_chip=True))
        # Too long for any cluster: the last shape, which is not on chip.
        self.assertIsNone(launch_shapes.pick(self.shapes, 1 << 20, rows=1, elem_size=2, on_chip=True))


if __name__ == "__main__":
    unittest.main()
