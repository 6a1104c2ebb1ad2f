"""Bazel must know every output file name before it runs xentgen. This
repository rule runs the same spec DSL (gen/lua/dsl.lua) with the host's
lua5.4 when a spec changes, and writes @xent_variants//:variants.bzl with
each spec's variant keys. Bazel re-runs it whenever a spec or the DSL
changes, so editing a spec is all it takes to add a variant.

A spec is untrusted: the DSL runs it in gen/lua/sandbox.lua's sandbox, and
this rule adds what a plain lua5.4 cannot: a cap on its address space
(ulimit -v) and a time limit."""

# The address space (KiB) and wall time (s) lua5.4 gets to list the variants.
_LUA_MEMORY_KIB = 1048576
_LUA_SECONDS = 60

def _xent_variants_impl(ctx):
    lua = ctx.which("lua5.4")
    if not lua:
        fail("xent: lua5.4 is not installed (./bazelw installs it: apt-get install lua5.4)")
    dsl = ctx.path(ctx.attr.dsl)
    ctx.path(ctx.attr.sandbox)  # a dependency: the DSL requires it
    lister = ctx.path(ctx.attr.lister)
    args = ["/bin/sh", "-c", 'ulimit -v %d && exec "$@"' % _LUA_MEMORY_KIB, "lua5.4", lua, lister, dsl]
    workspace = ctx.path(ctx.attr.dsl).dirname.dirname.dirname
    for spec in ctx.attr.specs:
        path = ctx.path(spec)  # also makes the spec a dependency of this repository
        args.append(str(path)[len(str(workspace)) + 1:])
    result = ctx.execute(args, working_directory = str(workspace), timeout = _LUA_SECONDS)
    if result.return_code != 0:
        fail("xent: " + (result.stderr or "listing the variants failed (exit status %d; time limit %d s)" %
                                           (result.return_code, _LUA_SECONDS)))
    ctx.file("variants.bzl", result.stdout)
    ctx.file("BUILD", "exports_files([\"variants.bzl\"])\n")

xent_variants = repository_rule(
    implementation = _xent_variants_impl,
    attrs = {
        "specs": attr.label_list(allow_files = [".lua"]),
        "dsl": attr.label(default = "//gen:lua/dsl.lua"),
        "sandbox": attr.label(default = "//gen:lua/sandbox.lua"),
        "lister": attr.label(default = "//gen:lua/list_variants.lua"),
    },
)
