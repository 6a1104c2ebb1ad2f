#!/usr/bin/env python3
"""Where a kernel's executed instructions go, from Nsight Compute's source
page: the ncu-source.csv(.xz) that bench/ncu_gpu.sh --source writes (the
three rows kernels of bench/ncu_driver.py, their SASS with each
instruction's executed count and warp-stall samples).

    bench/ncu_source.py bench/results/<run>/ncu-source.csv.xz [--out FILE]

bench/sass_report.py counts the instructions of a kernel's streaming loop
per 16-byte vector from the machine code alone; this says, from what ran,
how many the whole kernel spent per vector and where the rest went. For
each kernel: warp instructions executed per 512-byte warp-vector of the
logits (16384 x 131072 bf16 unless told otherwise), the streaming loops'
share (innermost loops holding a 16-byte access of global or shared
memory), and the regions outside
them that cost most, with their opcode mix. A region is a run of
consecutive instructions executed the same number of times (straight-line
code between branches). Stall samples are the share of the kernel's
warp-state samples taken at those instructions.
"""

import argparse
import collections
import csv
import io
import lzma
import re
import sys


def read_kernels(path):
    """[(name, header, rows)] from the CSV blocks, one per kernel."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        text = f.read()
    kernels, cur = [], None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            cur = {"name": row[1], "header": None, "rows": []}
            kernels.append(cur)
        elif row[0] == "Address" and cur is not None:
            cur["header"] = row
        elif cur is not None and cur["header"] and row[0].startswith("0x") and len(row) == len(cur["header"]):
            cur["rows"].append(row)
    return kernels


def opcode(text):
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def is_vector_access(text):
    """A 16-byte access of global or shared memory: LDG.E.128, STG.E.128,
    LDS.128, STS.128 (the fused on-chip kernel's second pass reads its row
    back from shared memory)."""
    return re.match(r"(LDG|STG|LDS|STS)(\.[A-Z0-9_]+)*\.128\b", opcode(text)) is not None


def number(s):
    try:
        return float(s) if s else 0.0
    except ValueError:
        return 0.0


def analyse(kernel, vectors):
    h = kernel["header"]
    col_exec = h.index("Instructions Executed")
    col_samples = h.index("Warp Stall Sampling (All Samples)")
    ins = [(int(r[0], 16), r[1].strip(), number(r[col_exec]), number(r[col_samples])) for r in kernel["rows"]]
    index = {a: i for i, (a, _, _, _) in enumerate(ins)}
    base = ins[0][0]
    loops = []
    for i, (a, text, n, _) in enumerate(ins):
        if opcode(text).split(".")[0] != "BRA" or n == 0:
            continue
        m = re.search(r"(0x[0-9a-f]+)", text.split("BRA", 1)[1])
        if not m:
            continue
        target = int(m.group(1), 16)
        target = target + base if target < base else target
        if target <= a and target in index:
            loops.append((index[target], i))
    streaming = [(s, e) for (s, e) in loops if any(is_vector_access(t) for _, t, _, _ in ins[s:e + 1])]
    # Innermost: no other streaming loop strictly inside.
    streaming = [(s, e) for (s, e) in streaming
                 if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for (s2, e2) in streaming)]
    inside = set()
    for s, e in streaming:
        inside.update(range(s, e + 1))
    total = sum(x[2] for x in ins)
    samples = sum(x[3] for x in ins) or 1.0
    loop_rows = []
    for s, e in streaming:
        body = ins[s:e + 1]
        loop_rows.append((s, e, sum(x[2] for x in body), sum(x[3] for x in body), ins[s][2]))
    # Regions outside the streaming loops: runs of the same executed count.
    regions = []
    for i, (a, text, n, smp) in enumerate(ins):
        if n == 0 or i in inside:
            continue
        if regions and regions[-1]["end"] == i - 1 and regions[-1]["count"] == n:
            r = regions[-1]
        else:
            r = {"start": i, "count": n, "ops": collections.Counter(), "samples": 0.0}
            regions.append(r)
        r["end"] = i
        r["ops"][opcode(text).split(".")[0]] += 1
        r["samples"] += smp
    outside = total - sum(r[2] for r in loop_rows)
    return {
        "total": total, "samples": samples, "loops": loop_rows, "regions": regions, "outside": outside,
        "vectors": vectors, "entries": ins[0][2],
    }


def render(path, kernels, vectors):
    out = [f"# Where the rows kernels' instructions go (`{path}`)", ""]
    out.append(f"Per 512-byte warp-vector of the logits: {vectors:.0f} of them "
               "(bench/ncu_driver.py's shape). Written by `bench/ncu_source.py` from the file above.")
    out.append("")
    for k in kernels:
        a = analyse(k, vectors)
        v = a["vectors"]
        out.append(f"## `{k['name']}`")
        out.append("")
        out.append(f"- warp instructions executed: {a['total']:.4g}, **{a['total'] / v:.1f} per warp-vector**; "
                   f"{a['entries']:.0f} warps ran the kernel's first instruction")
        for s, e, n, smp, head in a["loops"]:
            out.append(f"- streaming loop, SASS lines {s}-{e} ({e - s + 1} instructions), entered "
                       f"{head:.0f} times: {n / v:.1f} per warp-vector ({100 * n / a['total']:.0f}% of the "
                       f"instructions, {100 * smp / a['samples']:.0f}% of the stall samples)")
        out.append(f"- outside the streaming loops: {a['outside'] / v:.1f} per warp-vector "
                   f"({100 * a['outside'] / a['total']:.0f}%)")
        out.append("")
        out.append("| SASS lines | instructions | executed (each) | per warp-vector | stall samples | opcodes |")
        out.append("|---|---|---|---|---|---|")
        top = sorted(a["regions"], key=lambda r: -(r["end"] - r["start"] + 1) * r["count"])[:12]
        for r in sorted(top, key=lambda r: r["start"]):
            n = r["end"] - r["start"] + 1
            ops = " ".join(f"{o} {c}" for o, c in r["ops"].most_common(6))
            out.append(f"| {r['start']}-{r['end']} | {n} | {r['count']:.0f} | {n * r['count'] / v:.2f} | "
                       f"{100 * r['samples'] / a['samples']:.1f}% | {ops} |")
        out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="ncu-source.csv or ncu-source.csv.xz")
    p.add_argument("--rows", type=int, default=16384)
    p.add_argument("--classes", type=int, default=131072)
    p.add_argument("--elem-bytes", type=int, default=2)
    p.add_argument("--out", help="write the report here (default: print it)")
    args = p.parse_args()
    kernels = read_kernels(args.csv)
    if not kernels:
        sys.exit(f"{args.csv}: no kernel's source page in it")
    text = render(args.csv, kernels, args.rows * args.classes * args.elem_bytes / 512)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
