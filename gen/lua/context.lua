-- The names a template sees for one (variant, target). Every decision that
-- depends on the variant is made here, as data; templates only branch on
-- these values, so the generated code has no branch on a compile-time axis.

local M = {}

M.extensions = { cuda = ".cu", hip = ".hip" }

-- Storage type in memory, accumulation type, and the conversion functions
-- the device header defines for each logits dtype.
local DTYPES = {
  f32 = { storage = "float", acc = "float", bytes = 4 },
  f64 = { storage = "double", acc = "double", bytes = 8 },
  f16 = { storage = "uint16_t", acc = "float", bytes = 2 },
  bf16 = { storage = "uint16_t", acc = "float", bytes = 2 },
}

-- Hard labels are integers; soft labels ("prob") are a distribution per row,
-- stored like the logits.
local LABELS = { i32 = "int32_t", i64 = "int64_t" }

function M.symbols(target, key)
  return {
    kernel = "xent_" .. target .. "_" .. key,
    launcher = "xent_" .. target .. "_launch_" .. key,
  }
end

function M.for_variant(v, target)
  local d = DTYPES[v.dtype]
  local sym = M.symbols(target, v.key)
  return {
    v = v,
    target = target,
    T = d.storage,
    A = d.acc,
    L = LABELS[v.label] or d.storage,
    soft = v.label == "prob",
    -- f16/bf16 variants may write the loss and the gradient in f32 (a
    -- run-time flag each): ONNX Runtime's mixed-precision variants.
    mixed = v.dtype == "f16" or v.dtype == "bf16",
    to_acc = "xent_load_" .. v.dtype,
    from_acc = "xent_store_" .. v.dtype,
    kernel = sym.kernel,
    launcher = sym.launcher,
    has_fwd = v.op == "fwd" or v.op == "fwd_bwd",
    has_bwd = v.op == "bwd" or v.op == "fwd_bwd",
    reduced = v.reduction ~= "none",
    -- Threads per block of the row kernel. f64's fused gradient (with the
    -- soft cap's tanh) needs more registers than a 1024- or 512-thread
    -- block leaves each thread (64 or 128): it would spill.
    row_threads = v.dtype == "f64" and 256 or 1024,
    -- Threads per block when the class axis is strided (inner > 1): one
    -- thread per row, neighbouring threads on neighbouring positions, so
    -- every load of a class is coalesced.
    column_threads = 256,
  }
end

return M
