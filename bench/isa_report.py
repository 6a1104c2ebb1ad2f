#!/usr/bin/env python3
"""A static performance report of the generated HIP kernels, read from their
AMD machine code for CDNA3 (gfx942: MI300X) and CDNA2 (gfx90a: MI250X): the
CDNA counterpart of bench/sass_report.py, with no GPU needed.

    ./bazelw run --define=xent_hip_archs=gfx90a,gfx942 //bench:isa_report   # prints it
    ./bazelw run --define=xent_hip_archs=gfx90a,gfx942 //bench:isa_report -- \
        --out bench/results/isa_report.md

(The tests' build compiles every HIP kernel for gfx942 alone: the --define
adds gfx90a.)

For each main kernel and the launch shape its tune table picks for a case:
VGPRs, AGPRs, SGPRs, scratch and LDS per workgroup (the code object's kernel
metadata), waves per SIMD and per CU (from those and the workgroup, against
a CDNA CU's limits), the 16-byte loads (global_load_dwordx4) each lane keeps
in flight in the main loop and the bytes that makes in flight per CU, and
the VALU, SALU and LDS instructions the main loop spends per 16-byte vector,
with the share of the CU's vector issue that asks at the roofline.

How the machine code is read (bench/amdgpu_code.py: the code object for the
target out of the object's offload bundle, llvm-objdump's disassembly): a
loop is a backward branch. The main loop of a pass is the innermost loop
holding 16-byte global loads. Its path runs from the loop head to its
backward branch: of the paths, those with the most 16-byte loads; of those,
the ones with one 16-byte store per vector of the pass's result (a vector
of each input it reads: y and dy for the softmax backward), where a pass
writes; then the fewest instructions. On AMD a divergent `if` is a branch
over its block when no lane takes it (s_cbranch_execz), so the run-time
options' blocks (soft cap, smoothing, weights, the label's element) are
skipped, and so are a gradient's f32-output stores (two a vector, an
option) and the element-wise side of a per-lane alignment test (clang
merges its stores into one 16-byte store there too): the path is a wave's
with the options off, aligned rows and no label in its vector. Of loops with
as many loads (a walk compiled several times: plain, with the run-time
options, with the optional outputs), the shortest path; in the strided
shape the path with the most staged accesses first, the plain walk's full
step (the optional outputs' walk takes a step's classes in a loop of its
own, so its path holds one class's); in a strided pass that stores, the
most 16-byte accesses and stage writes (a result per class), for the
structurized control flow joins the 16-byte output's side and the
element-wise output's (which reads the stage again) on one path on paper,
where a wave runs one of them. "Loads in
flight" follows the hardware's own count: each s_waitcnt vmcnt(n) on the
path leaves at most n memory operations outstanding, so the 16-byte loads
in flight are the most outstanding at once (the path taken twice, for the
loads one iteration leaves to the next).

The GPUs' figures (GPUS below, each with where it comes from): CUs, engine
clock, the bandwidth the kernels are held to (the issue's roofline: 5.3 TB/s
for MI300X, 3.2 TB/s for MI250X), the memory latency Little's law is taken
at, and the per-CU limits of CDNA2 and CDNA3 alike (AMD's CDNA3 and CDNA2
instruction set architecture guides, and LLVM's AMDGPUUsage for the
compiler's view of them): four SIMDs of 16 lanes, so one wave64 VALU
instruction takes a SIMD four cycles and a CU issues one VALU instruction
per clock over its four SIMDs; 512 vector registers per lane per SIMD,
shared by the VGPRs and AGPRs of the waves it holds (allocated in blocks of
8), at most 8 waves per SIMD; 800 SGPRs per SIMD (7 waves above 100 per
wave); 64 KB of LDS per CU. Targets: loads in flight per CU >= 2 x
bandwidth x latency / CUs; at most 60% of the CU's VALU issue spent at the
roofline; no scratch."""

import argparse
import datetime
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amdgpu_code  # noqa: E402
import launch_shapes  # noqa: E402
from sass_report import LIBRARY, STRIDED_PATH, TILE_NOTE, tile_bytes, units, write_report  # noqa: E402

