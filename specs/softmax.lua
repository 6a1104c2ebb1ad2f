-- Softmax and log-softmax along one axis, and their gradients: ONNX Runtime's
-- Softmax/LogSoftmax and SoftmaxGrad/LogSoftmaxGrad (opset 13, any axis).
-- The input is [outer, C, inner] in memory and is read in place, strided
-- when the axis is not last (README, "Semantics"). Every line below is one
-- statement; xentgen reports a mistake as specs/softmax.lua:<line>.
family "softmax"

-- fwd: y = softmax(x) or log_softmax(x).
-- bwd: dx from the forward's output y and the upstream dy.
ops { "fwd", "bwd" }

-- Types and the kind change every formula: compile time, 2 x 4 x 2 = 16
-- kernels per target.
specialize "dtype" { "f32", "f16", "bf16", "f64" }
specialize "kind" { "softmax", "log_softmax" }

min_arch { cuda = 70, hip = "gfx90a" }
