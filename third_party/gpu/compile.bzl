"""gpu_objects: compiles generated .cu files with nvcc or .hip files with
the HIP compiler (configure.bzl's route: ROCm's clang, Debian's clang-19 with
hip_device_libs below, or hipcc), one action per unit: the variants of one op and dtype (ce_fwd_bf16:
its nine label types and reductions), each unit a file that includes its
variants' files. A compiler pays about as much for its headers and its
passes over one file as for the kernels of a small one (nvcc, sm_90 and
sm_100: 5 of the 8 s of ce_fwd_bf16_i64_mean.cu go to an empty file with the
same includes; nine variants in one unit take 24 s, not 60), so units cut
the compile of every kernel by about half, and an edited spec still
recompiles only the units whose variants changed. Each unit's object comes
with the compiler's log: ptxas's per-kernel, per-arch report for CUDA, which
tests/kernels_compiled_test.py and bench/sass_report.py read. compiled.txt
names each unit's variants ("unit: ce_fwd_bf16.unit.cu <file> <file> ...").

With hip_on_cuda = True, the .hip files are compiled with nvcc for NVIDIA
GPUs through our HIP-on-CUDA headers (runtime/hip_on_cuda).

Architectures: --define=xent_cuda_archs=80,90a,100,120 (default with
--config=cuda: A100, H100/H200, B200/GB200 and RTX 50; "90a" and the like
are taken as nvcc spells them: sm_90a's code runs on sm_90 alone, with the
wgmma instructions of the ON_CHIP plan, where plain sm_90's traps; "100a"
and "100f" have its tcgen05 passes, 100f's running on sm_103 too), --define=xent_hip_archs=gfx90a,gfx942 (default
with --config=rocm: MI200 and MI300; a build without the backend, the
tests', compiles for compute_100 and gfx942 alone: _TEST_ARCHS) and, for HIP on CUDA,
--define=xent_hip_on_cuda_archs=90 (default: the H100 the GPU tests run on;
a second architecture would double the largest compile of CI for a test
that runs on one GPU). nvcc objects carry machine code (SASS) for each
architecture and the PTX of the newest, which the driver compiles for a GPU
newer than all of them (sm_103, sm_121 and later) instead of failing to load.
An architecture spelled compute_100 is its PTX alone, no machine code (the
tests' build, below), in uncompressed fatbins, where the compile test reads
its kernels. --define=xent_cuda_ptx=0 leaves the PTX out (machine code
alone), and --define=xent_cuda_compress=none stores the fatbins
uncompressed (nvcc's -compress-mode): the GPU run's build (bench/gpu/build.sh) uses both, since
the PTX is two thirds of an object's bytes and an H100 runs the SASS, and
xz finds the kernels the test binaries share only in uncompressed fatbins.
A gpu_objects target may fix its own architectures (archs), whatever the
--define says: the compile test's sample of every default architecture."""

load("@local_gpu//:defs.bzl", "HIP_COMPILER", "HIP_DEVICE_LIBS", "HIP_DEVICE_LIB_ISAS", "HIP_ROUTE", "LLVM_BIN", "NVCC", "ROCM_PATH")

# gfx90a: MI200 (MI210, MI250X); gfx942: MI300X, MI300A, MI325X (gfx940 was
# the pre-production MI300, which later ROCm releases dropped).
_DEFAULT_ARCHS = {
    "cuda": "80,90a,100,120",
    "hip": "gfx90a,gfx942",
    "hip_on_cuda": "90",
}

# The gfx targets each HIP compiler route lacks (configure.bzl's routes):
# compile.bzl fails with what to install instead of the compiler's error.
_HIP_ROUTE_LACKS = {
    "clang-19": {"gfx950": "gfx950 (MI355X) needs a newer compiler than Debian's clang-19: ROCm 6.4 or later's (set ROCM_PATH)"},
    "hipcc": {
        "gfx942": "gfx942 (MI300X) needs clang 17 or later; hipcc here is ROCm 5.2's (clang 15): install clang-19 lld-19 clang-tools-19 llvm-19 (./bazelw does) or set ROCM_PATH to ROCm 6",
        "gfx950": "gfx950 (MI355X) needs ROCm 6.4 or later's compiler (set ROCM_PATH)",
    },
}

_EXTENSIONS = {
    "cuda": ".cu",
    "hip": ".hip",
}

