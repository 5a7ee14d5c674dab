"""TF1 weight exchange shared by every Tacotron-2 torch module (DESIGN §5).

A module lists its TF1 variables with ``_tf1_variables()`` -- names relative to its TF1 scope,
exactly as the TF1 graph spells them -- and gets ``tf1_weights()`` and an all-or-nothing
``load_tf1_weights()``. Layout conversions are numpy functions, unit-tested on their own.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import torch

__all__ = ["TF1Variable", "TF1WeightsError", "TF1LoadReport", "TF1WeightsMixin", "dense_from_tf1",
           "dense_to_tf1", "conv1d_from_tf1", "conv1d_to_tf1"]


class TF1WeightsError(ValueError):
    """Raised when TF1 weights do not fit a block; ``problems`` lists every problem found."""

    def __init__(self, block: str, problems: list[str]):
        self.block = block
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{block}: cannot load TF1 weights ({len(self.problems)} problem(s)); nothing was assigned:\n{lines}")


@dataclasses.dataclass(frozen=True)
class TF1LoadReport:
    """What ``load_tf1_weights`` did: keys assigned, expected keys absent, keys not used."""

    loaded: tuple[str, ...]
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()


# -- layout conversions (numpy, TF1 <-> torch) ---------------------------------------------------
def dense_to_tf1(w: np.ndarray) -> np.ndarray:
    """torch Linear weight ``(out, in)`` -> TF1 dense kernel ``(in, out)``."""
    return np.ascontiguousarray(w.T)


def dense_from_tf1(k: np.ndarray) -> np.ndarray:
    """TF1 dense kernel ``(in, out)`` -> torch Linear weight ``(out, in)``."""
    return np.ascontiguousarray(k.T)


def conv1d_to_tf1(w: np.ndarray) -> np.ndarray:
    """torch Conv1d weight ``(out, in, k)`` -> TF1 conv1d kernel ``(k, in, out)``."""
    return np.ascontiguousarray(np.transpose(w, (2, 1, 0)))


def conv1d_from_tf1(k: np.ndarray) -> np.ndarray:
    """TF1 conv1d kernel ``(k, in, out)`` -> torch Conv1d weight ``(out, in, k)``."""
    return np.ascontiguousarray(np.transpose(k, (2, 1, 0)))


@dataclasses.dataclass
class TF1Variable:
    """One TF1 variable of a block, bound to the torch parameter or buffer that holds it.

    Args:
        tensor: the parameter or buffer.
        to_tf1: numpy conversion from the tensor's layout to TF1's; identity when ``None``.
        from_tf1: numpy conversion from TF1's layout to the tensor's; identity when ``None``.
    """

    tensor: torch.Tensor
    to_tf1: Callable[[np.ndarray], np.ndarray] | None = None
    from_tf1: Callable[[np.ndarray], np.ndarray] | None = None

    def value(self) -> np.ndarray:
        v = self.tensor.detach().cpu().numpy()
        # a copy: numpy() of a CPU tensor shares its memory, and a weights dict must not change with the module
        return self.to_tf1(v) if self.to_tf1 is not None else v.copy()

    def tf1_shape(self) -> tuple[int, ...]:
        shape = tuple(self.tensor.shape)
        if self.to_tf1 is None:
            return shape
        return tuple(self.to_tf1(np.zeros(shape, np.float32)).shape)

    @torch.no_grad()
    def assign(self, tf1_value: np.ndarray) -> None:
        v = self.from_tf1(tf1_value) if self.from_tf1 is not None else tf1_value
        self.tensor.copy_(torch.from_numpy(np.ascontiguousarray(v)).to(self.tensor.dtype))


def check_tf1_weights(block: str, expected: Mapping[str, tuple[int, ...]], weights: Mapping[str, np.ndarray],
                      strict: bool) -> tuple[list[str], list[str]]:
    """Validates ``weights`` against ``expected`` shapes; raises one TF1WeightsError listing all problems."""
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


class TF1WeightsMixin:
    """Gives a torch module ``tf1_weights()`` and ``load_tf1_weights()``.

    Subclasses set ``self.tf1_scope`` and implement ``_tf1_variables() -> {relative_name: TF1Variable}``.
    """

    def _tf1_variables(self) -> dict[str, TF1Variable]:
        raise NotImplementedError

    def _tf1_describe(self) -> str:
        return f"{type(self).__name__}(tf1_scope={self.tf1_scope!r})"

    @torch.jit.unused
    def tf1_weights(self) -> dict[str, np.ndarray]:
        """Returns ``{TF1 name relative to tf1_scope: numpy array in TF1 layout}``."""
        return {name: var.value() for name, var in self._tf1_variables().items()}

    @torch.jit.unused
    def load_tf1_weights(self, weights: Mapping[str, np.ndarray], strict: bool = True) -> TF1LoadReport:
        """Assigns TF1 weights (names relative to ``tf1_scope``, TF1 layout).

        Args:
            weights: ``{relative TF1 name: array}``.
            strict: every expected key must be present and no unknown key may appear.

        Returns:
            a :class:`TF1LoadReport`.

        Raises:
            TF1WeightsError: listing every problem (missing or unknown key, wrong shape); nothing is
                assigned then. Shape mismatches are errors even when ``strict`` is False.
        """
        weights = {k: np.asarray(v) for k, v in weights.items()}
        spec = self._tf1_variables()
        expected = {k: v.tf1_shape() for k, v in spec.items()}
        missing, unexpected = check_tf1_weights(self._tf1_describe(), expected, weights, strict)
        loaded = [k for k in spec if k in weights]
        for k in loaded:
            spec[k].assign(weights[k])
        return TF1LoadReport(tuple(loaded), tuple(missing), tuple(unexpected))
