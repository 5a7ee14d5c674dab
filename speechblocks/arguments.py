"""Constructor argument checks the Keras and torch twins share, with their messages (imports no framework).

Each raises ``ValueError("<block>: `<argument>` ...")`` exactly as both twins word it.
"""
from __future__ import annotations

__all__ = ["BN_POSITIONS", "check_bn_position", "check_drop_rate", "check_zoneout", "DROPOUT_MODES",
           "check_dropout_mode"]

#: where a conv block puts its batch norm: ``"before"`` the activation (seed) or ``"after"`` it (Rayhane's later code)
BN_POSITIONS = ("before", "after")


def check_bn_position(bn_position, block: str) -> str:
    """``bn_position`` must be ``"before"`` or ``"after"``."""
    if bn_position not in BN_POSITIONS:
        raise ValueError(f"{block}: `bn_position` must be 'before' or 'after'; got {bn_position!r}.")
    return bn_position


#: the pre-net's dropout modes: Tacotron-2's always-on dropout, keithito/mimic2's training-only one
DROPOUT_MODES = ("always", "training")


def check_dropout_mode(dropout, block: str) -> str:
    """``dropout`` if it is one of :data:`DROPOUT_MODES`, else ``ValueError`` naming the argument."""
    if dropout not in DROPOUT_MODES:
        raise ValueError(f"{block}: `dropout` must be one of {list(DROPOUT_MODES)}; got {dropout!r}.")
    return dropout


def check_drop_rate(drop_rate, block: str) -> float:
    """A dropout rate must lie in [0, 1); returns it as a float."""
    if not 0.0 <= float(drop_rate) < 1.0:
        raise ValueError(f"{block}: `drop_rate` must lie in [0, 1); got {drop_rate}.")
    return float(drop_rate)


def check_zoneout(value, name: str, block: str) -> float:
    """A zoneout factor must be a number in [0, 1] (docs/ARCHITECTURE.md, semantics)."""
    try:
        z = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{block}: `{name}` must be a number in [0, 1]; got {value!r}.") from None
    if not 0.0 <= z <= 1.0:
        raise ValueError(f"{block}: `{name}` must lie in [0, 1]; got {value!r}.")
    return z
