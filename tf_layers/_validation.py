"""Input checks that answer bad input with a ValueError naming the argument and the expected shape."""
from __future__ import annotations

import tensorflow as tf


def check_float_tensor(x, name: str, block: str, rank: int | None = None, last_dim: int | None = None,
                       shape_doc: str = ""):
    """Checks dtype, rank and last dimension statically (works inside ``tf.function``).

    Args:
        x: the tensor.
        name: argument name for the message.
        block: block name for the message.
        rank: expected rank, or None.
        last_dim: expected size of the last axis, or None.
        shape_doc: human form of the expected shape, e.g. ``"(batch, time, 512)"``.
    """
    expect = f" expected shape {shape_doc}" if shape_doc else ""
    dtype = tf.as_dtype(x.dtype)
    if not dtype.is_floating:
        raise ValueError(f"{block}: argument `{name}` must be a floating tensor,{expect}; got dtype {dtype.name}.")
    shape = x.shape
    if rank is not None and shape.rank is not None and shape.rank != rank:
        raise ValueError(f"{block}: argument `{name}` must have rank {rank},{expect}; got shape {shape}.")
    if last_dim is not None and shape.rank is not None and shape[-1] is not None and shape[-1] != last_dim:
        raise ValueError(
            f"{block}: argument `{name}` has {shape[-1]} channels in its last axis but the layer was built "
            f"for {last_dim};{expect}; got shape {shape}."
        )


def check_lengths(lengths, name: str, block: str, batch_dim=None):
    """Checks a ``(batch,)`` integer lengths tensor statically."""
    lengths = tf.convert_to_tensor(lengths)
    if lengths.dtype.is_floating or lengths.dtype == tf.bool:
        raise ValueError(f"{block}: argument `{name}` must be an integer tensor of shape (batch,); got {lengths.dtype.name}.")
    if lengths.shape.rank is not None and lengths.shape.rank != 1:
        raise ValueError(f"{block}: argument `{name}` must have shape (batch,); got shape {lengths.shape}.")
    if (batch_dim is not None and lengths.shape.rank == 1 and lengths.shape[0] is not None
            and lengths.shape[0] != batch_dim):
        raise ValueError(f"{block}: argument `{name}` has {lengths.shape[0]} entries, expected batch={batch_dim}.")
    return lengths
