"""All-or-nothing TF1 weight loading, the part both frameworks share (docs/ARCHITECTURE.md, rules).

``tf_layers.tf1_exchange`` and ``torch_layers.tf1_exchange`` bind TF1 names to their own variables
(``TF1Variable``) and give every block ``tf1_weights()`` / ``load_tf1_weights()``. What does not depend
on the framework is here, written once: the error listing every problem (:class:`TF1WeightsError`), the
report (:class:`TF1LoadReport`), the strict key and shape checks and their messages
(:func:`check_tf1_weights`), and the check-then-assign sequence (:func:`assign_tf1_weights`). Pure numpy.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from .errors import InputError

__all__ = ["TF1WeightsError", "TF1LoadReport", "check_tf1_weights", "assign_tf1_weights", "tf1_shape"]


class TF1WeightsError(InputError):
    """Raised when TF1 weights do not fit a block; ``problems`` lists every problem found."""

    def __init__(self, block: str, problems: list[str]):
        self.block = block
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{block}: cannot load TF1 weights ({len(self.problems)} problem(s)); nothing was "
                         f"assigned:\n{lines}")


@dataclasses.dataclass(frozen=True)
class TF1LoadReport:
    """What ``load_tf1_weights`` did: keys assigned, expected keys absent, keys not used."""

    loaded: tuple[str, ...]
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()


def tf1_shape(shape, to_tf1: Callable[[np.ndarray], np.ndarray] | None) -> tuple[int, ...]:
    """The TF1 shape of a variable of ``shape`` stored in the layout ``to_tf1`` converts from (identity: ``None``)."""
    shape = tuple(int(d) for d in shape)
    if to_tf1 is None:
        return shape
    return tuple(to_tf1(np.zeros(shape, np.float32)).shape)


def check_tf1_weights(
    block: str,
    expected: Mapping[str, tuple[int, ...]],
    weights: Mapping[str, np.ndarray],
    strict: bool,
) -> tuple[list[str], list[str]]:
    """Validates ``weights`` against ``expected`` shapes; raises one TF1WeightsError listing all problems.

    Shape mismatches are errors even when ``strict`` is False (as in torch's ``load_state_dict``).
    Returns ``(missing, unexpected)`` keys.
    """
    problems = []
    missing = [k for k in expected if k not in weights]
    unexpected = sorted(k for k in weights if k not in expected)
    if strict:
        problems += [f"missing key {k!r} (expected shape {list(expected[k])})" for k in missing]
        problems += [f"unexpected key {k!r} (shape {list(np.shape(weights[k]))})" for k in unexpected]
    for k, shape in expected.items():
        if k in weights and tuple(np.shape(weights[k])) != tuple(shape):
            problems.append(f"key {k!r} has shape {list(np.shape(weights[k]))}, expected {list(shape)}")
    if problems:
        raise TF1WeightsError(block, problems)
    return missing, unexpected


def assign_tf1_weights(block: str, spec: Mapping, weights: Mapping[str, np.ndarray], strict: bool) -> TF1LoadReport:
    """Checks ``weights`` against ``spec`` (``{name: TF1Variable}`` of either framework) and assigns them, all or
    nothing.

    Args:
        block: the block's description, first word of every message.
        spec: ``{relative TF1 name: variable}``; a variable has ``tf1_shape()`` and ``assign(tf1_value)``.
        weights: ``{relative TF1 name: numpy array}`` in TF1 layout.
        strict: every expected key must be present and no unknown key may appear.

    Returns:
        a :class:`TF1LoadReport`.

    Raises:
        TF1WeightsError: listing every problem; nothing is assigned then.
    """
    expected = {k: v.tf1_shape() for k, v in spec.items()}
    missing, unexpected = check_tf1_weights(block, expected, weights, strict)
    loaded = [k for k in spec if k in weights]
    for k in loaded:
        spec[k].assign(weights[k])
    return TF1LoadReport(tuple(loaded), tuple(missing), tuple(unexpected))