def _arch_number(arch):
    """80 for "80", 90 for "90a", 100 for "100f"."""
    digits = "".join([c for c in arch.elems() if c.isdigit()])
    if not digits:
        fail("xent: CUDA architecture '%s' is not a number (80, 90, 90a, 100, ...)" % arch)
    return int(digits)

# A build that leaves the vendor's GPU backend out (no --config=cuda or
# --config=rocm: the tests' build, README's `./bazelw test //...`) compiles
# every kernel for one architecture per vendor, the newest datacenter GPU's
# (B200/GB200, where the largest tunes live; gfx942: MI300X, the ISA
# report's), and the sample of gen/BUILD for the whole default list. For
# CUDA that is compute_100, its PTX alone, unoptimized (device_optimized):
# nvcc's front end over every kernel, without its optimizer or ptxas, which
# took most of the suite's largest cost (docs/PERFORMANCE.md, "What the
# test command spends"); ptxas, its registers and its spills are checked on the sample,
# for every default architecture, and on every kernel for sm_90 before a
# GPU run (bench/gpu/build.sh). gfx90a for every kernel would add little
# the sample lacks: wave64 CDNA with gfx942's register file, and their
# registers and scratch have differed in no kernel read so far.
_TEST_ARCHS = {
    "cuda": "compute_100",
    "hip": "gfx942",
    "hip_on_cuda": "90",
}

# The --config that builds each kind's GPU backend (.bazelrc).
_BACKEND_DEFINE = {
    "cuda": "xent_cuda",
    "hip": "xent_rocm",
    "hip_on_cuda": "xent_cuda",
}

def _tests_build(ctx, arch_kind, fixed = ""):
    """Whether a compile is the tests' build: no fixed architectures, none
    named by --define, and no GPU backend (--config=cuda, --config=rocm)."""
    backend = ctx.var.get(_BACKEND_DEFINE[arch_kind]) == "1"
    return not fixed and not backend and ctx.var.get("xent_%s_archs" % arch_kind) == None

def archs_of(ctx, arch_kind, fixed = ""):
    """The architectures of a compile: fixed where given ("default": the
    default list), else the --define's, else the tests' one architecture in
    the tests' build, else the default list (the backend's build)."""
    if fixed == "default":
        fixed = _DEFAULT_ARCHS[arch_kind]
    if _tests_build(ctx, arch_kind, fixed):
        return _TEST_ARCHS[arch_kind].split(",")
    return (fixed or ctx.var.get("xent_%s_archs" % arch_kind, _DEFAULT_ARCHS[arch_kind])).split(",")

def device_optimized(ctx, arch_kind, fixed = ""):
    """Whether nvcc optimizes the device code (cicc's -O3, its default). Not
    in the tests' build of every kernel to PTX alone (_TEST_ARCHS: no
    backend, no architectures named), whose objects nothing runs: there
    nvcc's front end checks every kernel and -Xcicc -O0 skips the optimizer,
    nine tenths of its time (the fused bf16 unit: 26 s, 2.8 s). Its code
    would be slow, so a build that names architectures or the backend
    optimizes; --define=xent_cuda_device_opt=0 or 1 says so outright (.ci/run's
    plugin step: the suite's objects, reused)."""
    said = ctx.var.get("xent_cuda_device_opt")
    if said in ("0", "1"):
        return said == "1"
    if said != None:
        fail("xent: --define=xent_cuda_device_opt=%s: 0 or 1" % said)
    return not _tests_build(ctx, arch_kind, fixed)

def _ptx_only(arch):
    """Whether a CUDA architecture is spelled compute_NN: its PTX alone."""
    return arch.startswith("compute_")

def sass_archs(archs):
    """The CUDA architectures compiled to machine code (not compute_NN)."""
    return [a for a in archs if not _ptx_only(a)]

def newest_cuda_arch(archs):
    """The architecture whose PTX the objects carry."""
    newest = archs[0]
    for a in archs:
        if _arch_number(a) > _arch_number(newest):
            newest = a
    return newest

def ptx_arch(ctx, archs):
    """The architecture whose PTX nvcc objects carry: the newest, or None
    with --define=xent_cuda_ptx=0."""
    return newest_cuda_arch(archs) if ctx.var.get("xent_cuda_ptx", "1") != "0" else None

