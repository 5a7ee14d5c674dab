"""Small activation registry (``activations.get``), in the spirit of asteroid's ``masknn``."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

_ACTIVATIONS: dict[str, Callable[..., nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "linear": nn.Identity,
    "prelu": nn.PReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
}


def get(identifier: str | None) -> Callable[..., nn.Module]:
    """Returns the module class (factory) for an activation name; ``None`` means identity.

    Args:
        identifier: one of ``relu, tanh, sigmoid, linear, prelu, elu, gelu`` or ``None``.

    Returns:
        a callable returning an ``nn.Module``.

    Raises:
        ValueError: for an unknown name.
    """
    if identifier is None:
        return nn.Identity
    if isinstance(identifier, str):
        key = identifier.lower()
        if key in _ACTIVATIONS:
            return _ACTIVATIONS[key]
    raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)} or None; got {identifier!r}.")


def name_of(identifier: str | None) -> str:
    """Canonical name of an activation identifier (``None`` -> ``"linear"``)."""
    get(identifier)
    return "linear" if identifier is None else identifier.lower()


def apply(name: str, x: torch.Tensor) -> torch.Tensor:
    """Functional form of the parameter-free activations (TorchScript friendly).

    Raises:
        ValueError: for ``prelu`` (it has a parameter: use ``get("prelu")()``) or an unknown name.
    """
    if name == "relu":
        return torch.relu(x)
    if name == "tanh":
        return torch.tanh(x)
    if name == "sigmoid":
        return torch.sigmoid(x)
    if name == "linear":
        return x
    if name == "elu":
        return torch.nn.functional.elu(x)
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    raise ValueError("activation `" + name + "` has no functional form here; expected one of relu, tanh, "
                     "sigmoid, linear, elu, gelu.")
