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

-- The launch shapes dsl.lua chose for the variant on this target (its
-- launch_shapes() text): the strided block size, the C initializer of the
-- xent_row_shape table the launcher picks from, the largest block (the
-- kernel's launch bounds), whether a shape holds rows on chip, the loads in
-- flight per thread, and the threads per SM the launch bounds ask room for
-- (0: not asked).
local function launch_shapes(text)
  local strided, loads, resident = text:match("^strided=(%d+) loads=(%d+) resident=(%d+)")
  strided, loads, resident = tonumber(strided), tonumber(loads), tonumber(resident)
  local shapes, largest, on_chip = {}, 0, false
  for classes, group, block, bytes, rows in text:gmatch("(%-?%d+):(%d+):(%d+):(%d+):(%d+)") do
    shapes[#shapes + 1] = "{" .. classes .. ", " .. group .. ", " .. block .. ", " .. bytes .. ", " .. rows .. "}"
    largest = math.max(largest, tonumber(block))
    on_chip = on_chip or tonumber(bytes) > 0
  end
  assert(strided and loads and resident and #shapes > 0, "malformed launch shapes: " .. text)
  return strided, "{" .. table.concat(shapes, ", ") .. "}", largest, on_chip, loads, resident
end

function M.for_variant(v, target)
  local d = DTYPES[v.dtype]
  local sym = M.symbols(target, v.key)
  local tune = v["tune_" .. target]
  local chunk_bytes = tune:match("^chunk=(%d+)$")
  local strided, shapes, largest, on_chip, loads, resident
  if not chunk_bytes then strided, shapes, largest, on_chip, loads, resident = launch_shapes(tune) end
  local mixed = v.dtype == "f16" or v.dtype == "bf16"
  local T, A, to_acc, from_acc = d.storage, d.acc, "xent_load_" .. v.dtype, "xent_store_" .. v.dtype
  return {
    v = v,
    target = target,
    T = T,
    A = A,
    L = LABELS[v.label] or d.storage,
    soft = v.label == "prob",
    -- f16/bf16 variants may write the loss and the gradient in f32 (a
    -- run-time flag each): ONNX Runtime's mixed-precision variants.
    mixed = mixed,
    to_acc = to_acc,
    -- xent_widen_<dtype>(vec, out): a 16-byte vector into the accumulation type.
    widen = "xent_widen_" .. v.dtype,
    from_acc = from_acc,
    -- from_acc as a function object (xent_to_<dtype>: an element, and two
    -- 16-bit ones into a word), the conversion xent_output and
    -- xent_row_walk2 take.
    to_storage = "xent_to_" .. v.dtype,
    -- C for an element of a loss or gradient buffer (and dloss), which is in
    -- the logits dtype or, where the call's `flag` (a C expression) says so,
    -- f32 (mixed only): one uniform branch per access. get(ptr, idx, flag)
    -- reads it into the accumulation type; put(ptr, idx, val, flag) is the
    -- statement storing val there.
    get = function(ptr, idx, flag)
      local plain = to_acc .. "(((const " .. T .. "*)" .. ptr .. ")[" .. idx .. "])"
      if not mixed then return plain end
      return "(" .. flag .. " ? " .. A .. "(((const float*)" .. ptr .. ")[" .. idx .. "]) : " .. plain .. ")"
    end,
    put = function(ptr, idx, val, flag)
      local plain = "((" .. T .. "*)" .. ptr .. ")[" .. idx .. "] = " .. from_acc .. "(" .. val .. ")"
      if not mixed then return plain .. ";" end
      return "if (" .. flag .. ") ((float*)" .. ptr .. ")[" .. idx .. "] = (float)(" .. val .. "); else " .. plain .. ";"
    end,
    kernel = sym.kernel,
    launcher = sym.launcher,
    -- The rows kernel's name: its own, or the one a mean and a sum variant
    -- share (dsl.lua's share_rows_kernels), which every file that holds it
    -- defines under a guard of that name, so that a unit compiles it once.
    rows_kernel = M.symbols(target, v["rows_key_" .. target]).kernel .. "_rows",
    has_fwd = v.op == "fwd" or v.op == "fwd_bwd",
    has_bwd = v.op == "bwd" or v.op == "fwd_bwd",
    reduced = v.reduction ~= "none",
    -- The spec's tune statement for this target: the launch shapes of a
    -- contiguous row by C (`shapes`, a C initializer of xent_row_shape),
    -- their largest block (`row_threads`, the launch bounds), and the block
    -- of a strided row, one thread per row (`column_threads`).
    shapes = shapes,
    row_threads = largest,
    column_threads = strided,
    -- Some shape holds rows in shared memory across a cluster (fused only).
    on_chip = on_chip,
    -- The 16-byte loads a thread keeps in flight in a contiguous row's walk
    -- (the walks' kInFlight; the spec's tune `loads`).
    row_loads = loads,
    -- The blocks per SM the row kernels' launch bounds ask room for: the
    -- spec's tune `resident` over the largest block, 1 where not given.
    row_min_blocks = resident and resident > 0 and resident // largest or 1,
    -- linear_cross_entropy: the bytes of logits one chunk may hold.
    chunk_bytes = chunk_bytes,
  }
end

return M
