"""Torch ``StopProjection``: Tacotron-2's stop-token projection (logits in training, sigmoid in eval)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from . import activations
from ._validation import activation_name, check_features, check_positive_int
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1


class StopProjection(TF1WeightsMixin, nn.Module):
    """Linear projection to ``shape`` stop-token logits; TF1 variables ``projection_<tf1_scope>/{kernel,bias}``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    As in the seed: in ``train()`` the module returns **logits** (the sigmoid belongs to the loss);
    in ``eval()`` it returns ``activation(logits)``, sigmoid probabilities by default. An explicit
    ``training`` argument of ``forward`` overrides the module mode.

    Args:
        input_size: input features.
        shape: outputs (``outputs_per_step`` in Rayhane's decoder; seed default 1).
        activation: applied in eval only: ``"sigmoid"`` (default), ``"relu"``, ``"tanh"``, ``"linear"``/``None``.
        tf1_scope: TF1 scope; ``None`` -> ``"stop_token_projection"``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> stop = StopProjection(1536, 2).eval()
        >>> stop(torch.zeros(3, 1536)).shape
        torch.Size([3, 2])
    """

    default_tf1_scope = "stop_token_projection"

    def __init__(self, input_size: int, shape: int = 1, activation: Optional[str] = "sigmoid",
                 tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        self.input_size = check_positive_int(input_size, "input_size", "StopProjection")
        self.shape = check_positive_int(shape, "shape", "StopProjection")
        self.activation = activation_name(activation, "StopProjection")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.dense = nn.Linear(input_size, shape, device=device, dtype=dtype)

    def forward(self, inputs: torch.Tensor, training: Optional[bool] = None) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, input_size)`` or ``(batch, time, input_size)``.
            training: ``None`` follows ``self.training``; True returns logits, False ``activation(logits)``.

        Returns:
            ``(..., shape)``: logits (training) or ``activation(logits)`` (eval).
        """
        check_features(inputs, "inputs", "StopProjection", self.input_size)
        logits = self.dense(inputs)
        is_training = self.training if training is None else training
        if is_training:
            return logits
        return activations.apply(self.activation, logits)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, tf1_scope={self.tf1_scope!r}"

    def _tf1_variables(self):
        name = f"projection_{self.tf1_scope}"
        return {f"{name}/kernel": TF1Variable(self.dense.weight, dense_to_tf1, dense_from_tf1),
                f"{name}/bias": TF1Variable(self.dense.bias)}
