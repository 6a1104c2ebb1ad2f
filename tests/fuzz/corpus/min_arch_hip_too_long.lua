-- A min_arch.hip longer than the C half's field (15 characters): refused at
-- its line by the DSL (the fuzzer's find of 1ab41ce).
family "cross_entropy"
ops { "fwd" }
min_arch { cuda = 70, hip = "gfx90a6666666666666" }
