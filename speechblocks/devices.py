"""Devices and numeric precision of the commands, framework-free: the values ``--device`` and ``--precision`` take,
checked where they are read (imports no framework; :func:`speechblocks.commands._common.torch_device` resolves a
device with torch).

``--device``: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``. Under
``torchrun`` (``LOCAL_RANK`` set) ``auto`` and ``cuda`` mean ``cuda:LOCAL_RANK`` on a machine with GPUs.

``--precision``: ``fp32`` (the default, the original), ``bf16`` or ``fp16`` (training only): torch autocast
(``fp16`` with a ``GradScaler``), Keras' ``mixed_bfloat16`` / ``mixed_float16`` policies (``mixed_float16`` with a
``LossScaleOptimizer``). Master weights, Adam's slots, checkpoints and the losses stay float32.
"""
from __future__ import annotations

import os
import re

__all__ = ["DEVICE_CHOICES", "PRECISIONS", "INFERENCE_PRECISIONS", "parse_device", "check_precision", "local_rank"]

#: the forms ``--device`` takes (``cuda:N`` with N a GPU index)
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
#: ``speechblocks train --precision``
PRECISIONS = ("fp32", "bf16", "fp16")
#: ``speechblocks synthesize --precision`` (float16 without loss scaling is not offered for inference)
INFERENCE_PRECISIONS = ("fp32", "bf16")

_CUDA = re.compile(r"cuda(?::(\d+))?")


def parse_device(text) -> str:
    """``text`` normalised (``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``), else a ``ValueError`` naming
    ``--device`` and its forms."""
    value = str(text).strip().lower()
    if value in ("auto", "cpu"):
        return value
    match = _CUDA.fullmatch(value)
    if match:
        return value if match.group(1) is None else f"cuda:{int(match.group(1))}"
    raise ValueError(f"--device must be one of auto, cpu, cuda, cuda:N; got {text!r}")


def check_precision(text, choices=PRECISIONS, option: str = "--precision") -> str:
    """``text`` if it is one of ``choices``, else a ``ValueError`` naming the option and its choices."""
    value = str(text).strip().lower()
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(choices)}; got {text!r}")
    return value


def local_rank() -> int | None:
    """``LOCAL_RANK`` of a ``torchrun`` launch of several processes (``None`` in one process)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        rank = os.environ.get("LOCAL_RANK")
        return int(rank) if world > 1 and rank is not None else None
    except ValueError:
        return None
