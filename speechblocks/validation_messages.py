"""The texts of the input-check errors of ``tf_layers._validation`` and ``torch_layers._validation``.

Each framework reads dtypes and shapes its own way and words them its own way (``float16`` and
``(2, 3)`` in Keras, ``torch.float16`` and ``[2, 3]`` in torch); the sentence around them is written once
here. Plain annotated string functions, so the TorchScript-compiled torch checks call them too. Imports no
framework.
"""
from __future__ import annotations

__all__ = ["not_floating_message", "wrong_rank_message", "rank_below_two_message"]


def _expected(shape_doc: str) -> str:
    if len(shape_doc) > 0:
        return " expected shape " + shape_doc
    return ""


def not_floating_message(block: str, name: str, shape_doc: str, dtype: str) -> str:
    """``x`` is not a floating tensor."""
    return block + ": argument `" + name + "` must be a floating tensor," + _expected(shape_doc) + "; got dtype " + dtype + "."


def wrong_rank_message(block: str, name: str, rank: int, shape_doc: str, shape: str) -> str:
    """``x`` does not have rank ``rank``."""
    return (block + ": argument `" + name + "` must have rank " + str(rank) + "," + _expected(shape_doc) + "; got shape "
            + shape + ".")


def rank_below_two_message(block: str, name: str, shape_doc: str, shape: str) -> str:
    """A ``(batch, [time,] features)`` argument of rank < 2."""
    return (block + ": argument `" + name + "` must have rank >= 2, expected shape " + shape_doc + "; got shape " + shape
            + ".")
