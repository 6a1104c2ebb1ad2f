#!/usr/bin/env python3
"""The fused linear cross entropy's benchmark (issue 62): the loss of
hidden @ weight^T and the gradients of hidden and weight, one forward and
backward step, timed and its peak memory measured side by side with the
three GEMMs alone, PyTorch (eager and torch.compile, the [N, V] logits
materialized), Liger-Kernel's fused linear cross entropy and Apple's Cut
Cross-Entropy, in one process, on the same tensors. A peer that cannot run
is named in the result with the reason.

Each method is checked first against the step in float64 on the same
(rounded) inputs, a chunk of rows at a time: the loss, grad_hidden and
grad_weight, each's largest error relative to its largest value. Then the
methods that agree are timed interleaved (bench.py's Timer.many: each
repetition calls every one once, the order rotated), and each keeps the
spread of its calls (min, p10, median, p90, max).

Lines, each a method on the same case:
  xent_package  xent.linear_cross_entropy(...).backward(), what a user
                calls (the headline; the other methods' ratios are to it):
                the autograd function (the gradients of a loss of 1
                computed in the forward, scaled by the incoming gradient in
                the backward)
  xent_on_chip  the same with plan="on_chip" (the tensor cores' tiles of
                logits never stored; sm_90a code on an H100/H200, else
                named as not run)
  xent          one xent_linear_ce_run: the loss and both gradients
                (workspace from PyTorch's allocator, as the package takes it)
  gemms         the three GEMMs alone, unchunked: hidden @ weight^T, then
                [N, V] @ weight and [N, V]^T @ hidden, by PyTorch (`@`)
  gemms_best    the same three by cuBLASLt's fastest algorithm for each
                (bench/cublaslt_best.py: the heuristic's first candidates
                each timed on the case's tensors, every one's time kept in
                the case's `gemms_search`): with `gemms`, the time the
                targets compare xent with (issue 62: within 1.05x of the
                faster)
  torch_eager   F.cross_entropy(F.linear(hidden, weight), target).backward()
  torch_compile the same function under torch.compile, built for each
                case's shape (dynamic=False), compiled in its check
  liger         LigerFusedLinearCrossEntropyLoss (CUDA only: Triton)
  cce           cut_cross_entropy.linear_cross_entropy (CUDA only: Triton)

Then xent's call under other plans (each case's `sweep`): the one-pass
plan in chunks of several sizes, and memory budgets (desc.memory_mib) from
the default 64 MiB to the one-pass plan's: the memory-for-speed curve of
docs/LINEAR_CE.md. Each is checked as the methods are, and they are timed
interleaved with each other and the default.

The package's step, with its default plan and with plan="on_chip", is
also profiled once (torch.profiler): each kernel's device time by name,
where the time goes (`kernels`).

Memory: the peak of PyTorch's allocator during one step beyond what was
allocated before it, less the step's own outputs (the loss and the two
gradients): what the step needs besides its inputs and outputs. On the CPU
(--dry-run: the cpu backend, OpenBLAS and the emulated kernels, tiny
shapes) it is not measured and the times mean nothing; every code path, the
checks and the JSON are exercised (//bench:bench_dry_run_test).

Writes OUT.json. Exit status 1 if a check of xent failed. On the CPU,
--cublaslt names a host stand-in of cuBLASLt (tests/fake_blaslt.c) for
gemms_best, whose products are then checked as on a GPU."""

import argparse
import ctypes
import gc
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from bench import Timer, clocks, compiled, environment, level, write_json  # noqa: E402
import cublaslt_best  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# Against the step in float64 on the same inputs, relative to the largest
# magnitude of each expected tensor: the logits and gradients are rounded to
# the dtype once per GEMM.
TOL = {"bf16": 3e-2, "f16": 5e-3, "f32": 1e-4}
# The float64 reference's rows at a time (its logits: 4 GiB at V = 262144).
REFERENCE_ROWS = 2048


