-- The names a template sees for one (variant, target): what its
-- instantiation unit writes into the variant's traits (kernels/<family>/
-- say what each means), as data.

local M = {}

M.extensions = { cuda = ".cu", hip = ".hip" }

-- Each logits dtype's type in memory (kernels/device/convert.h's
-- xent_dtype_<dtype> has the rest).
local DTYPES = {
  f32 = { storage = "float" },
  f64 = { storage = "double" },
  f16 = { storage = "uint16_t" },
  bf16 = { storage = "uint16_t" },
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
-- kernel's launch bounds), the largest block of an on-chip shape (0: none
-- holds rows on chip), the loads in flight per thread, the threads per SM
-- the launch bounds ask room for (0: not asked), and whether a shape stages
-- tiles of rows.
local function launch_shapes(text)
  local strided, loads, resident = text:match("^strided=(%d+) loads=(%d+) resident=(%d+)")
  strided, loads, resident = tonumber(strided), tonumber(loads), tonumber(resident)
  local shapes, largest, chip, tile = {}, 0, 0, false
  for classes, group, block, bytes, rows, tiled in text:gmatch("(%-?%d+):(%d+):(%d+):(%d+):(%d+):(%d)") do
    shapes[#shapes + 1] = "{" .. classes .. ", " .. group .. ", " .. block .. ", " .. bytes .. ", " .. rows .. ", " ..
      tiled .. "}"
    largest = math.max(largest, tonumber(block))
    if tonumber(bytes) > 0 then chip = math.max(chip, tonumber(block)) end
    tile = tile or tiled == "1"
  end
  assert(strided and loads and resident and #shapes > 0, "malformed launch shapes: " .. text)
  return strided, "{" .. table.concat(shapes, ", ") .. "}", largest, chip, loads, resident, tile
end

-- An option axis as a kernel's traits name it (kernels/device/variant.h):
-- specialized to its first value (off) or its second (on), or run time.
local function option(v, axis, values)
  local value = v[axis]
  if value == "runtime" then return "XENT_RUNTIME" end
  return value == values[1] and "XENT_OFF" or "XENT_ON"
end
local OPTIONS = {
  weights = { "unweighted", "weighted" },
  label_smoothing = { "nosmooth", "smooth" },
  ignore_index = { "noignore", "ignore" },
  z_loss = { "nozloss", "zloss" },
  softcap = { "nocap", "softcap" },
  temperature = { "notemp", "temp" },
  token_stats = { "nostats", "stats" },
  token_weight = { "notokw", "tokw" },
}

-- The threads per SM a strided row's launch bounds ask room for (its loads
-- in flight are per thread, xent_column_walk: 64 bytes each): 768 for the
-- forward, 512 where the gradient's, the temperature's or the per-token
-- statistics' state is live, one block for f64's doubled registers and for
-- the soft labels' gradient, which also loads the labels; each measured free
-- of spills with ptxas -v (docs/PERFORMANCE.md).
local function column_resident(v, strided)
  if v.family == "softmax" then return v.dtype == "f64" and 512 or 768 end
  local has_bwd = v.op == "bwd" or v.op == "fwd_bwd"
  if v.dtype == "f64" or (v.label == "prob" and has_bwd) then return strided end
  local extras = v.temperature ~= "notemp" or v.token_stats ~= "nostats"
  return (has_bwd or extras) and 512 or 768
end

-- Whether the variant's rows kernel is the one its i32 and i64 labels share
-- (dsl.lua's share_rows_kernels names it by "int" where the label was).
local function shares_labels(v, target)
  if v.label ~= "i32" and v.label ~= "i64" then return false end
  local tokens = {}
  for t in v["rows_key_" .. target]:gmatch("[^_]+") do tokens[t] = true end
  return tokens.int and not tokens[v.label]
end

function M.for_variant(v, target)
  local d = DTYPES[v.dtype]
  local sym = M.symbols(target, v.key)
  local tune = v["tune_" .. target]
  local chunk_bytes = tune:match("^chunk=(%d+)$")
  local strided, shapes, largest, chip, loads, resident, tile
  if not chunk_bytes then strided, shapes, largest, chip, loads, resident, tile = launch_shapes(tune) end
  local row_min_blocks = resident and resident > 0 and resident // largest or 1
  -- The on-chip kernel's launch bounds: its own shapes' largest block; on
  -- CUDA with the register cap the row shapes' bounds give (ptxas caps a
  -- thread at 65536 / (threads x blocks)), on HIP one block (where a second
  -- number asks for waves per SIMD, and a workgroup's LDS holds one).
  local chip_threads = (chip or 0) > 0 and chip or largest
  local chip_min_blocks = 1
  if target == "cuda" and largest then chip_min_blocks = math.max(1, largest * row_min_blocks // chip_threads) end
  return {
    v = v,
    target = target,
    -- The logits' storage type, and the labels' (soft labels are stored
    -- like the logits).
    T = d.storage,
    L = LABELS[v.label] or d.storage,
    soft = v.label == "prob",
    kernel = sym.kernel,
    launcher = sym.launcher,
    -- The rows kernel's name: its own, or the one a mean and a sum variant
    -- share (dsl.lua's share_rows_kernels), which every file that holds it
    -- defines under a guard of that name, so that a unit compiles it once.
    rows_kernel = M.symbols(target, v["rows_key_" .. target]).kernel .. "_rows",
    -- The traits the rows kernel is instantiated with: the variant's own,
    -- or, shared, ones every variant sharing it defines; their label type
    -- reads either width where the i32 and i64 variants share it.
    rows_traits = M.symbols(target, v["rows_key_" .. target]).kernel,
    rows_L = shares_labels(v, target) and "xent_int_labels" or (LABELS[v.label] or d.storage),
    -- The spec's tune statement for this target: the launch shapes of a
    -- contiguous row by C (`shapes`, a C initializer of xent_row_shape),
    -- their largest block (`row_threads`, the launch bounds), and the block
    -- of a strided row, one thread per row (`column_threads`).
    shapes = shapes,
    row_threads = largest,
    column_threads = strided,
    -- Some shape holds rows in shared memory across a cluster (fused and
    -- the softmax forward only), and the on-chip kernel's launch bounds.
    on_chip = (chip or 0) > 0,
    chip_threads = chip_threads,
    chip_min_blocks = chip_min_blocks,
    -- Some shape stages tiles of short rows (hard labels only: a soft
    -- label's second row is not staged).
    tile = tile and v.label ~= "prob",
    -- The 16-byte loads a thread keeps in flight in a contiguous row's walk
    -- (the walks' kInFlight; the spec's tune `loads`).
    row_loads = loads,
    -- The blocks per SM the row kernels' launch bounds ask room for: the
    -- spec's tune `resident` over the largest block, 1 where not given.
    row_min_blocks = row_min_blocks,
    -- The strided shape's threads per SM (its launch bounds).
    column_resident = strided and column_resident(v, strided),
    -- linear_cross_entropy: the bytes of logits one chunk may hold.
    chunk_bytes = chunk_bytes,
    -- cross_entropy: an option axis's XENT_OFF, XENT_ON or XENT_RUNTIME.
    option = function(axis) return option(v, axis, assert(OPTIONS[axis], axis)) end,
  }
end

return M
