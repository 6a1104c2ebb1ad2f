family "cross_entropy"
local s = ("x"):rep"weights" i = 1, 10 do s = s .. s end
