#!/usr/bin/env python3
"""A static performance report of the generated CUDA kernels, read from their
machine code for Hopper (sm_90, H100) and datacenter Blackwell (sm_100,
B200/GB200): no GPU needed.

    ./bazelw run --define=xent_cuda_archs=90,100 //bench:sass_report   # prints it
    ./bazelw run --define=xent_cuda_archs=90,100 //bench:sass_report -- \
        --out bench/results/sass_report.md

(The tests' build compiles the kernels to PTX alone: the --define asks for
the machine code this reads.)

For each main kernel and the launch shape its tune table picks for a case:
registers and spills (ptxas's report), resident warps per SM (from the
registers, the block and the shared memory, against an H100's limits), the
16-byte loads each thread keeps in flight in the main loop, the bytes that
makes in flight per SM, and the instructions the main loop spends per
16-byte vector, with the issue rate that asks of an SM at 3 TB/s. The
strided shape (class axis not last) has two paths: 16-byte loads staged
through shared memory (xent_column_walk, where the logits are 16-byte
aligned and the inner size a multiple of a vector) and one element per load
(elsewhere); the report follows the first, the one of its cases.

How the machine code is read (cuobjdump -sass, which runs nvdisasm: the
toolkit's, or PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm): a
loop is a backward branch. The main loop of a pass is the innermost loop
holding 16-byte loads (global, or shared for the on-chip kernels, whose
both passes read the row from shared memory; their bytes in flight are the
bulk copy's, UBLKCP: a block's next slice, half its shared memory). Its path is the shortest from the loop head to its
backward branch, where a conditional branch whose target is inside the loop
may be taken if it skips no 16-byte load or store (in the strided shape, no
shared-memory access of any width: its full steps read and write the staged
elements one by one): in these kernels the instructions off that path are
the run-time options' (soft cap, smoothing, weights) and slow paths' (a
division's FCHK fix-up), laid out before or after the common code as ptxas
chose, so the path is that of a call with the options off. In the
strided shape the path is instead the one with the most 16-byte accesses,
then the most staged accesses (any branch inside the loop may be taken),
then the shortest (a step at an address that is not 16-byte aligned moves
its staged elements one at a time: more accesses, on the rare path): a step is
full (its classes unrolled) or partial (the row's last classes, in a loop
of its own), ptxas may lay the partial one out first, and only the full
step holds all of a step's staged accesses; of loops with as many loads,
the one whose path holds the most staged accesses, so that the optional
outputs' walk, which takes a step's classes in a loop of its own
(kCompact), is not the one measured. Predicated
instructions on it count: they issue whatever their predicate. "Loads in flight" counts the
16-byte loads on the path before the first instruction that reads a
register one of them writes.

The GPUs' figures (GPUS below, each with where it comes from): SMs, the SM
clock under load, the memory bandwidth the report holds the kernels to (90%
of the peak), the memory latency Little's law is taken at, and the per-SM
limits (64K registers, 64 warps, 32 blocks and 228 KB of shared memory on
both, four schedulers each issuing one warp instruction per clock). The
targets follow from them: loads in flight per SM >= 2 x bandwidth x latency
/ SMs (a factor of 2 to spare), and at most 3 of the 4 warp instructions an
SM can issue per clock spent at that bandwidth."""

