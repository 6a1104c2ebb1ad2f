#!/usr/bin/env python3
"""xent's benchmark: each case of issue 5's table timed side by side with its
roofline, with PyTorch (eager F.cross_entropy and torch.compile of it) and
with the published kernels Liger-Kernel and Quack on the same tensors, in one
process. A peer that cannot run (not installed, no GPU, a failed check
against PyTorch) is named in the result with the reason. The softmax group
times the softmax family (softmax and its gradient from y and dy, the ops of
ONNX Runtime's Softmax and SoftmaxGrad) beside PyTorch eager, checked against
PyTorch in float64; the tune group times both families in every launch shape.

On a GPU (the default): CUDA events around every call, a 256 MiB write
between calls so no case runs out of L2, warm-ups (at least 5 calls and
50 ms of them) and the median of 25 timed calls. The roofline is
bench/roofline.cu, measured in the same run: a plain read of the logits for
forward cases, a copy of the logits into the gradient's buffer for cases
that write. Model bytes are what a pass must move: N*V*s read for forward,
read + write (2*N*V*s) for the fused and the backward passes, plus labels,
losses and lse. Before timing, each case's loss (and gradient) is checked
against PyTorch's.

--dry-run runs everything on the CPU instead (the cpu backend, which runs the
generated kernels under the SIMT emulator, tiny shapes, wall-clock timers,
PyTorch on the CPU): the numbers mean nothing, but every code path, the JSON
and the plot are exercised; //bench:bench_dry_run_test does this in CI.

Writes OUT.json and OUT.png (achieved TB/s versus V for xent, PyTorch eager,
torch.compile and the roofline). Exit status 1 if any check failed."""

import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from xent_ctypes import BF16, F16, F32, I64, MEAN, Desc, Tensors  # noqa: E402
from xent_ctypes import BACKWARD, FORWARD, FORWARD_BACKWARD  # noqa: E402
from xent_ctypes import SOFTMAX, SoftmaxDesc  # noqa: E402

DTYPES = {"bf16": (BF16, torch.bfloat16), "f16": (F16, torch.float16), "f32": (F32, torch.float32)}
OPS = {"fwd": FORWARD, "bwd": BACKWARD, "fwd_bwd": FORWARD_BACKWARD}
# The softmax family (specs/softmax.lua): y = softmax(x) along the class
# axis, and dx from y and dy (ONNX Runtime's Softmax and SoftmaxGrad).
SOFTMAX_OPS = ("sm_fwd", "sm_bwd")
# Loss and gradient agreement with PyTorch (both accumulate in f32; outputs
# rounded to the dtype).
TOL = {"bf16": 2e-2, "f16": 2e-3, "f32": 1e-4}


