-- The fused linear cross entropy (xent_linear_ce_run, docs/LINEAR_CE.md):
-- the loss of logits = hidden @ weight^T (+ bias) a chunk of rows at a time.
-- A variant is the device-side steps of the chunk loop (the mean's divisor,
-- the bias and its gradient, the loss from the chunks' sums); each chunk's
-- loss and gradient come from the cross_entropy family's fused kernel of the
-- same axes (ce_fwd_bwd_<dtype>_<label>_<reduction>...), so a variant here
-- needs that one in specs/cross_entropy.lua. xentgen reports a mistake as
-- specs/linear_cross_entropy.lua:<line>, the line where its statement starts.
family "linear_cross_entropy"

-- fwd_bwd: the loss and the gradients of hidden, weight and bias in one call.
ops { "fwd_bwd" }

-- The logits' (hidden's, weight's) dtype, the labels and the reduction
-- change the steps' C types and what they compute: 4 x 3 x 3 = 36 variants
-- per target, each a few small kernels.
specialize "dtype" { "f32", "f16", "bf16", "f64" }
specialize "label" { "i32", "i64", "prob" }
specialize "reduction" { "none", "sum", "mean" }

-- The options mean what they mean in cross_entropy.lua, where the fused
-- kernel reads them; here only the weights, ignore_index and the token
-- weights (the mean's divisor) are read, at run time.
runtime "weights"
runtime "label_smoothing"
runtime "ignore_index"
runtime "z_loss"
runtime "softcap"
runtime "temperature"
runtime "token_stats"
runtime "token_weight"

min_arch { cuda = 70, hip = "gfx90a6666666666666" }

-- The chunk: as many rows (a power of two) as keep one chunk of logits
-- within chunk_mib MiB of the whole vocabulary. It is the call's memory
-- beyond its inputs and outputs, and the M of its GEMMs: 256 MiB is 1024
-- rows of a 131072-wide bf16 vocabulary, half the 512 MiB the issue allows
-- at N = 16384 and enough rows for an H100's GEMM tiles (1024 x 131072 is
-- 4096 tiles of 128 x 256). An untuned starting point: bench/run_gpu.sh.
tune "cuda" { chunk_mib = 256 }
-- MI200/MI300 hold 64 to 192 GB: the same budget, for the same reasons.
tune "hip" { chunk_mib = 256 }
