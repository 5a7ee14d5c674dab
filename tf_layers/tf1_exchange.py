"""TF1 weight exchange shared by every Tacotron-2 Keras layer (docs/ARCHITECTURE.md, rules).

A layer lists its TF1 variables with :meth:`TF1WeightsMixin._tf1_variables` -- names relative to the
layer's TF1 scope, exactly as the TF1 graph spells them -- and gets ``tf1_weights()`` and an
all-or-nothing ``load_tf1_weights()`` for free.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

# the framework-free part (error, report, strict checks and their messages) lives in speechblocks.tf1_exchange
from speechblocks.tf1_exchange import TF1LoadReport, TF1WeightsError, assign_tf1_weights, tf1_shape
from speechblocks.tf1_exchange import check_tf1_weights as check_tf1_weights  # re-exported

__all__ = ["TF1Variable", "TF1WeightsError", "TF1LoadReport", "TF1WeightsMixin"]


@dataclasses.dataclass
class TF1Variable:
    """One TF1 variable of a block, bound to the framework variable that holds it.

    Args:
        variable: the Keras variable.
        to_tf1: converts the variable's value (numpy) to the TF1 layout; identity when ``None``.
        from_tf1: converts a TF1 value to the variable's layout; identity when ``None``.
    """

    variable: object
    to_tf1: Callable[[np.ndarray], np.ndarray] | None = None
    from_tf1: Callable[[np.ndarray], np.ndarray] | None = None

    def value(self) -> np.ndarray:
        v = np.asarray(self.variable.numpy())
        return self.to_tf1(v) if self.to_tf1 is not None else v

    def tf1_shape(self) -> tuple[int, ...]:
        return tf1_shape(self.variable.shape, self.to_tf1)

    def assign(self, tf1_value: np.ndarray) -> None:
        v = self.from_tf1(tf1_value) if self.from_tf1 is not None else tf1_value
        self.variable.assign(np.asarray(v, dtype=np.dtype(self.variable.dtype)))


class TF1WeightsMixin:
    """Gives a Keras layer ``tf1_scope``, ``tf1_weights()`` and ``load_tf1_weights()``.

    Subclasses implement ``_tf1_variables()`` (built layer -> ``{relative_name: TF1Variable}``) and
    ``_tf1_input_shape(weights)`` (the input shape to build from, inferred from TF1 weight shapes;
    raise ``KeyError(name)`` when a needed key is absent).
    """

    def _tf1_variables(self) -> dict[str, TF1Variable]:
        raise NotImplementedError

    def _tf1_input_shape(self, weights: Mapping[str, np.ndarray]):
        raise NotImplementedError

    def _tf1_describe(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, tf1_scope={self.tf1_scope!r})"

    def tf1_weights(self) -> dict[str, np.ndarray]:
        """Returns the block's weights as ``{TF1 name relative to tf1_scope: array in TF1 layout}``."""
        if not self.built:
            raise ValueError(f"{self._tf1_describe()} is not built yet: call it once or load weights first.")
        return {name: var.value() for name, var in self._tf1_variables().items()}

    def load_tf1_weights(self, weights: Mapping[str, np.ndarray], strict: bool = True) -> TF1LoadReport:
        """Assigns TF1 weights (names relative to ``tf1_scope``, TF1 layout).

        Args:
            weights: ``{relative TF1 name: array}``.
            strict: every expected key must be present and no unknown key may appear.

        Returns:
            a :class:`TF1LoadReport`.

        Raises:
            TF1WeightsError: listing every problem (missing or unknown key, wrong shape); nothing is
                assigned then. A layer not yet built builds itself from the weight shapes first.
        """
        weights = {k: np.asarray(v) for k, v in weights.items()}
        if not self.built:
            try:
                input_shape = self._tf1_input_shape(weights)
            except KeyError as e:
                raise TF1WeightsError(
                    self._tf1_describe(),
                    [f"missing key {e.args[0]!r}: needed to infer the input size of an unbuilt layer"],
                ) from None
            self.build(input_shape)
        return assign_tf1_weights(self._tf1_describe(), self._tf1_variables(), weights, strict)
