"""Reads the AMD GPU code objects inside a HIP object file: the offload
bundle clang writes into its .hip_fatbin section (one code object per gfx
target), each code object's per-kernel metadata (the AMDGPU ELF note's
msgpack map, printed by llvm-readobj --notes) and its disassembly
(llvm-objdump). Used by tests/kernels_compiled_test.py (spills) and
bench/isa_report.py (the CDNA machine-code report).

The metadata fields are LLVM's (AMDGPUUsage, "Code Object V3 to V5
Metadata"): .vgpr_count, .agpr_count, .sgpr_count, .vgpr_spill_count,
.sgpr_spill_count, .private_segment_fixed_size (scratch bytes per lane: a
VGPR spill or a stack object, off chip either way), .group_segment_fixed_size
(LDS bytes per workgroup), .max_flat_workgroup_size."""

import os
import re
import subprocess
import tempfile


def bundle_entries(llvm_bin, obj):
    """The offload bundle's entries: ["hipv4-amdgcn-amd-amdhsa--gfx942",
    "host-x86_64-unknown-linux--", ...]."""
    with tempfile.TemporaryDirectory() as tmp:
        fatbin = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", obj, fatbin], check=True)
        return subprocess.run([os.path.join(llvm_bin, "clang-offload-bundler"), "--list", "--type=o", f"--input={fatbin}"],
                              capture_output=True, text=True, check=True).stdout.split()


def code_object(llvm_bin, obj, arch, out):
    """Writes the code object for gfx target `arch` of a HIP object to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        fatbin = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", obj, fatbin], check=True)
        subprocess.run([os.path.join(llvm_bin, "clang-offload-bundler"), "--unbundle", "--type=o",
                        f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"--input={fatbin}", f"--output={out}"],
                       check=True)


def _value(text):
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text.strip("'\"")


def kernels(llvm_bin, code):
    """{kernel symbol: {field: value}} from a code object's metadata note
    (fields without their leading dot: "vgpr_count", ...)."""
    notes = subprocess.run([os.path.join(llvm_bin, "llvm-readobj"), "--notes", code],
                           capture_output=True, text=True, check=True).stdout
    found, current, in_kernels = {}, None, False
    for line in notes.splitlines():
        if re.match(r"\s*amdhsa\.kernels:", line):
            in_kernels = True
            continue
        if not in_kernels:
            continue
        if re.match(r"\s*amdhsa\.\w+:", line):
            in_kernels = False
            continue
        # A kernel's map starts at "  - .field: value"; its own fields are
        # indented one level (4 spaces); deeper ones (.args) are skipped.
        m = re.match(r"^(\s*)(- )?\.(\w+):\s*(.*)$", line)
        if not m:
            continue
        indent, item, field, value = len(m.group(1)), m.group(2), m.group(3), m.group(4)
        if item and indent == 2:
            current = {}
        elif indent != 4 or current is None:
            continue
        current[field] = _value(value)
        if field == "name":
            found[current["name"]] = current
    return found


def disassemble(llvm_bin, code, arch):
    """llvm-objdump's disassembly of a code object, symbolised."""
    return subprocess.run([os.path.join(llvm_bin, "llvm-objdump"), "-d", f"--mcpu={arch}", "--no-show-raw-insn", code],
                          capture_output=True, text=True, check=True).stdout
