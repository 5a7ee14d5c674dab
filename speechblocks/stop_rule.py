"""The Tacotron-2 decoder's stop rule, written once in numpy (each framework writes it once in its own ops, the C
steps once in ``native/stop_rule.h``).

The original helper (``TacoTestHelper``) rounds each frame's stop probability (``tf.round``: half to even, so exactly
0.5 does not stop) and stops **the whole batch** after the step at which, for some frame of the step
(``stop_at_any``) or for every frame, **every** batch entry's rounds to 1. ``synthesize_batch`` asks each entry's own
rule instead: an entry stops at the first step at which some (``stop_at_any``) / every frame of its own rounds to 1.
"""
from __future__ import annotations

import numpy as np

__all__ = ["frames_fired", "entries_fired", "batch_fired", "stop_steps"]


def frames_fired(stop) -> np.ndarray:
    """``stop`` ``(..., r)`` probabilities -> bool ``(..., r)``: the frames whose probability rounds to 1 (half to
    even, as ``tf.round`` / ``torch.round`` / ``np.rint``)."""
    return np.rint(np.asarray(stop, np.float32)) == 1.0


def entries_fired(stop, stop_at_any: bool) -> np.ndarray:
    """``stop`` ``(..., r)`` -> bool ``(...)``: each entry's own rule (some / every frame of the step rounds to 1)."""
    fired = frames_fired(stop)
    return fired.any(-1) if stop_at_any else fired.all(-1)


def batch_fired(stop, stop_at_any: bool) -> bool:
    """``stop`` ``(batch, r)`` of one step -> whether the original rule ends the batch's loop after this step: for
    some (``stop_at_any``) / every frame, every entry's probability rounds to 1."""
    every = frames_fired(stop).all(axis=0)  # (r,): the frame fired in every entry
    return bool(every.any() if stop_at_any else every.all())


def stop_steps(stop, stop_at_any: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of ``stop`` ``(batch, steps, r)`` (probabilities): ``(steps, fired)`` -- the first step at which its
    own stop rule fires, counted with that step, or every step when it never fires."""
    fired = entries_fired(stop, stop_at_any)
    stopped = fired.any(1)
    return np.where(stopped, fired.argmax(1) + 1, fired.shape[1]), stopped