# Each case; `sweep`: the chunk sizes (rows) xent's one-pass plan is also
# timed at, for the tune data of specs/linear_cross_entropy.lua; `memory`:
# the desc settings of the memory-for-speed curve (memory_mib: the budget,
# 2^40 the one-pass plan whatever it needs; plan: xent_linear_ce_plan_kind;
# chunk_classes: tiles of that many classes). The `xent` line is the
# default (64 MiB: TILED in tiles of 2048).
ONE_PASS = 1 << 40
# xent.h's XENT_ROW_SHAPE_ON_CHIP: a sweep entry's on_chip.
ROW_SHAPE_ON_CHIP = -1


def gpu_cases():
    # (The fifth run swept the one pass's chunks from 256 to 8192 rows; the
    # profile stage gives this step 140 s.)
    # At 16384 x 4096 x 131072: TILED in tiles of 4096 and (plan 3 asked
    # for) 8192; TILED_HIDDEN_SUM in tiles of 4096 and 8192; the one pass,
    # and its chunks' fused kernel with the rows on chip (issue 61 item 5).
    chip = dict(memory_mib=ONE_PASS, on_chip=True)
    curve = [dict(memory_mib=128), dict(memory_mib=512, plan=3), dict(memory_mib=512), dict(memory_mib=1024),
             dict(memory_mib=ONE_PASS), chip]
    short = [dict(memory_mib=m) for m in (512, ONE_PASS)] + [chip]
    return [dict(n=16384, h=4096, v=131072, dtype="bf16", sweep=curve + [dict(memory_mib=ONE_PASS, chunk_rows=4096)]),
            dict(n=8192, h=4096, v=262144, dtype="bf16", sweep=short),
            dict(n=16384, h=2048, v=248320, dtype="bf16", sweep=short)]


def dry_cases():
    return [dict(n=96, h=16, v=300, dtype="bf16",
                 sweep=[dict(memory_mib=ONE_PASS, chunk_rows=16), dict(memory_mib=ONE_PASS, chunk_rows=16, on_chip=True),
                        dict(chunk_classes=64, chunk_rows=40),
                        dict(chunk_classes=64, chunk_rows=40, plan=3)]),
            dict(n=70, h=24, v=257, dtype="f32", sweep=[])]


def xent_call(xent, hidden, weight, target, on_chip=False, **desc):
    """One xent_linear_ce_run: (loss, grad_hidden, grad_weight); desc: fields
    of xent_linear_ce_desc (chunk_rows, memory_mib, chunk_classes). on_chip:
    the one pass's chunks take the fused kernel with their rows held on chip
    (xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP) on the package's handle for
    the call; docs/PERFORMANCE.md, "Rows on chip")."""
    C = xent._capi
    n, h = hidden.shape
    dt = {torch.bfloat16: C.BF16, torch.float16: C.F16, torch.float32: C.F32}[hidden.dtype]
    d = C.LinearDesc()
    C.lib.xent_linear_ce_desc_init(ctypes.byref(d), n, h, weight.shape[0], dt, C.I64, C.MEAN)
    d.ce.loss_dtype = C.F32
    for k, v in desc.items():
        setattr(d, k, v)
    loss = torch.empty((), dtype=torch.float32, device=hidden.device)
    gh, gw = torch.empty_like(hidden), torch.empty_like(weight)
    t = C.LinearTensors(hidden=hidden.data_ptr(), weight=weight.data_ptr(), labels=target.data_ptr(),
                        loss=loss.data_ptr(), grad_hidden=gh.data_ptr(), grad_weight=gw.data_ptr())
    handle = xent._run.handle(hidden.device)
    size = ctypes.c_size_t()
    C.check(C.lib.xent_linear_ce_workspace_size(handle, ctypes.byref(d), ctypes.byref(size)))
    ws = torch.empty(max(size.value, 1), dtype=torch.uint8, device=hidden.device)
    if on_chip:
        C.check(C.lib.xent_set_row_shape(handle, ROW_SHAPE_ON_CHIP, 0))
    try:
        C.check(C.lib.xent_linear_ce_run(handle, ctypes.byref(d), ctypes.byref(t), ws.data_ptr(), size.value,
                                         xent._run.stream(hidden.device)))
    finally:
        if on_chip:
            C.check(C.lib.xent_set_row_shape(handle, 0, 0))
    return loss, gh, gw


