"""GEMMs by cuBLASLt's fastest algorithm for them: the baseline issue 62
compares the fused linear cross entropy with, "the three GEMMs alone,
with the best cuBLASLt algorithm for each". torch's `@` takes the first
algorithm of cuBLASLt's heuristic (or cuBLAS's choice); here the heuristic
is asked for several candidates, each is timed on the case's own tensors,
and the fastest is kept. The candidates' times are the evidence of whether
the heuristic's first choice, which xent's GEMMs take too
(runtime/backends/cuda/gemm_cuda.c), leaves time behind.

cuBLASLt is called through ctypes (cublasLt.h's types and constants, CUDA
12 and 13). On a GPU the library is the one PyTorch loaded; on the CPU
bench/cublaslt_best_test.py runs the same calls against the host stand-in
tests/fake_blaslt.c, whose products are checked against PyTorch's."""

import ctypes
import glob
import os

import torch

# cublasLt.h, cublas_api.h and library_types.h.
SUCCESS = 0
OP_N, OP_T = 0, 1
COMPUTE_32F = 68
R_32F, R_16F, R_16BF = 0, 2, 14
DESC_TRANSA, DESC_TRANSB = 3, 4
PREF_MAX_WORKSPACE_BYTES = 1
PREF_MIN_ALIGNMENT = (5, 6, 7, 8)  # A, B, C, D
CUDA_TYPES = {torch.float32: R_32F, torch.float16: R_16F, torch.bfloat16: R_16BF}
# PyTorch's cuBLASLt workspace on Hopper, and xent's (gemm_cuda.c's callers).
WORKSPACE_BYTES = 32 << 20


class Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def find_library():
    """The cuBLASLt PyTorch uses: already loaded, on the library path, or in
    its nvidia wheels; None where there is none."""
    for name in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"):
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            pass
    import site
    for root in site.getsitepackages() + [os.path.dirname(os.path.dirname(torch.__file__))]:
        found = sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libcublasLt.so.*")))
        if found:
            return found[-1]
    return None


def alignment(t):
    """What the heuristic is told of tensor t's alignment: the largest power
    of two to 256 its data is aligned to, and no more than its allocator
    promises every tensor (PyTorch's: 64 bytes on the CPU, 256 or more on a
    GPU), so that a plan serves fresh tensors of its shape."""
    k = 256 if t.is_cuda else 64
    while k > 1 and t.data_ptr() % k:
        k //= 2
    return k


def column_major(t):
    """A 2-D tensor, row-major or a transposed view of one, as cuBLASLt's
    column-major operand of t^T: (op, rows, cols, ld), op(stored) = t^T."""
    if t.stride(1) == 1:  # row-major: its memory is t^T, column-major
        return OP_N, t.shape[1], t.shape[0], t.stride(0)
    if t.stride(0) == 1:  # column-major: its memory is t
        return OP_T, t.shape[0], t.shape[1], t.stride(1)
    raise ValueError(f"an operand of strides {tuple(t.stride())}: neither rows nor columns contiguous")


