"""Input checks that answer bad input with a ValueError naming the argument and the expected shape."""
from __future__ import annotations

import tensorflow as tf

# re-exported: the blocks' from_hparams read hparams with it
from speechblocks.block_hparams import hparam as hparam
from speechblocks.validation_messages import not_floating_message, rank_below_two_message, wrong_rank_message


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
        raise ValueError(not_floating_message(block, name, shape_doc, dtype.name))
    shape = x.shape
    if rank is not None and shape.rank is not None and shape.rank != rank:
        raise ValueError(wrong_rank_message(block, name, rank, shape_doc, str(shape)))
    if last_dim is not None and shape.rank is not None and shape[-1] is not None and shape[-1] != last_dim:
        raise ValueError(
            f"{block}: argument `{name}` has {shape[-1]} channels in its last axis but the layer was built "
            f"for {last_dim};{expect}; got shape {shape}."
        )


def check_lengths(lengths, name: str, block: str, batch_dim=None):
    """Checks a ``(batch,)`` integer lengths tensor statically."""
    lengths = tf.convert_to_tensor(lengths)
    if lengths.dtype.is_floating or lengths.dtype == tf.bool:
        raise ValueError(f"{block}: argument `{name}` must be an integer tensor of shape (batch,); got "
                         f"{lengths.dtype.name}.")
    if lengths.shape.rank is not None and lengths.shape.rank != 1:
        raise ValueError(f"{block}: argument `{name}` must have shape (batch,); got shape {lengths.shape}.")
    if (batch_dim is not None and lengths.shape.rank == 1 and lengths.shape[0] is not None
            and lengths.shape[0] != batch_dim):
        raise ValueError(f"{block}: argument `{name}` has {lengths.shape[0]} entries, expected batch={batch_dim}.")
    return lengths


def check_features(x, name: str, block: str, in_features: int | None):
    """Checks a float ``(..., in_features)`` tensor of rank >= 2 (statically; works in ``tf.function``)."""
    doc = f"(batch, [time,] {in_features if in_features is not None else 'in_features'})"
    check_float_tensor(x, name, block, rank=None, last_dim=in_features, shape_doc=doc)
    if x.shape.rank is not None and x.shape.rank < 2:
        raise ValueError(rank_below_two_message(block, name, doc, str(x.shape)))


def check_build_shape(input_shape, block: str):
    input_shape = tuple(input_shape)
    if len(input_shape) < 2 or input_shape[-1] is None:
        raise ValueError(f"{block}: argument `inputs` must have rank >= 2 and a known last axis, expected shape "
                         f"(batch, [time,] in_features); got shape {input_shape}.")
    return input_shape
