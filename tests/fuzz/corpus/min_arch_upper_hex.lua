-- The fuzzer's find (stop 52): a gfx name in upper-case hex passed the DSL
-- and failed in the C half with an error naming no spec.
family "softmax"
ops { "fwd" }
specialize "dtype" { "f32" }
specialize "kind" { "softmax" }
min_arch { cuda = 70, hip = "gfxB0a" }
tune "cuda" { strided = 256, { row_threads = "block", block = 256 } }
tune "hip" { strided = 256, { row_threads = "block", block = 256 } }