def gpu_cases():
    """Issue 5's table, then the V sweep for the plot."""
    big = [(16384, 131072), (8192, 262144), (32768, 32768)]
    cases = []
    for op in ("fwd", "fwd_bwd", "bwd"):
        cases += [dict(group="large", op=op, dtype="bf16", shape=s, axis=1, torch=(s == big[0])) for s in big]
    for op in ("fwd", "fwd_bwd", "bwd"):
        cases += [dict(group="dtypes", op=op, dtype=dt, shape=big[0], axis=1, torch=False) for dt in ("f32", "f16")]
    for v in (10, 100, 1000):
        cases += [dict(group="small_vocab", op=op, dtype="bf16", shape=(1 << 20, v), axis=1, torch=False)
                  for op in ("fwd", "fwd_bwd")]
    # The class axis in place (issue 60): few classes over many positions,
    # and many over few.
    cases += [dict(group="nd", op=op, dtype="bf16", shape=shape, axis=1, torch=False)
              for shape in ((16, 21, 512, 512), (8, 1000, 32, 32)) for op in ("fwd", "fwd_bwd")]
    for v in (1024, 4096, 16384, 65536, 131072, 262144):
        cases += [dict(group="sweep", op=op, dtype="bf16", shape=((1 << 30) // v, v), axis=1, torch=True)
                  for op in ("fwd", "fwd_bwd")]
    # The fourth GPU run's five shapes, what the tables drawn from them
    # guessed (fifth run: where a warp a row stops paying as the rows get
    # few, the classes between its points), then what the fifth run's
    # tables guess: the rows floors of 4 threads a row (16384) and 8
    # (8192), and the fused kernels' rows on chip where rows are few.
    cases += tune_cases([(16384, 131072), (8192, 262144), (32768, 32768), (262144, 4096), (1048576, 1024),
                         (2048, 131072), (512, 131072), (65536, 16384), (524288, 2048),
                         (4096, 16384), (4096, 32768), (1024, 32768)])
    # Short rows, staged a tile at a time by the tables, beside the same
    # shapes from memory (issue 60's short rows).
    cases += tune_cases([(1048576, 10), (1048576, 100), (1048576, 1000)], asked=SHORT_TUNE_SHAPES)
    # The class axis in place in slices, the runtime's choice first (issue
    # 60's strided shapes; docs/PERFORMANCE.md, "The class axis in slices").
    cases += tune_cases([(8, 1000, 32, 32), (16, 21, 512, 512)], slices=TUNE_SLICES)
    # The softmax family beside PyTorch eager, and its launch shapes (the
    # fifth run's measured its tables; the last two check a warp a row past
    # 4096 classes and the 16-threads floor).
    big_softmax = [(4096, 131072), (16384, 32768), (262144, 4096), (1048576, 1024)]
    for op in SOFTMAX_OPS:
        cases += [dict(group="softmax", op=op, dtype="bf16", shape=s, axis=1, torch=True) for s in big_softmax]
    cases += tune_cases(big_softmax + [(65536, 16384), (4096, 1024)], SOFTMAX_OPS)
    return cases


# The `tune` group: each (bf16) shape and pass timed in every launch shape
# of TUNE_SHAPES on the same tensors, the tune table's first (None): (threads
# a row, block), 0 threads a row = a row a block (xent_set_row_shape). What
# the spec's tune tables are to be chosen from (docs/PERFORMANCE.md, "Launch
# shapes").
# (-1, 0): the row on chip (XENT_ROW_SHAPE_ON_CHIP), where the kernel has
# such a shape for C (the fused pass and the softmax forward; the others
# refuse it, reported as such).
TUNE_SHAPES = [None, (4, 256), (8, 256), (16, 256), (32, 256), (32, 512), (0, 128), (0, 256), (0, 512), (-1, 0)]
# Short rows: the table's first (where it stages them, the tile shape), then
# the same threads from memory (a launch shape asked for is never staged).
SHORT_TUNE_SHAPES = [None, (1, 256), (4, 256), (8, 256), (32, 256)]
# A strided class axis: the runtime's slices (None), then 1 (none) to 32
# (xent_set_column_slices).
TUNE_SLICES = [None, 1, 2, 4, 8, 16, 32]


def tune_cases(shapes, ops=("fwd", "fwd_bwd", "bwd"), asked=TUNE_SHAPES, slices=None):
    """Tune cases timed in each launch shape of `asked`, or, given
    `slices`, in each count of class slices."""
    knob = dict(column_slices=slices) if slices else dict(row_shapes=asked)
    return [dict(group="tune", op=op, dtype="bf16", shape=s, axis=1, torch=False, **knob)
            for s in shapes for op in ops]


def dry_cases():
    cases = []
    for op in ("fwd", "fwd_bwd", "bwd"):
        cases.append(dict(group="large", op=op, dtype="bf16", shape=(8, 3000), axis=1, torch=True))
    cases.append(dict(group="dtypes", op="fwd_bwd", dtype="f32", shape=(8, 3000), axis=1, torch=False))
    cases.append(dict(group="nd", op="fwd_bwd", dtype="bf16", shape=(2, 5, 6, 7), axis=1, torch=False))
    for v in (10, 100, 1000):
        cases += [dict(group="sweep", op=op, dtype="bf16", shape=(4096 // v + 1, v), axis=1, torch=True)
                  for op in ("fwd", "fwd_bwd")]
    cases += tune_cases([(7, 3001)])
    # The row on chip, asked for (a cluster of 2 in the emulator).
    cases += tune_cases([(3, 20000)], ops=("fwd_bwd",), asked=[None, (-1, 0)])
    cases += tune_cases([(4097, 10)], asked=SHORT_TUNE_SHAPES)
    cases += tune_cases([(2, 300, 4, 8)], slices=[None, 1, 3])
    cases += [dict(group="softmax", op=op, dtype="bf16", shape=(7, 3001), axis=1, torch=True) for op in SOFTMAX_OPS]
    cases += tune_cases([(7, 3001)], SOFTMAX_OPS)
    return cases


def spread(times):
    """min, p10, median, p90 and max of a list of seconds."""
    t = sorted(times)
    at = lambda q: t[min(len(t) - 1, int(q * len(t)))]  # noqa: E731
    return dict(min=t[0], p10=at(0.1), median=statistics.median(t), p90=at(0.9), max=t[-1], n=len(t))


def level(a, b):
    """Whether two spreads are level: their p10-p90 ranges overlap."""
    return a["p10"] <= b["p90"] and b["p10"] <= a["p90"]


class Timer:
    """Times calls: CUDA events on a GPU, the wall clock on the CPU.

    many() times several implementations of one case on the same tensors,
    interleaved: each repetition calls every one once, in an order rotated
    by one from the last, so that none always runs first or after the same
    neighbour. On a GPU, before each timed call the L2 is flushed (a 256 MiB
    write) and the GPU is given a lead (torch.cuda._sleep) while the host
    enqueues the call, so that the events bracket the kernels and not the
    host's work; nothing waits for the device until every repetition is
    enqueued. The host's time to enqueue each call is kept beside it."""

    LEAD_S = 300e-6  # the GPU's lead over the host before each timed call

    def __init__(self, device, warmup, reps, warmup_s=0.0):
        self.device, self.warmup, self.reps, self.warmup_s = device, warmup, reps, warmup_s
        if device == "cuda":
            self.flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
            self.lead_cycles = int(self.LEAD_S * 2e9)  # at most 2 GHz: a lead of at least LEAD_S

    def warm(self, fn):
        # At least `warmup` calls and warmup_s seconds of them: in the fifth
        # GPU run (bench/results/2026-11-27-NVIDIA-H200-3db0cf0/tune.json)
        # the tune group's first shape of a forward case, 5 calls of ~1 ms
        # after PyTorch's reference, read up to 16% slower than the same
        # launch shape timed later on the same tensors.
        start, calls = time.perf_counter(), 0
        while calls < self.warmup or time.perf_counter() - start < self.warmup_s:
            fn()
            if self.device == "cuda":
                torch.cuda.synchronize()
            calls += 1

    def many(self, fns):
        """{name: fn} -> {name: (spread of the call's seconds, spread of the
        host's seconds to enqueue it)}."""
        names = list(fns)
        for name in names:
            self.warm(fns[name])
        times = {n: [] for n in names}
        host = {n: [] for n in names}
        pending = []
        for rep in range(self.reps):
            k = rep % len(names)
            for name in names[k:] + names[:k]:
                if self.device == "cuda":
                    self.flush.zero_()
                    torch.cuda._sleep(self.lead_cycles)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    t0 = time.perf_counter()
                    fns[name]()
                    host[name].append(time.perf_counter() - t0)
                    end.record()
                    pending.append((name, start, end))
                else:
                    t0 = time.perf_counter()
                    fns[name]()
                    host[name].append(time.perf_counter() - t0)
                    times[name].append(host[name][-1])
            if len(pending) > 64:  # bounded: the flushes of a long run would queue up
                self._collect(pending, times)
        self._collect(pending, times)
        return {n: (spread(times[n]), spread(host[n])) for n in names}

    @staticmethod
    def _collect(pending, times):
        if pending:
            torch.cuda.synchronize()
            for name, start, end in pending:
                times[name].append(start.elapsed_time(end) * 1e-3)
            pending.clear()

    def __call__(self, fn):
        """The median seconds of fn alone."""
        return self.many({"fn": fn})["fn"][0]["median"]


def clocks():
    """The GPU's clocks, temperature and power now (nvidia-smi), or why not."""
    query = "clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return dict(zip(query.split(","), [v.strip() for v in out.split(",")]))
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": str(e)}


class Xent:
    def __init__(self, lib_path, device):
        self.lib = ctypes.CDLL(lib_path)
        self.lib.xent_last_error.restype = ctypes.c_char_p
        self.lib.xent_status_string.restype = ctypes.c_char_p
        self.lib.xent_ce_desc_init_nd.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                                  ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.handle = ctypes.c_void_p()
        backend = 2 if device == "cuda" else 1  # XENT_BACKEND_CUDA, XENT_BACKEND_CPU
        if device != "cuda":
            # The CPU rehearses the GPU run: the CUDA kernels under the
            # emulator, launch shapes and all, in the package's handles too.
            os.environ.setdefault("XENT_CPU_EMULATE", "cuda")
        self.check(self.lib.xent_create(ctypes.byref(self.handle), backend), "xent_create")

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.xent_last_error().decode()}")

    def desc(self, shape, axis, dtype):
        d = Desc()
        dims = (ctypes.c_int64 * len(shape))(*shape)
        self.check(self.lib.xent_ce_desc_init_nd(ctypes.byref(d), len(shape), dims, axis, DTYPES[dtype][0], I64, MEAN),
                   "xent_ce_desc_init_nd")
        return d

    def workspace(self, d, op, device, slices=(None,)):
        """The call's workspace, the largest of its counts of class slices
        (a tune case times several on one)."""
        n, most = ctypes.c_size_t(), 16
        for asked in slices:
            self.set_column_slices(asked)
            try:
                self.check(self.lib.xent_ce_workspace_size(self.handle, ctypes.byref(d), OPS[op], ctypes.byref(n)),
                           "workspace")
            finally:
                self.set_column_slices(None)
            most = max(most, n.value)
        return torch.empty(most, dtype=torch.uint8, device=device)

    def set_row_shape(self, asked):
        """(threads a row, block) for every row kernel, or None: the tune tables'."""
        group, threads = asked if asked else (0, 0)
        self.check(self.lib.xent_set_row_shape(self.handle, group, threads), "xent_set_row_shape")

    def set_column_slices(self, asked):
        """The slices of a strided class axis, or None: the runtime's."""
        self.check(self.lib.xent_set_column_slices(self.handle, asked or 0), "xent_set_column_slices")

    def softmax_desc(self, shape, axis, dtype):
        d = SoftmaxDesc()
        dims = (ctypes.c_int64 * len(shape))(*shape)
        self.check(self.lib.xent_softmax_desc_init_nd(ctypes.byref(d), len(shape), dims, axis, DTYPES[dtype][0],
                                                      SOFTMAX), "xent_softmax_desc_init_nd")
        return d

    def softmax(self, d, op, inputs, out, stream):
        """sm_fwd: out = softmax(x), inputs (x,); sm_bwd: out = dx, inputs (y, dy)."""
        name = "xent_softmax_forward" if op == "sm_fwd" else "xent_softmax_backward"
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in inputs + (out,)]
        self.check(getattr(self.lib, name)(self.handle, ctypes.byref(d), *ptrs, ctypes.c_void_p(stream)), name)

    def run(self, d, op, t, ws, stream):
        self.check(self.lib.xent_ce_run(self.handle, ctypes.byref(d), OPS[op], ctypes.byref(t), ctypes.c_void_p(ws.data_ptr()),
                                        ctypes.c_size_t(ws.numel()), ctypes.c_void_p(stream)), "xent_ce_run")


def model_bytes(case, elem):
    """What the pass must move: logits (and gradient), labels, loss, lse."""
    n = 1
    for i, s in enumerate(case["shape"]):
        n *= s if i != case["axis"] else 1
    nv = n * case["shape"][case["axis"]]
    passes = 1 if case["op"] == "fwd" else 2
    return passes * nv * elem + n * 8 + n * 4


# The published kernels xent must beat, beside PyTorch. Each maker gives a
# loss function of ([N, V] logits, labels) with PyTorch's mean (or, for the
# softmax family, of x), or raises with the reason it cannot run here: the
# reason is recorded in the result, never dropped. They travel to the GPU
# machine as wheels (docs/GPU_RUN.md).
def peer_liger(device, op):
    if device != "cuda":
        raise RuntimeError("Liger-Kernel is Triton: CUDA only")
    if op == "bwd":
        raise RuntimeError("Liger-Kernel computes the gradient in its forward: it has no backward from the lse")
    from liger_kernel.transformers import LigerCrossEntropyLoss
    return LigerCrossEntropyLoss(reduction="mean")


# Liger-Kernel writes the gradient over its input logits in the forward (its
# memory saving): it gets logits of its own, or every implementation checked
# after it reads gradients (the sixth GPU run's Quack fused pass did).
peer_liger.writes_its_input = True


def peer_quack(device, op):
    if device != "cuda":
        raise RuntimeError("Quack is CuTe DSL: sm_90 / sm_100 only")
    from quack.cross_entropy import cross_entropy

    def loss(x, y):
        out = cross_entropy(x, y)
        out = out[0] if isinstance(out, tuple) else out
        return out.mean() if out.dim() > 0 else out  # per-row losses in some releases
    return loss


def peer_liger_softmax(device, op):
    if device != "cuda":
        raise RuntimeError("Liger-Kernel is Triton: CUDA only")
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    return LigerSoftmaxFunction.apply


def peer_quack_softmax(device, op):
    if device != "cuda":
        raise RuntimeError("Quack is CuTe DSL: sm_90 / sm_100 only")
    from quack.softmax import softmax
    return softmax


PEERS = {"liger": peer_liger, "quack": peer_quack}
SOFTMAX_PEERS = {"liger": peer_liger_softmax, "quack": peer_quack_softmax}


def relative(got, want):
    return ((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-30)).item()


def loss_calls(loss_fn, x, y, op, axis):
    """A loss function's call on the case's tensors as the pass `op` times
    it: (a fresh call's (loss, gradient) for the check, the timed call).
    fwd: the loss without a gradient; fwd_bwd: the loss and its backward;
    bwd: the backward alone, from a forward made once (the graph kept)."""
    xg = x.detach().movedim(axis, 1).requires_grad_(op != "fwd")

    def checked():
        xg.grad = None
        loss = loss_fn(xg, y)
        if op == "fwd":
            return loss.detach(), None
        loss.backward()
        return loss.detach(), xg.grad.movedim(1, axis)

    if op == "fwd":
        def timed():
            with torch.no_grad():
                loss_fn(xg, y)
    elif op == "fwd_bwd":
        def timed():
            xg.grad = None
            loss_fn(xg, y).backward()
    else:
        saved = loss_fn(xg, y)

        def timed():
            xg.grad = None
            saved.backward(retain_graph=True)
    return checked, timed


def release_case_memory():
    """Drops what a case left behind: Dynamo's compiled graphs (one per
    shape, each keeping its tensors; past 8 the recompile limit would
    silently fall back to eager) and the cached blocks of the allocator."""
    import gc
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def compiled(fn):
    """torch.compile of fn for this case's shape alone (dynamic=False); its
    compile happens in the warm-up, outside the timed calls."""
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
    # The backward is timed from one saved graph (retain_graph=True), which
    # the donated-buffer optimisation of PyTorch >= 2.5 refuses.
    config = getattr(getattr(torch, "_functorch", None), "config", None)
    if config is not None and hasattr(config, "donated_buffer"):
        config.donated_buffer = False
    return torch.compile(fn, dynamic=False)


def time_implementations(case, result, impls, timer, nbytes, tol):
    """impls: {name: (checked, timed) or an exception}: each checked
    (checked() -> {error name: relative error}) and the ones that agree
    timed together, interleaved. Into result["impls"]: per name its spread,
    host time, TB/s and errors, or the reason it has none."""
    out, timed = {}, {}
    for name, impl in impls.items():
        try:
            if isinstance(impl, Exception):
                raise impl
            checked, call = impl
            errors = checked()
            if any(e > tol for e in errors.values()):
                raise RuntimeError(f"disagrees with PyTorch in float64: {errors}")
            out[name] = dict(errors=errors)
            timed[name] = call
        except Exception as e:  # noqa: BLE001 -- any failure is the implementation's, reported with its reason
            out[name] = dict(error=f"{type(e).__name__}: {e}"[:500])
    if timed:
        for name, (calls, host) in timer.many(timed).items():
            out[name].update(s=calls["median"], spread=calls, host_s=host["median"],
                             tbps=nbytes / calls["median"] / 1e12)
    result["impls"] = out
    return out


def summarize(result, impls, roofline_tbps, peak_tbps):
    """The comparison of a case: xent's package (the headline) and its C
    call, each as TB/s, fraction of the roofline and of the device's peak,
    against the best peer that ran (ratio > 1: xent is faster; level when
    their p10-p90 ranges overlap)."""
    peers = {n: r for n, r in impls.items() if not n.startswith("xent") and "s" in r}
    best = min(peers, key=lambda n: peers[n]["s"]) if peers else None
    result["best_peer"] = best
    for key, name in (("package", "xent"), ("c_call", "xent_c")):
        r = impls.get(name, {})
        if "s" not in r:
            continue
        line = dict(tbps=r["tbps"], fraction_of_roofline=r["tbps"] / roofline_tbps)
        if peak_tbps:
            line["fraction_of_peak"] = r["tbps"] / peak_tbps
        if best:
            line.update(vs_best_peer=peers[best]["s"] / r["s"], level_with_best_peer=level(r["spread"],
                                                                                          peers[best]["spread"]))
        result[key] = line


def time_xent(case, result, call, checked_errors, xent, timer, nbytes):
    """xent's call checked against PyTorch (checked_errors: one call, its
    errors), then timed, into result; in the tune group, in every launch
    shape of the case's row_shapes (TUNE_SHAPES), or every count of its
    column_slices, on the same tensors. Returns the errors."""
    if case["group"] == "tune":
        # Each launch shape on the same tensors, checked, then all timed
        # together, interleaved as the implementations of a case are: timed
        # one after another, the first (None, the tune table's) read up to
        # 10% below the same shape timed later in the sixth GPU run.
        if "column_slices" in case:
            knob, choices, setter = "column_slices", case["column_slices"], xent.set_column_slices
        else:
            knob, choices, setter = "row_shape", case.get("row_shapes", TUNE_SHAPES), xent.set_row_shape
        result["shapes"], timed = [], {}
        for i, asked in enumerate(choices):
            one = {knob: list(asked) if isinstance(asked, tuple) else asked}
            try:
                setter(asked)
                one["errors"] = checked_errors()
                one["ok"] = all(e <= TOL[case["dtype"]] for e in one["errors"].values())
                timed[i] = lambda asked=asked: (setter(asked), call())
            except RuntimeError as e:  # a shape the kernel refuses: reported, not timed
                one.update(error=str(e)[:500], ok=False)
            finally:
                setter(None)
            result["shapes"].append(one)
        try:
            for i, (calls, _) in timer.many(timed).items():
                one = result["shapes"][i]
                one["xent_s"], one["spread"] = calls["median"], calls
                one["xent_tbps"] = nbytes / one["xent_s"] / 1e12
        finally:
            setter(None)
        table = result["shapes"][0]
        errors = table.get("errors", {})
        # Wrong results fail the run; a refused shape is only reported.
        result["ok"] = table["ok"] and all(o["ok"] or "error" in o for o in result["shapes"])
        result["xent_s"], result["xent_tbps"] = table.get("xent_s", float("nan")), table.get("xent_tbps", 0.0)
    else:
        errors = checked_errors()
        result["ok"] = all(e <= TOL[case["dtype"]] for e in errors.values())
        result["xent_s"] = timer(call)
        result["xent_tbps"] = nbytes / result["xent_s"] / 1e12
    result["errors"] = errors
    return errors


def time_roofline(result, timer, roofline, x, out):
    """The roofline on the case's own buffers, into result: a read of x
    (out None: a forward that writes no row), else a copy of x into out."""
    nbytes = x.numel() * x.element_size()
    if out is None:
        result["roofline"] = "read"
        rs = timer(lambda: roofline.read(x))
        result["roofline_tbps"] = nbytes / rs / 1e12
    else:
        result["roofline"] = "copy"
        rs = timer(lambda: roofline.copy(x, out))
        result["roofline_tbps"] = 2 * nbytes / rs / 1e12
    result["fraction_of_roofline"] = result["xent_tbps"] / result["roofline_tbps"]


def output_calls(fn, x, dy, op):
    """A softmax-family function's call on x as the pass `op` times it:
    (a fresh call's (y, dx) for the check, the timed call). sm_fwd: y
    without a gradient; sm_bwd: dx from y and dy alone, from a forward made
    once (the graph kept)."""
    xg = x.detach().requires_grad_(op == "sm_bwd")

    def checked():
        xg.grad = None
        y = fn(xg)
        if op == "sm_fwd":
            return y.detach(), None
        y.backward(dy)
        return y.detach(), xg.grad

    if op == "sm_fwd":
        def timed():
            with torch.no_grad():
                fn(xg)
    else:
        saved = fn(xg)

        def timed():
            xg.grad = None
            saved.backward(dy, retain_graph=True)
    return checked, timed


def errors_of(calls, ref_out, ref_grad, what):
    """(checked, timed) -> (a check returning {name: relative error}, timed):
    what the check compares, the output, the gradient or both."""
    checked, timed = calls

    def check():
        out, grad = checked()
        errors = {}
        if "out" in what:
            errors["loss" if ref_out.dim() == 0 else "out"] = relative(out, ref_out)
        if "grad" in what:
            errors["grad"] = relative(grad, ref_grad)
        return errors
    return check, timed


def peer_impls(makers, device, op, x, make_calls):
    """Each peer's (check, timed), or the reason it cannot run here."""
    impls = {}
    for name, make in makers.items():
        try:
            if x.dim() != 2:
                raise RuntimeError("takes [N, V] logits only")
            fn = make(device, op)
            impls[name] = make_calls(fn, x.detach().clone()) if getattr(make, "writes_its_input", False) \
                else make_calls(fn)
        except Exception as e:  # noqa: BLE001 -- reported with its reason
            impls[name] = e
    return impls


def legacy_keys(result, impls, nbytes):
    """The keys every earlier run's files have, from the package's time:
    xent_s and xent_tbps (the package), xent_c_s (the C call),
    package_over_xent, speedup_vs_eager and _vs_compile, peers."""
    package, c_call = impls.get("xent", {}), impls.get("xent_c", {})
    result["ok"] = "s" in package and "s" in c_call
    result["errors"] = dict(package.get("errors", {"package": package.get("error")}),
                            **{"c_" + k: v for k, v in c_call.get("errors", {"call": c_call.get("error")}).items()})
    result["xent_s"] = package.get("s", float("nan"))
    result["xent_tbps"] = nbytes / result["xent_s"] / 1e12 if "s" in package else 0.0
    if "s" in c_call:
        result["xent_c_s"] = c_call["s"]
        result["package_over_xent"] = result["xent_s"] / c_call["s"]
    for name, key in (("torch_eager", "eager"), ("torch_compile", "compile")):
        r = impls.get(name, {})
        if "s" in r:
            result[f"{name}_s"], result[f"{name}_tbps"] = r["s"], r["tbps"]
            result[f"speedup_vs_{key}"] = r["s"] / result["xent_s"]
        else:
            result[f"{name}_error"] = r.get("error", "not run")
    result["peers"] = {n: dict(r, speedup=r["s"] / result["xent_s"]) if "s" in r else r
                       for n, r in impls.items() if n in ("liger", "quack")}


def compare(case, result, impls, calls, eager, makers, x, out, timer, roofline, nbytes, peak_tbps):
    """A case's comparison, into result: xent's implementations (impls)
    beside PyTorch eager (eager, made a timed call by calls()), eager
    compiled for this shape, and the peers (makers) where they take the
    case; each checked, then all timed together; the roofline on x (and
    out); the best peer and the ratios to it."""
    impls["torch_eager"] = calls(eager)
    try:
        impls["torch_compile"] = calls(compiled(eager))
    except RuntimeError as e:
        impls["torch_compile"] = e
    impls.update(peer_impls(makers, x.device.type, case["op"], x, calls))
    time_implementations(case, result, impls, timer, nbytes, TOL[case["dtype"]])
    legacy_keys(result, result["impls"], nbytes)
    time_roofline(result, timer, roofline, x, out)
    summarize(result, result["impls"], result["roofline_tbps"], peak_tbps)


def run_softmax_case(case, xent, timer, device, roofline, peak_tbps):
    """A softmax-family case: xent's package call and its C call, PyTorch
    eager and compiled, Liger-Kernel and Quack, each checked against PyTorch
    in float64 on the same tensors, then timed together, beside the
    roofline (a copy of the row's bytes: the forward moves x in and y out,
    the backward y and dy in and dx out, 1.5 copies). The tune group times
    the C call alone in every launch shape."""
    _, tdtype = DTYPES[case["dtype"]]
    shape, axis, op = case["shape"], case["axis"], case["op"]
    gen = torch.Generator(device=device).manual_seed(1234)
    x = (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * 4).to(tdtype)
    d = xent.softmax_desc(shape, axis, case["dtype"])
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0
    out = torch.empty_like(x)
    dy = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(tdtype)
    x64 = x.double().requires_grad_()
    ref_y = torch.softmax(x64, dim=axis)
    ref_dx = torch.autograd.grad(ref_y, x64, dy.double())[0] if op == "sm_bwd" else None
    ref_y = ref_y.detach()
    if op == "sm_fwd":
        inputs = (x,)
        ref = ref_y
    else:
        # The C call's y rounded to the dtype as a forward would give it;
        # PyTorch's softmax backward (its SoftmaxGrad) on the same values in
        # float64 is its reference.
        y = torch.softmax(x.float(), dim=axis).to(tdtype)
        inputs = (y, dy)
        ref = torch._softmax_backward_data(dy.double(), y.double(), axis, torch.float64)
    call = lambda: xent.softmax(d, op, inputs, out, stream)  # noqa: E731

    def checked_errors():
        out.fill_(float("nan"))
        call()
        if device == "cuda":
            torch.cuda.synchronize()
        return {"out": relative(out, ref)}

    result = dict(case, shape=list(shape))
    elem = x.element_size()
    moves = 2 if op == "sm_fwd" else 3
    nbytes = moves * x.numel() * elem
    result["model_bytes"] = nbytes
    if case["group"] == "tune":
        time_xent(case, result, call, checked_errors, xent, timer, nbytes)
        time_roofline(result, timer, roofline, x, out)
    else:
        import xent as package

        what = ("out",) if op == "sm_fwd" else ("grad",)

        def calls(fn):
            return errors_of(output_calls(fn, x, dy, op), ref_y, ref_dx, what)

        def softmax_along(fn):
            return lambda t: fn(t, axis)

        impls = {"xent": calls(softmax_along(package.softmax)), "xent_c": (checked_errors, call)}
        compare(case, result, impls, calls, softmax_along(torch.softmax), SOFTMAX_PEERS, x, out, timer, roofline,
                nbytes, peak_tbps)
    if device == "cuda":
        result["clocks"] = clocks()
    del x, out, inputs, ref
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


def run_case(case, xent, timer, device, roofline, peak_tbps):
    if case["op"] in SOFTMAX_OPS:
        return run_softmax_case(case, xent, timer, device, roofline, peak_tbps)
    dtype_id, tdtype = DTYPES[case["dtype"]]
    shape, axis, op = case["shape"], case["axis"], case["op"]
    gen = torch.Generator(device=device).manual_seed(1234)
    x = (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * 4).to(tdtype)
    label_shape = shape[:axis] + shape[axis + 1:]
    y = torch.randint(0, shape[axis], label_shape, generator=gen, device=device, dtype=torch.int64)
    d = xent.desc(shape, axis, case["dtype"])
    loss = torch.empty((), dtype=tdtype, device=device)
    lse = torch.empty(label_shape, dtype=torch.float32, device=device)
    grad = torch.empty_like(x) if op != "fwd" else None
    ws = xent.workspace(d, op, device, case.get("column_slices", (None,)))
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0
    t = Tensors()
    t.logits, t.labels = x.data_ptr(), y.data_ptr()
    if op != "bwd":
        t.loss, t.lse = loss.data_ptr(), lse.data_ptr()
    if op == "bwd":
        # The saved lse, from a forward call.
        fwd_ws = xent.workspace(d, "fwd", device)
        tf = Tensors()
        tf.logits, tf.labels, tf.loss, tf.lse = x.data_ptr(), y.data_ptr(), loss.data_ptr(), lse.data_ptr()
        xent.run(d, "fwd", tf, fwd_ws, stream)
        t.lse_in = lse.data_ptr()
    if grad is not None:
        t.grad = grad.data_ptr()
    call = lambda: xent.run(d, op, t, ws, stream)  # noqa: E731

    # Correctness first: the same (rounded) tensors through PyTorch in
    # float64 (the mean over rows, class axis `axis`).
    xr = x.double().movedim(axis, 1).requires_grad_(op != "fwd")
    ref = F.cross_entropy(xr, y)
    ref_loss = ref.detach()
    g_ref = None
    if op != "fwd":
        ref.backward()
        g_ref = xr.grad.movedim(1, axis)
    del xr, ref

    def checked_errors():
        """One C call, and its loss and gradient against PyTorch's."""
        call()
        if device == "cuda":
            torch.cuda.synchronize()
        errors = {}
        if op != "bwd":
            errors["loss"] = relative(loss, ref_loss)
        if op != "fwd":
            errors["grad"] = relative(grad, g_ref)
        return errors

    result = dict(case, shape=list(shape))
    elem = x.element_size()
    nbytes = model_bytes(case, elem)
    result["model_bytes"] = nbytes
    if case["group"] == "tune":
        time_xent(case, result, call, checked_errors, xent, timer, nbytes)
        time_roofline(result, timer, roofline, x, grad)
    else:
        # Every implementation on the same tensors: the package (what a user
        # calls: the headline), its C call, PyTorch eager and compiled for
        # this shape, Liger-Kernel and Quack where they take the case.
        import xent as package

        what = {"fwd": ("out",), "fwd_bwd": ("out", "grad"), "bwd": ("grad",)}[op]

        def calls(fn, logits=x):
            return errors_of(loss_calls(fn, logits, y, op, axis), ref_loss, g_ref, what)

        impls = {"xent": calls(package.cross_entropy), "xent_c": (checked_errors, call)}
        if x.dim() > 2:
            # The class axis in place against the layout a transpose makes:
            # PyTorch's loss (a peer) and xent's own after that copy.
            def transposed(f):
                return lambda xg, target: f(xg.movedim(1, -1).reshape(-1, xg.shape[1]), target.reshape(-1))
            impls["xent_transposed"] = calls(transposed(package.cross_entropy))
            impls["torch_transposed"] = calls(transposed(F.cross_entropy))
        compare(case, result, impls, calls, F.cross_entropy, PEERS, x, grad, timer, roofline, nbytes, peak_tbps)
    if device == "cuda":
        result["clocks"] = clocks()
    del x, y, grad, ws, lse, loss, g_ref
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


class GpuRoofline:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.sink = torch.empty(4, dtype=torch.uint8, device="cuda")

    def read(self, x):
        s = torch.cuda.current_stream().cuda_stream
        if self.lib.xent_bench_read(ctypes.c_void_p(x.data_ptr()), ctypes.c_size_t(x.numel() * x.element_size()),
                                    ctypes.c_void_p(self.sink.data_ptr()), ctypes.c_void_p(s)) != 0:
            raise RuntimeError("roofline read failed")

    def copy(self, x, y):
        s = torch.cuda.current_stream().cuda_stream
        if self.lib.xent_bench_copy(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
                                    ctypes.c_size_t(x.numel() * x.element_size()), ctypes.c_void_p(s)) != 0:
            raise RuntimeError("roofline copy failed")


class CpuRoofline:
    """Dry run: PyTorch's own CPU read (a sum over the bytes) and copy."""

    def read(self, x):
        x.view(torch.uint8).sum()

    def copy(self, x, y):
        y.copy_(x)


# The device's peak DRAM bandwidth (TB/s) by its name, from NVIDIA's data
# sheets: the denominator of "fraction of peak".
PEAK_TBPS = {"H200": 4.8, "H100 80GB HBM3": 3.35, "H100 PCIe": 2.0, "B200": 8.0}


def peak_tbps(name):
    return next((v for k, v in PEAK_TBPS.items() if k in name), None)


def environment(device, commit):
    env = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), commit=commit,
               host=platform.node(), torch=torch.__version__, python=platform.python_version(), device_kind=device)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(device=props.name, sms=props.multi_processor_count, memory_bytes=props.total_memory,
                   cuda=torch.version.cuda)
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            env["driver"] = f"unknown ({e})"
    else:
        env.update(device=f"cpu ({platform.processor() or platform.machine()}), emulated kernels", driver="none")
    return env


