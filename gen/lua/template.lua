-- A line-oriented template engine.
--
--   % if v.reduction == "none" then      <- a line whose first non-blank is %
--   loss[row] = {{ store }}(l);          <- text; {{ expr }} is substituted
--   % end
--
-- A template compiles to Lua with exactly one Lua line per template line and
-- the chunk name "@templates/<file>", so a Lua error inside a template names
-- the template line. Every text line remembers its template line, and the
-- renderer emits `#line N "templates/<file>"` wherever the output stops
-- following the template line by line, so a C compiler's error in generated
-- code also points at the template line that produced it.

local M = {}

-- What template code may use besides its context: no io, os, load or require.
local SAFE_GLOBALS = {
  string = string, table = table, math = math, ipairs = ipairs, pairs = pairs,
  tostring = tostring, tonumber = tonumber, type = type, error = error,
}

local function compile(name, text)
  local code = { "local _emit, _ENV = ... " }
  local n = 0
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
    n = n + 1
    local stmt = line:match("^%s*%%(.*)$")
    if stmt then
      code[#code + 1] = stmt
    else
      local parts, pos = {}, 1
      while true do
        local s, e, expr = line:find("{{(.-)}}", pos)
        if not s then break end
        if s > pos then parts[#parts + 1] = string.format("%q", line:sub(pos, s - 1)) end
        parts[#parts + 1] = "_emit.value(" .. string.format("%q", expr) .. ", (" .. expr .. "))"
        pos = e + 1
      end
      if pos <= #line then parts[#parts + 1] = string.format("%q", line:sub(pos)) end
      -- %q may span lines for embedded newlines; text lines have none.
      code[#code + 1] = "_emit.line(" .. n .. (#parts > 0 and ", " .. table.concat(parts, ", ") or "") .. ")"
    end
  end
  -- Line 1 of the chunk holds the prologue and template line 1 together.
  local src = code[1] .. table.concat(code, "\n", 2)
  -- An empty environment: the chunk's first statement binds _ENV to the
  -- context that render() passes in, and nothing else is reachable.
  return load(src, "@templates/" .. name, "t", {})
end

-- Renders template `name` (its text given) with the names in `ctx` visible.
-- Unknown names are errors, not nil. Returns the text or nil, message.
function M.render(name, text, ctx, line_directives)
  local fn, err = compile(name, text)
  if not fn then return nil, err end
  -- `next_line` is the line the compiler will assign to the next output
  -- line; a directive is due whenever it differs from the template line.
  local out, next_line = {}, 1
  local emit = {}
  function emit.value(expr, v)
    local t = type(v)
    if t == "number" then
      return math.type(v) == "integer" and string.format("%d", v) or string.format("%.17g", v)
    end
    if t ~= "string" then
      error("{{" .. expr .. "}} is " .. t .. ", expected a string or number", 2)
    end
    return v
  end
  function emit.line(n, ...)
    if line_directives and next_line ~= n then
      out[#out + 1] = string.format('#line %d "templates/%s"', n, name)
    end
    local text = table.concat({ ... })
    out[#out + 1] = text
    local _, newlines = text:gsub("\n", "")
    next_line = n + 1 + newlines
  end
  local env = setmetatable({}, {
    __index = function(_, k)
      local v = ctx[k]
      if v == nil then v = SAFE_GLOBALS[k] end
      if v == nil then error("unknown name '" .. tostring(k) .. "' in template", 2) end
      return v
    end,
    __newindex = function(_, k) error("assignment to global '" .. tostring(k) .. "' in template (use local)", 2) end,
  })
  local ok, res = pcall(fn, emit, env)
  if not ok then return nil, tostring(res) end
  return table.concat(out, "\n") .. "\n"
end

return M
