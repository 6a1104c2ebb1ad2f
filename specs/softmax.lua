-- Softmax and log-softmax along one axis, and their gradients: ONNX Runtime's
-- Softmax/LogSoftmax and SoftmaxGrad/LogSoftmaxGrad (opset 13, any axis).
-- The input is [outer, C, inner] in memory and is read in place, strided
-- when the axis is not last (README, "Semantics"). xentgen reports a mistake
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
-- "Launch shapes"). f64 and HIP: untuned starting points. The CUDA forward
-- and backward of bf16, f16 and f32: the fifth GPU run's `tune` winners
-- (bench/results/2026-11-27-NVIDIA-H200-3db0cf0/tune.json, bf16, TB/s of
-- copy): 16 threads a row at 1024 classes (forward 3.51 against 2.75 for a
-- warp a row; backward 3.71 against 3.16), with rows enough for them to
-- fill an H200 (8192 rows: 4096 warps).
tune "cuda" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 2048, row_threads = 32, block = 256 },
  { row_threads = "block", block = 256 },
}
-- The forward holds a long row on chip (as cross_entropy.lua's fused
-- kernels: a cluster of up to 8 blocks of 256 threads with 64 KiB of shared
-- memory each), so that its output pass reads the row from there: one read
-- and one write of the row instead of two reads and a write. A 128K bf16 row
-- takes a cluster of 4, f32 of 8; longer rows take the last shape.
-- In flight: six 16-byte loads a thread at 24 warps an SM, 72 KB, over the
-- 67 KB a B200 asks (bench/results/sass_report.md). 64 KiB of shared memory
-- a block leaves the on-chip shape 3 blocks an SM anyway; `resident` keeps
-- ptxas within the 80 registers that 24 warps leave (unbounded, it took 96
-- to 121 and held 16 warps, 40 to 48 KB), and blocks of 1024 (64
-- registers) spilled at 5 loads or more. Measured: a warp a row at 4096
-- classes (3.57 against 1.78 for a block a row; past 4096 to 16384 taken
-- from cross_entropy.lua's forward, where a block a row lost 2x too); the
-- rows on chip at 32768 and 131072 (3.72 and 3.30 against 3.29 and 2.76
-- for the best shape without).
tune "cuda" {
  when = { op = "fwd" },
  strided = 256,
  loads = 6,
  resident = 768,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 1024, row_threads = 16, block = 256, rows = 8192 },
  { classes = 2048, row_threads = 32, block = 256 },
  { classes = 16384, row_threads = 32, block = 256, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { classes = 262144, row_threads = "block", block = 256, on_chip = 64 },
  { row_threads = "block", block = 256 },
}
-- The backward keeps ten 16-byte loads in flight per thread, five of y and
-- five of dy (xent_row_walk2's batch), 80 KB an SM at 16 warps, over the
-- 67 KB a B200 asks (31 KB an H100; bench/results/sass_report.md). Two of
-- each in blocks of 1024 had 64 KB at 32 warps in 64 registers; ten need
-- 91 to 96, so its longest rows take blocks of 512 (launch bounds of 512:
-- up to 128 registers). Measured: a block of 128 a row at 4096 classes
-- (3.72 against 2.26 for 256 and 3.36 for the best warp-a-row shape), 256
-- at 32768 (3.24 against 3.12 for 512), 512 at 131072 (level with 256).
tune "cuda" {
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 1024, row_threads = 16, block = 256, rows = 8192 },
  { classes = 2048, row_threads = 32, block = 256 },
  { classes = 4096, row_threads = "block", block = 128 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- AMD: a 1024-thread block leaves a wave 128 registers (cross_entropy.lua
-- says why); the f64 forward needs a few more (it spilled 16 and 24 bytes
-- per lane at 1024) and takes blocks of 512, the rest fit and keep 1024.
-- The f64 backward takes 512 too: rendered for NVIDIA (runtime/hip_on_cuda),
-- a block of 1024 leaves a thread 64 registers, and its log-softmax rows
-- spilled 128 bytes there (bench/gpu/build.sh's check).
tune "hip" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
tune "hip" {
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 1024 },
}