GPUS = {
    "gfx942": dict(
        name="MI300X", cus=304, clock=1.9e9, bandwidth=5.3e12, latency=1.0e-6,
        source="304 CUs and 5.3 TB/s of HBM3 (AMD Instinct MI300X data sheet; AMD CDNA 3 white paper), the "
               "kernels held to the full 5.3 TB/s; 1.9 GHz, an assumed engine clock under load below the "
               "2.1 GHz peak; 1 us of memory latency, an assumption: AMD publishes no HBM latency, and a "
               "CDNA3 miss crosses its XCD's L2 and the Infinity Fabric to the Infinity Cache before HBM, "
               "so the report holds it above the ~700 ns an H100 is held to"),
    "gfx90a": dict(
        name="MI250X", cus=220, clock=1.6e9, bandwidth=3.2e12, latency=1.0e-6,
        source="220 CUs (two dies of 110) and 3.2 TB/s of HBM2e (AMD Instinct MI250X data sheet; AMD CDNA 2 "
               "white paper); 1.6 GHz, an assumed clock under load below the 1.7 GHz peak; 1 us of memory "
               "latency, assumed as for MI300X"),
}
CU = dict(simds=4, valu_cycles=4, regs=512, reg_granule=8, waves_per_simd=8, sgprs_high=100, lds=65536)
SHAPES = {"ROW": 0, "COLUMN": 1, "ON_CHIP": 2, "TILE": 3}

# (variant, row-kernel instantiation, what it is, classes C of the case,
# passes over the row, and the row's bytes moved per byte of logits: 1 for a
# read, 2 for a read and a write, 3 where the row is read twice and written)
CASES = [
    ("ce_fwd_bf16_i64_mean", "ROW", "forward, bf16", 131072, 1, 1),
    ("ce_fwd_f16_i64_mean", "ROW", "forward, f16", 131072, 1, 1),
    ("ce_fwd_f32_i64_mean", "ROW", "forward, f32", 131072, 1, 1),
    ("ce_fwd_bf16_i64_mean", "ROW", "forward, bf16", 1000, 1, 1),
    ("ce_fwd_bwd_bf16_i64_mean", "ROW", "fused fwd+bwd, bf16", 8192, 2, 3),
    ("ce_fwd_bwd_bf16_i64_mean", "ROW", "fused fwd+bwd, bf16", 131072, 2, 3),
    ("ce_bwd_bf16_i64_none", "ROW", "backward from lse, bf16", 131072, 1, 2),
    ("ce_bwd_f32_i64_none", "ROW", "backward from lse, f32", 131072, 1, 2),
    ("sm_fwd_bf16_softmax", "ROW", "softmax, bf16", 8192, 2, 3),
    ("sm_bwd_bf16_softmax", "ROW", "softmax backward, bf16 (y and dy)", 131072, 1, 3),
    # A row on chip: read once into LDS (the next row's slice held in
    # registers while this one is walked), walked twice from there.
    ("ce_fwd_bwd_bf16_i64_mean", "ON_CHIP", "fused fwd+bwd, bf16, on chip", 16384, 2, 2),
    ("ce_fwd_bwd_f32_i64_mean", "ON_CHIP", "fused fwd+bwd, f32, on chip", 8192, 2, 2),
    ("sm_fwd_bf16_softmax", "ON_CHIP", "softmax, bf16, on chip", 16384, 2, 2),
    ("ce_fwd_bf16_i64_mean", "COLUMN", "forward, bf16, class axis strided", 21, 1, 1),
    ("ce_fwd_bwd_bf16_i64_mean", "COLUMN", "fused fwd+bwd, bf16, class axis strided", 21, 2, 3),
    ("ce_bwd_bf16_i64_none", "COLUMN", "backward from lse, bf16, class axis strided", 21, 1, 2),
    # Short rows staged a tile at a time (sass_report.py's TILE rows).
    ("ce_fwd_bf16_i64_mean", "TILE", "forward, bf16, short rows staged", 10, 1, 1),
    ("ce_fwd_bf16_i64_mean", "TILE", "forward, bf16, short rows staged", 1000, 1, 1),
    ("ce_fwd_bwd_bf16_i64_mean", "TILE", "fused fwd+bwd, bf16, short rows staged", 10, 2, 2),
    ("ce_bwd_bf16_i64_none", "TILE", "backward from lse, bf16, short rows staged", 10, 2, 2),
]

