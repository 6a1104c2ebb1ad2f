"""Where a Bazel build's time goes: reads the JSON trace profile that
`bazel ... --profile=FILE.json.gz` writes and prints a Markdown summary, the
actions' seconds grouped by kind (each GPU compile by its architectures,
each test, the emulated kernels' host compiles) and the longest actions.

    ./bazelw test //... --profile=/tmp/suite.json.gz
    python3 bench/build_profile.py /tmp/suite.json.gz --title "..." > out.md

An action's seconds are its wall time; on a machine whose cores are all
busy, their sum over the elapsed time is about the number of cores."""

import argparse
import collections
import gzip
import json
import re


def actions(path):
    """[(seconds, description)] of the profile's executed actions."""
    with gzip.open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [(e["dur"] / 1e6, e.get("name") or "") for e in events
            if e.get("ph") == "X" and e.get("cat") == "action processing"]


def kind(name):
    """The group an action's description falls in."""
    m = re.match(r"Compiling \S+ \(\d+ variants\) for (\S+)", name)
    if m:
        return f"GPU compiles for {m.group(1)}"
    m = re.match(r"Compiling runtime/emu/(cuda|hip)/", name)
    if m:
        return f"host compile of the {m.group(1)} rendering for the emulator"
    m = re.match(r"Testing (//\S+?)(?: \(shard .*\))?$", name)
    if m:
        return f"test {m.group(1)}"
    if name.startswith("Executing genrule //gen:"):
        return "xentgen (render and --check): " + name.split()[-1]
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--title", default="Build profile")
    ap.add_argument("--elapsed", type=float, help="the build's elapsed seconds (Bazel's INFO line), for the ratio")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    acts = actions(args.profile)
    total = sum(d for d, _ in acts)
    groups = collections.Counter()
    counts = collections.Counter()
    for d, name in acts:
        k = kind(name)
        groups[k] += d
        counts[k] += 1
    print(f"# {args.title}\n")
    line = f"{len(acts)} actions, {total:.0f} action-seconds"
    if args.elapsed:
        line += f" in {args.elapsed:.0f} s elapsed ({total / args.elapsed:.2f} at once on average)"
    print(line + ".\n")
    print("| group | actions | seconds | share |")
    print("|---|---|---|---|")
    for g, d in groups.most_common():
        if d >= 0.005 * total:
            print(f"| {g} | {counts[g]} | {d:.0f} | {100 * d / total:.1f}% |")
    rest = sum(d for g, d in groups.items() if d < 0.005 * total)
    print(f"| (groups under 0.5% each) | | {rest:.0f} | {100 * rest / total:.1f}% |")
    print(f"\n## The {args.top} longest actions\n")
    print("| seconds | action |")
    print("|---|---|")
    for d, name in sorted(acts, reverse=True)[: args.top]:
        print(f"| {d:.1f} | {name} |")


if __name__ == "__main__":
    main()