def plot(results, env, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, op in zip(axes, ("fwd", "fwd_bwd")):
        rows = sorted((r for r in results if r["group"] == "sweep" and r["op"] == op), key=lambda r: r["shape"][1])
        v = [r["shape"][1] for r in rows]
        series = [("xent", "xent_tbps", "o-"), ("PyTorch eager", "torch_eager_tbps", "s--"),
                  ("torch.compile", "torch_compile_tbps", "^--"), ("Liger-Kernel", "liger", "v-."),
                  ("Quack", "quack", "d-."), (f"{rows[0]['roofline'] if rows else ''} roofline", "roofline_tbps", "k:")]
        for label, key, style in series:
            if key in PEERS:
                pts = [(vv, r["peers"][key]["tbps"]) for vv, r in zip(v, rows) if "tbps" in r.get("peers", {}).get(key, {})]
            else:
                pts = [(vv, r[key]) for vv, r in zip(v, rows) if key in r]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("V (classes)")
        ax.set_ylabel("TB/s of model bytes")
        ax.set_title({"fwd": "forward (loss only)", "fwd_bwd": "fused forward + backward"}[op] + f", bf16")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"xent on {env['device']}, {env['date'][:10]}, commit {env['commit'][:10]}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_json(path, env, results, complete):
    """The results so far, replaced whole (a reader never sees half a file)."""
    with open(path + ".tmp", "w") as f:
        json.dump(dict(environment=env, complete=complete, results=results), f, indent=1)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True, help="libxent_shared.so (built with --config=cuda for a GPU)")
    p.add_argument("--roofline", help="libxent_roofline.so (GPU runs)")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.json and OUT.png")
    p.add_argument("--dry-run", action="store_true", help="CPU backend, tiny shapes")
    p.add_argument("--groups", default="", help="comma-separated case groups to run (default: all)")
    p.add_argument("--commit", default=os.environ.get("XENT_COMMIT", "unknown"))
    p.add_argument("--reps", type=int, default=25)
    args = p.parse_args()
    # The PyTorch package (python/xent) over the same library.
    os.environ["XENT_LIBRARY"] = args.lib
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: no CUDA device for the benchmark (use --dry-run on a CPU)")
        return 0
    cases = dry_cases() if args.dry_run else gpu_cases()
    if args.groups:
        wanted = set(args.groups.split(","))
        cases = [c for c in cases if c["group"] in wanted]
    xent = Xent(args.lib, device)
    roofline = CpuRoofline() if args.dry_run else GpuRoofline(args.roofline)
    timer = Timer(device, warmup=2 if args.dry_run else 5, reps=3 if args.dry_run else args.reps,
                  warmup_s=0.0 if args.dry_run else 0.05)
    env = environment(device, args.commit)
    env["timing"] = dict(warmup=timer.warmup, warmup_s=timer.warmup_s, reps=timer.reps,
                         statistics="min, p10, median, p90, max; ratios of medians, level where p10-p90 overlap",
                         order="implementations interleaved per case, the order rotated each repetition",
                         clock="CUDA events, L2 flushed and a 300 us GPU lead before each call"
                         if device == "cuda" else "wall clock")
    import xent as package
    env["package_path"] = "C++ (xent._C)" if package._native.module is not None else \
        f"Python ({package._native.why})"
    peak = peak_tbps(env.get("device", ""))
    env["peak_tbps"] = peak
    if device == "cuda":
        env["clocks_start"] = clocks()
    results = []
    for case in cases:
        r = run_case(case, xent, timer, device, roofline, peak)
        results.append(r)
        release_case_memory()
        line = (f"{r['group']:12s} {r['op']:8s} {r['dtype']:5s} {'x'.join(map(str, r['shape'])):18s} "
                f"xent {r['xent_tbps']:.4g} TB/s = {100 * r['fraction_of_roofline']:.3g}% of {r['roofline']}")
        if "speedup_vs_eager" in r:
            line += f"; {r['speedup_vs_eager']:.3g}x eager"
        if "speedup_vs_compile" in r:
            line += f", {r['speedup_vs_compile']:.2f}x compile"
        if "package_over_xent" in r:
            line += f"; the package takes {r['package_over_xent']:.2f}x the C call's time"
        if r.get("best_peer") and "vs_best_peer" in r.get("package", {}):
            line += (f"; {r['package']['vs_best_peer']:.2f}x best peer ({r['best_peer']}"
                     f"{', level' if r['package']['level_with_best_peer'] else ''})")
        for name, peer in r.get("peers", {}).items():
            line += f", {peer['speedup']:.2f}x {name}" if "speedup" in peer else f", no {name}"
        for one in r.get("shapes", [])[1:]:
            asked = f"{one['column_slices']} slices" if "column_slices" in one else "x".join(map(str, one["row_shape"]))
            line += f"; {asked}: {one['xent_tbps']:.4g}" if "xent_tbps" in one else f"; {asked}: {one['error'][:60]}"
            line += "" if one["ok"] or "error" in one else f" WRONG {one.get('errors')}"
        print(line + ("" if r["ok"] else f"  WRONG: {r['errors']}"), flush=True)
        # Written after every case: a run stopped by its time limit keeps
        # what it measured ("complete": false).
        write_json(args.out + ".json", env, results, complete=False)
    # Fused time over forward-only time, per shape (target: <= 2.1).
    fwd = {(r["dtype"], tuple(r["shape"])): r["xent_s"] for r in results if r["op"] == "fwd"}
    for r in results:
        if r["op"] == "fwd_bwd" and (r["dtype"], tuple(r["shape"])) in fwd:
            r["fused_over_forward"] = r["xent_s"] / fwd[(r["dtype"], tuple(r["shape"]))]
    if device == "cuda":
        env["clocks_end"] = clocks()
    write_json(args.out + ".json", env, results, complete=True)
    plot(results, env, args.out + ".png")
    print(f"wrote {args.out}.json and {args.out}.png")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