class CublasLt:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        vp, vpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        L.cublasLtGetStatusString.restype = ctypes.c_char_p
        L.cublasLtGetStatusString.argtypes = [ctypes.c_int]
        for name, args in (("cublasLtCreate", [vpp]), ("cublasLtDestroy", [vp]),
                           ("cublasLtMatmulDescCreate", [vpp, ctypes.c_int, ctypes.c_int]),
                           ("cublasLtMatmulDescDestroy", [vp]),
                           ("cublasLtMatmulDescSetAttribute", [vp, ctypes.c_int, vp, ctypes.c_size_t]),
                           ("cublasLtMatrixLayoutCreate", [vpp, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                                           ctypes.c_int64]),
                           ("cublasLtMatrixLayoutDestroy", [vp]), ("cublasLtMatmulPreferenceCreate", [vpp]),
                           ("cublasLtMatmulPreferenceDestroy", [vp]),
                           ("cublasLtMatmulPreferenceSetAttribute", [vp, ctypes.c_int, vp, ctypes.c_size_t]),
                           ("cublasLtMatmulAlgoGetHeuristic", [vp, vp, vp, vp, vp, vp, vp, ctypes.c_int,
                                                               ctypes.POINTER(HeuristicResult),
                                                               ctypes.POINTER(ctypes.c_int)]),
                           ("cublasLtMatmul", [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp,
                                               ctypes.POINTER(Algo), vp, ctypes.c_size_t, vp])):
            getattr(L, name).argtypes = args
            getattr(L, name).restype = ctypes.c_int
        self.handle = ctypes.c_void_p()
        self.check(L.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")

    def check(self, status, what):
        if status != SUCCESS:
            raise RuntimeError(f"cuBLASLt {what}: {self.lib.cublasLtGetStatusString(status).decode()}")

    def close(self):
        if self.handle:
            self.lib.cublasLtDestroy(self.handle)
            self.handle = None


class Gemm:
    """out = a @ b for row-major out and a, b row-major or transposed views
    of row-major tensors, f32 compute, planned for these shapes, strides and
    alignments: candidates[i] is the heuristic's i-th algorithm. run(i, a,
    b, out) computes it by that one on tensors like these."""

    def __init__(self, lt, a, b, out, workspace, candidates):
        self.lt, self.workspace = lt, workspace
        if a.dtype != b.dtype or out.dtype not in (a.dtype, torch.float32) or a.dtype not in CUDA_TYPES:
            raise ValueError(f"operands {a.dtype}, {b.dtype} into {out.dtype}")
        if out.stride(1) != 1 or out.shape != (a.shape[0], b.shape[1]) or a.shape[1] != b.shape[0]:
            raise ValueError(f"{tuple(a.shape)} @ {tuple(b.shape)} into {tuple(out.shape)}")
        L, vp = lt.lib, ctypes.c_void_p
        # cublasLtMatmul's workspace is 256-byte aligned: the part that is.
        skip = -workspace.data_ptr() % 256
        self.workspace_at, self.workspace_bytes = workspace.data_ptr() + skip, max(workspace.numel() - skip, 0)
        self.desc, self.layouts, self.pref = vp(), [], vp()
        # Row-major out = a b is column-major out^T = b^T a^T: b's memory
        # first, a's second, out's the result's [n, m].
        (op_first, *first), (op_second, *second) = column_major(b), column_major(a)
        lt.check(L.cublasLtMatmulDescCreate(ctypes.byref(self.desc), COMPUTE_32F, R_32F), "cublasLtMatmulDescCreate")
        for attr, op in ((DESC_TRANSA, op_first), (DESC_TRANSB, op_second)):
            v = ctypes.c_int(op)
            lt.check(L.cublasLtMatmulDescSetAttribute(self.desc, attr, ctypes.byref(v), ctypes.sizeof(v)),
                     "cublasLtMatmulDescSetAttribute")
        for dtype, (rows, cols, ld) in ((b.dtype, first), (a.dtype, second),
                                        (out.dtype, (out.shape[1], out.shape[0], out.stride(0)))):
            layout = vp()
            lt.check(L.cublasLtMatrixLayoutCreate(ctypes.byref(layout), CUDA_TYPES[dtype], rows, cols, ld),
                     "cublasLtMatrixLayoutCreate")
            self.layouts.append(layout)
        lt.check(L.cublasLtMatmulPreferenceCreate(ctypes.byref(self.pref)), "cublasLtMatmulPreferenceCreate")
        ws = ctypes.c_uint64(self.workspace_bytes)
        lt.check(L.cublasLtMatmulPreferenceSetAttribute(self.pref, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws), 8),
                 "cublasLtMatmulPreferenceSetAttribute")
        self.alignments = [alignment(t) for t in (b, a, out)]
        for attr, k in zip(PREF_MIN_ALIGNMENT, self.alignments + self.alignments[-1:]):
            align = ctypes.c_uint32(k)
            lt.check(L.cublasLtMatmulPreferenceSetAttribute(self.pref, attr, ctypes.byref(align), 4),
                     "cublasLtMatmulPreferenceSetAttribute")
        results = (HeuristicResult * candidates)()
        found = ctypes.c_int(0)
        la, lb, lc = self.layouts
        lt.check(L.cublasLtMatmulAlgoGetHeuristic(lt.handle, self.desc, la, lb, lc, lc, self.pref, candidates,
                                                  results, ctypes.byref(found)), "cublasLtMatmulAlgoGetHeuristic")
        # Each result's state: whether its algorithm can run the GEMM.
        self.candidates = [r for r in results[:found.value] if r.state == SUCCESS]
        if not self.candidates:
            raise RuntimeError(f"cuBLASLt has no algorithm for {tuple(a.shape)} @ {tuple(b.shape)} {a.dtype}")
        self.scalars = (ctypes.c_float(1.0), ctypes.c_float(0.0))

    def run(self, i, a, b, out):
        for name, t, k in zip("bao", (b, a, out), self.alignments):
            if t.data_ptr() % k:
                raise ValueError(f"operand {name} is less aligned than the plan's {k} bytes")
        L, la, lb, lc = self.lt.lib, *self.layouts
        stream = torch.cuda.current_stream(out.device).cuda_stream if out.is_cuda else None
        alpha, beta = self.scalars
        self.lt.check(L.cublasLtMatmul(self.lt.handle, self.desc, ctypes.byref(alpha), b.data_ptr(), la,
                                       a.data_ptr(), lb, ctypes.byref(beta), out.data_ptr(), lc, out.data_ptr(), lc,
                                       ctypes.byref(self.candidates[i].algo), self.workspace_at,
                                       self.workspace_bytes, stream), "cublasLtMatmul")
        return out

    def close(self):
        L = self.lt.lib
        for layout in self.layouts:
            L.cublasLtMatrixLayoutDestroy(layout)
        if self.pref:
            L.cublasLtMatmulPreferenceDestroy(self.pref)
        if self.desc:
            L.cublasLtMatmulDescDestroy(self.desc)
        self.layouts, self.pref, self.desc = [], None, None


def fastest(gemm, args, timer):
    """Each candidate of gemm timed on args (a, b, out) by timer.many
    (interleaved, with its spread): (the fastest's index, [{"rank", "s",
    "spread", "workspace_bytes", "waves"}]), rank 0 the heuristic's first."""
    spreads = timer.many({i: (lambda i=i: gemm.run(i, *args)) for i in range(len(gemm.candidates))})
    out = []
    for i, c in enumerate(gemm.candidates):
        calls, _ = spreads[i]
        out.append(dict(rank=i, s=calls["median"], spread=calls, workspace_bytes=c.workspace_size,
                        waves=c.waves_count))
    return min(range(len(out)), key=lambda i: out[i]["s"]), out
