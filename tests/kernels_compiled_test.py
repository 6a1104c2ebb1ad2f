"""Every generated kernel was compiled for every configured architecture:
nvcc's ptxas report (one line per kernel per SM) for CUDA, or for an
architecture built as PTX alone (compute_100, the tests' build) the PTX's
entry functions, and the offload bundle inside each HIP object (one code
object per gfx target), with no local memory: no ptxas spill or stack frame
(on the machine code: every kernel's where the build has it, the sample's
for every default architecture), and no scratch in any AMD code object's
kernel metadata. Also checks each object defines its variant's
launcher. Prints SKIPPED for a target whose compiler is not installed."""

import glob
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
GEN = os.path.join(RUNFILES, "gen")
sys.path.insert(0, os.path.join(RUNFILES, "bench"))
import amdgpu_code  # noqa: E402
import launch_shapes  # noqa: E402


def manifest(target):
    with open(os.path.join(GEN, target, "manifest.tsv")) as f:
        return [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]


def compiled(target):
    """compiled.txt of gen/<target>_objects: compiler, archs, ptx, and
    "units": each generated file's unit (third_party/gpu/compile.bzl
    compiles the variants of one op and dtype as one file), as the base path
    of the unit's object and log."""
    info = {"units": {}}
    with open(os.path.join(GEN, f"{target}_objects", "compiled.txt")) as f:
        for line in f:
            k, _, v = line.partition(": ")
            if k == "unit":
                unit, *members = v.split()
                for m in members:
                    info["units"][m] = os.path.join(GEN, f"{target}_objects", unit)
            else:
                info[k] = v.strip()
    return info


def ptxas_spills(log):
    """{(function, sm): bytes of local memory} from ptxas -v's report, which
    names each entry function and its architecture, then its properties:
    its stack frame plus its spill stores. Either is local memory, off chip:
    spilled registers, or an array the code indexes at run time (a loop
    over a register array that was not unrolled), which costs as much."""
    spills, current = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(sm_\w+)'", line)
        if m:
            current = (m.group(1), m.group(2))
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and current:
            spills[current] = int(m.group(1)) + int(m.group(2))
    return spills


def embedded(obj):
    """The architectures of the cubins and of the PTX in an nvcc object's
    fat binary (its .nv_fatbin section): ({"sm_80", ...}, {"sm_120"}).

    Read directly, as cuobjdump -lelf -lptx lists it (the toolkit here has no
    cuobjdump): a header (magic 0xBA55ED50, version, header size, size of
    the entries), then entries, each a header (kind 1 = PTX, 2 = ELF; its
    header size; its padded payload size; the architecture at byte 28)
    followed by its payload."""
    with tempfile.TemporaryDirectory() as tmp:
        blob = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, blob], check=True)
        with open(blob, "rb") as f:
            data = f.read()
    cubins, ptx, off = set(), set(), 0
    while off + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, off)
        if magic != 0xBA55ED50:
            raise AssertionError(f"{obj}: not a fat binary at byte {off} (magic {magic:#x})")
        entry, end = off + header, off + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            {1: ptx, 2: cubins}[kind].add(f"sm_{arch}")
            entry += entry_header + payload
        off = end
    return cubins, ptx


def ptx_entries(obj):
    """{"compute_NN": [entry function, ...]} from the PTX in an nvcc object's
    fat binary, which a build of PTX alone stores uncompressed
    (third_party/gpu/compile.bzl): the kernels ptxas would have reported."""
    with tempfile.TemporaryDirectory() as tmp:
        blob = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, blob], check=True)
        with open(blob, "rb") as f:
            data = f.read()
    entries, off = {}, 0
    while off + 16 <= len(data):
        _, _, header, size = struct.unpack_from("<IHHQ", data, off)
        entry, end = off + header, off + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            if kind == 1:
                text = data[entry + entry_header:entry + entry_header + payload]
                if b".version" not in text:
                    raise AssertionError(f"{obj}: the PTX of compute_{arch} is compressed (build it uncompressed)")
                names = re.findall(rb"\.entry (\w+)\(", text)
                entries.setdefault(f"compute_{arch}", []).extend(n.decode() for n in names)
            entry += entry_header + payload
        off = end
    return entries


def hip_scratch(llvm_bin, obj, archs):
    """{(kernel, arch): scratch bytes per lane} of a HIP object's code objects,
    from each kernel's metadata (.private_segment_fixed_size: spilled
    registers or a stack object, in memory off chip either way)."""
    scratch = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in archs:
            code = os.path.join(tmp, arch + ".co")
            amdgpu_code.code_object(llvm_bin, obj, arch, code)
            for name, fields in amdgpu_code.kernels(llvm_bin, code).items():
                scratch[(name, arch)] = fields.get("private_segment_fixed_size", 0)
    return scratch


