"""The devices a device-aware test runs on, one shared parametrisation: ``cpu`` and ``cuda``.

``@pytest.mark.parametrize("device", DEVICES)``: the ``cuda`` case is skipped -- and counted as skipped, with the
reason -- where torch sees no GPU (a CPU-only build, or no driver), and runs where it does.
:data:`without_cuda` marks the tests of what a command does on a machine without CUDA (their refusals cannot be
seen on one with a GPU).
"""
from __future__ import annotations

import pytest


def _no_cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"no CUDA: torch {torch.__version__} is a CPU-only build"
    return f"no CUDA GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU or driver"


#: why the ``cuda`` cases are skipped (``None``: a GPU is there, they run)
NO_CUDA = _no_cuda_reason()
#: ``cpu`` and ``cuda`` (skipped with :data:`NO_CUDA` as its reason)
DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(NO_CUDA is not None, reason=str(NO_CUDA)))]
#: a test of the refusals on a machine without CUDA
without_cuda = pytest.mark.skipif(NO_CUDA is None, reason="torch sees a GPU: the no-CUDA refusals do not arise")
