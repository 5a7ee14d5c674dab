"""TF1 dropout (``tf.compat.v1.layers.dropout`` semantics) with an injectable keep-mask."""
from __future__ import annotations

import keras
import tensorflow as tf


def tf1_dropout(x, rate: float, seed_generator, mask=None, name: str = "dropout_mask"):
    """Inverted dropout: ``x / (1 - rate) * keep_mask`` with ``keep_mask ~ Bernoulli(1 - rate)``.

    Dropped entries are *selected* to 0 (TF's ``dropout`` is ``where(keep, x * scale, 0)``): a NaN/inf that
    is dropped gives 0, as in the TF1 reference, not ``0 * NaN``.

    Args:
        x: input tensor.
        rate: drop probability in [0, 1).
        seed_generator: a ``keras.random.SeedGenerator`` used when ``mask`` is None.
        mask: optional keep-mask (0/1) of ``x``'s shape; injected masks make runs comparable
            across frameworks.
        name: argument name used in error messages.

    Returns:
        the dropped-out tensor, same shape and dtype as ``x``.
    """
    if mask is None:
        if rate == 0.0:
            return x
        u = keras.random.uniform(tf.shape(x), seed=seed_generator, dtype="float32")
        mask = tf.cast(u >= rate, x.dtype)
    else:
        mask = tf.convert_to_tensor(mask)
        if mask.shape.rank is not None and x.shape.rank is not None:
            if mask.shape.rank != x.shape.rank or not mask.shape.is_compatible_with(x.shape):
                raise ValueError(f"argument `{name}` must have the shape of the dropped tensor {x.shape}; got "
                                 f"{mask.shape}.")
        mask = tf.cast(mask, x.dtype)
    # selection, as TF's `dropout` (`where(keep, x * scale, 0)`): a dropped NaN/inf gives 0, not 0 * NaN
    kept = x * mask if rate == 0.0 else x * tf.cast(1.0 / (1.0 - rate), x.dtype) * mask
    return tf.where(tf.not_equal(mask, 0), kept, tf.zeros_like(kept))
