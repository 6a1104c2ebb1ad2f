#!/usr/bin/env python3
"""Markdown tables of a GPU run's measurements, read from the files the run
wrote (bench.json, sweep.json, tune.json, linear.json under one
bench/results/ folder),
so that the README and docs/PERFORMANCE.md quote only what a committed file
holds:

  bench/results_tables.py bench/results/2026-11-26-NVIDIA-H200
  bench/results_tables.py DIR --update docs/PERFORMANCE.md
  bench/results_tables.py DIR --headline --update README.md

With --update, the text between the file's "<!-- results begin -->" and
"<!-- results end -->" lines is replaced by the tables; with --headline,
the text between "<!-- headline begin -->" and "<!-- headline end -->" by
the headline table alone (the cases the package ran beside a peer)."""

import argparse
import json
import os
import sys


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def shape(case):
    return "x".join(str(s) for s in case["shape"])


def ratio(x):
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def peer(case, name):
    p = case.get("peers", {}).get(name)
    if not p or "tbps" not in p:
        return "-"
    return f"{p['tbps']:.2f} ({ratio(p['speedup'])})"


def kernel_table(data, title):
    env = data["environment"]
    lines = [
        f"**{title}**: {env['device']} ({env['sms']} SMs), driver {env['driver']}, CUDA {env['cuda']}, "
        f"PyTorch {env['torch']}, commit {env['commit'][:7]}, {env['date'][:10]}; the median of "
        f"{env['timing']['reps']} calls ({env['timing']['clock']}); TB/s of model bytes"
        + ("" if data.get("complete") else " (the run stopped before its last case)"),
        "",
        "| group | pass | dtype | shape | xent TB/s | roofline TB/s | of roofline | vs eager | vs compile "
        "| Liger TB/s (xent's speed-up) | Quack TB/s (xent's speed-up) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["results"]:
        if not c.get("ok", False) or "xent_tbps" not in c:
            lines.append(f"| {c['group']} | {c['op']} | {c['dtype']} | {shape(c)} | not measured: "
                         f"{c.get('why', 'failed its check')} | | | | | | |")
            continue
        lines.append(
            f"| {c['group']} | {c['op']} | {c['dtype']} | {shape(c)} | {c['xent_tbps']:.2f} | "
            f"{c['roofline_tbps']:.2f} ({c['roofline']}) | {100 * c['fraction_of_roofline']:.0f}% | "
            f"{ratio(c.get('speedup_vs_eager'))} | {ratio(c.get('speedup_vs_compile'))} | "
            f"{peer(c, 'liger')} | {peer(c, 'quack')} |")
    return lines


def versus(r, best):
    """A ratio of medians with its range from the p10-p90 spreads (above 1:
    r is faster), 'level' where the spreads overlap."""
    a, b = r["spread"], best["spread"]
    text = f"{b['median'] / a['median']:.2f}x ({b['p10'] / a['p90']:.2f}-{b['p90'] / a['p10']:.2f})"
    return text + (", level" if a["p10"] <= b["p90"] and b["p10"] <= a["p90"] else "")


def comparison_table(data, title):
    """A run measured as users call it (bench.py's impls): per case xent's
    package (the headline) and its C call, each as TB/s, fraction of the
    roofline and of the device's peak, against the best peer that ran."""
    env = data["environment"]
    peak = env.get("peak_tbps")
    lines = [
        f"**{title}**: {env['device']}, driver {env.get('driver')}, CUDA {env.get('cuda')}, PyTorch {env['torch']}, "
        f"commit {env['commit'][:7]}, {env['date'][:10]}; the package through {env.get('package_path', '?')}; "
        f"{env['timing']['reps']} calls of each implementation interleaved ({env['timing']['clock']}); TB/s of "
        "model bytes (median); ratios of medians with their p10-p90 range, above 1 where xent is faster"
        + (f"; peak {peak} TB/s" if peak else "")
        + ("" if data.get("complete") else " (the run stopped before its last case)"),
        "",
        "| group | pass | dtype | shape | xent (package) TB/s | of roofline | of peak | best peer TB/s "
        "| package vs best peer | C call TB/s | C call vs best peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["results"]:
        impls = c.get("impls")
        if impls is None:
            continue
        pkg, ccall = impls.get("xent", {}), impls.get("xent_c", {})
        best = impls.get(c.get("best_peer") or "", {})
        head = f"| {c['group']} | {c['op']} | {c['dtype']} | {shape(c)} | "
        if "s" not in pkg:
            lines.append(head + f"not measured: {pkg.get('error', 'no package call')} | | | | | | |")
            continue
        frac_peak = f"{100 * pkg['tbps'] / peak:.0f}%" if peak else "-"
        cells = [f"{pkg['tbps']:.2f}", f"{100 * c['fraction_of_roofline']:.0f}%", frac_peak,
                 f"{best['tbps']:.2f} ({c['best_peer']})" if "s" in best else "none ran",
                 versus(pkg, best) if "s" in best else "-",
                 f"{ccall['tbps']:.2f}" if "s" in ccall else "-",
                 versus(ccall, best) if "s" in best and "s" in ccall else "-"]
        lines.append(head + " | ".join(cells) + " |")
    return lines


PLAN_NAMES = {1: "ONE_PASS", 2: "TILED_HIDDEN_SUM", 3: "TILED"}


def linear_cell(m):
    """A method's median (its min-max) and peak memory, or '-'."""
    if "s" not in m:
        return "-"
    t = m["spread"]
    mem = m.get("peak_extra_bytes")
    return (f"{1e3 * t['median']:.1f} ms ({1e3 * t['min']:.1f}-{1e3 * t['max']:.1f})"
            + (f", {mem / 2**20:.0f} MiB" if mem is not None else ""))


def linear_plan(entry):
    """A sweep entry's desc fields in words."""
    words = []
    mib = entry.get("memory_mib")
    if mib is not None:
        words.append("one pass" if mib >= 1 << 40 else f"{mib} MiB")
    if entry.get("plan"):
        words.append(PLAN_NAMES[entry["plan"]])
    for k in ("chunk_rows", "chunk_classes"):
        if entry.get(k):
            words.append(f"{k} {entry[k]}")
    if entry.get("on_chip"):
        words.append("rows on chip")
    return ", ".join(words)


def linear_table_spread(data):
    """bench_linear.py's files since the package became the headline: each
    method's median and min-max, the package over the faster of the GEMMs
    by PyTorch and by cuBLASLt's fastest algorithms (issue 62's baseline);
    then each case's sweep of plans and budgets beside its default."""
    env = data["environment"]
    lines = [
        f"**Fused linear cross entropy**, one forward and backward step: {env['device']}, commit "
        f"{env['commit'][:7]}, {env['date'][:10]}; milliseconds, median (min-max) of the run's interleaved calls, "
        "and the allocator's peak beyond inputs and outputs",
        "",
        "| N x H x V | xent (package) | xent (C call) | the GEMMs alone | the GEMMs, cuBLASLt's fastest | "
        "PyTorch eager | torch.compile | Liger-Kernel | Cut Cross-Entropy | package / faster GEMMs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        cells = [linear_cell(r["methods"].get(m, {}))
                 for m in ("xent_package", "xent", "gemms", "gemms_best", "torch_eager", "torch_compile", "liger",
                           "cce")]
        over = [r[k] for k in ("package_over_gemms", "package_over_gemms_best") if k in r]
        ratio = f"{max(over):.2f}" if over else "-"
        lines.append(f"| {r['n']} x {r['h']} x {r['v']} {r['dtype']} | " + " | ".join(cells) + f" | {ratio} |")
    searched = [r for r in data["results"] if r.get("gemms_search")]
    if searched:
        # Whether cuBLASLt's first choice, which PyTorch's @ and xent's GEMMs
        # take, leaves time behind (issue 62: "algorithm choice").
        lines += ["", "| N x H x V | GEMM (m x n x k) | the heuristic's first | the fastest of its candidates | "
                  "first / fastest |", "|---|---|---|---|---|"]
        for r in searched:
            for g in r["gemms_search"]:
                first, best = g["candidates"][0], g["candidates"][g["best"]]
                lines.append(f"| {r['n']} x {r['h']} x {r['v']} {r['dtype']} | {g['gemm']} ({g['m']} x {g['n']} x "
                             f"{g['k']}) | {linear_cell(first)} | {linear_cell(best)} (candidate {g['best']} of "
                             f"{len(g['candidates'])}) | {first['s'] / best['s']:.2f} |")
    sweeps = [r for r in data["results"] if any("s" in c for c in r.get("sweep", []))]
    if sweeps:
        lines += ["", "| N x H x V | xent's plan and budget | time, peak | over the default |", "|---|---|---|---|"]
        for r in sweeps:
            # The default's calls interleaved with the sweep's: the base.
            base = r["sweep_default_spread"]["median"]
            default = dict(s=base, spread=r["sweep_default_spread"],
                           peak_extra_bytes=r["methods"]["xent"].get("peak_extra_bytes"))
            lines.append(f"| {r['n']} x {r['h']} x {r['v']} {r['dtype']} | default (64 MiB) | "
                         f"{linear_cell(default)} | 1.00 |")
            for c in r["sweep"]:
                lines.append(f"| | {linear_plan(c)} | {linear_cell(c)} | "
                             + (f"{c['s'] / base:.2f} |" if "s" in c else "- |"))
    return lines


def linear_table(data):
    if any("package_over_gemms" in r for r in data["results"]):
        return linear_table_spread(data)
    env = data["environment"]
    lines = [
        f"**Fused linear cross entropy**, one forward and backward step: {env['device']}, commit "
        f"{env['commit'][:7]}, {env['date'][:10]}; milliseconds (median of the run's calls) and the "
        "allocator's peak beyond inputs and outputs",
        "",
        "| N x H x V | xent | xent (package) | the GEMMs alone | PyTorch eager | torch.compile | Liger-Kernel "
        "| Cut Cross-Entropy | xent / GEMMs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        cells = []
        for m in ("xent", "xent_package", "gemms", "torch_eager", "torch_compile", "liger", "cce"):
            got = r["methods"].get(m, {})
            cells.append(f"{1e3 * got['s']:.1f} ms, {got['peak_extra_bytes'] / 2**20:.0f} MiB"
                         if "s" in got else "-")
        lines.append(f"| {r['n']} x {r['h']} x {r['v']} {r['dtype']} | " + " | ".join(cells) +
                     f" | {r['xent_over_gemms']:.2f} |")
    return lines


def knob(one):
    """What a tune entry asked for: a launch shape (threads a row, block),
    a count of class slices ("slices", n), or the tables' choice (None, or
    ("slices", None): the runtime's)."""
    if "column_slices" in one:
        return ("slices", one["column_slices"])
    return tuple(one["row_shape"]) if one["row_shape"] else None


def knob_name(k):
    if k is None:
        return "table's"
    if k[0] == "slices":
        return "runtime's slices" if k[1] is None else f"{k[1]} slices"
    if k[0] == -1:
        return "the row on chip"
    return f"{k[0]} a row, {k[1]}" if k[0] else f"a row a block of {k[1]}"


def tune_table(data):
    """The `tune` group: each shape and pass in every launch shape (or
    count of class slices) it was timed in, TB/s of model bytes, the tune
    table's (or the runtime's) first."""
    env = data["environment"]
    asked = []
    for c in data["results"]:
        for one in c.get("shapes", []):
            if knob(one) not in asked:
                asked.append(knob(one))
    lines = [
        f"**Launch shapes** (bf16): {env['device']}, commit {env['commit'][:7]}, {env['date'][:10]}; TB/s of "
        "model bytes in each launch shape (threads a row, block; `xent_set_row_shape`) or count of class "
        "slices (`xent_set_column_slices`), the best in bold"
        + ("" if data.get("complete") else " (the run stopped before its last case)"),
        "",
        "| pass | shape | " + " | ".join(knob_name(k) for k in asked) + " |",
        "|---|---|" + "---|" * len(asked),
    ]
    for c in data["results"]:
        got = {knob(o): o for o in c.get("shapes", [])}
        best = max((o.get("xent_tbps", 0) for o in got.values() if o.get("ok")), default=None)
        cells = []
        for k in asked:
            o = got.get(k)
            if not o:
                cells.append("-")
            elif "xent_tbps" not in o:
                cells.append("refused")
            elif not o["ok"]:
                cells.append(f"wrong ({o['xent_tbps']:.2f})")
            else:
                cells.append(f"**{o['xent_tbps']:.2f}**" if o["xent_tbps"] == best else f"{o['xent_tbps']:.2f}")
        lines.append(f"| {c['op']} | {shape(c)} | " + " | ".join(cells) + " |")
    return lines


def tables(folder):
    out = []
    for name, title in (("bench.json", "Kernels"), ("sweep.json", "V sweep at 2^30 logits")):
        data = load(folder, name)
        if data and any("impls" in c for c in data["results"]):
            out += comparison_table(data, title) + [""]
        elif data:
            out += kernel_table(data, title) + [""]
    data = load(folder, "tune.json")
    if data:
        out += tune_table(data) + [""]
    data = load(folder, "linear.json")
    if data:
        out += linear_table(data) + [""]
    if not out:
        raise SystemExit(f"no bench.json, sweep.json, tune.json or linear.json in {folder}")
    out.append(f"(`bench/results_tables.py {os.path.relpath(folder)}`; the files hold every field, the peers' "
               "errors against PyTorch and the reason a peer did not run.)")
    return "\n".join(out)


# The peers of the headline table, in its column order: bench.json's names.
HEADLINE_PEERS = (("quack", "Quack"), ("liger", "Liger-Kernel"), ("torch_eager", "PyTorch"),
                  ("torch_compile", "torch.compile"))


def headline_rows(data):
    """(case, the package's result, {peer: result}) of every case where the
    package ran beside a peer, each result a dict with its seconds `s` (and
    its `spread` where the run kept one): from bench.py's impls, or from a
    run before them (the package's median as xent_package_s)."""
    rows = []
    for c in data["results"]:
        if "impls" in c:
            impls = c["impls"]
            pkg = impls.get("xent", {}) if "s" in impls.get("xent", {}) else None
            peers = {n: impls[n] for n, _ in HEADLINE_PEERS if "s" in impls.get(n, {})}
        else:
            pkg = dict(s=c["xent_package_s"]) if c.get("xent_package_s") else None
            peers = {n: dict(s=p["s"]) for n, p in c.get("peers", {}).items() if "s" in p}
            peers.update({n: dict(s=c[n + "_s"]) for n in ("torch_eager", "torch_compile") if c.get(n + "_s")})
        if pkg and c.get("ok", True) and peers:
            rows.append((c, pkg, peers))
    return rows


def headline(folder):
    """The README's table: xent through its PyTorch package, as a user calls
    it, beside the peers on the same tensors, in TB/s of model bytes."""
    data = load(folder, "bench.json")
    if not data:
        raise SystemExit(f"no bench.json in {folder}")
    env = data["environment"]
    spread = any("impls" in c for c in data["results"])
    lines = [
        f"{env['device']}, commit {env['commit'][:7]}, {env['date'][:10]}, PyTorch {env['torch']}; TB/s of model "
        f"bytes, the median of {env['timing']['reps']} calls"
        + (" of each, interleaved" if spread else " (this run kept no spread)")
        + "; the last column is the fastest other implementation's time over xent's (above 1: xent is faster)"
        + (", with the range of the p10-p90 spreads, level where they overlap." if spread else "."),
        "",
        "| pass | dtype | shape | xent | " + " | ".join(t for _, t in HEADLINE_PEERS) + " | xent vs the fastest other |",
        "|---|---|---|---|" + "---|" * len(HEADLINE_PEERS) + "---|",
    ]
    for c, pkg, peers in headline_rows(data):
        tbps = lambda r: f"{c['model_bytes'] / r['s'] / 1e12:.2f}"  # noqa: E731
        best = min(peers, key=lambda n: peers[n]["s"])
        cells = [tbps(pkg)] + [tbps(peers[n]) if n in peers else "-" for n, _ in HEADLINE_PEERS]
        ratio_text = versus(pkg, peers[best]) if "spread" in pkg and "spread" in peers[best] \
            else f"{peers[best]['s'] / pkg['s']:.2f}x"
        cells.append(f"{ratio_text} ({dict(HEADLINE_PEERS)[best]})")
        lines.append(f"| {c['op']} | {c['dtype']} | {shape(c)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"(`bench/results_tables.py {os.path.relpath(folder)} --headline`)")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--update", help="a Markdown file whose markers take the tables")
    p.add_argument("--headline", action="store_true", help="the README's table alone, between headline markers")
    args = p.parse_args()
    text = headline(args.folder) if args.headline else tables(args.folder)
    if not args.update:
        print(text)
        return 0
    with open(args.update) as f:
        doc = f.read()
    marker = "headline" if args.headline else "results"
    begin, end = f"<!-- {marker} begin -->\n", f"<!-- {marker} end -->"
    if begin not in doc or end not in doc:
        print(f"{args.update} has no {marker} markers", file=sys.stderr)
        return 1
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(args.update, "w") as f:
        f.write(head + begin + text + "\n" + end + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
