"""Input checks that answer bad input with a ValueError naming the argument and the expected shape."""
from __future__ import annotations

import torch


def check_float_tensor(x: torch.Tensor, name: str, block: str, rank: int, last_dim: int, shape_doc: str) -> None:
    """Checks dtype, rank and last dimension (``last_dim < 0`` skips the channel check).

    TorchScript compatible.
    """
    if not x.is_floating_point():
        raise ValueError(block + ": argument `" + name + "` must be a floating tensor, expected shape "
                         + shape_doc + "; got dtype " + str(x.dtype) + ".")
    if x.dim() != rank:
        raise ValueError(block + ": argument `" + name + "` must have rank " + str(rank) + ", expected shape "
                         + shape_doc + "; got shape " + str(list(x.shape)) + ".")
    if last_dim >= 0 and x.shape[-1] != last_dim:
        raise ValueError(block + ": argument `" + name + "` has " + str(x.shape[-1])
                         + " channels in its last axis, expected shape " + shape_doc + "; got shape "
                         + str(list(x.shape)) + ".")


def check_lengths(lengths: torch.Tensor, name: str, block: str, batch: int) -> None:
    """Checks a ``(batch,)`` integer lengths tensor."""
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(block + ": argument `" + name + "` must be an integer tensor of shape (batch,); got dtype "
                         + str(lengths.dtype) + ".")
    if lengths.dim() != 1 or lengths.shape[0] != batch:
        raise ValueError(block + ": argument `" + name + "` must have shape (" + str(batch) + ",); got shape "
                         + str(list(lengths.shape)) + ".")
