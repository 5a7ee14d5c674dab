"""``sequence_mask``: the Tacotron-2 length mask whose time axis is rounded up to a multiple of ``r``."""
from __future__ import annotations

import tensorflow as tf

from .masked_losses import check_outputs_per_step, checked_lengths, padded_max_length

__all__ = ["sequence_mask"]


def sequence_mask(lengths, r, expand: bool = True, dtype="float32"):
    """Length mask of TF1 Tacotron-2: ``1.0`` where ``t < length``, time axis padded to a multiple of ``r``.

    The mask has ``max(lengths)`` rounded **up** to a multiple of ``r`` frames (the decoder emits ``r``
    frames per step, so targets are padded that way); the extra frames are masked out.

    Args:
        lengths: integer tensor ``(batch,)``, every entry >= 0.
        r: int >= 1, frames per decoder step (``outputs_per_step``).
        expand: when True the mask gets a trailing channel axis of size 1.
        dtype: dtype of the mask (the seed's is float32).

    Returns:
        ``(batch, T)`` or, with ``expand``, ``(batch, T, 1)`` tensor of 0/1 values, where
        ``T = ceil(max(lengths) / r) * r`` (0 for an empty batch).

    Raises:
        ValueError: ``r < 1``, non-integer or non-``(batch,)`` ``lengths``, or a negative length
            (inside ``tf.function`` the last one is a ``tf.debugging`` assertion with the same message).

    Example:
    >>> sequence_mask([1, 3, 2], 2, expand=False).numpy()
    array([[1., 0., 0., 0.],
           [1., 1., 1., 0.],
           [1., 1., 0., 0.]], dtype=float32)
    """
    r = check_outputs_per_step(r, "r", "sequence_mask")
    lengths = checked_lengths(lengths, "lengths", "sequence_mask")
    mask = tf.sequence_mask(lengths, maxlen=padded_max_length(lengths, r), dtype=dtype)
    return mask[:, :, None] if expand else mask

