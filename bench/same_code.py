"""Whether a refactor of the kernels' sources left the code the compilers
get unchanged: every generated unit of two builds, preprocessed as each
compiler sees it, compared token for token.

    python3 bench/same_code.py --before OLD/gen --before-kernels OLD/kernels \\
        --after bazel-bin/gen --after-kernels kernels

OLD is a checkout of the earlier commit with its own `bazel build //gen:cuda
//gen:hip` done (`bazel-bin/gen`), or any directory holding `cuda/*.cu` and
`hip/*.hip` with the device library they include. A "before" side from the
days of the rendered device header (gen/<target>/xent_device.h) needs no
--before-kernels.

Each unit is preprocessed in every mode a compiler builds it in: CUDA device
code for sm_90 and sm_100 and its host code (clang-19 over the stand-in CUDA
headers, gen/check/cuda, as xentgen --check parses it), HIP device code for
gfx942 and its host code, the HIP rendering as built for NVIDIA
(runtime/hip_on_cuda), and the emulator's host C++ for both (g++). Whitespace,
line markers and the emulator's file and line arguments (__FILE__,
__LINE__) are not code and are left out. A unit whose tokens differ is
printed with the first difference; the exit status is 1 if any does.

Equal tokens are equal machine code for a given compiler. Where tokens
differ on purpose (a definition moved, say), compare the machine code of a
sample instead: bench/sass_report.py and bench/isa_report.py, before and
after."""

import argparse
import concurrent.futures
import difflib
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLANG = "clang-19"
CUDA = [CLANG, "-x", "cuda", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90", "-std=c++17",
        "-Wno-unknown-cuda-version", "-I", os.path.join(ROOT, "gen", "check", "cuda")]
HIP = [CLANG, "-x", "hip", "-nogpulib", "--offload-arch=gfx942", "-std=c++17"]
EMU = ["g++", "-x", "c++", "-std=gnu++17", "-DXENT_EMU", "-I", os.path.join(ROOT, "runtime", "emu"), "-I", ROOT]

# mode: (target, compiler and flags)
MODES = {
    "cuda_sm90": ("cuda", CUDA + ["--cuda-device-only"]),
    # clang 19 knows no sm_100: its architecture macro, as nvcc sets it.
    "cuda_sm100": ("cuda", CUDA + ["--cuda-device-only", "-U__CUDA_ARCH__", "-D__CUDA_ARCH__=1000",
                                   "-Wno-builtin-macro-redefined"]),
    "cuda_host": ("cuda", CUDA + ["--cuda-host-only"]),
    "hip_gfx942": ("hip", HIP + ["--cuda-device-only"]),
    "hip_host": ("hip", HIP + ["--cuda-host-only"]),
    "hip_on_cuda": ("hip", CUDA + ["--cuda-device-only", "-DXENT_CHECK_HIP_ON_CUDA", "-D__CUDACC__", "-I",
                                   os.path.join(ROOT, "runtime", "hip_on_cuda")]),
    "emu_cuda": ("cuda", EMU),
    "emu_hip": ("hip", EMU),
}
EXT = {"cuda": ".cu", "hip": ".hip"}

# The emulator's (name, "file", line) arguments, and any other file name.
FILE_LINE = re.compile(r'"[^"]*\.(?:h|cu|hip|tmpl|c|cc)"\s*,\s*\d+')
FILE = re.compile(r'"[^"]*\.(?:h|cu|hip|tmpl|c|cc)"')


def tokens(text):
    """The preprocessed text as one line of whitespace-separated tokens."""
    text = FILE.sub("FILE", FILE_LINE.sub("FILE, LINE", text))
    return re.sub(r"\s+", " ", text).strip().split(" ")


def preprocess(flags, unit, include_dirs):
    args = [*flags, "-E", "-P"]
    for d in include_dirs:
        args += ["-I", d]
    run = subprocess.run(args + [unit], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} {unit}:\n{run.stderr[-2000:]}")
    return tokens(run.stdout)


def first_difference(a, b):
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            return f"before: {' '.join(a[max(i1 - 8, 0):i2 + 8])[:300]}\n    after:  {' '.join(b[max(j1 - 8, 0):j2 + 8])[:300]}"
    return ""


def compare(mode, unit, before, after):
    target, flags = MODES[mode]
    name = os.path.basename(unit)
    a = preprocess(flags, os.path.join(before[0], target, name), [os.path.join(before[0], target)] + before[1])
    b = preprocess(flags, os.path.join(after[0], target, name), [os.path.join(after[0], target)] + after[1])
    return mode, name, len(b), "" if a == b else first_difference(a, b)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the earlier build's generated directory (cuda/, hip/)")
    ap.add_argument("--before-kernels", help="the device library the earlier units include (kernels/)")
    ap.add_argument("--after", required=True, help="the later build's generated directory")
    ap.add_argument("--after-kernels", default=os.path.join(ROOT, "kernels"), help="default: this checkout's")
    ap.add_argument("--modes", default=",".join(MODES), help="of: %(default)s")
    ap.add_argument("--kernels", default="*", help="a shell pattern of the units' names (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    before = (args.before, [args.before_kernels] if args.before_kernels else [])
    after = (args.after, [args.after_kernels])
    jobs = []
    for mode in args.modes.split(","):
        if mode not in MODES:
            sys.exit(f"same_code: no mode {mode} (of {', '.join(MODES)})")
        target = MODES[mode][0]
        units = sorted(glob.glob(os.path.join(args.after, target, args.kernels + EXT[target])))
        if not units:
            sys.exit(f"same_code: no {target} units match {args.kernels} in {args.after}")
        jobs += [(mode, unit) for unit in units]
    differ = 0
    counts = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for mode, name, n, diff in pool.map(lambda j: compare(j[0], j[1], before, after), jobs):
            counts.setdefault(mode, [0, 0])[0] += 1
            if diff:
                counts[mode][1] += 1
                differ += 1
                print(f"DIFFERS {mode} {name}:\n    {diff}")
    for mode, (n, d) in counts.items():
        print(f"{mode}: {n} units, {n - d} the same, {d} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
