"""MKL's thread count for the small-tensor recurrent loops: one thread on the thread that runs a loop, thread-local.

Why: ``torch.set_num_threads(n)`` (as most CPU deployments call it, and the bench does) also calls
``mkl_set_dynamic(0)`` (pytorch#13868). With MKL's dynamic threading off, every MKL call opens an ``n``-thread
OpenMP region whatever its size: MKL VML's ``vsTanh`` / ``vsExp`` (what ``torch.tanh`` / ``torch.exp`` call on
float32 CPU tensors; ATen's own split starts at 2048 elements) and sgemm of a ``(1, 512) x (512, 768)`` GEMV alike.
A GRU step's 256-element ``tanh`` then costs ~27 µs instead of ~2.5 µs on 2 cores (more on a loaded machine), and
a Tacotron-1 synthesis calls it thousands of times (the CBHG BiGRUs a frame, the decoder's three GRUs a step). In a
process that never called ``torch.set_num_threads`` MKL is dynamic and picks one thread for such calls itself.

What: :func:`single_threaded_mkl` sets MKL's *thread-local* thread count (``MKL_Set_Num_Threads_Local``, the C API
of ``mkl_service.h``, exported by torch's own ``libtorch_cpu``) to 1 on the calling thread for the duration of a
recurrent loop and restores the previous local value afterwards (also when the loop raises). Nothing else changes:
not ``torch.get_num_threads()``, not other threads, not ATen's OpenMP ``parallel_for`` (the attention's
``(1, T_in, 256)`` tanh still splits over the intra-op threads), not oneDNN's convolutions, not the big GEMMs
outside the loops. Outputs are bit-identical (the same MKL kernels, elementwise or the same reduction order).

Not covered: the BiGRU's backward direction, a TorchScript fork on the inter-op pool, whose thread this module
cannot reach (its VML calls still open their region there). A worker thread of this module with MKL's count 1 ran
it as fast in a process whose inter-op pool already existed, but several times slower in a fresh one (not
understood; not shipped).

Off: ``SPEECHBLOCKS_LOOP_MKL_THREADS=keep`` (read at each call) leaves MKL's threads alone. Without MKL (non-MKL builds: macOS, ARM,
OpenBLAS), or where the symbol is absent, :func:`single_threaded_mkl` does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from collections.abc import Iterator

import torch

__all__ = ["ENV", "mkl_local_setter", "single_threaded_mkl", "loops_single_threaded"]

ENV = "SPEECHBLOCKS_LOOP_MKL_THREADS"  # "keep": leave MKL's thread count alone in the loops

_UNSET = object()
_setter = _UNSET  # the looked-up MKL_Set_Num_Threads_Local, or None


def _lookup():
    """``MKL_Set_Num_Threads_Local`` (``int (int)``: sets this thread's MKL thread count, 0 = back to the global
    one; returns the previous local value) from torch's CPU library, or ``None`` (no MKL, symbol absent)."""
    try:
        if not torch.backends.mkl.is_available():
            return None
        lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
        for path in sorted(glob.glob(os.path.join(lib_dir, "*torch_cpu*"))):
            try:
                fn = getattr(ctypes.CDLL(path), "MKL_Set_Num_Threads_Local")
            except (OSError, AttributeError):
                continue
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            return fn
    except Exception:  # noqa: BLE001 - any failure: leave MKL alone
        return None
    return None


def mkl_local_setter():
    """The ``MKL_Set_Num_Threads_Local`` entry point (looked up once), or ``None`` where this torch has no MKL."""
    global _setter
    if _setter is _UNSET:
        _setter = _lookup()
    return _setter


def loops_single_threaded() -> bool:
    """Whether the loops run MKL single-threaded: MKL reachable and ``SPEECHBLOCKS_LOOP_MKL_THREADS`` not
    ``keep``."""
    return os.environ.get(ENV, "").strip().lower() != "keep" and mkl_local_setter() is not None


@contextlib.contextmanager
def single_threaded_mkl() -> Iterator[None]:
    """MKL's thread count 1 on the calling thread only, the previous thread-local value restored on exit (also on
    an exception); a no-op without MKL or with ``SPEECHBLOCKS_LOOP_MKL_THREADS=keep``."""
    fn = mkl_local_setter() if loops_single_threaded() else None
    if fn is None:
        yield
        return
    previous = fn(1)
    try:
        yield
    finally:
        fn(previous)