def gfx_isa_version(arch):
    """The ISA-version number ROCm's device libraries give a gfx target:
    major * 1000 + minor * 100 + stepping, the last two hex digits
    (gfx942 -> 9402, gfx90a -> 9010, gfx1100 -> 11000); feature suffixes
    (":xnack-") are dropped."""
    name = arch.split(":")[0]
    if not name.startswith("gfx") or len(name) < 6:
        fail("xent: HIP target '%s' is not a gfx target (gfx90a, gfx942, ...)" % arch)
    digits = name[3:]
    hexes = "0123456789abcdef"
    if not digits[:-2].isdigit() or digits[-2] not in hexes or digits[-1] not in hexes:
        fail("xent: HIP target '%s' is not a gfx target (gfx90a, gfx942, ...)" % arch)
    return int(digits[:-2]) * 1000 + hexes.index(digits[-2]) * 100 + hexes.index(digits[-1])

def _compile_args(ctx, target, hip_on_cuda, fixed_archs = ""):
    """The compiler, its flags and its inputs beyond the sources for one
    generated file (input and output appended by the caller): (archs, args,
    inputs), or (None, [], []) where the compiler is absent."""
    nvcc = target == "cuda" or hip_on_cuda
    compiler = NVCC if nvcc else HIP_COMPILER
    if not compiler:
        return None, [], []
    arch_kind = "hip_on_cuda" if hip_on_cuda else target
    archs = archs_of(ctx, arch_kind, fixed_archs)

    # The device library (kernels/) every generated file includes.
    library = [f for f in ctx.files._device_headers if f.basename == "xent_device.h"][0].dirname
    library_args = ["-I", library]
    if nvcc:
        args = [compiler, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-Werror", "all-warnings"] + library_args
        if not device_optimized(ctx, arch_kind, fixed_archs):
            args += ["-Xcicc", "-O0"]
        newest = ptx_arch(ctx, archs)
        if not newest and not sass_archs(archs):
            fail("xent: --define=xent_cuda_archs=%s with xent_cuda_ptx=0: no machine code and no PTX" % ",".join(archs))
        for a in archs:
            if _ptx_only(a):
                args.append("-gencode=arch=%s,code=%s" % (a, a))
            elif a == newest:
                args.append("-gencode=arch=compute_%s,code=[sm_%s,compute_%s]" % (a, a, a))
            else:
                args.append("-gencode=arch=compute_%s,code=sm_%s" % (a, a))
        compress = ctx.var.get("xent_cuda_compress", "" if sass_archs(archs) else "none")
        if compress:
            args.append("-compress-mode=" + compress)
        if target == "hip":
            # A .hip file is CUDA C++ to nvcc; <hip/...> resolves to the shim.
            args += ["-x", "cu", "-I", ctx.files.shim_hdrs[0].dirname.rsplit("/", 1)[0]]
        return archs, args, ctx.files._device_headers
    for a in archs:
        lacks = _HIP_ROUTE_LACKS.get(HIP_ROUTE, {}).get(a.split(":")[0])
        if lacks:
            fail("xent: --define=xent_hip_archs=%s: %s" % (",".join(archs), lacks))
    inputs = list(ctx.files._device_headers)
    if HIP_ROUTE == "hipcc":
        args = [compiler, "-O3", "-std=c++17", "-fPIC", "-Werror", "-Wno-unused-command-line-argument"]
    else:
        args = [compiler, "-x", "hip", "-O3", "-std=c++17", "-fPIC", "-Werror", "-Wno-unused-command-line-argument",
                "--rocm-path=" + ROCM_PATH]
    if HIP_ROUTE == "clang-19":
        # Debian's device libraries with the ISA-version libraries they lack
        # (hip_device_libs). Code object version 4: the HIP runtime this
        # route links (Debian's ROCm 5.2) loads it, as ROCm 6 does, where
        # clang-19's default, 5, needs a newer runtime.
        libs = ctx.files._hip_device_libs[0]
        args += ["--rocm-device-lib-path=" + libs.path, "-mcode-object-version=4"]
        inputs.append(libs)
    args += ["--offload-arch=" + a for a in archs] + library_args
    return archs, args, inputs

_DTYPES = ["bf16", "f16", "f32", "f64"]

# At most this many variants in a unit: a spec with many variants of one op
# and dtype still compiles in several actions, in parallel where there are
# the cores.
_UNIT_MAX = 12

def compile_units(basenames, ext):
    """[(unit, [basename, ...])]: the files grouped by their name up to and
    including its dtype (ce_fwd_bf16_i64_mean.cu -> ce_fwd_bf16,
    sm_bwd_f16_log_softmax.cu -> sm_bwd_f16), in name order, at most
    _UNIT_MAX to a unit (ce_fwd_bf16_2, ... for more); a name without a
    dtype is a unit of its own."""
    groups = {}
    for name in sorted(basenames):
        tokens = name[:-len(ext)].split("_")
        key = name[:-len(ext)]
        for i, token in enumerate(tokens):
            if token in _DTYPES:
                key = "_".join(tokens[:i + 1])
                break
        groups.setdefault(key, []).append(name)
    units = []
    for key in sorted(groups):
        members = groups[key]
        for start in range(0, len(members), _UNIT_MAX):
            suffix = "" if start == 0 else "_%d" % (start // _UNIT_MAX + 1)
            units.append((key + suffix, members[start:start + _UNIT_MAX]))
    return units

def _gpu_objects_impl(ctx):
    target = ctx.attr.target
    nvcc = target == "cuda" or ctx.attr.hip_on_cuda
    archs, compile_args, tool_inputs = _compile_args(ctx, target, ctx.attr.hip_on_cuda, ctx.attr.archs)
    manifest = ctx.actions.declare_file(ctx.label.name + "/compiled.txt")
    if not compile_args:
        ctx.actions.write(manifest, "compiler: absent\n")
        return [DefaultInfo(files = depset([])), OutputGroupInfo(logs = depset([manifest]))]
    compiler = compile_args[0]
    ext = _EXTENSIONS[target]
    by_name = {}
    for src in ctx.files.srcs:
        if src.basename.endswith(ext):
            if src.basename in by_name:
                fail("xent: two generated files named %s" % src.basename)
            by_name[src.basename] = src
    objects, logs, unit_lines = [], [], []
    for unit, members in compile_units(by_name.keys(), ext):
        srcs = [by_name[m] for m in members]
        dirs = {s.dirname: True for s in srcs}
        if len(dirs) != 1:
            fail("xent: unit %s spans directories %s" % (unit, dirs.keys()))

        # The unit's own file, beside its objects: it includes its variants
        # by name, found on the generated directory's include path (".unit"
        # keeps its name from being one of theirs, which it would include).
        unit_src = ctx.actions.declare_file(ctx.label.name + "/" + unit + ".unit" + ext)
        ctx.actions.write(unit_src, "".join(['#include "%s"\n' % m for m in members]))
        obj = ctx.actions.declare_file(ctx.label.name + "/" + unit + ".unit" + ext + ".pic.o")
        log = ctx.actions.declare_file(ctx.label.name + "/" + unit + ".unit" + ext + ".log")
        args = compile_args + ["-I", srcs[0].dirname, "-c", unit_src.path, "-o", obj.path]
        ctx.actions.run_shell(
            outputs = [obj, log],
            # The HIP shim is an input of the HIP-on-CUDA compiles only: an
            # edit of it recompiles no CUDA or hipcc kernel.
            inputs = [unit_src] + srcs + ctx.files.hdrs + tool_inputs + (ctx.files.shim_hdrs if ctx.attr.hip_on_cuda else []),
            command = '"$@" > "{log}" 2>&1 || {{ cat "{log}" >&2; exit 1; }}'.format(log = log.path),
            arguments = args,
            mnemonic = "Nvcc" if nvcc else "Hipcc",
            progress_message = "Compiling %s (%d variants) for %s" % (unit, len(members), ",".join(archs)),
            use_default_shell_env = True,
        )
        objects.append(obj)
        logs.append(log)
        unit_lines.append("unit: %s %s\n" % (unit + ".unit" + ext, " ".join(members)))
    ptx_of = ptx_arch(ctx, archs) if nvcc else None
    ptx = "ptx: %s\n" % ptx_of if ptx_of else ""
    # llvm_bin: the HIP compiler's tools (clang-offload-bundler, llvm-readobj,
    # llvm-objdump), which read its code objects.
    tools = "llvm_bin: %s\n" % LLVM_BIN if not nvcc and LLVM_BIN else ""
    ctx.actions.write(manifest, "compiler: %s\narchs: %s\n%s%s%s" % (compiler, " ".join(archs), ptx, tools, "".join(unit_lines)))
    return [
        DefaultInfo(files = depset(objects), runfiles = ctx.runfiles(files = objects)),
        OutputGroupInfo(logs = depset(logs + [manifest])),
    ]

gpu_objects = rule(
    implementation = _gpu_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = True),
        "hdrs": attr.label_list(allow_files = True),
        "target": attr.string(mandatory = True, values = ["cuda", "hip"]),
        "hip_on_cuda": attr.bool(default = False),
        # Fixed architectures ("80,90", or "default" for the default list),
        # whatever --define=xent_*_archs says.
        "archs": attr.string(default = ""),
        "shim_hdrs": attr.label_list(allow_files = True, default = ["//runtime/hip_on_cuda:hip/hip_runtime.h", "//runtime/hip_on_cuda:hip/hip_runtime_api.h", "//runtime/hip_on_cuda:hip/hip_fp16.h"]),
        "_hip_device_libs": attr.label(default = Label("//third_party/gpu:hip_device_libs")),
        "_device_headers": attr.label(default = Label("//kernels:headers")),
    },
)

