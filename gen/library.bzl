"""xent_library: libxent with the kernels of your own specs, for a Bazel
workspace that brings xent in as a repository (defs.bzl re-exports it;
docs/INTEGRATION.md, "Using xent in your project").

    load("@xent//:defs.bzl", "xent_library")
    xent_library(name = "my_xent", specs = ["my_losses.lua"], targets = ["cuda", "hip"])

gives a cc_library with <xent.h>, the runtime, and the dispatch tables of
exactly the variants of those specs: always the cpu backend (the kernels
emulated, runtime/emu), and the CUDA / HIP backends when --config=cuda /
--config=rocm select them and the target is in `targets`.

The variant keys of a spec are known only once it has run, so unlike this
repository's own build (gen/variants.bzl lists them at loading time) each
rendering is one directory (a tree artifact): xentgen --check writes the
kernels into it, the emulator's wrappers are written beside it, and Bazel's
C++ rules compile every file of the wrapper directory."""

load("//third_party/gpu:compile.bzl", "gpu_archive")

_EXTENSIONS = {"cuda": ".cu", "hip": ".hip"}

def _xent_render_impl(ctx):
    target = ctx.attr.target
    ext = _EXTENSIONS[target]
    src = ctx.actions.declare_directory(ctx.label.name + "/src")
    emu = ctx.actions.declare_directory(ctx.label.name + "/emu")
    dispatch = ctx.actions.declare_file(ctx.label.name + "/dispatch.c")
    dispatch_emu = ctx.actions.declare_file(ctx.label.name + "/dispatch_emu.c")

    args = ["--check", "--target", target, "--out", src.path]
    args += ["--templates", ctx.files._templates[0].dirname]
    args += ["--headers", ctx.file._device_header.dirname]
    args += ["--check-cuda-headers", ctx.files._check_cuda_headers[0].dirname]
    if target == "hip":
        # Also as built for NVIDIA GPUs, over the HIP-on-CUDA headers (their
        # root, above hip/).
        args += ["--check-hip-on-cuda", ctx.files._hip_on_cuda_headers[0].dirname.rpartition("/")[0]]
    if ctx.attr.kernels:
        args += ["--kernels", ",".join(ctx.attr.kernels)]
    if ctx.attr.exclude:
        args += ["--exclude", ",".join(ctx.attr.exclude)]
    for spec in ctx.files.specs:
        args += ["--spec", spec.path]

    # The emulator compiles each kernel as host C++ from a two-line wrapper
    # (as runtime/emu/BUILD does): includes name the file from the execution
    # root, which every C++ compile has on its quote path.
    script = """set -e
xentgen="$1"; src="$2"; emu="$3"; shift 3
"$xentgen" "$@"
found=0
for kernel in "$src"/*{ext}; do
  [ -e "$kernel" ] || continue
  found=1
  printf '// The generated kernel, compiled for the emulator.\\n#include "%s"\\n' "$kernel" \\
    > "$emu/$(basename "$kernel" {ext}).cc"
done
if [ $found = 0 ]; then
  echo "xent_library: the specs gave no {target} kernels (check --kernels / --exclude)" >&2
  exit 1
fi
""".format(ext = ext, target = target)
    ctx.actions.run_shell(
        outputs = [src, emu],
        inputs = ctx.files.specs + ctx.files._templates + ctx.files._device_headers + ctx.files._check_cuda_headers +
                 ctx.files._hip_on_cuda_headers,
        tools = [ctx.executable._xentgen],
        command = script,
        arguments = [ctx.executable._xentgen.path, src.path, emu.path] + args,
        mnemonic = "XentGen",
        progress_message = "Generating the %s kernels of %s" % (target, ctx.label),
    )
    table = '#include "%s/xent_dispatch_%s.c"\n' % (src.path, target)
    ctx.actions.write(dispatch, "// The generated dispatch table.\n" + table)
    ctx.actions.write(dispatch_emu, "// The generated dispatch table, naming the emulated launchers.\n#define XENT_EMU 1\n" + table)
    return [
        DefaultInfo(files = depset([emu])),
        OutputGroupInfo(
            src = depset([src]),
            dispatch = depset([dispatch]),
            dispatch_emu = depset([dispatch_emu]),
        ),
    ]

_xent_render = rule(
    implementation = _xent_render_impl,
    attrs = {
        "specs": attr.label_list(allow_files = [".lua"], mandatory = True),
        "target": attr.string(mandatory = True, values = ["cuda", "hip"]),
        "kernels": attr.string_list(),
        "exclude": attr.string_list(),
        "_xentgen": attr.label(default = Label("//gen:xentgen"), executable = True, cfg = "exec"),
        "_templates": attr.label(default = Label("//templates")),
        "_device_headers": attr.label(default = Label("//kernels:headers")),
        "_device_header": attr.label(default = Label("//kernels:xent_device.h"), allow_single_file = True),
        "_check_cuda_headers": attr.label(default = Label("//gen:check_cuda_headers")),
        "_hip_on_cuda_headers": attr.label(default = Label("//runtime/hip_on_cuda:headers")),
    },
)

