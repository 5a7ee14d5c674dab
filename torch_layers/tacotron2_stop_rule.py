"""The Tacotron-2 decoder's stop rule in torch ops, written once (TorchScript functions; the numpy twin is
:mod:`speechblocks.stop_rule`, the C steps' ``native/stop_rule.h``).

The original helper (``TacoTestHelper``) rounds each frame's stop probability (``torch.round``: half to even, so
exactly 0.5 does not stop) and stops **the whole batch** after the step at which, for some frame of the step
(``stop_at_any``) or for every frame, **every** batch entry's rounds to 1 (:func:`batch_fired`). ``stop_each``
(``synthesize_batch``) asks each entry's own rule instead (:func:`entries_fired`).
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["frames_fired", "entries_fired", "batch_fired"]


def frames_fired(probs: Tensor) -> Tensor:
    """``probs`` ``(..., r)`` stop probabilities -> bool ``(..., r)``: the frames whose probability rounds to 1."""
    return torch.round(probs) == 1.0


def entries_fired(probs: Tensor, stop_at_any: bool) -> Tensor:
    """``probs`` ``(batch, r)`` of one step -> bool ``(batch,)``: each entry's own rule (some / every frame fired)."""
    fired = frames_fired(probs)
    if stop_at_any:
        return fired.any(1)
    return fired.all(1)


def batch_fired(probs: Tensor, stop_at_any: bool) -> bool:
    """``probs`` ``(batch, r)`` of one step -> whether the original rule ends the batch's loop after this step: for
    some (``stop_at_any``) / every frame, every entry's probability rounds to 1."""
    every = frames_fired(probs).all(0)  # (r,): the frame fired in every entry
    if stop_at_any:
        return bool(every.any())
    return bool(every.all())