def _gpu_archive_impl(ctx):
    target = ctx.attr.target
    archs, compile_args, tool_inputs = _compile_args(ctx, target, False)
    if not compile_args:
        fail("xent: --config=%s needs %s, which this host does not have (CUDA_PATH / ROCM_PATH say where it is)" %
             ("cuda" if target == "cuda" else "rocm", "nvcc" if target == "cuda" else "a HIP compiler (ROCm's clang, Debian's clang-19 or hipcc)"))
    # .lo: an archive Bazel links whole (the dispatch table beside it names
    # every kernel; nothing else would pull them in first).
    archive = ctx.actions.declare_file("lib%s.lo" % ctx.label.name)
    log = ctx.actions.declare_file(ctx.label.name + ".log")
    ext = _EXTENSIONS[target]

    # One action over the whole tree: its file names are known only once the
    # generator has run. Each file is compiled with the tree as its include
    # path, as gpu_objects does, and the objects are archived.
    script = """set -e
archive="$1"; log="$2"; tree="$3"; shift 3
objs=$(mktemp -d)
: > "$log"
for src in "$tree"/*{ext}; do
  [ -e "$src" ] || continue
  obj="$objs/$(basename "$src").pic.o"
  "$@" -I "$tree" -c "$src" -o "$obj" >> "$log" 2>&1 || {{ cat "$log" >&2; exit 1; }}
done
rm -f "$archive"
ar rcs "$archive" "$objs"/*.o
rm -rf "$objs"
""".format(ext = ext)
    trees = [f for f in ctx.files.srcs if f.is_directory]
    if len(trees) != 1:
        fail("xent: gpu_archive takes the generator's output directory (one), not %d" % len(trees))
    ctx.actions.run_shell(
        outputs = [archive, log],
        inputs = ctx.files.srcs + tool_inputs,
        command = script,
        arguments = [archive.path, log.path, trees[0].path] + compile_args,
        mnemonic = "Nvcc" if target == "cuda" else "Hipcc",
        progress_message = "Compiling %s's %s kernels for %s" % (ctx.label, target, ",".join(archs)),
        use_default_shell_env = True,
    )
    return [
        DefaultInfo(files = depset([archive])),
        OutputGroupInfo(logs = depset([log])),
    ]