INSN = re.compile(r"^\s+([a-z_][a-z0-9_]*)\s*(.*?)\s*//\s*([0-9A-Fa-f]+):")
TARGET = re.compile(r"<(\w+)\+0x([0-9a-f]+)>")
TRANSCENDENTAL = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")


def functions(disassembly):
    """{symbol: [(address, opcode, operands, branch target or None)]}."""
    out, current, start = {}, None, 0
    for line in disassembly.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\w+)>:", line)
        if m:
            current, start = m.group(2), int(m.group(1), 16)
            out[current] = []
            continue
        m = INSN.match(line)
        if not (m and current):
            continue
        op, operands, addr = m.group(1), m.group(2), int(m.group(3), 16)
        target = None
        if op.startswith("s_branch") or op.startswith("s_cbranch"):
            t = TARGET.search(line)
            if t and t.group(1) == current:
                target = start + int(t.group(2), 16)
        out[current].append((addr, op, operands, target))
    return out


def is_load16(op):
    return op in ("global_load_dwordx4", "buffer_load_dwordx4")


def is_lds_load16(op):
    """The on-chip shape's 16-byte reads: from LDS, where its walks read the
    row."""
    return op == "ds_read_b128"


def is_chip_wide(op):
    return is_lds_load16(op) or is_store16(op)


def is_store16(op):
    return op in ("global_store_dwordx4", "buffer_store_dwordx4")


def is_vmem(op):
    return op.startswith(("global_", "buffer_", "flat_", "scratch_"))


def is_wide(op):
    return is_load16(op) or is_store16(op)


def is_staged(op):
    """The strided shape's work: a 16-byte global access or any LDS access."""
    return is_wide(op) or op.startswith("ds_") and not op.startswith("ds_bpermute") and not op.startswith("ds_swizzle")


def is_staged_write(op):
    """A storing strided pass's work: a 16-byte global access or an LDS
    write (each class's result goes over its element of the stage once)."""
    return is_wide(op) or op.startswith("ds_write")


def blocks(insns):
    """The function's basic blocks: (list of (first, last) instruction
    indices, {block: [successor blocks]})."""
    index = {a: i for i, (a, _, _, _) in enumerate(insns)}
    leaders = {0}
    for i, (_, op, _, t) in enumerate(insns):
        if t is not None and t in index:
            leaders.add(index[t])
        if op.startswith(("s_branch", "s_cbranch", "s_endpgm", "s_setpc")) and i + 1 < len(insns):
            leaders.add(i + 1)
    starts = sorted(leaders)
    spans = [(b, (starts[k + 1] if k + 1 < len(starts) else len(insns)) - 1) for k, b in enumerate(starts)]
    of = {b: k for k, (b, _) in enumerate(spans)}
    succ = {}
    for k, (_, last) in enumerate(spans):
        _, op, _, t = insns[last]
        out = []
        if op not in ("s_branch", "s_endpgm", "s_setpc_b64") and k + 1 < len(spans):
            out.append(k + 1)
        if t is not None and t in index:
            out.append(of[index[t]])
        succ[k] = out
    return spans, succ


def dominators(succ):
    """Immediate dominators from block 0 (Cooper, Harvey and Kennedy)."""
    order, seen, stack = [], {0}, [(0, iter(succ[0]))]
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
            order.append(node)
        elif nxt not in seen:
            seen.add(nxt)
            stack.append((nxt, iter(succ[nxt])))
    rpo = order[::-1]
    number = {b: i for i, b in enumerate(rpo)}
    preds = {}
    for b in rpo:
        for c in succ[b]:
            preds.setdefault(c, []).append(b)
    idom = {0: 0}

    def meet(a, b):
        while a != b:
            while number[a] > number[b]:
                a = idom[a]
            while number[b] > number[a]:
                b = idom[b]
        return a
    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            ps = [p for p in preds.get(b, []) if p in idom]
            if not ps:
                continue
            new = ps[0]
            for p in ps[1:]:
                new = meet(p, new)
            if idom.get(b) != new:
                idom[b], changed = new, True
    return idom, preds