def with_autograd(loss_fn):
    """A step of a loss function of (hidden, weight, target): its loss and the
    two gradients through autograd."""
    def step(hidden, weight, target):
        hg, wg = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
        loss = loss_fn(hg, wg, target)
        loss = loss[0] if isinstance(loss, tuple) else loss
        loss.backward()
        return loss.detach(), hg.grad, wg.grad
    return step


def torch_loss(hidden, weight, target):
    return F.cross_entropy(F.linear(hidden, weight), target)


def make_methods(xent, device):
    """name -> a step of (hidden, weight, target), or the reason it cannot
    run here; made for each case (torch.compile's graph is the case's)."""
    methods = {"xent_package": with_autograd(lambda h, w, y: xent.linear_cross_entropy(h, w, y)),
               "xent_on_chip": with_autograd(lambda h, w, y: xent.linear_cross_entropy(h, w, y, plan="on_chip")),
               "xent": lambda h, w, y: xent_call(xent, h, w, y)}

    def gemms(h, w, y):
        logits = h @ w.t()
        return None, logits @ w, logits.t() @ h
    methods["gemms"] = gemms
    methods["torch_eager"] = with_autograd(torch_loss)
    try:
        methods["torch_compile"] = with_autograd(compiled(torch_loss))
    except RuntimeError as e:  # no torch.compile
        methods["torch_compile"] = str(e)
    if device != "cuda":
        methods["liger"] = "Liger-Kernel is Triton: CUDA only"
        methods["cce"] = "Cut Cross-Entropy is Triton: CUDA only"
        return methods
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        liger = LigerFusedLinearCrossEntropyLoss()
        methods["liger"] = with_autograd(lambda h, w, y: liger(w, h, y))
    except Exception as e:  # noqa: BLE001 -- reported with its reason
        methods["liger"] = f"{type(e).__name__}: {e}"[:500]
    try:
        from cut_cross_entropy import linear_cross_entropy as cce
        methods["cce"] = with_autograd(lambda h, w, y: cce(h, w, y))
    except Exception as e:  # noqa: BLE001
        methods["cce"] = f"{type(e).__name__}: {e}"[:500]
    return methods


# cuBLASLt's candidates timed for each GEMM of gemms_best.
GEMM_CANDIDATES = 8