# gpu_archive: the kernels of a generated directory (a downstream
# xent_library's, defs.bzl) compiled with nvcc or hipcc into one static
# library, with the architectures of --define=xent_cuda_archs /
# --define=xent_hip_archs. Only analysed where --config=cuda or
# --config=rocm selects it.
gpu_archive = rule(
    implementation = _gpu_archive_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = True),
        "target": attr.string(mandatory = True, values = ["cuda", "hip"]),
        "shim_hdrs": attr.label_list(allow_files = True, default = []),
        "_hip_device_libs": attr.label(default = Label("//third_party/gpu:hip_device_libs")),
        "_device_headers": attr.label(default = Label("//kernels:headers")),
    },
)

def _exact_flag(arch):
    """xent_cuda_archs.h's flag of a machine-code architecture: 1 for an
    "a" one (runs on that GPU alone), 2 for an "f" one (the family's: a
    later GPU of the same major, as plain code), 0 for plain code."""
    return "1" if arch.endswith("a") else "2" if arch.endswith("f") else "0"

def cuda_archs_header_text(archs, ptx):
    """xent_cuda_archs.h for a list of nvcc architectures and the one whose
    PTX the objects carry (None: none; the CMake route writes the same from
    CMAKE_CUDA_ARCHITECTURES)."""
    newest = ptx or "0"
    sass = sass_archs(archs)
    return """/* Generated from the build's CUDA architectures: the machine code
   (SASS) the CUDA kernels carry, whether each runs on that GPU alone (1:
   an "a" architecture) or is a family's (2: an "f" one, which later GPUs
   of its major run as plain code), and the architecture of the PTX they
   carry (0: none).
   backend_cuda.c refuses at xent_create a GPU that none of them can run. */
#define XENT_CUDA_SASS_ARCHS {%s}
#define XENT_CUDA_SASS_EXACT {%s}
#define XENT_CUDA_PTX_ARCH %d
""" % (", ".join([str(_arch_number(a)) for a in sass]) or "0", ", ".join([_exact_flag(a) for a in sass]) or "0",
       _arch_number(newest))

