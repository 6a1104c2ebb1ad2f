"""What the PyTorch differential tests share: libxent_shared.so loaded through
ctypes, the dtypes as torch dtypes, the tolerance per dtype, the moves
between torch tensors and the raw numpy buffers handed to the C API, and the
in-process all-gather of the vocabulary-parallel tests."""

import ctypes
import os
import threading

import torch

import numpy as np

from xent_ctypes import F32, F16, BF16, F64, ALL_GATHER, BACKEND_CPU

TORCH = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16, F64: torch.float64}
# Relative error allowed in outputs: two roundings to the dtype plus f32 sums.
TOL = {F32: 2e-5, F64: 1e-10, F16: 4e-3, BF16: 2.5e-2}

P = ctypes.c_void_p


def load_lib():
    """libxent_shared.so from the test's runfiles (or $XENT_LIBRARY, as
    bench/run_gpu.sh runs a test on a GPU), with xent_last_error typed."""
    path = os.environ.get("XENT_LIBRARY") or os.path.join(os.environ["TEST_SRCDIR"], "xent", "runtime",
                                                          "libxent_shared.so")
    lib = ctypes.CDLL(path)
    lib.xent_last_error.restype = ctypes.c_char_p
    return lib


def raw(t):
    """A tensor's bytes as a numpy array (f16/bf16 as int16: numpy has no bf16)."""
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().copy()
    return t.numpy().copy()


def from_raw(a, dtype):
    """The inverse of raw, widened to float64 for the comparison."""
    t = torch.from_numpy(a)
    if dtype in (F16, BF16):
        return t.view(TORCH[dtype]).to(torch.float64)
    return t.to(torch.float64)


def ptr(a):
    """An array's address as a ctypes argument (None for None)."""
    return a.ctypes.data_as(P) if a is not None else None


def addr(a):
    """An array's address as an int, for a struct field (None for None)."""
    return a.ctypes.data if a is not None else None


def emulated_call(lib, target, desc, op, tensors):
    """One xent_ce_run of op on a new cpu handle emulating target's
    rendering, with a workspace of the size xent states: (status, message)."""
    h = P()
    status = lib.xent_create(ctypes.byref(h), BACKEND_CPU)
    if status == 0:
        status = lib.xent_cpu_emulate(h, target)
    nbytes = ctypes.c_size_t()
    if status == 0:
        status = lib.xent_ce_workspace_size(h, ctypes.byref(desc), op, ctypes.byref(nbytes))
    if status == 0:
        ws = np.zeros(max(nbytes.value, 8), np.uint8)
        status = lib.xent_ce_run(h, ctypes.byref(desc), op, ctypes.byref(tensors), ws.ctypes.data_as(P),
                                 ctypes.c_size_t(ws.size), None)
    message = lib.xent_last_error().decode()
    if h:
        lib.xent_destroy(h)
    return status, message


def on_threads(ranks, rank_main):
    """rank_main(k) for every rank k, each on its own thread: their results,
    in rank order."""
    results = [None] * ranks

    def run(k):
        results[k] = rank_main(k)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


class Group:
    """The in-process collective: each rank publishes a copy of its part,
    waits for the others, and copies theirs into its receive buffer."""

    def __init__(self, ranks):
        self.ranks = ranks
        self.parts = [None] * ranks
        self.barrier = threading.Barrier(ranks, timeout=120)
        self.calls = [0] * ranks

    def gather_fn(self, rank):
        def gather(ctx, send, recv, nbytes, stream):
            if send != recv + rank * nbytes:
                return 1  # not the documented in-place form
            self.calls[rank] += 1
            self.parts[rank] = ctypes.string_at(send, nbytes)
            self.barrier.wait()
            for k in range(self.ranks):
                if k != rank:
                    ctypes.memmove(recv + k * nbytes, self.parts[k], nbytes)
            self.barrier.wait()
            return 0

        return ALL_GATHER(gather)
