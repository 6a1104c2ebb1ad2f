-- A downstream project's own cross-entropy variants (tests/downstream: the
-- example of docs/INTEGRATION.md's "Using xent in your project"). Fewer than xent's own
-- spec: bf16 and f32 logits, int64 labels, the mean, forward and backward.
-- And one axis specialized where xent's spec keeps it at run time: the
-- z-loss, so a call without it runs a kernel that has no z-loss code at all.
-- Written before xent had the temperature, the per-token outputs and the
-- token weights, it names none of them: they are compiled out (as if
-- specialized "off"), and a call that asks for one is refused, naming the
-- axis and this file.
family "cross_entropy"

ops { "fwd", "bwd" }

specialize "dtype" { "bf16", "f32" }
specialize "label" { "i64" }
specialize "reduction" { "mean" }
specialize "z_loss" { "nozloss", "zloss" }

runtime "weights"
runtime "label_smoothing"
runtime "ignore_index"
runtime "softcap"

min_arch { cuda = 80, hip = "gfx90a" }

tune "cuda" {
  strided = 256,
  { classes = 2048, row_threads = 32, block = 256 },
  { row_threads = "block", block = 512 },
}
tune "hip" {
  strided = 256,
  { classes = 4096, row_threads = 64, block = 256 },
  { row_threads = "block", block = 256 },
}
