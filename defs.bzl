"""What a downstream Bazel workspace loads from xent (docs/INTEGRATION.md,
"Using xent in your project"): xent_library, libxent with the kernels of its own specs."""

load("//gen:library.bzl", _xent_library = "xent_library")

xent_library = _xent_library