def _cuda_archs_header_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + "/xent_cuda_archs.h")
    archs = archs_of(ctx, "cuda")
    ctx.actions.write(out, cuda_archs_header_text(archs, ptx_arch(ctx, archs)))
    return [DefaultInfo(files = depset([out]))]

# xent_cuda_archs.h: the architectures of --define=xent_cuda_archs (the same
# the CUDA kernels are compiled for), for the CUDA backend's check of the
# device at xent_create.
cuda_archs_header = rule(implementation = _cuda_archs_header_impl)

def _hip_device_libs_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    if HIP_ROUTE != "clang-19":
        # ROCm's own compiler finds its own device libraries (--rocm-path);
        # hipcc, its ROCm's.
        ctx.actions.run_shell(outputs = [out], command = 'mkdir -p "$1"', arguments = [out.path])
        return [DefaultInfo(files = depset([out]))]
    archs = {}
    for a in archs_of(ctx, "hip") + archs_of(ctx, "hip", "default"):
        name = a.split(":")[0]
        if name[3:] not in HIP_DEVICE_LIB_ISAS and name not in _HIP_ROUTE_LACKS["clang-19"]:
            archs[name[3:]] = gfx_isa_version(a)

    # Each missing library: the one-line source compiled to LLVM IR for the
    # GPU, its definition given linkonce_odr linkage (what ROCm's build gives
    # every device-library definition, its prepare-builtins step, so that it
    # links as the others do), assembled to bitcode.
    script = """set -e
out="$1"; system="$2"; llvm="$3"; src="$4"; shift 4
mkdir -p "$out"
cp "$system"/*.bc "$out"/
for pair in "$@"; do
  name="${pair%%=*}"; version="${pair#*=}"
  "$llvm/clang" -cc1 -triple amdgcn-amd-amdhsa -x cl -cl-std=CL2.0 -O3 -fvisibility=protected \\
    -mcode-object-version=none -DXENT_OCLC_ISA_VERSION="$version" -emit-llvm "$src" -o "$out/isa.ll"
  sed -i 's/^\\(@__oclc_ISA_version = \\)protected /\\1linkonce_odr protected /' "$out/isa.ll"
  grep -q "^@__oclc_ISA_version = linkonce_odr protected .* i32 $version," "$out/isa.ll" ||
    { echo "hip_device_libs: unexpected IR for gfx$name:" >&2; cat "$out/isa.ll" >&2; exit 1; }
  "$llvm/llvm-as" "$out/isa.ll" -o "$out/oclc_isa_version_$name.bc"
  rm "$out/isa.ll"
done
"""
    ctx.actions.run_shell(
        outputs = [out],
        inputs = [ctx.file.src],
        command = script,
        arguments = [out.path, HIP_DEVICE_LIBS, LLVM_BIN, ctx.file.src.path] + ["%s=%d" % (k, v) for k, v in sorted(archs.items())],
        mnemonic = "HipDeviceLibs",
        progress_message = "Building the HIP device libraries (ISA versions %s)" % (", ".join(sorted(archs.keys())) or "none missing"),
    )
    return [DefaultInfo(files = depset([out]))]

# hip_device_libs: the device libraries the HIP kernels link on configure.bzl's
# "clang-19" route: Debian's, with the ISA-version library (oclc_isa_version.cl)
# of every target of --define=xent_hip_archs and the default list that they
# lack. A directory, given to clang as --rocm-device-lib-path.
hip_device_libs = rule(
    implementation = _hip_device_libs_impl,
    attrs = {"src": attr.label(allow_single_file = True, mandatory = True)},
)
