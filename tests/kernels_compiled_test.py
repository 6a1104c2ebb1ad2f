"""Every generated kernel was compiled for every configured architecture:
nvcc's ptxas report (one line per kernel per SM) for CUDA, and the offload
bundle inside each HIP object (one entry per gfx target). Also checks each
object defines its variant's launcher. Prints SKIPPED for a target whose
compiler is not installed."""

import glob
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "xent")
GEN = os.path.join(RUNFILES, "gen")


def manifest(target):
    with open(os.path.join(GEN, target, "manifest.tsv")) as f:
        return [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]


def compiled(target):
    info = {}
    with open(os.path.join(GEN, f"{target}_objects", "compiled.txt")) as f:
        for line in f:
            k, _, v = line.partition(": ")
            info[k] = v.strip()
    return info


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


def defined_symbols(obj):
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


class KernelsCompiled(unittest.TestCase):
    def test_cuda(self):
        info = compiled("cuda")
        if info["compiler"] == "absent":
            print("SKIPPED: nvcc not found (set CUDA_PATH)")
            return
        archs = info["archs"].split()
        rows = manifest("cuda")
        self.assertGreater(len(rows), 0)
        for key, _, _, file, symbol, _ in rows:
            base = os.path.join(GEN, "cuda_objects", file)
            with open(base + ".log") as f:
                log = f.read()
            # Instantiations of the row kernel: contiguous (XENT_ROW) and
            # strided class axis (XENT_COLUMN), and XENT_ON_CHIP where the
            # spec's tune table has an on_chip shape for the variant.
            with open(os.path.join(GEN, "cuda", file)) as f:
                shapes = 3 if "XENT_LAUNCH_ROWS_ON_CHIP(" in f.read() else 2
            if key.startswith("lce_"):
                # The linear cross entropy's steps (linear_cross_entropy.tmpl);
                # a mean over hard labels sums its divisor in a kernel first.
                steps = ["begin", "bias", "bias_grad", "finish"]
                if "_mean" in key and "_prob_" not in key:
                    steps.append("divisor")
                for arch in archs:
                    entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_%s'" % arch, log)
                    for step in steps:
                        found = [e for e in entries if re.search(rf"xent_cuda_{key}_{step}\d", e)]
                        self.assertEqual(len(found), 1, f"{file}: step {step} for sm_{arch}: {entries}")
            for arch in archs if not key.startswith("lce_") else []:
                entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_%s'" % arch, log)
                rows_kernel = [e for e in entries if f"xent_cuda_{key}_rows" in e]
                self.assertEqual(len(rows_kernel), shapes, f"{file}: expected {shapes} row kernels for sm_{arch}: {rows_kernel}")
            self.assertIn(symbol, defined_symbols(base + ".pic.o"), f"{file} does not define {symbol}")
            spills = re.findall(r"(\d+) bytes spill stores", log)
            self.assertTrue(all(s == "0" for s in spills), f"{file}: register spills: {spills}")

    def test_cuda_default_architectures(self):
        """A sample of variants (gen/BUILD's CUDA_SAMPLE) compiled for the
        default architectures: NVIDIA's current generation (sm_100 for
        B200/GB200, sm_120 for RTX 50) beside sm_80 and sm_90, a cubin for
        each, and the PTX of the newest for the GPUs after it; no spills on
        any. Every build's objects carry the PTX of their newest
        architecture."""
        info = compiled("cuda_sample")
        if info["compiler"] == "absent":
            print("SKIPPED: nvcc not found (set CUDA_PATH)")
            return
        archs = info["archs"].split()
        for want in ["80", "90", "100", "120"]:
            self.assertIn(want, archs, f"the default CUDA architectures {archs} lack sm_{want}")
        newest = max(archs, key=lambda a: int(re.sub(r"\D", "", a)))
        self.assertEqual(info["ptx"], newest)
        logs = glob.glob(os.path.join(GEN, "cuda_sample_objects", "*.log"))
        self.assertEqual(len(logs), 6, logs)
        for log_path in logs:
            obj = log_path[: -len(".log")] + ".pic.o"
            cubins, ptx = embedded(obj)
            name = os.path.basename(obj)
            self.assertEqual(cubins, {f"sm_{a}" for a in archs}, f"{name}: cubins")
            self.assertEqual(ptx, {f"sm_{newest}"}, f"{name}: PTX (cuobjdump names it by its sm)")
            with open(log_path) as f:
                log = f.read()
            for arch in archs:
                self.assertRegex(log, r"Compiling entry function '\w+' for 'sm_%s'" % arch, f"{name}: sm_{arch}")
            spills = re.findall(r"(\d+) bytes spill stores", log)
            self.assertTrue(spills and all(s == "0" for s in spills), f"{name}: register spills: {spills}")
        # The full build's objects carry the PTX of their newest architecture.
        full = compiled("cuda")
        obj = os.path.join(GEN, "cuda_objects", "ce_fwd_bf16_i64_mean.cu.pic.o")
        cubins, ptx = embedded(obj)
        self.assertEqual(cubins, {f"sm_{a}" for a in full["archs"].split()})
        self.assertEqual(ptx, {f"sm_{full['ptx']}"})

    def test_hip(self):
        info = compiled("hip")
        if info["compiler"] == "absent":
            print("SKIPPED: hipcc not found (set ROCM_PATH)")
            return
        bundler = shutil.which("clang-offload-bundler-15") or shutil.which("clang-offload-bundler")
        if not bundler:
            self.fail("hipcc is present but clang-offload-bundler is not")
        archs = info["archs"].split()
        rows = manifest("hip")
        self.assertGreater(len(rows), 0)
        with tempfile.TemporaryDirectory() as tmp:
            for key, _, _, file, symbol, _ in rows:
                obj = os.path.join(GEN, "hip_objects", file + ".pic.o")
                fatbin = os.path.join(tmp, "fatbin")
                subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", obj, fatbin], check=True)
                listed = subprocess.run([bundler, "--list", "--type=o", f"--input={fatbin}"], capture_output=True,
                                        text=True, check=True).stdout.split()
                for arch in archs:
                    self.assertIn(f"hipv4-amdgcn-amd-amdhsa--{arch}", listed, f"{file}: no code object for {arch}")
                self.assertIn(symbol, defined_symbols(obj), f"{file} does not define {symbol}")


if __name__ == "__main__":
    unittest.main(verbosity=1)
