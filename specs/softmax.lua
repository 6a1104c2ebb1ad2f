-- Softmax and log-softmax along one axis, and their gradients: ONNX Runtime's
-- Softmax/LogSoftmax and SoftmaxGrad/LogSoftmaxGrad (opset 13, any axis).
-- The input is [outer, C, inner] in memory and is read in place, strided
-- when the axis is not last (docs/API.md, "Semantics"). xentgen reports a mistake
-- as specs/softmax.lua:<line>, the line where its statement starts.
family "softmax"

-- fwd: y = softmax(x) or log_softmax(x).
-- bwd: dx from the forward's output y and the upstream dy.
ops { "fwd", "bwd" }

-- Types and the kind change every formula: compile time, 2 x 4 x 2 = 16
-- kernels per target.
specialize "dtype" { "f32", "f16", "bf16", "f64" }
specialize "kind" { "softmax", "log_softmax" }

min_arch { cuda = 70, hip = "gfx90a" }

-- Launch shapes by C and rows, as in cross_entropy.lua (docs/PERFORMANCE.md,
-- "Launch shapes", says why each is as it is). f64 and HIP: untuned.
tune "cuda" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 2048, row_threads = 32, block = 256 },
  { row_threads = "block", block = 256 },
}
-- The forward holds a long row on chip (a cluster of up to 8 blocks of 256
-- threads, 64 KiB of shared memory each in two halves: one row walked while
-- the next one's slice loads): one read and one write of the row instead of
-- two reads and a write. Six 16-byte loads in flight a thread;
-- `resident` keeps ptxas within the 80 registers that 24 warps leave.
tune "cuda" {
  when = { op = "fwd" },
  strided = 256,
  loads = 6,
  resident = 768,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 1024, row_threads = 16, block = 256, rows = 4096 },
  { classes = 2048, row_threads = 32, block = 256 },
  { classes = 8192, row_threads = 32, block = 256, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { classes = 262144, row_threads = "block", block = 256, on_chip = 64 },
  { row_threads = "block", block = 256 },
}
-- The backward: ten 16-byte loads in flight a thread (five of y, five of
-- dy); its longest rows take blocks of 512 for the registers.
tune "cuda" {
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 1024, row_threads = 16, block = 256, rows = 4096 },
  { classes = 2048, row_threads = 32, block = 256 },
  { classes = 4096, row_threads = "block", block = 128 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- AMD: blocks of 512 for f64, whose kernels need more than the 128
-- registers a 1024-thread block leaves a wave.
tune "hip" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- The forward holds a row on chip on AMD too: 32 KiB of a workgroup's
-- LDS, no clusters, the next row's slice held in registers (4 vectors a
-- thread of 512); kept for the calls of fewer than 512 rows until an AMD
-- GPU measures it.
tune "hip" {
  when = { op = "fwd" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256, rows = 512 },
  { classes = 32768, row_threads = "block", block = 512, on_chip = 32 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 1024 },
}
tune "hip" {
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 1024 },
}
