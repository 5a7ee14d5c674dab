"""The Tacotron-2 decoder's stop rule in TensorFlow ops, written once (the numpy twin is :mod:`speechblocks.stop_rule`,
torch's ``torch_layers/tacotron2_stop_rule.py``, the C steps' ``speechblocks/native/stop_rule.h``).

The original helper (``TacoTestHelper``) rounds each frame's stop probability (``tf.round``: half to even, so exactly
0.5 does not stop) and stops **the whole batch** after the step at which, for some frame of the step
(``stop_at_any``) or for every frame, **every** batch entry's rounds to 1 (:func:`batch_fired`). ``stop_each``
(``synthesize_batch``) asks each entry's own rule instead (:func:`entries_fired`).
"""
from __future__ import annotations

import tensorflow as tf

__all__ = ["frames_fired", "entries_fired", "batch_fired"]


def frames_fired(stop):
    """``stop`` ``(..., r)`` probabilities -> bool: the frames whose probability rounds to 1 (``tf.round``: half to
    even, so 0.5 does not stop)."""
    return tf.equal(tf.round(stop), tf.cast(1.0, stop.dtype))


def entries_fired(stop, stop_at_any: bool):
    """``stop`` ``(batch, r)`` -> bool ``(batch,)``: each entry's own rule (some / every frame rounds to 1)."""
    fired = frames_fired(stop)
    return tf.reduce_any(fired, -1) if stop_at_any else tf.reduce_all(fired, -1)


def batch_fired(stop, stop_at_any: bool):
    """``stop`` ``(batch, r)`` of one step -> scalar bool: the original rule (for some / every frame, every entry's
    probability rounds to 1) ends the batch's loop after this step."""
    every = tf.reduce_all(frames_fired(stop), axis=0)  # (r,): the frame fired in every entry
    return tf.reduce_any(every) if stop_at_any else tf.reduce_all(every)
