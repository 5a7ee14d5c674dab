"""Input checks that answer bad input with a ValueError naming the argument and the expected shape."""
from __future__ import annotations

from typing import Optional

import torch

# re-exported: the blocks' from_hparams read hparams with it
from speechblocks.block_hparams import hparam as hparam
from speechblocks.validation_messages import not_floating_message, rank_below_two_message, wrong_rank_message

from . import activations


def check_float_tensor(x: torch.Tensor, name: str, block: str, rank: int, last_dim: int, shape_doc: str) -> None:
    """Checks dtype, rank and last dimension (``last_dim < 0`` skips the channel check).

    TorchScript compatible.
    """
    if not x.is_floating_point():
        raise ValueError(not_floating_message(block, name, shape_doc, str(x.dtype)))
    if x.dim() != rank:
        raise ValueError(wrong_rank_message(block, name, rank, shape_doc, str(list(x.shape))))
    if last_dim >= 0 and x.shape[-1] != last_dim:
        raise ValueError(block + ": argument `" + name + "` has " + str(x.shape[-1])
                         + " channels in its last axis, expected shape " + shape_doc + "; got shape "
                         + str(list(x.shape)) + ".")


def check_lengths(lengths: torch.Tensor, name: str, block: str, batch: int) -> None:
    """Checks a ``(batch,)`` integer lengths tensor."""
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(block + ": argument `" + name + "` must be an integer tensor of shape (batch,); got dtype "
                         + str(lengths.dtype) + ".")
    if lengths.dim() != 1 or lengths.shape[0] != batch:
        raise ValueError(block + ": argument `" + name + "` must have shape (" + str(batch) + ",); got shape "
                         + str(list(lengths.shape)) + ".")


# activations the Tacotron-2 blocks accept (applied functionally, TorchScript friendly)
_PARAMETER_FREE = ("relu", "tanh", "sigmoid", "linear")


def activation_name(identifier: Optional[str], block: str) -> str:
    """Canonical name of a parameter-free activation (``None`` -> ``"linear"``), else ``ValueError``."""
    if identifier is not None and (not isinstance(identifier, str) or identifier.lower() not in _PARAMETER_FREE):
        raise ValueError(f"{block}: `activation` must be one of {list(_PARAMETER_FREE)} or None; got {identifier!r}.")
    return activations.name_of(identifier)


def check_positive_int(value, arg: str, block: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{block}: `{arg}` must be an integer >= 1; got {value!r}.")
    return value


def check_features(x: torch.Tensor, name: str, block: str, in_features: int) -> None:
    """Checks a float ``(..., in_features)`` tensor of rank >= 2 (TorchScript compatible)."""
    doc = "(batch, [time,] " + str(in_features) + ")"
    if x.dim() < 2:
        raise ValueError(rank_below_two_message(block, name, doc, str(list(x.shape))))
    check_float_tensor(x, name, block, x.dim(), in_features, doc)
