"""Length-aware sequence helpers (``bidirectional_dynamic_rnn`` semantics)."""
from __future__ import annotations

import tensorflow as tf


def reverse_within_lengths(x, lengths):
    """Reverses each sequence of ``x`` ``(batch, time, ...)`` within its own length; ``None`` reverses all.

    Entries past a sequence's length stay in place, as ``tf.reverse_sequence`` does.
    """
    if lengths is None:
        return tf.reverse(x, axis=[1])
    return tf.reverse_sequence(x, tf.cast(lengths, tf.int64), seq_axis=1, batch_axis=0)


def time_mask(lengths, max_time, dtype):
    """``(batch, time, 1)`` mask: 1 where ``t < length``; all ones when ``lengths`` is None."""
    if lengths is None:
        return None
    return tf.cast(tf.sequence_mask(lengths, maxlen=max_time), dtype)[:, :, None]
