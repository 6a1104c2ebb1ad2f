"""What a downstream WORKSPACE calls after bringing xent in (docs/INTEGRATION.md, "Using
xent in your project"):

    local_repository(name = "xent", path = "/path/to/xent")
    load("@xent//:deps.bzl", "xent_dependencies")
    xent_dependencies()

It declares the repositories xent's own BUILD files name: Lua 5.4 and
libclang 19 from the host (the generator embeds them), the CUDA toolkit and
ROCm wherever the host has them (third_party/gpu/configure.bzl), PyTorch's
C++ headers for the package's extension (third_party/torch/configure.bzl,
read only by //python), and xent's own spec list. With stand_ins = True (the default) it also points
rules_cc, rules_java and remote_coverage_tools at xent's offline stand-ins,
which Debian's Bazel 4.2.3 needs without a network; a workspace that fetches
or declares them itself keeps its own (a repository declared before this
call is left alone)."""

load("//gen:variants.bzl", "xent_variants")
load("//third_party/gpu:configure.bzl", "gpu_configure")
load("//third_party/torch:configure.bzl", "torch_configure")

def _stand_in_impl(ctx):
    # third_party/<dir> holds a WORKSPACE of its own, so it is no package of
    # @xent: find it from xent's root and link its files in.
    root = ctx.path(Label("//:WORKSPACE")).dirname
    folder = root.get_child("third_party").get_child(ctx.attr.folder)
    for entry in folder.readdir():
        ctx.symlink(entry, entry.basename)

_stand_in = repository_rule(
    implementation = _stand_in_impl,
    attrs = {"folder": attr.string(mandatory = True)},
    local = True,
)

def xent_dependencies(stand_ins = True):
    """Declares the repositories xent needs that are not declared yet."""
    existing = native.existing_rules()
    if stand_ins:
        for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
            if name not in existing:
                _stand_in(name = name, folder = name)
    if "lua" not in existing:
        native.new_local_repository(
            name = "lua",
            build_file = str(Label("//third_party/lua:lua.BUILD")),
            path = "/usr",
        )
    if "libclang" not in existing:
        native.new_local_repository(
            name = "libclang",
            build_file = str(Label("//third_party/libclang:libclang.BUILD")),
            path = "/usr/lib/llvm-19",
        )
    if "local_gpu" not in existing:
        gpu_configure(name = "local_gpu")
    if "local_torch" not in existing:
        torch_configure(name = "local_torch")
    if "xent_variants" not in existing:
        xent_variants(
            name = "xent_variants",
            specs = [
                Label("//specs:cross_entropy.lua"),
                Label("//specs:linear_cross_entropy.lua"),
                Label("//specs:softmax.lua"),
            ],
        )
