-- Softmax cross entropy: logits [outer, C, inner] (any class axis, read in
-- place), hard integer labels or soft labels (a distribution per position).
-- Semantics are PyTorch's F.cross_entropy (README, "Semantics"). xentgen
-- reports a mistake as specs/cross_entropy.lua:<line>, the line where its
-- statement starts.
family "cross_entropy"

-- fwd: loss (per row or reduced) and the per-row log-sum-exp for backward.
-- bwd: gradient from dloss and the saved log-sum-exp.
-- fwd_bwd: loss and gradient in one pass over the logits.
ops { "fwd", "bwd", "fwd_bwd" }

-- Types change the generated C, so they are always compile-time axes.
specialize "dtype" { "f32", "f16", "bf16", "f64" }
specialize "label" { "i32", "i64", "prob" }
-- The reduction decides what the kernel writes (per-row losses, or block
-- partials for a deterministic two-stage sum), so it is compile time too.
specialize "reduction" { "none", "sum", "mean" }

-- Options that cost one uniform branch per row or element (or a scalar
-- read): run time, so that 3 x 4 x 3 x 3 = 108 kernels per target cover every
-- combination. The class-axis stride, the extra tensors (log_prob, softmax,
-- grad_bias, grad_labels) and f32 outputs for f16/bf16 logits are run-time
-- arguments of every kernel, not axes (README, "Options"). So is the
-- vocabulary-parallel split: a class offset and the global C in every kernel,
-- and the shard statistics and their combine in the fwd kernels, which the
-- runtime chains with the bwd kernels around one all-gather: no extra
-- kernels, and the fused fwd_bwd kernels carry none of it.
runtime "weights"          -- null pointer = unweighted; weights[y] is one load per row
runtime "label_smoothing"  -- epsilon = 0 skips the per-row sum of logits
runtime "ignore_index"     -- one integer compare per row
-- LLM-training extras (Liger's lse_square_scale, Gemma-2's logit cap): a
-- scale of 0 turns each off; the cap costs a tanh per element when on.
runtime "z_loss"           -- loss += z * lse^2 on counted rows
runtime "softcap"          -- logits -> cap * tanh(logits / cap)
-- What RL and LLM trainers ask per token (README, "Per-token outputs"): a
-- temperature (a multiply per element, on a second copy of the row walks
-- that the calls without it do not take), and entropy, the label's log-prob
-- and argmax with the entropy's gradient (that copy again, plus a few
-- instructions per element and a reduction per row when asked for).
runtime "temperature"      -- logits / tau after the cap
runtime "token_stats"      -- entropy, label_logprob, argmax outputs; dentropy input

-- sm_70 (Volta) is the oldest arch with independent thread scheduling, which
-- the kernels assume (every shuffle names its mask).
min_arch { cuda = 70, hip = "gfx90a" }

