family "cross_entropy"
local s = ("x"):rep(100)
for i = 1, 10 do s = s .. s end