def dominates(idom, a, b):
    while b != a and idom.get(b, 0) != b:
        b = idom[b]
    return a == b


def natural_loops(succ, idom, preds):
    """{header: body blocks} of every natural loop (back edges n -> h, h
    dominating n, merged per header)."""
    loops = {}
    for n, outs in succ.items():
        for h in outs:
            if n in idom and dominates(idom, h, n):
                body, stack = loops.setdefault(h, {h}), [n]
                while stack:
                    b = stack.pop()
                    if b not in body:
                        body.add(b)
                        stack.extend(preds.get(b, []))
    return loops


def iteration(insns, spans, succ, idom, header, body, wide, streams=1, fullest=False, load16=is_load16):
    """One iteration of the loop: from its header to a block that branches
    back to it, through the body without the back edges of loops inside it
    (the module's docstring), in path order. Of the paths, those with the
    most 16-byte loads; of those, the ones whose 16-byte stores come nearest
    one per `streams` loads (a pass's result is one vector per vector of
    each input it reads: the f32-output option's two stores a vector and the
    second side of a per-lane alignment test are not the bf16 result's
    path); then the fewest instructions. fullest (the strided shape): the
    most `wide` accesses first, then the fewest instructions."""
    def weight(b):
        ops = [insns[i][1] for i in range(spans[b][0], spans[b][1] + 1)]
        if fullest:
            return (sum(1 for op in ops if wide(op)), 0), len(ops)
        return (sum(1 for op in ops if load16(op)), sum(1 for op in ops if is_store16(op))), len(ops)

    # memo[b]: {(loads, stores) from b to the back edge: (instructions, next
    # block, its key)}, the fewest instructions for each count.
    memo = {}

    def paths(b):
        if b in memo:
            return memo[b]
        memo[b] = {}  # guards against a cycle the back edges missed
        (l, st), n = weight(b)
        out = {}
        for c in succ[b]:
            if c == header:
                options = {(0, 0): (0, None, None)}
            elif c in body and not dominates(idom, c, b):
                options = paths(c)
            else:
                continue
            for (cl, cs), (cn, _, _) in options.items():
                key, val = (cl + l, cs + st), (cn + n, None if c == header else c, (cl, cs))
                if key not in out or val[0] < out[key][0]:
                    out[key] = val
        memo[b] = out
        return out
    sys.setrecursionlimit(max(10000, 4 * len(body) + 100))
    found = paths(header)
    if not found:
        return []
    loads = max(k[0] for k in found)
    if fullest:
        key = min((k for k in found if k[0] == loads), key=lambda k: found[k][0])
    else:
        key = min((k for k in found if k[0] == loads), key=lambda k: (abs(k[1] * streams - loads), found[k][0]))
    path, b = [], header
    while b is not None:
        path += insns[spans[b][0]:spans[b][1] + 1]
        _, b, key = memo[b][key]
    return path


