"""The framework-free part of ``TAC`` (Keras and torch twins): the activations it takes and its constructor
checks. Imports no framework."""
from __future__ import annotations

__all__ = ["ACTIVATIONS", "check_tac_sizes", "tac_activation"]

#: the activations of TAC's transforms (asteroid's choices)
ACTIVATIONS = ("prelu", "relu", "tanh", "sigmoid", "linear", "elu", "gelu")


def check_tac_sizes(input_dim, hidden_dim) -> None:
    """Both sizes must be >= 1."""
    if int(input_dim) < 1 or int(hidden_dim) < 1:
        raise ValueError(f"TAC: `input_dim` and `hidden_dim` must be >= 1; got {input_dim}, {hidden_dim}.")


def tac_activation(name) -> str:
    """The activation's key (lower case), one of :data:`ACTIVATIONS`, else ``ValueError``."""
    key = name.lower() if isinstance(name, str) else name
    if key not in ACTIVATIONS:
        raise ValueError(f"TAC: `activation` must be one of {list(ACTIVATIONS)}; got {name!r}.")
    return key