def best_gemms(lt, hidden, weight, device):
    """gemms_best's step, the three GEMMs by cuBLASLt's fastest candidate
    for each, and what the search found: [{"gemm", "m", "n", "k", "best",
    "candidates": [...]}] (cublaslt_best.fastest's, each timed interleaved
    with the others of its GEMM)."""
    n, h = hidden.shape
    v = weight.shape[0]
    logits = torch.empty(n, v, dtype=hidden.dtype, device=device)
    gh, gw = torch.empty_like(hidden), torch.empty_like(weight)
    workspace = torch.empty(cublaslt_best.WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    shapes = [("logits", hidden, weight.t(), logits), ("grad_hidden", logits, weight, gh),
              ("grad_weight", logits.t(), hidden, gw)]
    timer = Timer(device, warmup=1, reps=3)
    plans, search = [], []
    for name, a, b, out in shapes:
        gemm = cublaslt_best.Gemm(lt, a, b, out, workspace, GEMM_CANDIDATES)
        best, times = cublaslt_best.fastest(gemm, (a, b, out), timer)
        plans.append((gemm, best))
        search.append(dict(gemm=name, m=a.shape[0], n=b.shape[1], k=a.shape[1], best=best, candidates=times))
    del logits, gh, gw, shapes

    def step(hidden, weight, target):
        (g1, b1), (g2, b2), (g3, b3) = plans
        logits = g1.run(b1, hidden, weight.t(), torch.empty(n, v, dtype=hidden.dtype, device=device))
        gh = g2.run(b2, logits, weight, torch.empty_like(hidden))
        gw = g3.run(b3, logits.t(), hidden, torch.empty_like(weight))
        return None, gh, gw
    step.plans, step.workspace = plans, workspace
    return step, search


def reference(hidden, weight, target):
    """The step in float64 on the same rounded inputs, REFERENCE_ROWS rows
    at a time: (the mean loss, grad_hidden, grad_weight), from the
    definitions (every target counts)."""
    n = hidden.shape[0]
    w64 = weight.double()
    loss = torch.zeros((), dtype=torch.float64, device=hidden.device)
    gh = torch.empty(hidden.shape, dtype=torch.float64, device=hidden.device)
    gw = torch.zeros(weight.shape, dtype=torch.float64, device=hidden.device)
    for r0 in range(0, n, REFERENCE_ROWS):
        h64, y = hidden[r0:r0 + REFERENCE_ROWS].double(), target[r0:r0 + REFERENCE_ROWS]
        z = h64 @ w64.T
        lse = torch.logsumexp(z, 1)
        rows = torch.arange(len(y), device=y.device)
        loss += (lse - z[rows, y]).sum()
        g = torch.exp(z - lse[:, None])  # softmax, then less the one-hot target
        del z
        g[rows, y] -= 1
        gh[r0:r0 + REFERENCE_ROWS] = g @ w64
        gw += g.T @ h64
        del g
    return loss / n, gh / n, gw / n


def errors(got, want):
    out = {}
    for name, g, w in zip(("loss", "grad_hidden", "grad_weight"), got, want):
        if g is None:
            continue
        g = g.double()
        out[name] = ((g - w).abs().max() / w.abs().max().clamp_min(1e-30)).item()
    return out


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def peak_extra_bytes(step, args, device):
    """The allocator's peak during one step beyond what was allocated before
    it, less the step's outputs; None on the CPU."""
    if device != "cuda":
        return None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = step(*args)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    outputs = sum(t.numel() * t.element_size() for t in out if t is not None)
    del out
    return peak - outputs


# The methods whose step is also profiled once, kernel by kernel.
PROFILED = ("xent_package", "xent_on_chip")


def kernel_times(step, args, device):
    """One step under torch.profiler (CUDA activity alone): each GPU
    kernel's device time summed by name, its template arguments and
    parameters dropped, largest first: [{"name", "s", "calls"}], where a
    plan's time goes (the ON_CHIP plan's two passes beside the combine and
    the rounding). None on the CPU, where the cpu backend's kernels are no
    profiler events."""
    if device != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = step(*args)
        torch.cuda.synchronize()
    del out
    sums = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us <= 0:
            continue
        name = e.key.split("(")[0].split("<")[0].strip()
        name = (name[5:] if name.startswith("void ") else name) or e.key
        total = sums.setdefault(name, dict(name=name, s=0.0, calls=0))
        total["s"] += us * 1e-6
        total["calls"] += e.count
    return sorted(sums.values(), key=lambda k: -k["s"])


def keep_times(entries, spreads):
    """Into each entry of {name: entry}: the median, spread and host time
    of its calls from Timer.many's {name: (calls, host)}."""
    for name, (calls, host) in spreads.items():
        if name in entries:
            entries[name].update(s=calls["median"], spread=calls, host_s=host["median"])


def run_case(case, xent, methods, timer, device, lt):
    n, h, v, dtype = case["n"], case["h"], case["v"], case["dtype"]
    gen = torch.Generator(device=device).manual_seed(1234)
    hidden = torch.randn(n, h, generator=gen, device=device).to(DTYPES[dtype])
    weight = (torch.randn(v, h, generator=gen, device=device) / h ** 0.5).to(DTYPES[dtype])
    target = torch.randint(0, v, (n,), generator=gen, device=device)
    want = reference(hidden, weight, target)
    result = dict(case, logits_bytes=n * v * hidden.element_size(), gemm_flops=3 * 2 * n * h * v, methods={})
    args = (hidden, weight, target)

    def check(step, compare=True):
        """{"errors": ...} of one step against the float64 one, or
        {"error": why} (a failure is reported, not fatal)."""
        try:
            got = step(*args)
            sync(device)
            err = errors(got, want) if compare else {}
            del got
            if any(e > TOL[dtype] for e in err.values()):
                raise RuntimeError(f"disagrees with the float64 step: {err}")
            return dict(errors=err)
        except Exception as e:  # noqa: BLE001 -- reported with its reason
            return dict(error=f"{type(e).__name__}: {e}"[:500])

    checked = {}
    for name, step in methods.items():
        result["methods"][name] = dict(error=step) if isinstance(step, str) else check(step, name != "gemms")
        if "errors" in result["methods"][name]:
            checked[name] = step
    # The GEMMs by cuBLASLt's fastest algorithms, their products checked
    # against PyTorch's (the gemms method's) on the same inputs.
    if isinstance(lt, str):
        result["methods"]["gemms_best"] = dict(error=lt)
    else:
        try:
            step, result["gemms_search"] = best_gemms(lt, hidden, weight, device)
            got, torch_got = step(*args), methods["gemms"](*args)
            sync(device)
            err = {k: ((g.double() - w.double()).abs().max() / w.double().abs().max().clamp_min(1e-30)).item()
                   for k, g, w in zip(("grad_hidden", "grad_weight"), got[1:], torch_got[1:])}
            del got, torch_got
            if any(e > TOL[dtype] for e in err.values()):
                raise RuntimeError(f"its products disagree with PyTorch's: {err}")
            result["methods"]["gemms_best"] = dict(products_vs_torch=err)
            checked["gemms_best"] = step
        except Exception as e:  # noqa: BLE001 -- reported with its reason
            result["methods"]["gemms_best"] = dict(error=f"{type(e).__name__}: {e}"[:500])
    # The sweep's plans, each checked like a method before it is timed.
    sweep = []
    for desc in case["sweep"] if "xent" in checked else []:
        def step(h, w, y, desc=desc):
            return xent_call(xent, h, w, y, **desc)
        entry = dict(desc, **check(step))
        sweep.append((step if "errors" in entry else None, entry))
    del want
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    def measure_memory(timed, key, step, entry):
        """Into entry its peak memory, and step into timed[key]; or the
        error (out of memory, say)."""
        try:
            entry["peak_extra_bytes"] = peak_extra_bytes(step, args, device)
            timed[key] = (lambda: step(*args))
        except Exception as e:  # noqa: BLE001 -- reported with its reason
            entry["error"] = f"{type(e).__name__}: {e}"[:500]

    ms = result["methods"]
    timed = {}
    for name, step in checked.items():
        measure_memory(timed, name, step, ms[name])
    keep_times(ms, timer.many(timed) if timed else {})
    for name in PROFILED:
        if name in timed:
            try:
                ms[name]["kernels"] = kernel_times(checked[name], args, device)
            except Exception as e:  # noqa: BLE001 -- reported, never fatal
                ms[name]["kernels_error"] = f"{type(e).__name__}: {e}"[:500]
    # The clocks right after (a GEMM-bound step at the power limit clocks
    # down: what the GEMMs' TFLOP/s is read against), and each method's
    # rate in the three GEMMs' flops.
    if device == "cuda":
        result["clocks"] = clocks()
    for m in ms.values():
        if "s" in m:
            m["gemm_tflops"] = result["gemm_flops"] / m["s"] / 1e12
    if "s" in ms["xent"]:
        result["sweep"] = []
        timed = {"default": lambda: xent_call(xent, *args)}
        for i, (step, entry) in enumerate(sweep):
            result["sweep"].append(entry)
            if step is not None:
                measure_memory(timed, i, step, entry)
        spreads = timer.many(timed)
        keep_times({i: result["sweep"][i] for i in timed if i != "default"}, spreads)
        result["sweep_default_spread"] = spreads["default"][0]
    # The package is the headline: every ratio is to it (above 1: the
    # package is faster), level where the p10-p90 ranges overlap.
    head = ms["xent_package"]
    if "s" in head:
        for name, m in ms.items():
            if "s" in m and name != "xent_package":
                m["over_package"] = m["s"] / head["s"]
                m["level_with_package"] = level(m["spread"], head["spread"])
        for g in ("gemms", "gemms_best"):
            if "s" in ms[g]:
                result[f"package_over_{g}"] = head["s"] / ms[g]["s"]
    xs = ms["xent"].get("s")
    if xs:
        for g in ("gemms", "gemms_best"):
            if "s" in ms[g]:
                result[f"xent_over_{g}"] = xs / ms[g]["s"]
        if ms["xent"].get("peak_extra_bytes") is not None:
            result["xent_extra_over_logits"] = ms["xent"]["peak_extra_bytes"] / result["logits_bytes"]
    result["ok"] = all("s" in ms[m] and "error" not in ms[m] for m in ("xent", "xent_package")) and not any(
        "error" in c for c in result.get("sweep", []))
    del hidden, weight, target
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True, help="libxent_shared.so (built with --config=cuda for a GPU)")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.json")
    p.add_argument("--dry-run", action="store_true", help="CPU backend, tiny shapes")
    p.add_argument("--commit", default=os.environ.get("XENT_COMMIT", "unknown"))
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--cublaslt", help="cuBLASLt for gemms_best (default on a GPU: the one PyTorch uses; on the CPU: "
                   "none, or a host stand-in such as tests/fake_blaslt.c's)")
    args = p.parse_args()
    os.environ["XENT_LIBRARY"] = args.lib
    import xent

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: no CUDA device for the benchmark (use --dry-run on a CPU)")
        return 0
    timer = Timer(device, warmup=1 if args.dry_run else 2, reps=2 if args.dry_run else args.reps)
    env = environment(device, args.commit)
    env["timing"] = dict(warmup=timer.warmup, reps=timer.reps, statistic="median and spread, interleaved",
                         clock="CUDA events" if device == "cuda" else "wall clock")
    path = args.cublaslt or (cublaslt_best.find_library() if device == "cuda" else None)
    lt = ("cuBLASLt: CUDA only (--cublaslt names a stand-in on the CPU)" if device != "cuda" else
          "no libcublasLt found") if path is None else None
    if lt is None:
        try:
            lt = cublaslt_best.CublasLt(path)
            env["cublaslt"] = path
        except (OSError, RuntimeError, AttributeError) as e:
            lt = f"{path}: {type(e).__name__}: {e}"[:500]
    results = []
    for case in dry_cases() if args.dry_run else gpu_cases():
        r = run_case(case, xent, make_methods(xent, device), timer, device, lt)
        results.append(r)
        line = f"N {r['n']} H {r['h']} V {r['v']} {r['dtype']}:"
        for name, m in r["methods"].items():
            if "s" in m:
                mem = m.get("peak_extra_bytes")
                line += f"\n  {name:14s} {m['s'] * 1e3:9.3f} ms" + (f", {mem / 2**20:9.1f} MiB extra" if mem is not None
                                                                   else "")
            else:
                line += f"\n  {name:14s} did not run: {m['error']}"
            for k in (m.get("kernels") or [])[:6]:
                line += f"\n    {k['name'][:60]:60s} {k['s'] * 1e3:9.3f} ms in {k['calls']}"
        for c in r.get("sweep", []):
            what = ", ".join(f"{k} {'one pass' if v == ONE_PASS else v}" for k, v in c.items()
                             if k in ("memory_mib", "plan", "chunk_rows", "chunk_classes"))
            if "error" in c:
                line += f"\n  xent, {what}: did not run: {c['error']}"
                continue
            mem = c["peak_extra_bytes"]
            line += f"\n  xent, {what}: {c['s'] * 1e3:9.3f} ms" + (
                f", {mem / 2**20:9.1f} MiB extra" if mem is not None else "")
        for g in ("gemms", "gemms_best"):
            if f"package_over_{g}" in r:
                line += f"\n  package / {g}: {r[f'package_over_{g}']:.3f}"
        for one in r.get("gemms_search", []):
            line += (f"\n  {one['gemm']}: cuBLASLt's candidate {one['best']} of {len(one['candidates'])} fastest, "
                     + ", ".join(f"{c['s'] * 1e3:.3f}" for c in one["candidates"]) + " ms")
        print(line, flush=True)
        # After every case: a run stopped by its time limit keeps what it
        # measured ("complete": false).
        write_json(args.out + ".json", env, results, complete=False)
    write_json(args.out + ".json", env, results, complete=True)
    print(f"wrote {args.out}.json")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