def main_passes(insns, passes, wide, writes_result, fullest=False, streams=1, load16=is_load16):
    """The main loop of each pass: the innermost loops that hold 16-byte
    global loads (natural loops of the control-flow graph: clang lays a
    loop's blocks out in any order, its entry anywhere), each as one
    iteration's instructions. The `passes` with the most such loads, the
    shortest first among equals (a walk compiled twice, with and without the
    per-token outputs); with writes_result, the last pass is one that
    stores (sass_report.main_passes's rule). fullest (the strided shape):
    among loops with as many loads, the path with the most staged accesses
    first: the walk of the optional outputs keeps a step's per-class work in
    a loop of its own (kCompact), so that its path holds one class's staged
    accesses where a full step's holds all of them. streams: the inputs a
    pass reads a vector of for each vector of its result (iteration's).
    load16: what a pass's 16-byte read is (the on-chip shape's, from LDS)."""
    spans, succ = blocks(insns)
    idom, preds = dominators(succ)
    loops = natural_loops(succ, idom, preds)
    has_load = {b for b, (f, l) in enumerate(spans) if any(load16(insns[i][1]) for i in range(f, l + 1))}
    found = []
    for h, body in loops.items():
        # Innermost: no loop inside it holds a 16-byte load of its own.
        if not body & has_load or any(h2 != h and h2 in body and loops[h2] & has_load for h2 in loops):
            continue
        path = iteration(insns, spans, succ, idom, h, body, wide, streams, fullest, load16)
        vec = sum(1 for _, op, _, _ in path if load16(op))
        if not vec:
            continue
        stores = any(op.startswith(("global_store", "buffer_store")) for _, op, _, _ in path)
        counted = wide
        if fullest and stores:
            # A storing strided pass: the path with the most stage writes.
            # The most staged accesses of any kind joined its 16-byte output
            # to the other output side's (element by element to global
            # memory, reading the stage again), which clang's structurized
            # control flow puts on one path on paper, though a wave (whose
            # rows all take the same side) runs one of them.
            path = iteration(insns, spans, succ, idom, h, body, is_staged_write, streams, fullest, load16)
            counted = is_staged_write
        staged = sum(1 for _, op, _, _ in path if counted(op)) if fullest else 0
        found.append((spans[h][0], path, vec, stores, staged))
    found.sort(key=lambda f: (-f[2], -f[4], len(f[1])))
    reading = [f for f in found if not f[3]]
    writing = [f for f in found if f[3]]
    chosen = reading[:passes - 1] + writing[:1] if writes_result else reading[:passes]
    return [f[1] for f in sorted(chosen, key=lambda f: f[0])]


def loads_in_flight(path, load16=is_load16):
    """The most 16-byte loads outstanding at once on the path, taken twice:
    each s_waitcnt vmcnt(n) retires the oldest memory operations down to n
    (lgkmcnt(n) for LDS reads, the on-chip shape's)."""
    lds = load16 is is_lds_load16
    counter = "lgkmcnt" if lds else "vmcnt"
    queue, most = [], 0
    for rep in range(2):
        for _, op, operands, _ in path:
            if (op.startswith("ds_") and not op.startswith(("ds_bpermute", "ds_swizzle"))) if lds else is_vmem(op):
                queue.append(load16(op))
            elif op == "s_waitcnt":
                m = re.search(counter + r"\((\d+)\)", operands)
                if m:
                    n = int(m.group(1))
                    del queue[:max(0, len(queue) - n)]
            if rep == 1:
                most = max(most, sum(queue))
    return most


