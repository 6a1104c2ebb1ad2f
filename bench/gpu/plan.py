#!/usr/bin/env python3
"""The GPU run's calls, in order, and the device machine's limits they must
fit (docs/GPU_RUN.md). The one place that says which call runs which stage
and carries what.

  bench/gpu/plan.py            prints the calls: each one's command line and
                               carry list, as the device tool takes them
  bench/gpu/plan.py --check    also checks every limit below against what
                               bench/gpu/build.sh left in gpu_run/ and the
                               working tree that travels; exit status 1 if
                               one is broken, naming it

Limits (.library/device/README.md): 10 minutes a command (each stage's
step limits add up to at most STAGE_SECONDS), 2000 characters a command
line, 8 carried paths and 64 MiB travelling a call (the working tree, the
archives and the wheels it carries), and what comes back from $OUT: at most
8 files of 16 MiB, plain names, 2 folders deep (bench/gpu/dry_run.sh checks
those on what the stages wrote). The archives together stay under 20 MiB."""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MIB = 1 << 20
CALL_BYTES = 64 * MIB      # what travels in one call
CALL_MARGIN = 4 * MIB      # kept free: the tree grows between the build and the run
ARCHIVES_BYTES = 20 * MIB  # both archives together
STAGE_SECONDS = 540        # a stage's step limits added up (the command's limit is 600)
COMMAND_CHARS = 2000
CARRY_PATHS = 8

LIBS = "gpu_run/xent-gpu-libs.tar.xz"
TESTS = "gpu_run/xent-gpu-tests.tar.xz"


def wheel_batches():
    """gpu_run/wheels/<batch> folders bench/gpu/build.sh wrote: part1, part2,
    ... (pieces of the wheels too big to travel whole) and peers (every
    whole wheel and SHA256SUMS)."""
    d = os.path.join(ROOT, "gpu_run", "wheels")
    names = sorted(os.listdir(d)) if os.path.isdir(d) else []
    return [n for n in names if n.startswith("part")], ("peers" if "peers" in names else None)


def calls():
    """The calls in order: (stage arguments, carried paths). The parts of
    the big wheels ride with the calls before the benchmark, which joins
    them; the benchmark and the profile each carry the whole small wheels
    again, so that Liger-Kernel and Cut Cross-Entropy install even where the
    machine was given back between calls."""
    parts, peers = wheel_batches()
    plan = [
        (["correctness"], [LIBS, TESTS]),
        (["sanitize", "memcheck", "racecheck", "synccheck", "initcheck"], [LIBS, TESTS]),
        (["bench"], [LIBS]),
        (["profile"], [LIBS]),
    ]
    # Parts go to the calls before the benchmark first, the last one with it.
    for i, part in enumerate(parts):
        plan[min(i, 2)][1].append("gpu_run/wheels/" + part)
    if peers:
        plan[2][1].append("gpu_run/wheels/" + peers)
        plan[3][1].append("gpu_run/wheels/" + peers)
    return [("bench/gpu/stage.sh " + " ".join(args), carry) for args, carry in plan]


def size(path):
    p = os.path.join(ROOT, path)
    if os.path.isfile(p):
        return os.path.getsize(p)
    total = 0
    for dirpath, _, files in os.walk(p):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


def tree_bytes():
    """What travels with every call: tracked files and untracked files git
    does not ignore."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode()
    return sum(os.path.getsize(os.path.join(ROOT, f)) for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f)))


def stage_seconds(command):
    """The step limits of a stage added up, from stage.sh's plan mode."""
    env = dict(os.environ, XENT_GPU_PLAN_ONLY="1", OUT=os.path.join("/tmp", "xent-gpu-plan"))
    out = subprocess.run(["bash"] + command.split(), cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    steps = re.findall(r"^PLAN (\S+) (\d+)$", out, re.M)
    return steps, sum(int(s) for _, s in steps)


def check():
    problems = []
    tree = tree_bytes()
    print(f"working tree that travels: {tree / MIB:.1f} MiB")
    for folder in ("gpu_run", ".whl"):
        if subprocess.run(["git", "check-ignore", "-q", folder + "/x"], cwd=ROOT).returncode != 0:
            problems.append(f"{folder}/ must be ignored by git (.gitignore), or it travels with every call")
    archives = 0
    for a in (LIBS, TESTS):
        if not os.path.isfile(os.path.join(ROOT, a)):
            problems.append(f"{a} is missing: run bench/gpu/build.sh")
        else:
            archives += size(a)
            print(f"{a}: {size(a) / MIB:.1f} MiB")
    if archives > ARCHIVES_BYTES:
        problems.append(f"the archives are {archives / MIB:.1f} MiB, over {ARCHIVES_BYTES // MIB} MiB")
    parts, peers = wheel_batches()
    if not peers:
        problems.append("gpu_run/wheels/peers is missing: run bench/gpu/build.sh (it fetches the wheels)")
    for n, (command, carry) in enumerate(calls(), 1):
        travels = tree + sum(size(c) for c in carry)
        steps, seconds = stage_seconds(command)
        print(f"call {n}: {command}: {len(steps)} steps, limits add up to {seconds} s; "
              f"{len(carry)} carried paths, {travels / MIB:.1f} MiB travel")
        if len(command) > COMMAND_CHARS:
            problems.append(f"call {n}: the command is {len(command)} characters, over {COMMAND_CHARS}")
        if len(carry) > CARRY_PATHS:
            problems.append(f"call {n}: {len(carry)} carried paths, over {CARRY_PATHS}")
        if travels > CALL_BYTES - CALL_MARGIN:
            problems.append(f"call {n}: {travels / MIB:.1f} MiB travel, over {(CALL_BYTES - CALL_MARGIN) // MIB} MiB "
                            f"(64 MiB less a margin)")
        if seconds > STAGE_SECONDS:
            problems.append(f"call {n}: its steps' limits add up to {seconds} s, over {STAGE_SECONDS} s")
        for c in carry:
            if not os.path.exists(os.path.join(ROOT, c)):
                problems.append(f"call {n}: carries {c}, which is missing")
    for p in problems:
        print("PLAN PROBLEM: " + p)
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="check every limit against gpu_run/ and the tree")
    args = p.parse_args()
    for n, (command, carry) in enumerate(calls(), 1):
        print(f"call {n}: run(command={json.dumps(command)}, carry={json.dumps(carry)}, timeout_s=600)")
    if args.check:
        return 1 if check() else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
