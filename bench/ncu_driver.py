#!/usr/bin/env python3
"""The three most important kernels, one call each, for bench/ncu_gpu.sh to
profile: the bf16 forward, the fused forward+backward and the backward from
the saved lse at 16384 x 131072 (docs/PERFORMANCE.md's first rows), through
the C API on CUDA tensors, each inside an NVTX range named after it; then
the fused pass again with the rows on chip asked for (the pipelined on-chip
shape, xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP, 0)), whose DRAM bytes say
whether it reads the logits once (issue 61)."""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Tensors, Xent  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True, help="libxent_shared.so built with --config=cuda")
    p.add_argument("--rows", type=int, default=16384)
    p.add_argument("--classes", type=int, default=131072)
    args = p.parse_args()
    xent = Xent(args.lib, "cuda")
    shape = (args.rows, args.classes)
    x = (torch.randn(shape, device="cuda") * 4).to(torch.bfloat16)
    y = torch.randint(0, args.classes, (args.rows,), device="cuda")
    loss = torch.empty((), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(args.rows, dtype=torch.float32, device="cuda")
    grad = torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream
    d = xent.desc(shape, 1, "bf16")
    for op, on_chip in (("fwd", False), ("fwd_bwd", False), ("bwd", False), ("fwd_bwd", True)):
        t = Tensors()
        t.logits, t.labels = x.data_ptr(), y.data_ptr()
        if op == "bwd":
            t.lse_in = lse.data_ptr()
        else:
            t.loss, t.lse = loss.data_ptr(), lse.data_ptr()
        if op != "fwd":
            t.grad = grad.data_ptr()
        ws = xent.workspace(d, op, "cuda")
        xent.set_row_shape((-1, 0) if on_chip else None)
        torch.cuda.nvtx.range_push(f"xent {op} bf16 {shape[0]}x{shape[1]}" + (" rows on chip" if on_chip else ""))
        xent.run(d, op, t, ws, stream)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        xent.set_row_shape(None)
    print("ran fwd, fwd_bwd, bwd, fwd_bwd with the rows on chip")


if __name__ == "__main__":
    main()
