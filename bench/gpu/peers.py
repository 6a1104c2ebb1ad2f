#!/usr/bin/env python3
"""Imports each benchmark peer the way bench/bench.py and bench/bench_linear.py
do, after bench/gpu/stage.sh installed their wheels: Liger-Kernel, Quack
(through the CUTLASS DSL and TVM FFI) and Cut Cross-Entropy. Prints one line
per peer with its version and what it needed; exit status 1 if one does not
import. Their kernels need a GPU; what is checked here is that the pins and
the packages' own imports resolve against this Python and PyTorch."""

import importlib.metadata
import sys

import torch

PEERS = [
    # (distribution, the imports the benchmarks make)
    ("liger-kernel", ["liger_kernel.transformers:LigerCrossEntropyLoss",
                      "liger_kernel.transformers:LigerFusedLinearCrossEntropyLoss"]),
    ("quack-kernels", ["quack.cross_entropy:cross_entropy"]),
    ("cut-cross-entropy", ["cut_cross_entropy:linear_cross_entropy"]),
]


def main():
    print(f"Python {sys.version.split()[0]}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"torch.Tensor.__dlpack_c_exchange_api__: {hasattr(torch.Tensor, '__dlpack_c_exchange_api__')}")
    failed = 0
    for dist, names in PEERS:
        try:
            version = importlib.metadata.version(dist)
            for name in names:
                module, attr = name.split(":")
                getattr(importlib.import_module(module), attr)
            print(f"{dist} {version}: imports {', '.join(names)}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, none hidden
            failed += 1
            print(f"{dist}: FAILED to import: {type(e).__name__}: {e}")
    try:
        import cutlass
        print(f"CUTLASS DSL {importlib.metadata.version('nvidia-cutlass-dsl')} from {cutlass.__file__}")
    except Exception as e:  # noqa: BLE001
        failed += 1
        print(f"cutlass: FAILED to import: {type(e).__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