def hip_kernel_key(name):
    """A mangled HIP kernel name as the test's messages name it:
    _ZL37xent_hip_ce_fwd_bf16_int_reduced_rowsILi1EEv12xent_ce_argsi ->
    ce_fwd_bf16_int_reduced_rows<1>, and a step templated on its variant's
    traits, _ZL14xent_lce_beginI34xent_hip_lce_fwd_bwd_f32_i32_meanEv... ->
    lce_fwd_bwd_f32_i32_mean_begin (xent_ce_totals and the like too)."""
    step = re.search(r"xent_(?:lce|ce)_(\w+?)I\d+xent_hip_(\w+?)E", name)
    if step:
        return f"{step.group(2)}_{step.group(1)}"
    m = re.search(r"xent_hip_(\w+?)(ILi(\d)EE|\d+xent_|$)", name)
    if not m:
        return name
    return m.group(1) + (f"<{m.group(3)}>" if m.group(3) else "")


def defined_symbols(obj):
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


class KernelsCompiled(unittest.TestCase):
    def test_cuda(self):
        info = compiled("cuda")
        if info["compiler"] == "absent":
            print("SKIPPED: nvcc not found (set CUDA_PATH)")
            return
        # Machine code (sm_NN, ptxas's report in the log) or PTX alone
        # (compute_NN, the tests' build: the kernels read from the PTX, and
        # no spills to read, which the sample below checks).
        archs = info["archs"].split()
        sass = [a for a in archs if not a.startswith("compute_")]
        rows = manifest("cuda")
        self.assertGreater(len(rows), 0)
        self.assertEqual(sorted(info["units"]), sorted(file for _, _, _, file, _, _ in rows),
                         "every generated file is compiled in exactly one unit")
        # A unit's kernels per architecture, its ptxas spills and its
        # object's symbols, read once for all of its variants.
        facts = {}
        for key, _, _, file, symbol, _ in rows:
            base = info["units"][file]
            if base not in facts:
                with open(base + ".log") as f:
                    log = f.read()
                kernels = {a: re.findall(r"Compiling entry function '(\w+)' for 'sm_%s'" % a, log) for a in sass}
                kernels.update(ptx_entries(base + ".pic.o") if len(sass) < len(archs) else {})
                facts[base] = (kernels, ptxas_spills(log), defined_symbols(base + ".pic.o"))
            kernels, spills, symbols = facts[base]
            # Instantiations of the row kernel: contiguous (XENT_ROW) and
            # strided class axis (XENT_COLUMN), XENT_ON_CHIP where the
            # spec's tune table has an on_chip shape for the variant, and
            # XENT_TILE where it has a tile shape (hard labels).
            # The rows kernel is the variant's own or one it shares with the
            # variants of the other reduction or label width
            # (cross_entropy.tmpl's guard names it).
            with open(os.path.join(GEN, "cuda", file)) as f:
                text = f.read()
            shapes = 2 + ("XENT_LAUNCH_ROWS_ON_CHIP(" in text) + ("XENT_LAUNCH_ROWS_TILE(" in text)
            rows_name = launch_shapes.rows_kernel(text, "cuda", key)
            if key.startswith("lce_"):
                # The linear cross entropy's steps (kernels/linear_cross_entropy/
                # steps.h), each a template on the variant's traits, which are
                # named for its key; a mean over hard labels sums its divisor
                # in a kernel first.
                steps = ["begin", "bias", "bias_grad", "finish"]
                if "_mean" in key and "_prob_" not in key:
                    steps.append("divisor")
                for arch in archs:
                    entries = kernels.get(arch, [])
                    for step in steps:
                        found = [e for e in entries if re.search(rf"xent_lce_{step}I\d+xent_cuda_{key}E", e)]
                        self.assertEqual(len(found), 1, f"{file}: step {step} for {arch}: {entries}")
            for arch in archs if not key.startswith("lce_") else []:
                rows_kernel = [e for e in kernels.get(arch, []) if rows_name in e]
                self.assertEqual(len(rows_kernel), shapes, f"{file}: expected {shapes} row kernels for {arch}: {rows_kernel}")
            self.assertIn(symbol, symbols, f"{file}'s unit does not define {symbol}")
            mine = {k: v for k, v in spills.items() if re.search(rf"xent_cuda_{key}[_E]", k[0]) or rows_name in k[0]}
            self.assertEqual({arch for _, arch in mine}, {f"sm_{a}" for a in sass}, f"{file}: ptxas's report")
            self.assertFalse({k: v for k, v in mine.items() if v}, f"{file}: local memory (a stack frame or register spills)")

    def test_cuda_default_architectures(self):
        """A sample of variants (gen/BUILD's CUDA_SAMPLE) compiled for the
        default architectures: NVIDIA's current generation (sm_100 for
        B200/GB200, sm_120 for RTX 50) beside sm_80 and sm_90a, a cubin for
        each, and the PTX of the newest for the GPUs after it; no spills on
        any. Every build's objects carry the PTX of their newest
        architecture."""
        info = compiled("cuda_sample")
        if info["compiler"] == "absent":
            print("SKIPPED: nvcc not found (set CUDA_PATH)")
            return
        archs = info["archs"].split()
        for want in ["80", "90a", "100", "120"]:
            self.assertIn(want, archs, f"the default CUDA architectures {archs} lack sm_{want}")
        newest = max(archs, key=lambda a: int(re.sub(r"\D", "", a)))
        self.assertEqual(info["ptx"], newest)
        logs = glob.glob(os.path.join(GEN, "cuda_sample_objects", "*.log"))
        self.assertEqual(len(info["units"]), 6, info["units"])
        self.assertEqual(len(logs), len(set(info["units"].values())), logs)
        for log_path in logs:
            obj = log_path[: -len(".log")] + ".pic.o"
            cubins, ptx = embedded(obj)
            name = os.path.basename(obj)
            # (The fat binary's entry names sm_90a's cubin by its number.)
            self.assertEqual(cubins, {"sm_" + re.sub(r"\D", "", a) for a in archs}, f"{name}: cubins")
            self.assertEqual(ptx, {f"sm_{newest}"}, f"{name}: PTX (cuobjdump names it by its sm)")
            with open(log_path) as f:
                log = f.read()
            for arch in archs:
                self.assertRegex(log, r"Compiling entry function '\w+' for 'sm_%s'" % arch, f"{name}: sm_{arch}")
            spills = ptxas_spills(log)
            self.assertTrue(spills, f"{name}: no kernel in ptxas's report")
            self.assertFalse({k: v for k, v in spills.items() if v}, f"{name}: local memory (a stack frame or register spills)")
        # The full build's objects carry the PTX of their newest architecture
        # (compute_NN: PTX alone).
        full = compiled("cuda")
        obj = full["units"]["ce_fwd_bf16_i64_mean.cu"] + ".pic.o"
        cubins, ptx = embedded(obj)
        self.assertEqual(cubins, {f"sm_{a}" for a in full["archs"].split() if not a.startswith("compute_")})
        self.assertEqual(ptx, {"sm_" + full["ptx"].replace("compute_", "")})

    def hip_tools(self, info):
        llvm_bin = info.get("llvm_bin", "")
        if not os.path.exists(os.path.join(llvm_bin, "clang-offload-bundler")):
            self.fail(f"the HIP compiler {info['compiler']} is present but its clang-offload-bundler is not (llvm_bin: {llvm_bin!r})")
        return llvm_bin

    def test_hip(self):
        info = compiled("hip")
        if info["compiler"] == "absent":
            print("SKIPPED: no HIP compiler found (ROCm's clang, Debian's clang-19 or hipcc; set ROCM_PATH)")
            return
        llvm_bin = self.hip_tools(info)
        archs = info["archs"].split()
        rows = manifest("hip")
        self.assertGreater(len(rows), 0)
        self.assertEqual(sorted(info["units"]), sorted(file for _, _, _, file, _, _ in rows),
                         "every generated file is compiled in exactly one unit")
        listed, symbols, scratch = {}, {}, {}
        for key, _, _, file, symbol, _ in rows:
            obj = info["units"][file] + ".pic.o"
            if obj not in listed:
                listed[obj] = amdgpu_code.bundle_entries(llvm_bin, obj)
                symbols[obj] = defined_symbols(obj)
            for arch in archs:
                self.assertIn(f"hipv4-amdgcn-amd-amdhsa--{arch}", listed[obj], f"{file}: no code object for {arch}")
            self.assertIn(symbol, symbols[obj], f"{file}'s unit does not define {symbol}")
        self.check_scratch(llvm_bin, sorted(listed), archs)

    def check_scratch(self, llvm_bin, objs, archs):
        """No kernel of these HIP objects uses scratch on any of archs."""
        scratch = {}
        for obj in objs:
            scratch.update(hip_scratch(llvm_bin, obj, archs))
        self.assertTrue(scratch, "no kernel in the HIP code objects' metadata")
        spilling = sorted(f"{hip_kernel_key(name)} on {arch}: {size} bytes per lane"
                          for (name, arch), size in scratch.items() if size)
        self.assertFalse(spilling, "HIP kernels with scratch (spilled registers or a stack object)")

    def test_hip_default_architectures(self):
        """The sample of test_cuda_default_architectures in the HIP
        rendering, compiled for the default gfx targets: a code object for
        each, also where a build (the tests') compiles every HIP kernel
        for one."""
        info = compiled("hip_sample")
        if info["compiler"] == "absent":
            print("SKIPPED: no HIP compiler found (ROCm's clang, Debian's clang-19 or hipcc; set ROCM_PATH)")
            return
        llvm_bin = self.hip_tools(info)
        archs = info["archs"].split()
        for want in ["gfx90a", "gfx942"]:
            self.assertIn(want, archs, f"the default HIP architectures {archs} lack {want}")
        self.assertEqual(len(info["units"]), 6, info["units"])
        for obj in sorted({base + ".pic.o" for base in info["units"].values()}):
            listed = amdgpu_code.bundle_entries(llvm_bin, obj)
            for arch in archs:
                self.assertIn(f"hipv4-amdgcn-amd-amdhsa--{arch}", listed, f"{os.path.basename(obj)}: no code object for {arch}")
        self.check_scratch(llvm_bin, sorted({base + ".pic.o" for base in info["units"].values()}), archs)


if __name__ == "__main__":
    unittest.main(verbosity=1)
