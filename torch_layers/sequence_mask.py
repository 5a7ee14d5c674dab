"""``sequence_mask``: the Tacotron-2 length mask whose time axis is rounded up to a multiple of ``r``."""
from __future__ import annotations

from typing import Optional

import torch

from .masked_losses import check_outputs_per_step, checked_lengths, round_up

__all__ = ["sequence_mask"]


def sequence_mask(lengths: torch.Tensor, r: int, expand: bool = True,
                  dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Length mask of TF1 Tacotron-2: 1 where ``t < length``, time axis padded to a multiple of ``r``.

    The mask has ``max(lengths)`` rounded **up** to a multiple of ``r`` frames (the decoder emits ``r``
    frames per step); the extra frames are 0. TorchScript compatible.

    Args:
        lengths: integer tensor ``(batch,)``, entries >= 0.
        r: int >= 1, frames per decoder step (``outputs_per_step``).
        expand: add a trailing channel axis of size 1.
        dtype: dtype of the mask, default ``torch.float32`` (the seed's).

    Returns:
        ``(batch, T)`` or ``(batch, T, 1)`` with ``T = ceil(max(lengths) / r) * r``, on ``lengths``' device.

    Raises:
        ValueError: ``r < 1``, ``lengths`` not an integer ``(batch,)`` tensor, or a negative length.

    Example:
        >>> sequence_mask(torch.tensor([1, 3, 2]), 2, expand=False)
        tensor([[1., 0., 0., 0.],
                [1., 1., 1., 0.],
                [1., 1., 0., 0.]])
    """
    r = check_outputs_per_step(r, "r", "sequence_mask")
    if lengths.dim() != 1:
        raise ValueError("sequence_mask: argument `lengths` must have shape (batch,); got shape "
                         + str(list(lengths.shape)) + ".")
    longest = checked_lengths(lengths, "lengths", "sequence_mask", lengths.shape[0])
    steps = torch.arange(round_up(longest, r), device=lengths.device)
    mask = (steps.unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float32 if dtype is None else dtype)
    return mask.unsqueeze(-1) if expand else mask

