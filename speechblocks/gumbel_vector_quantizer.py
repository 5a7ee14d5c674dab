"""The framework-free part of ``GumbelVectorQuantizer`` (Keras and torch twins): constructor checks and the
temperature schedule. Imports no framework."""
from __future__ import annotations

__all__ = ["check_quantizer_arguments", "annealed_temperature"]

_BLOCK = "GumbelVectorQuantizer"


def check_quantizer_arguments(dim, num_vars, temp, groups, vq_dim) -> int:
    """Sizes >= 1, ``vq_dim`` divisible by ``groups``, ``temp`` a ``(start, min, decay)`` triple.

    Returns ``vq_dim`` (``dim`` when ``None``).
    """
    vq_dim = dim if vq_dim is None else vq_dim
    for name, value in (("dim", dim), ("num_vars", num_vars), ("groups", groups), ("vq_dim", vq_dim)):
        if int(value) < 1:
            raise ValueError(f"{_BLOCK}: `{name}` must be >= 1; got {value}.")
    if int(vq_dim) % int(groups):
        raise ValueError(f"{_BLOCK}: `vq_dim` ({vq_dim}) must be divisible by `groups` ({groups}).")
    if len(temp) != 3:
        raise ValueError(f"{_BLOCK}: `temp` must be (start, min, decay); got {temp!r}.")
    return vq_dim


def annealed_temperature(start: float, minimum: float, decay: float, num_updates: int) -> float:
    """The Gumbel temperature after ``num_updates`` updates: ``max(start * decay ** num_updates, minimum)``."""
    return max(start * decay ** num_updates, minimum)
