-- Softmax cross entropy: logits [outer, C, inner] (any class axis, read in
-- place), hard integer labels or soft labels (a distribution per position).
-- Semantics are PyTorch's F.cross_entropy (docs/API.md, "Semantics"). xentgen
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
-- arguments of every kernel, not axes (docs/API.md, "Options"). So is the
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
-- What RL and LLM trainers ask per token (docs/API.md, "Per-token outputs"): a
-- temperature (a multiply per element, on a second copy of the row walks
-- that the calls without it do not take), and entropy, the label's log-prob
-- and argmax with the entropy's gradient (that copy again, plus a few
-- instructions per element and a reduction per row when asked for).
runtime "temperature"      -- logits / tau after the cap (one tau, or one a row)
runtime "token_stats"      -- entropy, label_logprob, argmax outputs; dentropy input
runtime "token_weight"     -- a loss weight per row: one load and multiply per row

-- sm_70 (Volta) is the oldest arch with independent thread scheduling, which
-- the kernels assume (every shuffle names its mask).
min_arch { cuda = 70, hip = "gfx90a" }

-- Launch shapes of the row kernels, picked at run time: the first that serves
-- C (at most its `classes`) and the row count (at least its `rows`). Why
-- each table is as it is, measured: docs/PERFORMANCE.md, "Launch shapes".
-- Short rows are staged a tile at a time (tile = true; not yet measured).
-- f64 first (untuned): its fused gradient with the soft cap spills in
-- blocks of 512 or 1024.
tune "cuda" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 64, row_threads = 4, block = 256, tile = true },
  { classes = 256, row_threads = 8, block = 256 },
  { classes = 2048, row_threads = 32, block = 256 },
  { row_threads = "block", block = 256 },
}
-- The fused kernels can hold a long row on chip (on_chip: KiB of shared
-- memory per block of a cluster of up to 8, in two halves: one row walked
-- while the next one's slice loads), kept only for the calls of fewer than
-- 512 rows until a GPU run measures the pipelined form at more; nine
-- 16-byte loads in flight a thread (from shared memory on chip).
tune "cuda" {
  when = { op = "fwd_bwd" },
  strided = 256,
  loads = 9,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 64, row_threads = 4, block = 256, tile = true },
  { classes = 256, row_threads = 8, block = 256, rows = 16384, tile = true },
  { classes = 1024, row_threads = 32, block = 256, rows = 16384, tile = true },
  { classes = 2048, row_threads = 8, block = 256 },
  { classes = 4096, row_threads = 8, block = 256, rows = 8192 },
  { row_threads = 32, block = 512, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { classes = 262144, row_threads = "block", block = 128, rows = 512 },
  { classes = 262144, row_threads = "block", block = 256, on_chip = 64 },
  { row_threads = "block", block = 256 },
}
-- The gradient from the saved lse: at most 512 threads a block for its
-- registers; ten 16-byte loads in flight a thread.
tune "cuda" {
  when = { op = "bwd" },
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 64, row_threads = 4, block = 256, tile = true },
  { classes = 256, row_threads = 8, block = 256, rows = 16384, tile = true },
  { classes = 1024, row_threads = 32, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 8, block = 256 },
  { row_threads = 32, block = 256, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- The forward: at most 512 threads a block for its registers; ten 16-byte
-- loads in flight a thread (80 KB an SM at 16 warps).
tune "cuda" {
  strided = 256,
  loads = 10,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 64, row_threads = 4, block = 256, tile = true },
  { classes = 256, row_threads = 8, block = 256, rows = 16384, tile = true },
  { classes = 1024, row_threads = 32, block = 256, rows = 16384, tile = true },
  { classes = 16384, row_threads = 4, block = 256, rows = 16384 },
  { classes = 4096, row_threads = 8, block = 256 },
  { classes = 32768, row_threads = 8, block = 256, rows = 8192 },
  { row_threads = 32, block = 512, rows = 2048 },
  { classes = 16384, row_threads = "block", block = 256 },
  { row_threads = "block", block = 128 },
}
-- AMD CDNA: 64-lane wavefronts, a wave a row up to 4096 classes. Long rows
-- take blocks of 512: a 1024-thread block leaves a wave 128 registers, fewer
-- than these kernels use.
tune "hip" {
  when = { dtype = "f64" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 128, row_threads = 8, block = 256, tile = true },
  { classes = 1024, row_threads = 64, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 64, block = 256 },
  { row_threads = "block", block = 256 },
}
-- The fused pass can hold a row on chip on AMD too (on_chip: one
-- workgroup's LDS, no clusters): one row's slice in LDS while the next
-- one's is held in registers, 4 vectors a thread (at 8 it spilled), so blocks of
-- 512 hold 32 KiB (a row of 16384 bf16 classes, 8192 f32) and soft
-- labels' blocks of 256 hold 16 KiB. Kept, as on CUDA, for the calls of
-- fewer than 512 rows until an AMD GPU measures it.
tune "hip" {
  when = { label = "prob", op = "fwd_bwd" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 128, row_threads = 8, block = 256, tile = true },
  { classes = 1024, row_threads = 64, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256, rows = 512 },
  { classes = 32768, row_threads = "block", block = 256, on_chip = 16 },
  { row_threads = "block", block = 256 },
}
-- Soft labels read a second row and need over 256 registers: blocks of 256.
tune "hip" {
  when = { label = "prob" },
  strided = 256,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 128, row_threads = 8, block = 256, tile = true },
  { classes = 1024, row_threads = 64, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 64, block = 256 },
  { row_threads = "block", block = 256 },
}
tune "hip" {
  when = { op = "fwd_bwd" },
  strided = 256,
  loads = 6,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 128, row_threads = 8, block = 256, tile = true },
  { classes = 1024, row_threads = 64, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256, rows = 512 },
  { classes = 32768, row_threads = "block", block = 512, on_chip = 32 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
-- Six 16-byte loads in flight per lane, over the 34 KB per CU an MI300X asks.
tune "hip" {
  strided = 256,
  loads = 6,
  { classes = 16, row_threads = 1, block = 256, tile = true },
  { classes = 128, row_threads = 8, block = 256, tile = true },
  { classes = 1024, row_threads = 64, block = 256, rows = 16384, tile = true },
  { classes = 4096, row_threads = 64, block = 256 },
  { classes = 32768, row_threads = "block", block = 256 },
  { row_threads = "block", block = 512 },
}
