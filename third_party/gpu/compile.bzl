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

def _gpu_objects_impl(ctx):
    target = ctx.attr.target
    nvcc = target == "cuda" or ctx.attr.hip_on_cuda
    compiler = NVCC if nvcc else HIPCC
    arch_kind = "hip_on_cuda" if ctx.attr.hip_on_cuda else target
    archs = ctx.var.get("xent_%s_archs" % arch_kind, _DEFAULT_ARCHS[arch_kind]).split(",")
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
        if nvcc:
            args = [compiler, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-Werror", "all-warnings"]
            args += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
            if target == "hip":
                # A .hip file is CUDA C++ to nvcc; <hip/...> resolves to the shim.
                args += ["-x", "cu", "-I", ctx.files.shim_hdrs[0].dirname.rsplit("/", 1)[0]]
        else:
            args = [compiler, "-O3", "-std=c++17", "-fPIC", "-Werror", "-Wno-unused-command-line-argument"]
            args += ["--offload-arch=" + a for a in archs]
        args += ["-I", src.dirname, "-c", src.path, "-o", obj.path]
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
