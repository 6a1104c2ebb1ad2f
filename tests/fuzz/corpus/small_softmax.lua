family "softmax"
ops { "fwd" }
specialize "dtype" { "f32" }
specialize "kind" { "softmax" }
tune "cuda" { strided = 256, { row_threads = "block", block = 256 } }
tune "hip" { strided = 256, { row_threads = "block", block = 256 } }
