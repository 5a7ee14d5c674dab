"""TF1 weight exchange shared by every Tacotron-2 torch module (docs/ARCHITECTURE.md, rules).

A module lists its TF1 variables with ``_tf1_variables()`` -- names relative to its TF1 scope,
exactly as the TF1 graph spells them -- and gets ``tf1_weights()`` and an all-or-nothing
``load_tf1_weights()``. Layout conversions are numpy functions, unit-tested on their own.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import torch

# the framework-free part (error, report, strict checks and their messages, layout conversions) lives in
# speechblocks.tf1_exchange and speechblocks.layouts
from speechblocks.layouts import conv1d_from_tf1, conv1d_to_tf1, dense_from_tf1, dense_to_tf1
from speechblocks.tf1_exchange import TF1LoadReport, TF1WeightsError, assign_tf1_weights, tf1_shape
from speechblocks.tf1_exchange import check_tf1_weights as check_tf1_weights  # re-exported

__all__ = ["TF1Variable", "TF1WeightsError", "TF1LoadReport", "TF1WeightsMixin", "dense_from_tf1",
           "dense_to_tf1", "conv1d_from_tf1", "conv1d_to_tf1", "tf1_training_gradients"]


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
        return tf1_shape(self.tensor.shape, self.to_tf1)

    @torch.no_grad()
    def assign(self, tf1_value: np.ndarray) -> None:
        v = self.from_tf1(tf1_value) if self.from_tf1 is not None else tf1_value
        self.tensor.copy_(torch.from_numpy(np.ascontiguousarray(v)).to(self.tensor.dtype))


def tf1_training_gradients(module: torch.nn.Module, variables: Mapping[str, TF1Variable],
                           losses_fn: Callable[[], Mapping[str, torch.Tensor]]
                           ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The body of every model's ``tf1_loss_and_gradients``: ``losses_fn()`` run once with ``module`` in ``train()``
    and autograd on, then ``torch.autograd.grad`` of its ``"loss"`` entry -- what the TF1 graph's ``add_loss`` and
    ``tf.gradients(loss, variables)`` compute. The module's mode, its buffers (batch-norm moving statistics) and the
    parameters' ``.grad`` are left as they were.

    Args:
        module: the model.
        variables: ``{TF1 name: TF1Variable}`` of the variables to differentiate (parameters).
        losses_fn: runs the forward pass and the loss; returns ``{name: scalar tensor}`` with a ``"loss"`` entry.

    Returns:
        ``(losses, gradients)``: every loss as a Python float, and ``{TF1 name: gradient}`` (numpy, TF1 layout;
        zeros where the loss does not depend on the variable).
    """
    saved = {name: b.detach().clone() for name, b in module.named_buffers()}
    was_training = module.training
    module.train()
    try:
        with torch.enable_grad():
            losses = losses_fn()
            grads = torch.autograd.grad(losses["loss"], [v.tensor for v in variables.values()], allow_unused=True)
    finally:
        module.train(was_training)
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(saved[name])
    gradients = {}
    for (name, var), g in zip(variables.items(), grads):
        value = np.zeros(tuple(var.tensor.shape), np.float32) if g is None else g.detach().cpu().numpy()
        gradients[name] = var.to_tf1(value) if var.to_tf1 is not None else value
    return {k: float(v.detach()) for k, v in losses.items()}, gradients


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
        return assign_tf1_weights(self._tf1_describe(), self._tf1_variables(), weights, strict)
