"""gpu_objects: compiles generated .cu files with nvcc or .hip files with
hipcc, one action per file (so an edited spec recompiles only the files whose
text changed). Each object comes with the compiler's log: ptxas's per-kernel,
per-arch report for CUDA, which tests/kernels_compiled_test.py reads.

With hip_on_cuda = True, the .hip files are compiled with nvcc for NVIDIA
GPUs through our HIP-on-CUDA headers (runtime/hip_on_cuda).

Architectures: --define=xent_cuda_archs=80,90 (default),
--define=xent_hip_archs=gfx90a,gfx940 (default) and, for HIP on CUDA,
--define=xent_hip_on_cuda_archs=90 (default: the H100 the GPU tests run on;
a second architecture would double the largest compile of CI for a test
that runs on one GPU)."""

load("@local_gpu//:defs.bzl", "HIPCC", "NVCC")

_DEFAULT_ARCHS = {
    "cuda": "80,90",
    "hip": "gfx90a,gfx940",
    "hip_on_cuda": "90",
}

_EXTENSIONS = {
    "cuda": ".cu",
    "hip": ".hip",
}

def _compile_args(ctx, target, hip_on_cuda):
    """The compiler and its flags for one generated file (input and output
    appended by the caller): (archs, args), or (None, []) where the compiler
    is absent."""
    nvcc = target == "cuda" or hip_on_cuda
    compiler = NVCC if nvcc else HIPCC
    if not compiler:
        return None, []
    arch_kind = "hip_on_cuda" if hip_on_cuda else target
    archs = ctx.var.get("xent_%s_archs" % arch_kind, _DEFAULT_ARCHS[arch_kind]).split(",")
    if nvcc:
        args = [compiler, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-Werror", "all-warnings"]
        args += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
        if target == "hip":
            # A .hip file is CUDA C++ to nvcc; <hip/...> resolves to the shim.
            args += ["-x", "cu", "-I", ctx.files.shim_hdrs[0].dirname.rsplit("/", 1)[0]]
    else:
        args = [compiler, "-O3", "-std=c++17", "-fPIC", "-Werror", "-Wno-unused-command-line-argument"]
        args += ["--offload-arch=" + a for a in archs]
    return archs, args

def _gpu_objects_impl(ctx):
    target = ctx.attr.target
    nvcc = target == "cuda" or ctx.attr.hip_on_cuda
    archs, compile_args = _compile_args(ctx, target, ctx.attr.hip_on_cuda)
    manifest = ctx.actions.declare_file(ctx.label.name + "/compiled.txt")
    if not compile_args:
        ctx.actions.write(manifest, "compiler: absent\n")
        return [DefaultInfo(files = depset([])), OutputGroupInfo(logs = depset([manifest]))]
    compiler = compile_args[0]
    objects, logs = [], []
    for src in ctx.files.srcs:
        if not src.basename.endswith(_EXTENSIONS[target]):
            continue
        obj = ctx.actions.declare_file(ctx.label.name + "/" + src.basename + ".pic.o")
        log = ctx.actions.declare_file(ctx.label.name + "/" + src.basename + ".log")
        args = compile_args + ["-I", src.dirname, "-c", src.path, "-o", obj.path]
        ctx.actions.run_shell(
            outputs = [obj, log],
            inputs = [src] + ctx.files.hdrs + ctx.files.shim_hdrs,
            command = '"$@" > "{log}" 2>&1 || {{ cat "{log}" >&2; exit 1; }}'.format(log = log.path),
            arguments = args,
            mnemonic = "Nvcc" if nvcc else "Hipcc",
            progress_message = "Compiling %s for %s" % (src.basename, ",".join(archs)),
            use_default_shell_env = True,
        )
        objects.append(obj)
        logs.append(log)
    ctx.actions.write(manifest, "compiler: %s\narchs: %s\n" % (compiler, " ".join(archs)))
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
        "shim_hdrs": attr.label_list(allow_files = True, default = ["//runtime/hip_on_cuda:hip/hip_runtime.h", "//runtime/hip_on_cuda:hip/hip_runtime_api.h", "//runtime/hip_on_cuda:hip/hip_fp16.h"]),
    },
)

def _gpu_archive_impl(ctx):
    target = ctx.attr.target
    archs, compile_args = _compile_args(ctx, target, False)
    if not compile_args:
        fail("xent: --config=%s needs %s, which this host does not have (CUDA_PATH / ROCM_PATH say where it is)" %
             ("cuda" if target == "cuda" else "rocm", "nvcc" if target == "cuda" else "hipcc"))
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
        inputs = ctx.files.srcs,
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
    },
)
