-- The sandbox a spec runs in. A spec is untrusted input: whoever writes one
-- must not be able to run commands, touch files, reach the generator's own
-- tables, or hang the build. So a spec sees
--   * its own copies of the safe parts of string, table and math (changing
--     them changes nothing outside the spec), and a string metatable that
--     points at that copy while the spec runs (so ("x"):rep(n) is bounded
--     too);
--   * no load, require, io, os, debug, setmetatable, rawset, pcall or
--     coroutine: nothing that reaches past the values it is given;
-- and it runs under limits, each reported at the spec line running when it
-- struck:
--   * text: a spec of at most 1 MiB, no NUL byte, brackets nested at most as
--     deep as Lua's parser allows (reported at the line, not as a bare "C
--     stack overflow");
--   * instructions: a count hook stops a spec (DSL expansion included) after
--     50 million Lua instructions;
--   * memory: the hook stops a spec whose heap grew by more than 256 MiB;
--     string.rep refuses results over 16 MiB. xentgen also caps the Lua
--     heap in C and puts a CPU-time limit on each spec (gen/spec_limits.c), which
--     stops what no hook sees: a long call inside the C library, such as a
--     pathological string pattern. The Bazel repository rule that lists
--     variants runs this file under lua5.4 with an address-space and time
--     limit (gen/variants.bzl).
--
-- This file is shared by xentgen and that repository rule, so both apply the
-- same rules.

local M = {}

M.limits = {
  text_bytes = 1 << 20,
  instructions = 50000000,
  memory_bytes = 256 << 20,
  string_bytes = 16 << 20,
}

-- Instructions between two runs of the hook.
local STEP = 1000

local function copy(src, names)
  local t = {}
  for _, name in ipairs(names) do t[name] = src[name] end
  return t
end

local real_rep = string.rep
local string_meta = getmetatable("")

-- Fresh copies of what a spec may call besides the DSL statements.
function M.library()
  local s = copy(string, { "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "reverse",
                           "sub", "upper" })
  -- string.rep builds its result in one C call, out of the hook's sight.
  -- Its argument errors are raised here, at the spec's line (level 2), as
  -- string.rep itself would.
  function s.rep(str, n, sep)
    local count = math.tointeger(tonumber(n))
    if type(str) ~= "string" and type(str) ~= "number" then
      error("bad argument #1 to 'rep' (string expected, got " .. type(str) .. ")", 2)
    end
    if not count then error("bad argument #2 to 'rep' (an integer expected, got " .. tostring(n) .. ")", 2) end
    if sep ~= nil and type(sep) ~= "string" and type(sep) ~= "number" then
      error("bad argument #3 to 'rep' (string expected, got " .. type(sep) .. ")", 2)
    end
    if count > 0 then
      local bytes = count * #tostring(str) + (count - 1) * #tostring(sep or "")
      if count > M.limits.string_bytes or bytes > M.limits.string_bytes then
        error("string.rep: a result of " .. string.format("%.0f", bytes) .. " bytes is over the sandbox's " ..
          (M.limits.string_bytes >> 20) .. " MiB", 2)
      end
    end
    return real_rep(str, n, sep)
  end
  -- No table.move: it loops over any range in C.
  local t = copy(table, { "concat", "insert", "pack", "remove", "sort", "unpack" })
  local m = {}
  for k, v in pairs(math) do
    -- No random numbers: output is byte-identical from run to run.
    if k ~= "random" and k ~= "randomseed" then m[k] = v end
  end
  return {
    string = s, table = t, math = m,
    ipairs = ipairs, pairs = pairs, tostring = tostring, tonumber = tonumber, type = type,
  }
end

-- The line of `path` that the innermost running spec frame is at, or nil.
-- `level` counts from the caller of this function.
local function spec_line(path, level)
  local source = "@" .. path
  level = level + 1
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    if info.source == source then return info.currentline end
    level = level + 1
  end
end

local function count_lines(text, upto)
  local _, n = text:sub(1, upto):gsub("\n", "")
  return n + 1
end

local function has_position(path, msg)
  return type(msg) == "string" and msg:sub(1, #path + 1) == path .. ":"
end

-- Compiles a spec's text with `env` as its globals. Returns the chunk, or nil
-- and "path:line: message".
function M.compile(path, text, env)
  if #text > M.limits.text_bytes then
    return nil, path .. ":1: the spec is " .. #text .. " bytes, over the sandbox's " .. (M.limits.text_bytes >> 20) ..
      " MiB"
  end
  local nul = text:find("\0", 1, true)
  if nul then return nil, path .. ":" .. count_lines(text, nul) .. ": the spec contains a NUL byte" end
  local chunk, err = load(text, "@" .. path, "t", env)
  if chunk or has_position(path, err) then return chunk, err end
  -- The parser ran out of C stack (brackets or operators nested too deep) and
  -- said so without a position: find the first line whose prefix of the spec
  -- fails the same way.
  local first = err:match("^[^\n]*")
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local lo, hi = 1, #lines
  while lo < hi do
    local mid = (lo + hi) // 2
    local _, e = load(table.concat(lines, "\n", 1, mid), "@" .. path, "t", env)
    if e and not has_position(path, e) then hi = mid else lo = mid + 1 end
  end
  return nil, path .. ":" .. lo .. ": " .. first .. " (brackets or operators nested too deep)"
end

-- Runs fn(...) as spec `path` under the limits. Returns true and fn's first
-- result, or false and the error (a DSL error table or a message).
function M.run(path, fn, ...)
  local limits = M.limits
  local executed, last_line = 0, 1
  local base_kib = collectgarbage("count")
  local function over(what)
    error({ xent = true, msg = path .. ":" .. last_line .. ": " .. what }, 0)
  end
  local function hook()
    executed = executed + STEP
    last_line = spec_line(path, 2) or last_line
    if executed > limits.instructions then
      over("the spec ran past the sandbox's limit of " .. limits.instructions .. " instructions (an endless loop?)")
    end
    if (collectgarbage("count") - base_kib) * 1024 > limits.memory_bytes then
      over("the spec took more than the sandbox's " .. (limits.memory_bytes >> 20) .. " MiB of memory")
    end
  end
  local saved_index = string_meta.__index
  local lib = M.library()
  string_meta.__index = lib.string
  debug.sethook(hook, "", STEP)
  local ok, res = pcall(fn, lib, ...)
  debug.sethook()
  string_meta.__index = saved_index
  if not ok and res == "not enough memory" then
    res = path .. ":" .. last_line .. ": the spec took more memory than the generator allows"
  elseif not ok and type(res) == "string" and has_position(path, res) and res:match(": stack overflow$") then
    res = res .. " (a recursion without end?)"
  elseif not ok and type(res) == "string" and not has_position(path, res) then
    -- Raised outside the spec's own code, where the spec led: a recursion
    -- without end overflows the stack wherever the next call happens to be
    -- (the hook's own frame, a library function). The spec's line that was
    -- running, and where it was raised.
    local at, what = res:match("^([^:\n]+:%d+): (.*)$")
    if what == "stack overflow" then
      res = path .. ":" .. last_line .. ": stack overflow (a recursion without end?)"
    else
      res = path .. ":" .. last_line .. ": " .. (what or res) .. (at and " (raised at " .. at .. ")" or "")
    end
  end
  return ok, res
end

return M
