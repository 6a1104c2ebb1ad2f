#!/usr/bin/env python3
"""CPU tensors through the package against PyTorch (issue 64): the time of
xent.cross_entropy and of F.cross_entropy on the same CPU tensors, forward
and forward + backward, f32, mean over hard labels, on the issue's shapes.
The two calls alternate, one of each per round, so that both see the same
machine; each gets the same threads (--threads: torch.set_num_threads, and
OMP_NUM_THREADS for xent's cpu backend). Writes OUT.json with min, median
and max per call in milliseconds, the machine, the PyTorch and the ratio of
the medians.

    ./bazelw build //runtime:libxent_shared.so //python:xent
    XENT_LIBRARY=bazel-bin/runtime/libxent_shared.so \\
    XENT_EXTENSION=bazel-bin/python/xent/_C.so PYTHONPATH=python \\
      /usr/bin/python3 bench/cpu_bench.py --out bench/results/DATE-cpu-COMMIT"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from host_overhead import cpu_name, stats  # the same figures and machine name

SHAPES = [(256, 32000), (4096, 1000), (65536, 10)]


def table(path):
    """docs/PERFORMANCE.md's table of a result file: per case, the medians
    with their ranges and the ratio."""
    with open(path) as f:
        r = json.load(f)
    lines = [f"{r['machine']}, {r['threads']} threads, PyTorch {r['torch']}, commit {r['commit']}, {r['date']}, "
             f"{r['rounds']} rounds (median, min-max, ms):", "",
             "| call | xent | `F.cross_entropy` | xent / PyTorch |", "|---|---|---|---|"]
    for name, c in r["cases"].items():
        x, t = c["xent_ms"], c["torch_ms"]
        lines.append(f"| {name} | {x['median']:.2f} ({x['min']:.2f}-{x['max']:.2f}) | "
                     f"{t['median']:.2f} ({t['min']:.2f}-{t['max']:.2f}) | {c['xent_over_torch']:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", metavar="RESULT.json", help="print docs/PERFORMANCE.md's table of a result file")
    ap.add_argument("--out", help="write OUT.json (else print)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import torch.nn.functional as F
    import xent

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = {}
    for rows, classes in SHAPES:
        x = torch.randn(rows, classes)
        t = torch.randint(0, classes, (rows,))
        for op in ("forward", "forward+backward"):
            def call(fn):
                xi = x.detach().requires_grad_(op != "forward")
                start = time.perf_counter()
                loss = fn(xi, t)
                if op != "forward":
                    loss.backward()
                return (time.perf_counter() - start) * 1e3, float(loss)

            times = {"xent": [], "torch": []}
            losses = {}
            for r in range(args.warmup + args.rounds):
                for name, fn in (("xent", xent.cross_entropy), ("torch", F.cross_entropy)):
                    ms, losses[name] = call(fn)
                    if r >= args.warmup:
                        times[name].append(ms)
            if abs(losses["xent"] - losses["torch"]) > 1e-4 * max(1.0, abs(losses["torch"])):
                sys.exit(f"cpu_bench: {rows} x {classes} {op}: xent's loss {losses['xent']} is not PyTorch's "
                         f"{losses['torch']}")
            xs, ts = stats(times["xent"]), stats(times["torch"])
            cases[f"{op} {rows} x {classes}"] = {"xent_ms": xs, "torch_ms": ts,
                                                 "xent_over_torch": xs["median"] / ts["median"]}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "machine": f"{cpu_name()}, {os.cpu_count()} CPUs",
        "threads": args.threads,
        "torch": torch.__version__,
        "path": "C++ (xent._C)" if xent._native.module is not None else "Python",
        "rounds": args.rounds,
        "cases": cases,
    }
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out + ".json", "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
