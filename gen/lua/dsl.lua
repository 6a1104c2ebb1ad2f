-- The spec DSL: loads one specs/*.lua file in a sandbox, validates it and
-- expands it into a sorted list of variants.
--
-- A spec is a list of statements, one per line, so that every mistake can be
-- reported at the line that made it:
--
--   family "cross_entropy"
--   ops { "fwd", "bwd", "fwd_bwd" }
--   specialize "dtype" { "f32", "bf16" }
--   runtime "weights"
--   exclude { op = "bwd", dtype = "f64" }
--   tune "cuda" { strided = 256, { classes = 64, row_threads = 4, block = 256 }, { row_threads = "block", block = 1024 } }
--
-- This file is policy only; it is embedded in xentgen (which renders and writes
-- files) and run by the Bazel repository rule that must know every output file
-- name before the build starts. Both call load_spec() and get the same list.

local sandbox = require("sandbox")

local M = {}

-- The cross-entropy axes, in key order: family cross_entropy's, and the
-- linear cross entropy's (whose variants run around those kernels). Read
-- only.
local CE_AXES = {
  { name = "dtype", values = { "f32", "f16", "bf16", "f64" }, type_axis = true },
  { name = "label", values = { "i32", "i64", "prob" }, type_axis = true },
  { name = "reduction", values = { "none", "sum", "mean" }, type_axis = true },
  { name = "weights", values = { "unweighted", "weighted" } },
  { name = "label_smoothing", values = { "nosmooth", "smooth" } },
  { name = "ignore_index", values = { "noignore", "ignore" } },
  { name = "z_loss", values = { "nozloss", "zloss" } },
  { name = "softcap", values = { "nocap", "softcap" } },
  -- The scaled logits z = logits / tau (one tau, or one a row); the
  -- per-token outputs (entropy, the label's log-prob, argmax) and the
  -- entropy's gradient; a loss weight per row.
  { name = "temperature", values = { "notemp", "temp" } },
  { name = "token_stats", values = { "nostats", "stats" } },
  { name = "token_weight", values = { "notokw", "tokw" } },
}

-- What each family may declare. `axes` is the canonical key order. An axis
-- with `choice` values names what each compile-time value means; axes marked
-- `type_axis` must be specialized (they change C types, not just a branch).
M.schemas = {
  cross_entropy = {
    prefix = "ce",
    template = "cross_entropy.tmpl",
    ops = { "fwd", "bwd", "fwd_bwd" },
    -- The ops whose kernels can hold a row on chip (tune's on_chip): the
    -- fused kernel, whose gradient pass reads the row again.
    on_chip_ops = { "fwd_bwd" },
    -- Whose row kernels can stage short rows a tile at a time (tune's tile).
    tile = true,
    axes = CE_AXES,
  },
  softmax = {
    prefix = "sm",
    template = "softmax.tmpl",
    ops = { "fwd", "bwd" },
    -- The forward's output pass reads the row again.
    on_chip_ops = { "fwd" },
    axes = {
      { name = "dtype", values = { "f32", "f16", "bf16", "f64" }, type_axis = true },
      -- Softmax and log-softmax differ in every formula, so the kind is
      -- always compile time.
      { name = "kind", values = { "softmax", "log_softmax" }, type_axis = true },
    },
  },
  -- The fused linear cross entropy (runtime/linear_ce.c): a variant is the
  -- device-side helpers of the chunk loop around the cross_entropy family's
  -- fused kernel of the same axes (ce_fwd_bwd_<the same key>), and its tune
  -- data is the size of a chunk of logits, not launch shapes.
  linear_cross_entropy = {
    prefix = "lce",
    template = "linear_cross_entropy.tmpl",
    ops = { "fwd_bwd" },
    tune = "chunk",
    axes = CE_AXES,
  },
}
-- The largest chunk of logits a linear_cross_entropy tune may ask for (MiB).
M.max_chunk_mib = 65536

-- The targets a spec tunes for, and their warp width (lanes that shuffle
-- together; kernels/device/target_*.h's XENT_WARP). on_chip: the most shared memory a
-- block may hold a row slice in (KiB; sm_90's opt-in limit, a CDNA
-- workgroup's LDS); held: the 16-byte vectors a thread holds the next row's
-- slice in (HIP's XENT_CHIP_HELD: an on-chip block of `block` threads holds
-- at most block x held x 16 bytes; CUDA's copy needs no registers).
M.targets = { cuda = { warp = 32, on_chip = 227 }, hip = { warp = 64, on_chip = 64, held = 4 } }
M.target_names = { "cuda", "hip" }
-- The largest thread block either vendor launches (kernels/device/target.h's XENT_MAX_THREADS).
M.max_block = 1024
-- A tune's `loads`: 16-byte loads in flight per thread in a row walk (64
-- registers' worth at most: beyond that no kernel keeps its other state).
M.default_loads, M.max_loads = 4, 16
-- A CUDA tune's `resident`: threads per SM the row kernels' launch bounds
-- ask room for (an SM holds at most 2048 threads on sm_80 to sm_100).
M.max_resident = 2048

local function index_of(list, value)
  for i, v in ipairs(list) do
    if v == value then return i end
  end
  return nil
end

local function axis_of(schema, name)
  for i, a in ipairs(schema.axes) do
    if a.name == name then return a, i end
  end
  return nil
end

local function quoted_list(list)
  local out = {}
  for _, v in ipairs(list) do out[#out + 1] = tostring(v) end
  return table.concat(out, ", ")
end

-- Raised errors carry "file:line: message" already; this marks them so the
-- loader does not prefix a second position.
local function fail_at(where, msg)
  error({ xent = true, msg = where .. ": " .. msg }, 0)
end

-- Builds the statement functions a spec may call. `st` collects the
-- declarations; `where()` is the file:line of the statement being run.
local function make_env(path, st, lib)
  -- The spec's file:line that is running: the innermost frame of the
  -- spec's own code, from `level` up. A statement may be reached through a
  -- C function (string.gsub(s, p, family)), whose frame has no line.
  local function where(level)
    local source = "@" .. path
    local l = level or 3
    while true do
      local info = debug.getinfo(l, "Sl")
      if not info then return path .. ":0" end
      if info.source == source and info.currentline > 0 then return path .. ":" .. info.currentline end
      l = l + 1
    end
  end

  local function need_family(name)
    if not st.schema then
      fail_at(where(4), "'" .. name .. "' before 'family': a spec starts with family \"<name>\"")
    end
  end

  -- A list in braces with no holes and no other keys: { "a", nil, "b" },
  -- { [3] = "a" } and { [1.5] = "a" } drop or misplace values silently in
  -- Lua, so they are errors here.
  local function check_sequence(value, what, here)
    local count, largest = 0, 0
    for k in pairs(value) do
      if math.type(k) ~= "integer" then
        fail_at(here, what .. " expects a plain list, got a field '" .. tostring(k) .. "'")
      end
      if k < 1 then fail_at(here, what .. " expects a plain list, got an entry at index " .. k) end
      count, largest = count + 1, math.max(largest, k)
    end
    if largest ~= count then
      fail_at(here, what .. " has a hole (a nil entry): " .. count .. " values at indexes up to " .. largest)
    end
    return count
  end

  -- Returns a copy: a spec must not change a list after the DSL checked it.
  local function string_list(value, what, here)
    if type(value) ~= "table" then
      fail_at(here, what .. " expects a list in braces, got " .. type(value))
    end
    local n = check_sequence(value, what, here)
    if n == 0 then fail_at(here, what .. " must not be empty") end
    local seen, list = {}, {}
    for i = 1, n do
      local v = value[i]
      if type(v) ~= "string" then
        fail_at(here, what .. " expects strings, got " .. type(v))
      end
      if seen[v] then fail_at(here, what .. " lists '" .. v .. "' twice") end
      seen[v] = true
      list[i] = v
    end
    return list
  end

  local env = {}
  local parse_rule, chunk_tune

  function env.family(name)
    local here = where()
    if st.schema then fail_at(here, "a spec declares one family; '" .. st.family .. "' was declared at line " .. st.family_line) end
    if type(name) ~= "string" then fail_at(here, "family expects a name in quotes") end
    local schema = M.schemas[name]
    if not schema then
      local known = {}
      for k in pairs(M.schemas) do known[#known + 1] = k end
      table.sort(known)
      fail_at(here, "unknown family '" .. name .. "' (known: " .. quoted_list(known) .. ")")
    end
    st.schema, st.family, st.family_line = schema, name, here:match(":(%d+)$")
    st.family_where = here
  end

  function env.ops(list)
    need_family("ops")
    local here = where()
    if st.ops then fail_at(here, "ops declared twice") end
    list = string_list(list, "ops", here)
    for _, op in ipairs(list) do
      if not index_of(st.schema.ops, op) then
        fail_at(here, "unknown op '" .. op .. "' (family " .. st.family .. " has " .. quoted_list(st.schema.ops) .. ")")
      end
    end
    st.ops = list
  end

  local function declare_axis(name, here, how)
    if type(name) ~= "string" then fail_at(here, how .. " expects an axis name in quotes") end
    local axis = axis_of(st.schema, name)
    if not axis then
      local names = {}
      for _, a in ipairs(st.schema.axes) do names[#names + 1] = a.name end
      fail_at(here, "unknown axis '" .. name .. "' (family " .. st.family .. " has " .. quoted_list(names) .. ")")
    end
    if st.axes[name] then
      fail_at(here, "axis '" .. name .. "' declared twice (first at line " .. st.axes[name].line .. ")")
    end
    return axis
  end

  -- specialize "axis" { values }: one kernel per value, no run-time branch.
  function env.specialize(name)
    need_family("specialize")
    local here = where()
    local axis = declare_axis(name, here, "specialize")
    return function(values)
      local here2 = where()
      if st.axes[name] then fail_at(here2, "axis '" .. name .. "' declared twice (first at line " .. st.axes[name].line .. ")") end
      values = string_list(values, "specialize \"" .. name .. "\"", here2)
      for _, v in ipairs(values) do
        if not index_of(axis.values, v) then
          fail_at(here2, "unknown " .. name .. " '" .. v .. "' (expected one of " .. quoted_list(axis.values) .. ")")
        end
      end
      st.axes[name] = { mode = "specialize", values = values, line = here2:match(":(%d+)$") }
    end
  end

  -- runtime "axis": one kernel serves every value, read at run time.
  function env.runtime(name)
    need_family("runtime")
    local here = where()
    local axis = declare_axis(name, here, "runtime")
    if axis.type_axis then
      fail_at(here, "axis '" .. name .. "' changes C types and cannot be a run-time parameter; use specialize \"" .. name .. "\" { ... }")
    end
    st.axes[name] = { mode = "runtime", line = here:match(":(%d+)$") }
  end

  -- { field = value or {values}, ... } naming variants (exclude, tune's when).
  function parse_rule(rule, here, what)
    if type(rule) ~= "table" then fail_at(here, what .. " expects a table of axis = value") end
    local clean = {}
    for k, v in pairs(rule) do
      if type(k) ~= "string" then fail_at(here, what .. " expects axis = value fields, not a list") end
      local allowed
      if k == "op" then
        allowed = st.schema.ops
      else
        local axis = axis_of(st.schema, k)
        if not axis then fail_at(here, what .. " names unknown axis '" .. k .. "'") end
        allowed = axis.values
      end
      local vs = type(v) == "table" and v or { v }
      local n = check_sequence(vs, what .. " " .. k, here)
      if n == 0 then fail_at(here, what .. ": " .. k .. " = {} matches nothing") end
      vs = table.move(vs, 1, n, 1, {})
      for _, x in ipairs(vs) do
        if not index_of(allowed, x) then
          fail_at(here, what .. ": unknown " .. k .. " '" .. tostring(x) .. "' (expected one of " .. quoted_list(allowed) .. ")")
        end
      end
      clean[k] = vs
    end
    if next(clean) == nil then fail_at(here, what .. " {} would match every variant") end
    return clean
  end

  -- exclude { field = value or {values}, ... }: drops matching combinations.
  function env.exclude(rule)
    need_family("exclude")
    local here = where()
    local clean = parse_rule(rule, here, "exclude")
    st.excludes[#st.excludes + 1] = { rule = clean, where = here }
  end

  -- min_arch { cuda = 70, hip = "gfx90a" }: the oldest device a kernel needs.
  function env.min_arch(t)
    need_family("min_arch")
    local here = where()
    if st.min_arch then fail_at(here, "min_arch declared twice (first at line " .. st.min_arch_line .. ")") end
    if type(t) ~= "table" then fail_at(here, "min_arch expects { cuda = <sm number>, hip = \"gfx...\" }") end
    for k, v in pairs(t) do
      if k == "cuda" then
        if math.type(v) ~= "integer" or v < 50 or v > 200 then
          fail_at(here, "min_arch.cuda must be an SM number such as 70 or 90")
        end
      elseif k == "hip" then
        -- Lower case, as the C half and the compilers take it (%x would
        -- let "gfxB0a" through to an internal error there).
        -- At most 15 characters: the variant's field in the C half
        -- (gen/variant.h's min_arch_hip), and longer than any gfx name.
        if type(v) ~= "string" or not v:match("^gfx[0-9a-f]+$") or #v > 15 then
          fail_at(here, "min_arch.hip must be a gfx name such as \"gfx90a\"")
        end
      else
        fail_at(here, "min_arch: unknown target '" .. tostring(k) .. "' (expected cuda, hip)")
      end
    end
    st.min_arch, st.min_arch_line = { cuda = t.cuda, hip = t.hip }, here:match(":(%d+)$")
  end

  -- tune "target" { chunk_mib = n, when = { axis = value(s) } } (family
  -- linear_cross_entropy): the chunk loop takes as many rows at a time as
  -- keep one chunk of logits within n MiB (a power of two, at least one
  -- row): its memory beyond the inputs and outputs, and the M of its GEMMs.
  function chunk_tune(target, here)
    return function(t)
      local here2 = where()
      local what = "tune \"" .. target .. "\""
      if type(t) ~= "table" then fail_at(here2, what .. " expects { chunk_mib = <MiB of logits per chunk> }") end
      local rule = { target = target, where = here2 }
      for k, v in pairs(t) do
        if k == "chunk_mib" then
          if math.type(v) ~= "integer" or v < 1 or v > M.max_chunk_mib then
            fail_at(here2, what .. ": chunk_mib must be a whole number of MiB, 1 to " .. M.max_chunk_mib .. ", got " .. tostring(v))
          end
          rule.chunk_mib = v
        elseif k == "when" then
          rule.when = parse_rule(v, here2, what .. " when")
        else
          fail_at(here2, what .. ": unknown field '" .. tostring(k) .. "' (family " .. st.family ..
            " tunes chunk_mib, optionally with when)")
        end
      end
      if not rule.chunk_mib then fail_at(here2, what .. ": missing chunk_mib = <MiB of logits per chunk>") end
      st.tunes[#st.tunes + 1] = rule
    end
  end

  -- tune "target" { strided = n, { classes = n, row_threads = n, block = n }, ..., when = { axis = value(s) } }
  -- The launch shapes of the family's row kernels on one target (kernels/device/launch.h's
  -- row walk). A contiguous row (inner == 1) takes the first shape that
  -- serves it: C at most its `classes` bound (none: any C) and, where the
  -- shape has `rows = n`, at least n rows (a warp per row leaves SMs idle
  -- on a few long rows that a block per row would fill). The last shape has
  -- neither bound, so every call has one; a shape that an earlier one
  -- serves wholly (a bound as large, a rows floor as low) is an error.
  -- row_threads threads share a row: a power of two up to the warp (several
  -- rows per block, reduced with shuffles), or "block" (the whole block, one
  -- row at a time); block is threads per block. A strided row (inner > 1) is
  -- one thread's, `strided` threads per block. With `when`, the statement
  -- applies only to matching variants; each variant takes the first tune of
  -- its target that matches, in spec order.
  -- on_chip = n (KiB, row_threads "block", not the last shape; the ops of
  -- the family's on_chip_ops only): the row is held in shared memory, spread over a
  -- thread-block cluster of the fewest blocks (a power of two, at most 8;
  -- one block on HIP) that hold it in n KiB each, so the gradient pass
  -- reads it from there and not again from memory. Where the device cannot
  -- (no clusters, too little shared memory), the launcher takes the next
  -- shape.
  -- tile = true (families with schema.tile; row_threads a power of two):
  -- the block copies a tile of whole rows into shared memory as one stream
  -- of 16-byte loads and walks each row from there (short rows, which
  -- alone cannot fill a thread's loads). A call the tile cannot take (soft
  -- labels, outputs per element, unaligned buffers, a pass of rows past
  -- the tile: kernels/device/rows.h) runs the same shape from memory, to
  -- the same bits.
  -- loads = n (1 to 16; 4 where not given): the 16-byte loads each thread
  -- issues before it uses the first, in a contiguous row's walk. Bytes in
  -- flight per SM are resident threads x n x 16, which Little's law asks of
  -- a memory-bound kernel (bench/sass_report.py reads it back); each load
  -- holds 4 registers (CUDA) or VGPRs (HIP) until used.
  -- resident = n (CUDA only; threads per SM, a multiple of the largest
  -- block): the row kernels' launch bounds ask for n / block resident
  -- blocks, so that ptxas keeps each thread within 65536 / n registers. Without
  -- it ptxas may use up to 65536 / block, fewer threads stay resident, and
  -- fewer bytes are in flight (bench/sass_report.py's rows).
  function env.tune(target)
    need_family("tune")
    local here = where()
    local info = M.targets[target]
    if not info then
      fail_at(here, "tune expects a target in quotes (" .. quoted_list(M.target_names) .. "), got " .. tostring(target))
    end
    if st.schema.tune == "chunk" then return chunk_tune(target, here) end
    return function(t)
      local here2 = where()
      local what = "tune \"" .. target .. "\""
      if type(t) ~= "table" then fail_at(here2, what .. " expects a table of launch shapes") end
      local function threads(value, name)
        if math.type(value) ~= "integer" or value < info.warp or value > M.max_block or value % info.warp ~= 0 then
          fail_at(here2, what .. ": " .. name .. " must be a whole number of " .. info.warp .. "-lane warps up to " ..
            M.max_block .. " threads, got " .. tostring(value))
        end
        return value
      end
      local rule = { target = target, where = here2, shapes = {} }
      for k, v in pairs(t) do
        if k == "strided" then
          rule.strided = threads(v, "strided")
        elseif k == "loads" then
          if math.type(v) ~= "integer" or v < 1 or v > M.max_loads then
            fail_at(here2, what .. ": loads must be a whole number of 16-byte loads per thread, 1 to " .. M.max_loads ..
              ", got " .. tostring(v))
          end
          rule.loads = v
        elseif k == "resident" then
          if target ~= "cuda" then
            fail_at(here2, what .. ": resident is CUDA's (ptxas's launch bounds); a HIP kernel's occupancy follows its block")
          end
          if math.type(v) ~= "integer" or v < 1 or v > M.max_resident then
            fail_at(here2, what .. ": resident must be a whole number of threads per SM, 1 to " .. M.max_resident ..
              ", got " .. tostring(v))
          end
          rule.resident = v
        elseif k == "when" then
          rule.when = parse_rule(v, here2, what .. " when")
        elseif math.type(k) ~= "integer" then
          fail_at(here2, what .. ": unknown field '" .. tostring(k) .. "' (expected strided, loads, resident, when and a list of shapes)")
        end
      end
      if not rule.strided then fail_at(here2, what .. ": missing strided = <threads per block for a strided class axis>") end
      local count, largest = 0, 0
      for k in pairs(t) do
        if math.type(k) == "integer" then
          if k < 1 then fail_at(here2, what .. ": a shape at index " .. k .. " (shapes are a plain list)") end
          count, largest = count + 1, math.max(largest, k)
        end
      end
      if largest ~= count then fail_at(here2, what .. " has a hole (a nil entry) in its list of shapes") end
      if count == 0 then fail_at(here2, what .. " lists no shapes") end
      for i = 1, count do
        local s = t[i]
        local row = what .. ", shape " .. i
        if type(s) ~= "table" then fail_at(here2, row .. " must be { classes = ..., row_threads = ..., block = ... }") end
        for k in pairs(s) do
          if k ~= "classes" and k ~= "row_threads" and k ~= "block" and k ~= "on_chip" and k ~= "rows" and k ~= "tile" then
            fail_at(here2, row .. ": unknown field '" .. tostring(k) .. "' (expected classes, rows, row_threads, block, on_chip, tile)")
          end
        end
        local block = threads(s.block, "shape " .. i .. " block")
        local group = s.row_threads
        if group == "block" then
          group = 0
        elseif math.type(group) ~= "integer" or group < 1 or group > info.warp or group & (group - 1) ~= 0 then
          fail_at(here2, row .. ": row_threads must be a power of two up to the warp (" .. info.warp .. ") or \"block\", got " ..
            tostring(group))
        end
        local bound, floor = s.classes, s.rows
        if bound ~= nil and (math.type(bound) ~= "integer" or bound < 1) then
          fail_at(here2, row .. ": classes must be a positive whole number (the largest C it serves)")
        end
        if floor ~= nil and (math.type(floor) ~= "integer" or floor < 1) then
          fail_at(here2, row .. ": rows must be a positive whole number (the fewest rows it serves)")
        end
        if i < #t then
          if bound == nil and floor == nil then
            fail_at(here2, row .. ": only the last shape serves every call: give it classes = <the largest C it serves> " ..
              "or rows = <the fewest rows>")
          end
        elseif bound ~= nil or floor ~= nil then
          fail_at(here2, row .. ": the last shape serves every call (every larger C, any rows) and takes no " ..
            (bound ~= nil and "classes" or "rows") .. " bound")
        end
        -- A shape after one that serves every (C, rows) it does is never taken
        -- (an on-chip shape may be passed over: the device has no room).
        for j = 1, i - 1 do
          local p = rule.shapes[j]
          if p.on_chip == 0 and (p.classes < 0 or (bound ~= nil and p.classes >= bound)) and p.rows <= (floor or 0) then
            fail_at(here2, row .. " is never taken: shape " .. j .. " before it serves every call it does (classes " ..
              (p.classes < 0 and "any" or p.classes) .. ", rows >= " .. p.rows .. ")")
          end
        end
        local on_chip = s.on_chip
        if on_chip ~= nil then
          if math.type(on_chip) ~= "integer" or on_chip < 1 or on_chip > info.on_chip then
            fail_at(here2, row .. ": on_chip must be KiB of shared memory per block, 1 to " .. info.on_chip .. ", got " ..
              tostring(on_chip))
          end
          if info.held and on_chip * 1024 > block * info.held * 16 then
            fail_at(here2, row .. ": on_chip = " .. on_chip .. " needs a block of at least " ..
              (on_chip * 1024 // (info.held * 16)) .. " threads on " .. target .. " (each holds " .. info.held ..
              " 16-byte vectors of the next row), got " .. block)
          end
          if group ~= 0 then fail_at(here2, row .. ": on_chip needs row_threads = \"block\"") end
          if i == #t then
            fail_at(here2, row .. ": the last shape cannot be on_chip (it is the fallback where a row does not fit)")
          end
          rule.on_chip = true
        end
        local tile = s.tile
        if tile ~= nil then
          if tile ~= true and tile ~= false then
            fail_at(here2, row .. ": tile must be true or false, got " .. tostring(tile))
          end
          if tile and not st.schema.tile then
            fail_at(here2, row .. ": tile is not supported by family " .. st.family .. " (its row kernels stage no tiles)")
          end
          if tile and group == 0 then fail_at(here2, row .. ": tile needs row_threads of a power of two, not \"block\"") end
          if tile and on_chip ~= nil then fail_at(here2, row .. ": a shape is on_chip or tile, not both") end
        end
        rule.shapes[i] = { classes = bound or -1, group = group, block = block, on_chip = (on_chip or 0) * 1024,
                           rows = floor or 0, tile = tile and 1 or 0 }
      end
      if rule.resident then
        local widest = 0
        for _, s in ipairs(rule.shapes) do widest = math.max(widest, s.block) end
        if rule.resident % widest ~= 0 then
          fail_at(here2, what .. ": resident must be a whole number of the largest block (" .. widest ..
            " threads), got " .. rule.resident)
        end
      end
      st.tunes[#st.tunes + 1] = rule
    end
  end

  -- The sandbox's own copies of string/table/math and a few base functions.
  for k, v in pairs(lib) do env[k] = v end

  return setmetatable(env, {
    __index = function(_, k)
      fail_at(where(3), "unknown name '" .. tostring(k) .. "' (not part of the spec DSL)")
    end,
    __newindex = function(_, k)
      fail_at(where(3), "assignment to global '" .. tostring(k) .. "' (specs may only call DSL statements; use local)")
    end,
  })
end

-- A variant's canonical key: prefix, op, then each specialized axis in schema
-- order. Run-time axes never appear: one kernel serves all their values.
local function key_of(schema, v)
  local parts = { schema.prefix, v.op }
  for _, a in ipairs(schema.axes) do
    if v[a.name] ~= "runtime" then parts[#parts + 1] = v[a.name] end
  end
  return table.concat(parts, "_")
end

-- The key a variant's rows kernel is named by on each target (rows_key_cuda,
-- rows_key_hip). Variants that differ only in these compute the same rows:
-- - a mean and a sum, but for the mean's division of the gradient's scale
--   (by the sum of row weights, or the row count for soft labels), which
--   their launchers pass as a run-time flag (xent_ce_args.divide_by_total);
-- - i32 and i64 labels, but for the width of the row's label, which the
--   launchers pass the same way (xent_ce_args.wide_labels).
-- Where a variant's partner on an axis is in the spec with the same launch
-- shapes for a target, they share one rows kernel there, named by the key
-- with "reduced" for the reduction, "int" for the label or both, which the
-- compiler then builds once per unit (third_party/gpu/compile.bzl): one
-- where there were up to four. Every other variant's rows kernel is named
-- by its own key.
local SHARED = {
  reduction = { mean = "sum", sum = "mean", as = "reduced" },
  label = { i32 = "i64", i64 = "i32", as = "int" },
}

local function share_rows_kernels(schema, variants)
  local by_key = {}
  for _, v in ipairs(variants) do by_key[v.key] = v end
  local function key_with(v, changes)
    return key_of(schema, setmetatable(changes, { __index = v }))
  end
  for _, v in ipairs(variants) do
    for _, target in ipairs(M.target_names) do
      local tune = "tune_" .. target
      local rows = {}
      for axis, pairs_ in pairs(SHARED) do
        local other = pairs_[v[axis]]
        local partner = other and by_key[key_with(v, { [axis] = other })]
        if partner and partner[tune] == v[tune] then rows[axis] = pairs_.as end
      end
      v["rows_key_" .. target] = next(rows) and key_with(v, rows) or v.key
    end
  end
end

local function matches(rule, v)
  for k, vs in pairs(rule) do
    if not index_of(vs, v[k]) then return false end
  end
  return true
end

local function excluded(excludes, v)
  for _, e in ipairs(excludes) do
    if matches(e.rule, v) then
      e.used = true
      return true
    end
  end
  return false
end

-- A variant's launch shapes on one target, as one line of text the C half
-- carries to the renderer (context.lua reads it back): "strided=<threads>
-- loads=<n> resident=<n>" then "<classes>:<row_threads>:<block>:<on_chip bytes>:<rows>:<tile>" per
-- shape; classes -1 = any C, row_threads 0 = the whole block, on_chip 0 = not, tile 1 or 0,
-- rows 0 = any number of rows, resident 0 = not given. For
-- a chunk tune (linear_cross_entropy): "chunk=<bytes of logits>".
local function launch_shapes(st, v, target)
  for _, rule in ipairs(st.tunes) do
    if rule.target == target and (not rule.when or matches(rule.when, v)) then
      rule.used = true
      if rule.chunk_mib then return "chunk=" .. (rule.chunk_mib * 1024 * 1024) end
      local ops = st.schema.on_chip_ops or {}
      if rule.on_chip and not index_of(ops, v.op) then
        local want = #ops == 1 and ("\"" .. ops[1] .. "\"") or ("{ \"" .. table.concat(ops, "\", \"") .. "\" }")
        fail_at(rule.where, "tune \"" .. target .. "\": on_chip serves op " .. quoted_list(ops) .. " only in family " ..
          st.family .. ", and variant " .. v.key .. " is op " .. v.op .. " (limit this tune with when = { op = " .. want .. " })")
      end
      local parts = { "strided=" .. rule.strided, "loads=" .. (rule.loads or M.default_loads),
                      "resident=" .. (rule.resident or 0) }
      for _, s in ipairs(rule.shapes) do
        parts[#parts + 1] = s.classes .. ":" .. s.group .. ":" .. s.block .. ":" .. s.on_chip .. ":" .. s.rows .. ":" ..
          s.tile
      end
      return table.concat(parts, " ")
    end
  end
  fail_at(st.family_where, "no tune \"" .. target .. "\" statement matches variant " .. v.key ..
    " (end the spec's tunes for " .. target .. " with one that has no `when`)")
end

local function expand(path, st)
  local schema = st.schema
  if not st.ops then fail_at(st.family_where, "family '" .. st.family .. "' declares no ops { ... }") end
  for _, a in ipairs(schema.axes) do
    if not st.axes[a.name] and a.type_axis then
      fail_at(st.family_where, "axis '" .. a.name .. "' is not declared: add specialize \"" .. a.name .. "\" { ... }")
    elseif not st.axes[a.name] then
      -- An option the spec does not name (one written before xent had it):
      -- compiled out, as if specialized to its first value, which is "off".
      -- A call that asks for it finds no kernel and is told the axis and
      -- the spec (runtime/dispatch).
      st.axes[a.name] = { mode = "specialize", values = { a.values[1] }, implicit = true }
    end
  end
  local list = { {} }
  local function product(name, values)
    local out = {}
    for _, partial in ipairs(list) do
      for _, value in ipairs(values) do
        local v = {}
        for k, x in pairs(partial) do v[k] = x end
        v[name] = value
        out[#out + 1] = v
      end
    end
    list = out
  end
  product("op", st.ops)
  for _, a in ipairs(schema.axes) do
    local decl = st.axes[a.name]
    product(a.name, decl.mode == "runtime" and { "runtime" } or decl.values)
  end
  local variants, seen = {}, {}
  for _, v in ipairs(list) do
    if not excluded(st.excludes, v) then
      v.key = key_of(schema, v)
      if not seen[v.key] then
        seen[v.key] = true
        v.family = st.family
        v.prefix = schema.prefix
        v.template = schema.template
        v.spec = path
        v.min_arch_cuda = (st.min_arch and st.min_arch.cuda) or 70
        v.min_arch_hip = (st.min_arch and st.min_arch.hip) or "gfx90a"
        for _, target in ipairs(M.target_names) do v["tune_" .. target] = launch_shapes(st, v, target) end
        v.axis_names = {}
        for _, a in ipairs(schema.axes) do v.axis_names[#v.axis_names + 1] = a.name end
        variants[#variants + 1] = v
      end
    end
  end
  for _, e in ipairs(st.excludes) do
    if not e.used then fail_at(e.where, "exclude matches no variant (a stale or misspelt rule)") end
  end
  if #variants == 0 then fail_at(st.family_where, "every variant is excluded") end
  for _, rule in ipairs(st.tunes) do
    if not rule.used then
      fail_at(rule.where, "tune \"" .. rule.target .. "\" serves no variant (its `when` matches none, or earlier tunes for " ..
        rule.target .. " take them all)")
    end
  end
  table.sort(variants, function(a, b) return a.key < b.key end)
  share_rows_kernels(schema, variants)
  return variants
end

-- Loads, validates and expands one spec in the sandbox (gen/lua/sandbox.lua).
-- Returns the sorted variant list, or nil and "path:line: message".
function M.load_spec(path, text)
  if type(path) ~= "string" or path == "" or path:find("%c") then
    -- The path is written into every generated file and the manifest.
    return nil, "spec path " .. string.format("%q", tostring(path)) .. " is empty or has a control character"
  end
  local st = { axes = {}, excludes = {}, tunes = {} }
  local ok, res = sandbox.run(path, function(lib)
    local chunk, err = sandbox.compile(path, text, make_env(path, st, lib))
    if not chunk then error({ xent = true, msg = err }, 0) end
    chunk()
    if not st.schema then fail_at(path .. ":1", "spec declares no family (start with family \"<name>\")") end
    return expand(path, st)
  end)
  if ok then return res end
  if type(res) == "table" and res.xent then return nil, res.msg end
  return nil, tostring(res)
end

function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("a")
  f:close()
  return text
end

return M