def residency(meta, threads, dynamic_lds=0):
    """(waves per SIMD, waves per CU, what limits them); dynamic_lds: the
    launch's LDS beyond the kernel's own (the on-chip shape's slice)."""
    regs = -(-meta["vgpr_count"] // CU["reg_granule"]) * CU["reg_granule"]
    by = {"registers": CU["regs"] // regs if regs else CU["waves_per_simd"], "the SIMD": CU["waves_per_simd"]}
    if meta.get("sgpr_count", 0) > CU["sgprs_high"]:
        by["SGPRs"] = 7
    per_simd = min(by.values())
    waves_per_block = -(-threads // 64)
    blocks = per_simd // -(-waves_per_block // CU["simds"])
    lds = meta.get("group_segment_fixed_size", 0) + dynamic_lds
    if lds:
        blocks = min(blocks, CU["lds"] // lds)
    limit = min(by, key=by.get)
    return per_simd, blocks * waves_per_block, limit


def chip_held():
    """The 16-byte vectors a thread holds of the next row on chip
    (XENT_CHIP_HELD in kernels/device/target_hip.h)."""
    header = open(os.path.join(LIBRARY, "device", "target_hip.h")).read()
    return int(re.search(r"#define XENT_CHIP_HELD (\d+)", header).group(1))


def compiled_info(objects):
    info = {}
    for line in open(os.path.join(objects, "compiled.txt")):
        k, _, v = line.partition(": ")
        info[k] = v.strip()
    return info


def report(gen, objects, llvm_bin, arch):
    rows, cache = [], {}
    unit_of = units(objects)
    for key, shape, what, C, passes, moved in CASES:
        src = os.path.join(gen, key + ".hip")
        unit = unit_of.get(key + ".hip")
        obj = os.path.join(objects, f"{unit}.pic.o") if unit else ""
        if not (os.path.exists(src) and os.path.exists(obj)):
            rows.append((what, C, None, f"{key} was not generated or compiled"))
            continue
        if obj not in cache:
            with tempfile.TemporaryDirectory() as tmp:
                code = os.path.join(tmp, arch + ".co")
                amdgpu_code.code_object(llvm_bin, obj, arch, code)
                cache[obj] = (amdgpu_code.kernels(llvm_bin, code),
                              functions(amdgpu_code.disassemble(llvm_bin, code, arch)))
        metas, funcs = cache[obj]
        family = "softmax_args" if key.startswith("sm_") else "ce_args"
        with open(src) as f:
            text = f.read()
        rows_name = launch_shapes.rows_kernel(text, "hip", key)
        function = f"_ZL{len(rows_name)}{rows_name}ILi{SHAPES[shape]}EEv{len('xent_' + family)}xent_{family}i"
        if function not in metas or function not in funcs:
            rows.append((what, C, None, f"{function} not in the {arch} code object"))
            continue
        meta, insns = metas[function], funcs[function]
        slice_bytes = 0
        if shape == "COLUMN":
            threads = int(re.search(r"kColumnThreads = (\d+)", text).group(1))
        elif shape == "ON_CHIP":
            # The on-chip shape serves the calls of few rows (the tables'
            # `rows` floor): a call of one row. Its slice in LDS; the next
            # one's in registers (XENT_CHIP_HELD vectors a thread).
            elem = launch_shapes.elem_size(key)
            picked = launch_shapes.pick(launch_shapes.table(text), C, rows=1, elem_size=elem, on_chip=True,
                                        buffers=1, held=chip_held(), max_cluster=1)
            if picked is None:
                rows.append((what, C, None, f"no on-chip shape of {key} holds a row of {C}"))
                continue
            threads, _, slice_bytes = picked
        else:
            # The rows of a training step's call (launch_shapes.ROWS), for the
            # tune tables' `rows` floors.
            threads = launch_shapes.pick(launch_shapes.table(text), C)[0]
        wide = is_staged if shape == "COLUMN" else is_chip_wide if shape == "ON_CHIP" else is_wide
        load16 = is_lds_load16 if shape == "ON_CHIP" else is_load16
        # The softmax backward reads y and dy for each vector it writes.
        streams = 2 if key.startswith("sm_bwd") else 1
        found = main_passes(insns, passes, wide, writes_result=moved > 1, fullest=shape == "COLUMN", streams=streams,
                            load16=load16)
        per_simd, per_cu, limit = residency(meta, threads, slice_bytes)
        loop_info = []
        for path in found:
            vecs = sum(1 for _, op, _, _ in path if load16(op))
            valu = [op for _, op, _, _ in path if op.startswith("v_")]
            loop_info.append(dict(
                path=len(path), vecs=vecs, flight=loads_in_flight(path, load16),
                valu=len(valu), trans=sum(1 for op in valu if TRANSCENDENTAL.match(op)),
                salu=sum(1 for _, op, _, _ in path if op.startswith("s_") and op not in ("s_waitcnt", "s_nop")),
                lds=sum(1 for _, op, _, _ in path if op.startswith("ds_"))))
        rows.append((what, C, dict(key=key, shape=shape, meta=meta, threads=threads, per_simd=per_simd,
                                   per_cu=per_cu, limit=limit, loops=loop_info, moved=moved,
                                   size=len(insns), tile=tile_bytes(None, "hip") if shape == "TILE" else 0,
                                   slice=slice_bytes), None))
    return rows


def targets(gpu):
    """(bytes in flight per CU: Little's law, twice over; wave-wide 16-byte
    vectors (1 KB) moved per CU per clock at the roofline)."""
    per_cu = gpu["bandwidth"] / gpu["cus"]
    return 2 * per_cu * gpu["latency"], per_cu / 1024 / gpu["clock"]


def caption(arch):
    gpu = GPUS[arch]
    flight, _ = targets(gpu)
    return (f"**{arch}, {gpu['name']} at {gpu['bandwidth'] / 1e12:g} TB/s**: targets >= {flight / 1024:.0f} KB in "
            f"flight per CU (contiguous shapes), <= 60% of the CU's VALU issue, no scratch")


def judge(arch, r):
    """A measured row against the targets: (16-byte bytes in flight per CU,
    VALU/trans/SALU/LDS instructions per vector, the share of the CU's VALU
    issue at the roofline, the targets missed). isa_targets_test holds the
    build's kernels to the same judgement."""
    gpu = GPUS[arch]
    flight_target, vec_rate = targets(gpu)
    m = r["meta"]
    flight = r["loops"][0]["flight"] if r["loops"] else 0
    in_flight = r["per_cu"] * 64 * flight * 16
    if r["shape"] == "TILE":
        # A workgroup's tile is in flight while it loads, up to its batch.
        in_flight = r["per_cu"] // -(-r["threads"] // 64) * min(r["tile"], r["threads"] * flight * 16)
    if r["shape"] == "ON_CHIP":
        # The next row's slice, loaded into registers while this one's is
        # walked from LDS: a workgroup's slice in flight all the time.
        in_flight = r["per_cu"] // -(-r["threads"] // 64) * r.get("slice", 0)
    per_vec = {k: sum(x[k] / x["vecs"] for x in r["loops"] if x["vecs"]) for k in ("valu", "trans", "salu", "lds")}
    # VALU cycles per wave-wide vector: 4 per instruction (a wave64 on a
    # SIMD16), over the CU's 4 SIMDs, at the vectors the roofline moves.
    share = vec_rate / r["moved"] * per_vec["valu"] * CU["valu_cycles"] / CU["simds"]
    missed = []
    if not r["loops"] or not all(x["vecs"] for x in r["loops"]):
        missed.append("no 16-byte loop read" if r["loops"] else "no 16-byte loads")
    if r["shape"] == "ON_CHIP" and len(r["loops"]) < 2:
        missed.append("not two passes from LDS")
    if r["shape"] != "COLUMN" and in_flight < flight_target:
        missed.append("in flight")
    if share > 0.6:
        missed.append("issue")
    if m.get("private_segment_fixed_size"):
        missed.append("scratch")
    return in_flight, per_vec, share, missed


def render_table(arch, rows):
    gpu = GPUS[arch]
    bw = f"{gpu['bandwidth'] / 1e12:g} TB/s"
    out = ["| kernel | C | variant, shape | VGPR / AGPR / SGPR | scratch B | LDS B | block | waves/SIMD (limit) | "
           "waves/CU | loop: path / vectors (16 B in flight) | 16 B in flight per CU | VALU / SALU / LDS per "
           f"vector | VALU issue at {bw} | targets |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for what, C, r, err in rows:
        if r is None:
            out.append(f"| {what} | {C} | not measured: {err} | | | | | | | | | | | |")
            continue
        m = r["meta"]
        loops_txt = "; ".join(f"{x['path']} / {x['vecs']} ({x['flight']})" for x in r["loops"]) or "no 16-byte loop"
        in_flight, per_vec, share, missed = judge(arch, r)
        out.append(
            f"| {what} | {C} | `{r['key']}`, {r['shape']} | {m.get('vgpr_count')} / {m.get('agpr_count', 0)} / "
            f"{m.get('sgpr_count')} | {m.get('private_segment_fixed_size', 0)} | "
            f"{m.get('group_segment_fixed_size', 0) + r.get('slice', 0)} | "
            f"{r['threads']} | {r['per_simd']} ({r['limit']}) | {r['per_cu']} | {loops_txt} | {in_flight / 1024:.0f} KB | "
            f"{per_vec['valu']:.0f} / {per_vec['salu']:.0f} / {per_vec['lds']:.0f} | {share:.0%} | "
            f"{'missed: ' + ', '.join(missed) if missed else 'met'}{f' ({TILE_NOTE})' if r['shape'] == 'TILE' else ''} |")
    return out


def render(by_arch, stamp, compiler):
    out = [f"# Static report of the generated HIP kernels' AMD machine code ({stamp})", "",
           f"Code objects compiled by `{compiler}` (compile.bzl's flags).", "",
           "Generated by `bench/isa_report.py` (its docstring says how the machine code is read), one table per",
           "GPU. VGPRs count the AGPRs in (one register file of 512 per lane per SIMD on CDNA2 and CDNA3); a",
           "16-byte vector costs one move per read or write of it (1 for the forward, 2 for the backward, 3",
           "where the row is read twice and written). Targets: loads in flight per CU at least what Little's",
           "law asks at the GPU's bandwidth and memory latency, twice over, on every contiguous shape; at most",
           "60% of the CU's VALU issue spent at that bandwidth; no scratch. The path counts instructions by",
           "kind; VALU's include the transcendental ones (v_exp_f32), which issue at a quarter of the rate on",
           "CDNA, so the share is a floor. ON_CHIP rows (a row in LDS, the next one's slice in registers:",
           "kernels/device/pipeline.h): the loops are the two walks of the row from LDS (16-byte `ds_read_b128`,",
           "their in-flight count by lgkmcnt), and the bytes in flight per CU are the next rows' slices, loading",
           "while the walks run.", *STRIDED_PATH, ""]
    for arch, rows in by_arch.items():
        gpu = GPUS[arch]
        flight, vec_rate = targets(gpu)
        out += [f"## {arch}: {gpu['name']}", "",
                f"Figures: {gpu['source']}. Per CU at {gpu['bandwidth'] / 1e12:g} TB/s: {vec_rate:.4f} wave-wide "
                f"16-byte vectors (1 KB) moved per clock; Little's law: {flight / 2 / 1024:.1f} KB in flight, so "
                f"the target is {flight / 1024:.0f} KB.", ""]
        out += render_table(arch, rows)
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gen", help="the generated HIP sources (default: the runfiles' gen/hip)")
    ap.add_argument("--objects", help="the HIP objects and compiled.txt (default: the runfiles' gen/hip_objects)")
    ap.add_argument("--out", help="write the report here (relative to the workspace under bazel run)")
    ap.add_argument("--arch", default="gfx942,gfx90a", help="the targets to read (of: %(default)s)")
    args = ap.parse_args()
    runfiles = os.environ.get("RUNFILES_DIR")
    here = os.path.join(runfiles, "xent") if runfiles else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gen = args.gen or os.path.join(here, "gen", "hip")
    objects = args.objects or os.path.join(here, "gen", "hip_objects")
    info = compiled_info(objects)
    if info.get("compiler") == "absent":
        sys.exit("isa_report: the HIP kernels were not compiled (no HIP compiler found)")
    llvm_bin = info.get("llvm_bin", "")
    archs = args.arch.split(",")
    unknown = [a for a in archs if a not in GPUS]
    missing = [a for a in archs if a not in info.get("archs", "").split()]
    if unknown or missing:
        sys.exit(f"isa_report: no GPU figures for {unknown} (GPUS has {', '.join(GPUS)})" if unknown else
                 f"isa_report: the objects were compiled for {info.get('archs')}, not {missing} "
                 f"(--define=xent_hip_archs=gfx942,gfx90a)")
    by_arch = {arch: report(gen, objects, llvm_bin, arch) for arch in archs}
    text = render(by_arch, datetime.date.today().isoformat(), info.get("compiler", "?"))
    tables = "\n\n".join(caption(arch) + "\n\n" + "\n".join(render_table(arch, rows)) for arch, rows in by_arch.items())
    write_report(args.out, text, "isa_report", tables)

if __name__ == "__main__":
    main()
