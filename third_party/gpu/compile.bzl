"""gpu_objects: compiles generated .cu files with nvcc or .hip files with
hipcc, one action per file (so an edited spec recompiles only the files whose
text changed). Each object comes with the compiler's log: ptxas's per-kernel,
per-arch report for CUDA, which tests/kernels_compiled_test.py reads.

Architectures: --define=xent_cuda_archs=80,90 (default) and
--define=xent_hip_archs=gfx90a,gfx940 (default)."""

load("@local_gpu//:defs.bzl", "HIPCC", "NVCC")

_DEFAULT_ARCHS = {
    "cuda": "80,90",
    "hip": "gfx90a,gfx940",
}

_EXTENSIONS = {
    "cuda": ".cu",
    "hip": ".hip",
}

def _gpu_objects_impl(ctx):
    target = ctx.attr.target
    compiler = NVCC if target == "cuda" else HIPCC
    archs = ctx.var.get("xent_%s_archs" % target, _DEFAULT_ARCHS[target]).split(",")
    manifest = ctx.actions.declare_file(ctx.label.name + "/compiled.txt")
    if not compiler:
        ctx.actions.write(manifest, "compiler: absent\n")
        return [DefaultInfo(files = depset([])), OutputGroupInfo(logs = depset([manifest]))]
    objects, logs = [], []
    for src in ctx.files.srcs:
        if not src.basename.endswith(_EXTENSIONS[target]):
            continue
        obj = ctx.actions.declare_file(ctx.label.name + "/" + src.basename + ".pic.o")
        log = ctx.actions.declare_file(ctx.label.name + "/" + src.basename + ".log")
        if target == "cuda":
            args = [compiler, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-Werror", "all-warnings"]
            args += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
        else:
            args = [compiler, "-O3", "-std=c++17", "-fPIC", "-Werror", "-Wno-unused-command-line-argument"]
            args += ["--offload-arch=" + a for a in archs]
        args += ["-I", src.dirname, "-c", src.path, "-o", obj.path]
        ctx.actions.run_shell(
            outputs = [obj, log],
            inputs = [src] + ctx.files.hdrs,
            command = '"$@" > "{log}" 2>&1 || {{ cat "{log}" >&2; exit 1; }}'.format(log = log.path),
            arguments = args,
            mnemonic = "Nvcc" if target == "cuda" else "Hipcc",
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
    },
)