-- Launch shapes of the row kernels (docs/PERFORMANCE.md, "Launch shapes"),
-- picked at run time: the first shape that serves C (at most its `classes`)
-- and the row count (at least its `rows`). Small vocabularies put several
-- rows in a block (row_threads threads each, reduced with warp shuffles) so
-- that no lane idles on a short row; strided rows (class axis not last) take
-- one thread each. The CUDA tables of bf16, fp16 and f32 come from the
-- H200's tune groups (the fourth run's bench/results/2026-11-27-NVIDIA-H200/
-- tune.json and the fifth's, -3db0cf0/, bf16 at 1024 to 262144 classes, 512
-- to 1M rows): a row's fixed cost (its set-up, the clamped last batch of
-- loads, the reduction) is paid once per thread, so a thread wants many
-- vectors of its row. Few threads a row win on short rows (the fifth run's
-- forward: 4 a row at 1024 to 16384 classes, 2.50 to 3.17 TB/s against
-- 2.02 to 3.10 for 8), a warp a row from 32768 up (3.2-3.9 against 2.6-3.7
-- for the best block a row): no block barrier, and a warp's row never waits
-- on another's. Few threads a row leave SMs idle on few rows (an H200 holds
-- ~2100 warps of these kernels): 4 a row need 16384 rows, a warp a row
-- 2048 (measured at 131072 classes: at 2048 rows a warp a row read 2.43
-- TB/s against 1.99 for the best block, at 512 rows 0.72 against 1.02).
-- f64 first (not measured): its fused gradient with the soft cap's tanh
-- needs more registers than a 512- or 1024-thread block leaves a thread,
-- and spills.
tune "cuda" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 2048, row_threads = 32, block = 256 },
  { row_threads = "block", block = 256 },
}
-- The fused kernels can hold a long row on chip (on_chip: KiB of shared
-- memory per block of a cluster of up to 8 blocks on sm_90), so that the
-- gradient pass reads it from there rather than from memory again: 2
-- passes over the logits' bytes instead of 3 ("Rows on chip"). Measured
-- (the fifth run, nine loads), a warp a row that reads the row twice from
-- memory beat it at every row count that fills the GPU: 2.47 TB/s of copy
-- against 1.99 at 32768 classes (the fourth run, at four loads: 2.42
-- against 2.61), level at 2048 rows of 131072; and at 512 rows of 131072 a
-- block of 256 without it beat it (1.10 against 0.96). A cluster splits a
-- row over up to 8 SMs, which only rows too few for the GPU's SMs need:
-- it keeps the calls of fewer than 512 rows (not yet measured there).
-- In flight: nine 16-byte loads a thread, 72 KB an SM at 16 warps for both
-- passes and both shapes, where four held 32 KB, half what a B200 asks
-- (bench/results/sass_report.md); 124 to 128 registers. At ten (the
-- forward's) the f16 on-chip kernel spilled 28 bytes on sm_100.
tune "cuda" {
  when = { op = "fwd_bwd" },
  strided = 256,
  loads = 9,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 1024, row_threads = 4, block = 256, rows = 16384 },
  { classes = 2048, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 32, block = 256 },
  { row_threads = 32, block = 512, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { classes = 262144, row_threads = "block", block = 256, rows = 512 },
  { classes = 262144, row_threads = "block", block = 256, on_chip = 64 },
  { row_threads = "block", block = 256 },
}
-- The gradient from the saved lse holds more per thread than the 64
-- registers a 1024-thread block leaves: 512 at most. Measured (H200, the
-- fifth run, ten loads): 4 threads a row at 1024 classes (3.81 TB/s of
-- copy against 3.61 for 8), 8 at 2048 and 4096 (within 3% of the best), a
-- warp a row in blocks of 256 past that (within 3% of the best shape at
-- 16384 to 262144).
-- Ten loads in flight a thread (32 KB an SM at four; a B200 asks 67): 80 KB
-- at 16 warps in 122 to 128 registers, the f32 one on sm_90 at 16 warps
-- where four left it 24.
tune "cuda" {
  when = { op = "bwd" },
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 1024, row_threads = 4, block = 256, rows = 16384 },
  { classes = 4096, row_threads = 8, block = 256 },
  { row_threads = 32, block = 256, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- The forward keeps ten 16-byte loads in flight per thread (loads), which
-- with the run-time options' per-element work needs more than the 64
-- registers a 1024-thread block leaves: 512 at most, 16 warps x 10 x 16 B =
-- 80 KB in flight per SM, what a B200 asks (bench/results/sass_report.md;
-- an H100 asks 31 KB), in 127 registers without spills. Measured: 4
-- threads a row up to 16384 classes (1024: 2.50 TB/s against 2.02 for 8;
-- 2048: 2.86 against 2.49), 8 for fewer rows to 4096, a warp a row in
-- blocks of 512 past it, and a block of 256 a row for few long rows (0.99
-- and 1.90 TB/s at 512 and 2048 rows of 131072, against 0.91 and 1.78 for
-- 512).
tune "cuda" {
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 64, row_threads = 4, block = 256 },
  { classes = 16384, row_threads = 4, block = 256, rows = 16384 },
  { classes = 4096, row_threads = 8, block = 256 },
  { row_threads = 32, block = 512, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { row_threads = "block", block = 256 },
}
-- AMD CDNA: 64-lane wavefronts (a wave per row up to 4096 classes, where a
-- CUDA warp would give up), 64 KB of LDS per workgroup of which the
-- reductions use a few hundred bytes. Long rows take blocks of 512, not
-- 1024: a SIMD's 512 registers per lane (VGPRs and AGPRs together on gfx90a
-- and gfx942) are shared by the waves it holds, and a 1024-thread block puts
-- 4 waves on each SIMD, so 128 registers each, where these kernels use 150
-- to 250: clang spilled 160 to 512 bytes per lane to scratch in every
-- 16-bit row kernel, and gave the bf16 soft-label fused kernel more
-- registers than a 1024-thread block can have. (The softmax kernels fit in
-- 128 and keep 1024.)
tune "hip" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { row_threads = "block", block = 256 },
}
-- Soft labels read a second row beside the logits and hold more: their
-- kernels need over 256 registers (the fused bf16 one spilled 100 bytes per
-- lane at 512 threads), so they stay at 256-thread blocks, where a wave may
-- have all 512.
tune "hip" {
  when = { label = "prob" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { row_threads = "block", block = 256 },
}
-- Loads in flight: 6 per lane, 48 KB per CU at 8 waves (2 a SIMD at 150 to
-- 250 registers), over the 34 KB an MI300X asks (bench/results/
-- isa_report.md), for the forward, the backward and the fused kernels alike.
-- (The fused ones kept 4, 32 KB, while their f32 gradient store held 32
-- registers across the row loop, xent_store16f: at 6 they spilled 240 bytes
-- per lane then, and fit 256 registers since.)
tune "hip" {
  strided = 256,
  loads = 6,
  { classes = 16, row_threads = 1, block = 256 },
  { classes = 128, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
