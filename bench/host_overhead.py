#!/usr/bin/env python3
"""The package's host time per call over the library calls it makes (issue
59): for each call a user makes (cross_entropy's, softmax's and
linear_cross_entropy's forward and backward), on a tiny case, the time of
the call minus the time spent inside libxent during it, as the C++ path
(xent/_C.cpp) counts it with its timers.
The forward's is the call's wall time; the backward's is the time inside
xent's backward node (autograd's engine, which every op's backward pays, is
reported beside it, with PyTorch's own op on the same tensors for scale).
The Python path (XENT_NATIVE=0, ctypes) is timed on the same calls in a
second process, wall time only (it has no timers), beside the C++ path's
wall time; the two runs alternate, so that both see the same machine.

On the CPU the library call is the emulator: a long call evicts the host's
caches, and the package's next steps run cold. The [0, C] case (no rows,
the same package code, a library call of microseconds) shows the package's
cost with warm caches; on a GPU, where the library call only enqueues,
every case does.

Writes OUT.json with min, median and max over the calls, the machine and
the PyTorch named."""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

CASES = [
    # (name, shape, call), the call on a tensor of that shape
    ("cross_entropy none", (4, 8), "ce_none"),
    ("cross_entropy mean", (4, 8), "ce_mean"),
    ("cross_entropy none", (0, 8), "ce_none"),
    ("softmax", (4, 8), "softmax"),
    ("softmax", (0, 8), "softmax"),
    ("linear_cross_entropy mean", (4, 8), "linear"),  # hidden [4, 8], weight [16, 8]
]


def stats(values):
    values = sorted(values)
    return {"min": values[0], "median": values[len(values) // 2], "max": values[-1]}


def measure(kind, shape, reps, warmup, device):
    """Per call: wall, library and backward times (microseconds) of a forward
    and of its backward through the package on this process's path."""
    import torch
    import xent

    native = xent._native.module
    torch.manual_seed(0)
    x = torch.randn(*shape, device=device, requires_grad=True)
    t = torch.randint(0, shape[1], shape[:1], device=device)
    if kind == "ce_none":
        def forward():
            return xent.cross_entropy(x, t, reduction="none")

        def peer():
            return torch.nn.functional.cross_entropy(x, t, reduction="none")
    elif kind == "ce_mean":
        def forward():
            return xent.cross_entropy(x, t)

        def peer():
            return torch.nn.functional.cross_entropy(x, t)
    elif kind == "linear":
        w = torch.randn(16, shape[1], device=device, requires_grad=True)
        t = torch.randint(0, 16, shape[:1], device=device)

        def forward():
            return xent.linear_cross_entropy(x, w, t)

        def peer():
            return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w), t)
    else:
        def forward():
            return xent.softmax(x, 1)

        def peer():
            return torch.softmax(x, 1)

    rows = {k: [] for k in ("forward_wall", "forward_library", "backward_wall", "backward_node", "backward_library",
                            "torch_forward_wall", "torch_backward_wall")}

    def timed(call):
        """call()'s wall time and the C++ path's library and backward times
        during it (ns)."""
        if native is not None:
            native.set_timing(True)
        start = time.perf_counter_ns()
        out = call()
        wall = time.perf_counter_ns() - start
        counts = (native.library_ns(), native.backward_ns()) if native is not None else (0, 0)
        if native is not None:
            native.set_timing(False)
        return out, wall, counts

    # Each kind of call back to back, as a training loop makes it; what a
    # call returns is freed outside the timed window.
    for loop in ("forward", "backward", "torch_forward", "torch_backward"):
        f = peer if loop.startswith("torch") else forward
        for i in range(warmup + reps):
            if loop.endswith("forward"):
                y, wall, (library, _) = timed(f)
                values = {loop + "_wall": wall, "forward_library": library}
            else:
                y = f()
                grad = torch.ones_like(y)
                _, wall, (library, node) = timed(lambda: y.backward(grad))
                values = {loop + "_wall": wall, "backward_node": node, "backward_library": library}
                del grad
            if loop.startswith("torch"):  # PyTorch's own op: its wall time alone
                values = {loop + "_wall": wall}
            del y
            x.grad = None
            if kind == "linear":
                w.grad = None
            if i >= warmup:
                for key, value in values.items():
                    rows[key].append(value / 1e3)
    return rows


