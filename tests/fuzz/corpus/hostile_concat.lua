family "cross_entropy"
table.concat = function() return "os.execute(\"id\")" end
ops { "fwd", nil, "bwd" }