import argparse
import datetime
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The device library (kernels/), from the runfiles under bazel run or the
# checkout.
LIBRARY = os.path.join(os.path.join(os.environ["RUNFILES_DIR"], "xent") if os.environ.get("RUNFILES_DIR")
                       else os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
import launch_shapes  # noqa: E402

# Per architecture, the GPU its rows are for. Per-SM limits: the CUDA C++
# Programming Guide's table per compute capability (9.0 and 10.0 alike); the
# Blackwell Tuning Guide (docs.nvidia.com/cuda/blackwell-tuning-guide, 1.4.1.1
# "Occupancy") says they are Hopper's.
GPUS = {
    "sm_90": dict(
        name="H100 SXM", sms=132, clock=1.755e9, bandwidth=3.0e12, latency=700e-9,
        regs=65536, warps=64, blocks=32, smem=228 * 1024,
        source="132 SMs and 3.35 TB/s of HBM3 (NVIDIA H100 datasheet), held to 3.0 TB/s; 1.755 GHz, the "
               "SM clock under load (the boost clock is 1.98 GHz); ~700 ns of memory latency under load"),
    "sm_100": dict(
        name="B200", sms=148, clock=1.9e9, bandwidth=7.2e12, latency=700e-9,
        regs=65536, warps=64, blocks=32, smem=228 * 1024,
        source="148 SMs (the driver's multiProcessorCount for a B200, compute capability 10.0) and 8 TB/s of "
               "HBM3e (NVIDIA DGX B200 datasheet: 64 TB/s for eight GPUs), held to 7.2 TB/s; 1.9 GHz, an "
               "assumed clock under load below the 1.965 GHz boost clock, as the H100's is below its own; "
               "the H100's ~700 ns of latency, which HBM3e does not shorten"),
}
SHAPES = {"ROW": 0, "COLUMN": 1, "ON_CHIP": 2, "TILE": 3}

# (variant, row-kernel instantiation, what it is, classes C of the case,
# passes over the row, and the row's bytes moved per byte of logits: 1 for a
# read, 2 for a read and a write, 3 for two reads and a write)
CASES = [
    ("ce_fwd_bf16_i64_mean", "ROW", "forward, bf16", 131072, 1, 1),
    ("ce_fwd_f16_i64_mean", "ROW", "forward, f16", 131072, 1, 1),
    ("ce_fwd_f32_i64_mean", "ROW", "forward, f32", 131072, 1, 1),
    ("ce_fwd_bf16_i64_mean", "ROW", "forward, bf16", 1000, 1, 1),
    # The forward's second copy of its walk, for a call with a temperature
    # or per-token outputs (entropy, argmax): z scaled, T and the argmax
    # tracked (templates/cross_entropy.tmpl; "stats" picks that copy).
    ("ce_fwd_bf16_i64_mean", "ROW", "forward, bf16, temperature + entropy + argmax", 131072, 1, 1, "stats"),
    ("ce_fwd_bwd_bf16_i64_mean", "ROW", "fused fwd+bwd, bf16", 8192, 2, 3),
    ("ce_fwd_bwd_bf16_i64_mean", "ON_CHIP", "fused fwd+bwd, bf16, on chip", 131072, 2, 2),
    ("ce_bwd_bf16_i64_none", "ROW", "backward from lse, bf16", 131072, 1, 2),
    ("ce_bwd_f32_i64_none", "ROW", "backward from lse, f32", 131072, 1, 2),
    ("sm_fwd_bf16_softmax", "ROW", "softmax, bf16", 8192, 2, 3),
    ("sm_fwd_bf16_softmax", "ON_CHIP", "softmax, bf16, on chip", 131072, 2, 2),
    ("sm_bwd_bf16_softmax", "ROW", "softmax backward, bf16 (y and dy)", 131072, 2, 5),
    ("ce_fwd_bf16_i64_mean", "COLUMN", "forward, bf16, class axis strided", 21, 1, 1),
    ("ce_fwd_bwd_bf16_i64_mean", "COLUMN", "fused fwd+bwd, bf16, class axis strided", 21, 2, 3),
    ("ce_bwd_bf16_i64_none", "COLUMN", "backward from lse, bf16, class axis strided", 21, 1, 2),
    # Short rows staged a tile at a time (XENT_TILE): the tile's copy in and
    # (a gradient's) copy out are the 16-byte loops; each row's walk from
    # shared memory is per-row work the model does not count (TILE_NOTE).
    ("ce_fwd_bf16_i64_mean", "TILE", "forward, bf16, short rows staged", 10, 1, 1),
    ("ce_fwd_bf16_i64_mean", "TILE", "forward, bf16, short rows staged", 1000, 1, 1),
    ("ce_fwd_bwd_bf16_i64_mean", "TILE", "fused fwd+bwd, bf16, short rows staged", 10, 2, 2),
    ("ce_bwd_bf16_i64_none", "TILE", "backward from lse, bf16, short rows staged", 10, 2, 2),
]

# What a tile row's verdict leaves out, in both reports.
TILE_NOTE = "copies only: the rows' walk from shared memory not modelled"


def tile_bytes(library, target):
    """XENT_TILE_BYTES of a target ("cuda" or "hip") in kernels/device/rows.h."""
    header = open(os.path.join(library or LIBRARY, "device", "rows.h")).read()
    hip, other = re.search(r"#if defined\(XENT_TARGET_HIP\)\s*#define XENT_TILE_BYTES (\d+).*?#else\s*"
                           r"#define XENT_TILE_BYTES (\d+)", header, re.S).groups()
    return int(hip if target == "hip" else other)

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def find_tool(name):
    for path in (os.environ.get("XENT_" + name.upper()), shutil.which(name),
                 os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", name)):
        if path and os.path.exists(path):
            return path
    try:  # PyPI's nvidia-cuda-cuobjdump
        import nvidia
        for root in nvidia.__path__:
            for hit in glob.glob(os.path.join(root, "*", "bin", name)):
                return hit
    except ImportError:
        pass
    sys.exit(f"sass_report: {name} not found (PATH, $XENT_{name.upper()}, $CUDA_PATH/bin, or "
             f"`pip install nvidia-cuda-{name}`)")


def parse_sass(text):
    """[(address, predicate, opcode, operands)] of one function."""
    out = []
    for line in text.splitlines():
        m = INSN.search(line)
        if m:
            out.append((int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return out


def branch_target(op, operands):
    if op != "BRA":
        return None
    m = re.search(r"0x([0-9a-f]+)", operands)
    return int(m.group(1), 16) if m else None


def is_wide_access(op):
    """A 16-byte load or store, global or shared: the work of a row pass."""
    return op[:3] in ("LDG", "LDS", "STG", "STS") and ".128" in op


def is_pass_load(op):
    """A pass's 16-byte loads: from memory, or from shared memory (the
    on-chip kernels' second pass)."""
    return (op.startswith("LDG") or op.startswith("LDS")) and ".128" in op


def is_column_load(op):
    """The strided shape's 16-byte loads from memory (its staged path; the
    loads of one element are its other path's, and the labels' and
    weights')."""
    return op.startswith("LDG") and ".128" in op


def load_bytes(op):
    """The bytes one thread's load moves, from its width suffix (32-bit
    when it names none)."""
    for suffix, n in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1)):
        if suffix in op:
            return n
    return 4


def loops(insns):
    """(head index, backward-branch index) of every loop, innermost first."""
    index = {a: i for i, (a, _, _, _) in enumerate(insns)}
    found = []
    for i, (addr, _, op, operands) in enumerate(insns):
        t = branch_target(op, operands)
        if t is not None and t <= addr and t in index:
            found.append((index[t], i))
    return sorted(found, key=lambda hl: hl[1] - hl[0])


def is_staged_access(op):
    """The strided shape's work: a 16-byte access, or any shared-memory one."""
    return is_wide_access(op) or op[:3] in ("LDS", "STS")


def walk_path(insns, head, tail, wide=is_wide_access, fullest=False):
    """The instructions of one iteration on the shortest path from the loop
    head to its backward branch, where a conditional branch inside the loop
    may be taken only if it skips no `wide` access (see the module's
    docstring). Shortest, not "every branch taken": ptxas lays an option's
    code out either way (sm_90 branches over the soft cap's tanh, sm_100
    branches into it), and the path of a call with the options off is the
    one without their code. fullest (the strided shape): of the paths, those
    with the most `wide` accesses first, then the shortest. A strided step
    is full (its classes unrolled) or partial (the row's last classes, a
    loop of its own inside the step's), and the shortest path can run
    through the partial one, which ptxas may lay out first; the full step
    holds every staged access of the step. An inner loop's body counts
    once."""
    index = {a: i for i, (a, _, _, _) in enumerate(insns)}
    inf = float("inf")
    # cost[i], nxt[i]: instructions from i to the tail on the shortest path,
    # and the instruction after i on it. Branches inside the loop go
    # forward (the backward one is the tail), so one sweep from the tail.
    # A cost is (-16-byte accesses, -wide accesses, instructions), compared
    # in that order; the first two are 0 unless fullest. 16-byte ones first:
    # a step whose address is not 16-byte aligned moves its staged elements
    # one at a time (more shared-memory accesses, rarer), and the common
    # step moves whole vectors.
    def one(i):
        op = insns[i][2]
        return (-1 if fullest and is_wide_access(op) else 0, -1 if fullest and wide(op) else 0, 1)

    worst = (inf, inf, inf)
    cost, nxt = {tail: one(tail)}, {tail: None}
    for i in range(tail - 1, head - 1, -1):
        addr, pred, op, operands = insns[i]
        if op in ("EXIT", "RET") and not pred:
            cost[i], nxt[i] = worst, None
            continue
        t = branch_target(op, operands)
        ti = index.get(t) if t is not None else None
        inside = ti is not None and i < ti <= tail
        options = []
        if not (op == "BRA" and not pred):
            options.append(i + 1)  # falls through
        if inside and (fullest or not pred or not any(wide(o) for _, _, o, _ in insns[i + 1:ti])):
            options.append(ti)
        best = min(options, key=lambda j: cost[j], default=None)
        if best is None or cost[best] == worst:
            cost[i], nxt[i] = worst, None
        else:
            cost[i], nxt[i] = tuple(a + b for a, b in zip(one(i), cost[best])), best
    path, i = [], head
    while i is not None and cost[i] != worst:
        path.append(insns[i])
        i = nxt[i]
    return path


def registers_of(operand_text):
    return [int(r) for r in re.findall(r"\bR(\d+)\b", operand_text)]


def pass_bytes(insns, is_load):
    """The bytes of a pass's loads (is_load) in insns. Where the pass copies
    from memory straight into shared memory (LDGSTS: cp.async, the on-chip
    kernels' first walk), those copies alone: its shared-memory loads read
    the same bytes back."""
    ops = [op for _, _, op, _ in insns]
    if any(op.startswith("LDGSTS") for op in ops):
        return sum(load_bytes(op) for op in ops if op.startswith("LDGSTS"))
    return sum(load_bytes(op) for op in ops if is_load(op))


def loads_in_flight(path, is_load):
    """The bytes of the loads (is_load) issued before any of their registers
    is read, per thread. A copy to shared memory (LDGSTS) holds no register:
    it is in flight until a DEPBAR waits for the copies."""
    pending = set()
    count = 0
    for _, _, op, operands in path:
        regs = registers_of(operands)
        if op.startswith("LDGSTS"):
            count += load_bytes(op)
            continue
        if op.startswith("DEPBAR"):
            break
        if is_load(op) and op.startswith("LDG"):
            dest = regs[0] if regs else None
            srcs = regs[1:]
            if pending & set(srcs):
                break
            count += load_bytes(op)
            if dest is not None:
                pending |= set(range(dest, dest + max(1, load_bytes(op) // 4)))
            continue
        # The first register operand of most instructions is written, the
        # rest read; a store reads all of them.
        reads = regs if op.startswith("ST") else regs[1:]
        if pending & set(reads) or (regs and regs[0] in pending and not op.startswith("ST") and op != "MOV"):
            break
    return count


def main_passes(insns, passes, is_load, wide, walk="plain", writes_result=False, fullest=False, on_chip=False):
    """The main loop of each pass: innermost loops with loads (is_load), the
    `passes` with the most, in program order. walk "stats": of loops with as
    many loads, the longest (a kernel's copy of its walk for the per-token
    statistics), not the shortest. writes_result: the kernel's last pass
    writes its result (global stores), the passes before it only
    read: a loop of each kind is taken for them, so that a walk that only
    reads (the statistics' walks, which the backward takes for the entropy's
    gradient) never stands for one that writes, nor two copies of one pass
    for two passes. on_chip: a loop of 16-byte shared-memory loads is a pass
    too (the on-chip shape walks its row from shared memory both times)."""
    chosen = []
    for head, tail in loops(insns):
        body = insns[head:tail + 1]
        vec = pass_bytes(body, is_load)
        # A pass reads the row from memory or writes its result there: a
        # loop of shared-memory loads alone is a reduction's (the argmax's
        # int64 candidates, read 16 bytes at a time), not a pass.
        passes_ops = ("LDG", "STG", "LDS") if on_chip else ("LDG", "STG")
        if vec == 0 or not any(op[:3] in passes_ops and ".128" in op for _, _, op, _ in body):
            continue
        if any(head <= h and t <= tail for h, t, _ in chosen):
            continue  # an outer loop of one already chosen
        chosen.append((head, tail, vec))
    # The most loads first; among loops with as many (a pass compiled twice,
    # with and without the optional outputs), the shortest path. fullest
    # (the strided shape): the path with the most staged accesses first,
    # which is a full step's: the walk of the optional outputs keeps its
    # step's per-class work in a loop of its own (kCompact), so that its
    # path holds the staged accesses of one class, not of all.
    sign = -1 if walk == "stats" else 1

    def rank(c):
        path = walk_path(insns, c[0], c[1], wide, fullest)
        vectors = sum(1 for _, _, op, _ in path if is_wide_access(op)) if fullest else 0
        staged = sum(1 for _, _, op, _ in path if wide(op)) if fullest else 0
        return (-c[2], -vectors, -staged, sign * len(path))
    chosen.sort(key=rank)
    def writes(c):  # global stores of any width (sm_90 stores f32 gradients 8 bytes at a time)
        return any(op.startswith("STG") for _, _, op, _ in insns[c[0]:c[1] + 1])
    reading = [c for c in chosen if not writes(c)]
    writing = [c for c in chosen if writes(c)]
    if writes_result:
        return sorted(reading[:passes - 1] + writing[:1])
    return sorted(reading[:passes])


def ptxas_report(log, function, arch):
    """(registers, spill store bytes) of `function` for `arch` (sm_90), from
    ptxas -v."""
    start = log.find(f"Compiling entry function '{function}' for '{arch}'")
    if start < 0:
        return None
    end = log.find("Compiling entry function", start + 1)
    block = log[start:end if end > 0 else len(log)]
    regs = re.search(r"Used (\d+) registers", block)
    spill = re.search(r"(\d+) bytes spill stores", block)
    smem = re.search(r"(\d+) bytes smem", block)
    return (int(regs.group(1)), int(spill.group(1)), int(smem.group(1)) if smem else 0) if regs and spill else None


def resident_warps(gpu, regs, threads, smem):
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // 256) * 256
    blocks = min(gpu["regs"] // (warps * per_warp), gpu["warps"] // warps, gpu["blocks"])
    if smem:
        blocks = min(blocks, gpu["smem"] // (smem + 1024))
    return blocks * warps


def units(objects):
    """Each generated file's unit: the file the GPU compiler compiled it in
    (third_party/gpu/compile.bzl compiles the variants of one op and dtype
    together), from the objects' compiled.txt ("unit: <unit> <file> ...")."""
    found = {}
    path = os.path.join(objects, "compiled.txt")
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("unit: "):
                unit, *members = line.split()[1:]
                found.update({m: unit for m in members})
    return found


def report(gen, objects, cuobjdump, arch, library=None):
    gpu = GPUS[arch]
    rows = []
    unit_of = units(objects)
    for key, shape, what, C, passes, moved, *walk in CASES:
        src = os.path.join(gen, key + ".cu")
        unit = unit_of.get(key + ".cu")
        obj = os.path.join(objects, f"{unit}.pic.o")
        log_path = os.path.join(objects, f"{unit}.log")
        if not (os.path.exists(src) and unit and os.path.exists(obj)):
            rows.append((what, C, None, f"{key} was not generated or compiled"))
            continue
        text = open(src).read()
        family = "softmax_args" if key.startswith("sm_") else "ce_args"
        rows_name = launch_shapes.rows_kernel(text, "cuda", key)
        function = f"_Z{len(rows_name)}{rows_name}ILi{SHAPES[shape]}EEv{len('xent_' + family)}xent_{family}i"
        reg_spill = ptxas_report(open(log_path).read(), function, arch)
        if not reg_spill:
            rows.append((what, C, None, f"{function} not in ptxas's report for {arch} (not built for it?)"))
            continue
        regs, spill, static_smem = reg_spill
        elem = launch_shapes.elem_size(key)
        if shape == "COLUMN":
            threads = int(re.search(r"kColumnThreads = (\d+)", text).group(1))
            # The shared memory the 16-byte loads are staged in
            # (XENT_COLUMN_STAGE): per thread, its loads and one element.
            header = open(os.path.join(library or LIBRARY, "device", "rows.h")).read()
            loads = int(re.search(r"#define XENT_COLUMN_LOADS (\d+)", header).group(1))
            cluster, smem = 0, threads * (16 * loads + elem)
        else:
            # The on-chip shape serves the rows too few for a warp each (the
            # fused tune's `rows` floor): a call of one row.
            threads, cluster, smem = launch_shapes.pick(launch_shapes.table(text), C,
                                                        rows=1 if shape == "ON_CHIP" else launch_shapes.ROWS,
                                                        elem_size=elem, on_chip=shape == "ON_CHIP")
            if shape == "TILE":
                smem = static_smem  # the tile and its rows' labels and lse
        run = subprocess.run([cuobjdump, "-sass", "-arch", arch, "-fun", function, obj], capture_output=True,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"sass_report: {' '.join(run.args)} failed:\n{run.stderr}")
        sass = run.stdout
        insns = parse_sass(sass)
        is_load = is_column_load if shape == "COLUMN" else is_pass_load
        wide = is_staged_access if shape == "COLUMN" else is_wide_access
        fullest = shape == "COLUMN"
        found = main_passes(insns, passes, is_load, wide, *walk, writes_result=moved > 1, fullest=fullest,
                            on_chip=shape == "ON_CHIP")
        warps = resident_warps(gpu, regs, threads, smem)
        loop_info = []
        for head, tail, _ in found:
            path = walk_path(insns, head, tail, wide, fullest)
            # Vectors: the path's bytes loaded, in 16-byte units.
            vecs = pass_bytes(path, is_load) / 16
            loop_info.append((len(path), vecs, loads_in_flight(path, is_load) / 16, tail - head + 1,
                              sum(1 for _, _, op, _ in path if op.startswith("STG") and ".128" in op)))
        # The on-chip shape's rows come in by bulk copies (UBLKCP), a block's
        # half of its shared memory in flight while it walks the other.
        bulk = any(op.startswith("UBLKCP") for _, _, op, _ in insns)
        rows.append((what, C, dict(key=key, shape=shape, regs=regs, spill=spill, threads=threads, cluster=cluster,
                                   smem=smem, warps=warps, loops=loop_info, moved=moved, bulk=bulk,
                                   tile=tile_bytes(library, "cuda") if shape == "TILE" else 0), None))
    return rows


def targets(gpu):
    """(bytes in flight per SM, 16-byte vectors moved per SM per clock) at
    the GPU's bandwidth: Little's law with a factor of 2, and the rate that
    makes the issue-rate column."""
    per_sm = gpu["bandwidth"] / gpu["sms"]
    return 2 * per_sm * gpu["latency"], per_sm / 16 / gpu["clock"]


def caption(arch):
    gpu = GPUS[arch]
    flight, _ = targets(gpu)
    return (f"**{arch}, {gpu['name']} at {gpu['bandwidth'] / 1e12:g} TB/s**: targets >= {flight / 1024:.0f} KB in "
            f"flight per SM (contiguous shapes), <= 3 warp instructions per clock per SM")


def render_table(arch, rows):
    gpu = GPUS[arch]
    flight_target, vec_rate = targets(gpu)
    bw = f"{gpu['bandwidth'] / 1e12:g} TB/s"
    out = ["| kernel | C | variant, shape | regs | spill B | block | warps/SM | loop: path / vectors (in flight) "
           f"| 16 B loads in flight per SM | instr. per vector | warp instr./clock/SM at {bw} | targets |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for what, C, r, err in rows:
        if r is None:
            out.append(f"| {what} | {C} | not measured: {err} | | | | | | | | | |")
            continue
        loops_txt = "; ".join(f"{n} / {v:g} ({f:g})" for n, v, f, _, _ in r["loops"]) or "no 16-byte loop"
        first_flight = r["loops"][0][2] if r["loops"] else 0
        in_flight = r["warps"] * 32 * first_flight * 16
        if r["shape"] == "TILE":
            # cp.async keeps a block's whole tile in flight while it loads.
            in_flight = r["warps"] // -(-r["threads"] // 32) * r["tile"]
        if r["shape"] == "ON_CHIP" and r.get("bulk"):
            # One bulk copy a block: the next row's slice, half its shared
            # memory, in flight while it walks the other half.
            in_flight = r["warps"] // -(-r["threads"] // 32) * r["smem"] // 2
        per_vec = sum(n / v for n, v, _, _, _ in r["loops"] if v)
        rate = vec_rate / r["moved"] * per_vec / 32
        missed = []
        if r["shape"] != "COLUMN" and in_flight < flight_target:
            missed.append("in flight")
        if rate > 3:
            missed.append("issue rate")
        if r["spill"]:
            missed.append("spills")
        shape = r["shape"] + (f", cluster of {r['cluster']}, {r['smem'] // 1024} KB smem" if r["cluster"] else
                              f", {r['smem'] / 1024:.1f} KB smem" if r["smem"] else "")
        verdict = "missed: " + ", ".join(missed) if missed else "met"
        if r["shape"] == "TILE":
            verdict += f" ({TILE_NOTE})"
        out.append(f"| {what} | {C} | `{r['key']}`, {shape} | {r['regs']} | {r['spill']} | {r['threads']} | "
                   f"{r['warps']} | {loops_txt} | {in_flight / 1024:.0f} KB | {per_vec:.0f} | {rate:.2f} | "
                   f"{verdict} |")
    return out


# Which path a strided row measures, in both machine-code reports (this
# one and isa_report.py): lines of the paragraph above the tables.
STRIDED_PATH = [
    "A strided row's path is a full step of its walk (32 classes of bf16, 4 vectors a thread), which a row",
    "of 32 classes or more runs; at C = 21 every step is a short one, not measured here: a gradient's takes",
    "two vectors through the same vector code and five classes one by one, the forward's 21 classes one by",
    "one.",
]


def render(by_arch, stamp):
    out = [f"# Static report of the generated kernels' machine code ({stamp})", "",
           "Generated by `bench/sass_report.py` (its docstring says how the machine code is read), one table",
           "per GPU. Each 16-byte vector of a row costs one move per read or write of it (1 for the forward, 2",
           "for the backward and the on-chip fused kernel, 3 where the row is read twice). Targets: loads in",
           "flight per SM at least what Little's law asks at the GPU's bandwidth and memory latency, twice over,",
           "on every contiguous shape; at most 3 of the 4 warp instructions an SM issues per clock spent at that",
           "bandwidth; no spills.", *STRIDED_PATH, ""]
    for arch, rows in by_arch.items():
        gpu = GPUS[arch]
        flight, vec_rate = targets(gpu)
        out += [f"## {arch}: {gpu['name']}", "",
                f"Figures: {gpu['source']}. Per SM at {gpu['bandwidth'] / 1e12:g} TB/s: {vec_rate:.3f} 16-byte "
                f"vectors moved per clock; Little's law: {flight / 2 / 1024:.1f} KB in flight, so the target is "
                f"{flight / 1024:.0f} KB.", ""]
        out += render_table(arch, rows)
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gen", help="the generated CUDA sources (default: the runfiles' gen/cuda)")
    ap.add_argument("--objects", help="nvcc's objects and logs (default: the runfiles' gen/cuda_objects)")
    ap.add_argument("--out", help="write the report here (relative to the workspace under bazel run)")
    ap.add_argument("--arch", default="sm_90,sm_100", help="the architectures to read (of: %(default)s)")
    args = ap.parse_args()
    # The runfiles' workspace root (bazel run), or the checkout's.
    runfiles = os.environ.get("RUNFILES_DIR")
    here = os.path.join(runfiles, "xent") if runfiles else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gen = args.gen or os.path.join(here, "gen", "cuda")
    objects = args.objects or os.path.join(here, "gen", "cuda_objects")
    unknown = [a for a in args.arch.split(",") if a not in GPUS]
    if unknown:
        sys.exit(f"sass_report: no GPU figures for {', '.join(unknown)} (GPUS has {', '.join(GPUS)})")
    cuobjdump = find_tool("cuobjdump")
    # cuobjdump -sass runs nvdisasm, which it looks for on PATH: the one
    # beside it (the toolkit's bin, or the same PyPI install), else found so.
    nvdisasm = os.path.join(os.path.dirname(cuobjdump), "nvdisasm")
    if not os.path.exists(nvdisasm):
        nvdisasm = find_tool("nvdisasm")
    os.environ["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + os.environ.get("PATH", "")
    by_arch = {arch: report(gen, objects, cuobjdump, arch) for arch in args.arch.split(",")}
    text = render(by_arch, datetime.date.today().isoformat())
    tables = "\n\n".join(caption(arch) + "\n\n" + "\n".join(render_table(arch, rows)) for arch, rows in by_arch.items())
    write_report(args.out, text, "sass_report", tables)


def write_report(out, text, marker, tables):
    """Prints the report, or with out writes it there (relative to the
    workspace under bazel run); written to its committed place,
    bench/results/{marker}.md, it also puts its tables in
    docs/PERFORMANCE.md ("The reports' tables"), between <!-- {marker}
    begin/end --> (the ISA report's too), so that the page shows what that
    file holds and a report written elsewhere (an experiment's) leaves the
    page alone."""
    if not out:
        print(text)
        return
    root = os.environ.get("BUILD_WORKSPACE_DIRECTORY", ".")
    path = os.path.join(root, out)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")
    if os.path.relpath(path, root) != os.path.join("bench", "results", f"{marker}.md"):
        return
    page = os.path.join(root, "docs", "PERFORMANCE.md")
    begin, end = f"<!-- {marker} begin -->", f"<!-- {marker} end -->"
    body = open(page).read() if os.path.exists(page) else ""
    if begin in body and end in body:
        head, rest = body.split(begin, 1)
        with open(page, "w") as f:
            f.write(head + begin + "\n" + tables + "\n" + end + rest.split(end, 1)[1])
        print(f"updated {page}")


if __name__ == "__main__":
    main()