def child(args):
    """One path's measurements, as JSON on stdout."""
    out = {}
    for name, shape, kind in CASES:
        out[f"{name} {list(shape)}"] = measure(kind, shape, args.reps, args.warmup, args.device)
    import xent
    out["_path"] = "C++ (xent._C)" if xent._native.module is not None else f"Python ({xent._native.why})"
    json.dump(out, sys.stdout)


def run_path(native, args):
    env = dict(os.environ, XENT_NATIVE=native)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--reps", str(args.reps), "--warmup",
           str(args.warmup), "--device", args.device]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def summarize(cpp, python):
    """Per case: the C++ path's overheads and the wall times of both paths."""
    cases = {}
    for key, rows in cpp.items():
        if key.startswith("_"):
            continue
        py = python[key]
        cases[key] = {
            "forward_overhead_us": stats([w - lib for w, lib in zip(rows["forward_wall"], rows["forward_library"])]),
            "backward_overhead_us": stats([n - lib for n, lib in zip(rows["backward_node"],
                                                                      rows["backward_library"])]),
            "forward_library_us": stats(rows["forward_library"]),
            "forward_wall_us": stats(rows["forward_wall"]),
            "backward_engine_us": stats([w - n for w, n in zip(rows["backward_wall"], rows["backward_node"])]),
            "python_path_forward_wall_us": stats(py["forward_wall"]),
            "python_path_backward_wall_us": stats(py["backward_wall"]),
            "cpp_path_backward_wall_us": stats(rows["backward_wall"]),
            "torch_forward_wall_us": stats(rows["torch_forward_wall"]),
            "torch_backward_wall_us": stats(rows["torch_backward_wall"]),
        }
    return cases


def table(paths):
    """docs/PERFORMANCE.md's table from result files: a column pair per file."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    head = "| call | " + " | ".join(f"PyTorch {r['torch']}: forward, backward node (min) | whole forward, C++ vs "
                                     "Python path" for r in runs) + " |"
    lines = [head, "|---|" + "---|---|" * len(runs)]
    for key in runs[0]["cases"]:
        cells = []
        for r in runs:
            c = r["cases"][key]
            f, b = c["forward_overhead_us"], c["backward_overhead_us"]
            wall, py = c["forward_wall_us"]["median"], c["python_path_forward_wall_us"]["median"]
            cells.append(f"{f['median']:.1f} ({f['min']:.1f}), {b['median']:.1f} ({b['min']:.1f}) us")
            cells.append(f"{wall:.1f} vs {py:.1f} us" if wall < 1000 else f"{wall / 1e3:.1f} vs {py / 1e3:.1f} ms")
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="writes OUT.json")
    p.add_argument("--table", nargs="+", help="prints docs/PERFORMANCE.md's table from these result files")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3, help="alternations of the two paths' processes")
    p.add_argument("--device", default="cpu", help="the tensors' device (cuda: the library call only enqueues)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    if args.table:
        print(table(args.table))
        return
    import torch

    cpp_runs, python_runs = [], []
    for _ in range(args.rounds):
        cpp_runs.append(run_path("1", args))
        python_runs.append(run_path("0", args))
    merged = []
    for runs in (cpp_runs, python_runs):
        m = {}
        for run in runs:
            for key, rows in run.items():
                if key.startswith("_"):
                    m[key] = rows
                    continue
                dest = m.setdefault(key, {k: [] for k in rows})
                for k, v in rows.items():
                    dest[k].extend(v)
        merged.append(m)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": os.environ.get("XENT_COMMIT") or _commit(),
        "machine": platform.processor() or platform.machine(),
        "cpu": cpu_name(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "python": platform.python_version(),
        "calls_per_case": args.reps * args.rounds,
        "paths": [merged[0]["_path"], merged[1]["_path"]],
        "cases": summarize(*merged),
    }
    for key, case in result["cases"].items():
        f, b = case["forward_overhead_us"], case["backward_overhead_us"]
        print(f"{key}: forward +{f['median']:.2f} us (min {f['min']:.2f}), backward node +{b['median']:.2f} us "
              f"over the library; wall C++ {case['forward_wall_us']['median']:.1f} vs Python path "
              f"{case['python_path_forward_wall_us']['median']:.1f} us")
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")


def _commit():
    """The checkout's commit, with "+changes" where the tree differs from it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
