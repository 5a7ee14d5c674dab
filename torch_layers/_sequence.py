"""Length-aware sequence helpers (``bidirectional_dynamic_rnn`` semantics)."""
from __future__ import annotations

from typing import Optional

import torch


def reverse_within_lengths(x: torch.Tensor, lengths: Optional[torch.Tensor]) -> torch.Tensor:
    """Reverses each sequence of ``x`` ``(batch, time, ...)`` within its own length.

    Entries past a sequence's length stay in place (as ``tf.reverse_sequence``); ``lengths=None``
    reverses the whole time axis.

    Args:
        x: ``(batch, time, ...)``.
        lengths: ``(batch,)`` integer lengths or ``None``.

    Returns:
        tensor of ``x``'s shape.
    """
    if lengths is None:
        return torch.flip(x, dims=[1])
    t = x.shape[1]
    ar = torch.arange(t, device=x.device).unsqueeze(0)
    lens = lengths.to(device=x.device, dtype=torch.long).unsqueeze(1)
    idx = torch.where(ar < lens, lens - 1 - ar, ar)  # (batch, time)
    flat = x.reshape(x.shape[0], t, -1)  # TorchScript-friendly: gather over a 3-D view
    out = torch.gather(flat, 1, idx.unsqueeze(-1).expand(flat.shape))
    return out.reshape(x.shape)


def time_mask(lengths: Optional[torch.Tensor], max_time: int, dtype: torch.dtype) -> Optional[torch.Tensor]:
    """``(batch, time, 1)`` mask, 1 where ``t < length``; ``None`` when ``lengths`` is None."""
    if lengths is None:
        return None
    ar = torch.arange(max_time, device=lengths.device).unsqueeze(0)
    return (ar < lengths.unsqueeze(1)).to(dtype).unsqueeze(-1)