def _empty_table_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".c")
    ctx.actions.write(out, """// No {t} rendering in this library: the cpu backend's {t} table is empty,
// and xent_cpu_emulate(h, XENT_BACKEND_{T}) calls report XENT_ERROR_NOT_GENERATED.
#include "xent_launch.h"

const xent_dispatch_entry xent_{t}_dispatch_emu[1] = {{{{0, 0, 0}}}};
const size_t xent_{t}_dispatch_count_emu = 0;
const xent_dispatch_spec xent_{t}_dispatch_specs_emu[1] = {{{{0, 0}}}};
const char* const xent_{t}_dispatch_axes_emu[1][5] = {{{{0, 0, 0, 0, 0}}}};
""".format(t = ctx.attr.target, T = ctx.attr.target.upper()))
    return [DefaultInfo(files = depset([out]))]

_empty_table = rule(
    implementation = _empty_table_impl,
    attrs = {"target": attr.string(mandatory = True, values = ["cuda", "hip"])},
)

def _key(label):
    # select() takes strings only; "@//..." names the main repository from
    # any other (str(label) would say "//..." there).
    return "@%s//%s:%s" % (label.workspace_name, label.package, label.name)

# Per rendering: the config_setting that turns its GPU backend on, the
# backend, and its stand-in.
_BACKENDS = {
    "cuda": (_key(Label("//runtime:cuda_enabled")), Label("//runtime:backend_cuda"), Label("//runtime:backend_cuda_absent")),
    "hip": (_key(Label("//runtime:rocm_enabled")), Label("//runtime:backend_hip"), Label("//runtime:backend_hip_absent")),
}

_EMU_COPTS = ["-std=gnu++17", "-DXENT_EMU", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"]

def xent_library(name, specs, targets = ["cuda", "hip"], kernels = None, exclude = None, **kwargs):
    """A cc_library `name`: <xent.h> and libxent with the variants of `specs`.

    Args:
      name: the cc_library's name.
      specs: spec files (.lua) of the families to generate, each family once.
      targets: the renderings to generate, "cuda" and/or "hip". Each one's
        kernels run on the cpu backend (emulated), and on its GPU backend
        when built with --config=cuda / --config=rocm.
      kernels: optional shell patterns of the variant keys to keep
        (xentgen --kernels), e.g. ["ce_fwd_*", "ce_bwd_*"].
      exclude: optional shell patterns of variant keys to drop.
      **kwargs: visibility, tags and the like, for the cc_library.
    """
    if not targets or [t for t in targets if t not in _EXTENSIONS]:
        fail("xent_library %s: targets must name \"cuda\" and/or \"hip\", not %s" % (name, targets))
    deps = [Label("//runtime:core")]
    for target in ["cuda", "hip"]:
        prefix = "%s_%s" % (name, target)
        enabled, backend, absent = _BACKENDS[target]
        if target not in targets:
            _empty_table(name = prefix + "_empty_table", target = target)
            native.cc_library(
                name = prefix + "_emu_table",
                srcs = [":%s_empty_table" % prefix],
                alwayslink = 1,
                deps = [Label("//gen:launch_header")],
            )
            deps += [":%s_emu_table" % prefix, absent]
            continue
        _xent_render(name = prefix, specs = specs, target = target, kernels = kernels or [], exclude = exclude or [])
        for group in ["src", "dispatch", "dispatch_emu"]:
            native.filegroup(name = "%s_%s" % (prefix, group), srcs = [":" + prefix], output_group = group)

        # The cpu backend's table and kernels: the rendering emulated.
        native.cc_library(
            name = prefix + "_emu_kernels",
            srcs = [":" + prefix],
            textual_hdrs = [":%s_src" % prefix],
            # Linked whole and statically: Bazel 4 leaves the objects of a
            # generated directory out of a dynamic library (--start-lib).
            alwayslink = 1,
            linkstatic = 1,
            copts = _EMU_COPTS,
            deps = [Label("//kernels:device"), Label("//runtime/emu")],
        )
        native.cc_library(
            name = prefix + "_emu_table",
            srcs = [":%s_dispatch_emu" % prefix],
            textual_hdrs = [":%s_src" % prefix],
            alwayslink = 1,
            deps = [":%s_emu_kernels" % prefix],
        )

        # The GPU backend: the kernels compiled by nvcc / hipcc, only when
        # --config selects it (a plain `bazel build //...` compiles none).
        # "manual": `bazel build //...` reaches the archive only through
        # the select below.
        gpu_archive(name = prefix + "_gpu_kernels", srcs = [":%s_src" % prefix], target = target, tags = ["manual"])
        native.cc_library(
            name = prefix + "_gpu",
            srcs = select({
                enabled: [":%s_dispatch" % prefix, ":%s_gpu_kernels" % prefix],
                "//conditions:default": [],
            }),
            textual_hdrs = [":%s_src" % prefix],
            alwayslink = 1,
            linkstatic = 1,
            deps = select({
                enabled: [backend],
                "//conditions:default": [absent],
            }),
        )
        deps += [":%s_emu_table" % prefix, ":%s_gpu" % prefix]
    native.cc_library(
        name = name,
        deps = deps + [Label("//runtime:xent_header")],
        **kwargs
    )
