"""Torch ``FrameProjection``: Tacotron-2's dense projection to ``r * num_mels`` (or ``num_mels``) frames."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from . import activations
from ._validation import activation_name, check_features, check_positive_int
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1


class FrameProjection(TF1WeightsMixin, nn.Module):
    """Dense projection ``activation(inputs @ W.T + b)``; TF1 variables ``projection_<tf1_scope>/{kernel,bias}``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Args:
        input_size: input features.
        shape: output units (``r * num_mels`` for the decoder, ``num_mels`` after the postnet).
        activation: ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"linear"`` or ``None`` (seed default, linear).
        tf1_scope: TF1 scope; ``None`` -> ``"Linear_projection"`` (Rayhane: ``"linear_transform_projection"``,
            ``"postnet_projection"``).
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> proj = FrameProjection(1536, 160)
        >>> proj(torch.zeros(2, 1536)).shape
        torch.Size([2, 160])
    """

    default_tf1_scope = "Linear_projection"

    def __init__(self, input_size: int, shape: int = 80, activation: Optional[str] = None,
                 tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        self.input_size = check_positive_int(input_size, "input_size", "FrameProjection")
        self.shape = check_positive_int(shape, "shape", "FrameProjection")
        self.activation = activation_name(activation, "FrameProjection")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.dense = nn.Linear(input_size, shape, device=device, dtype=dtype)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, input_size)`` or ``(batch, time, input_size)``.

        Returns:
            ``(..., shape)``.
        """
        check_features(inputs, "inputs", "FrameProjection", self.input_size)
        return activations.apply(self.activation, self.dense(inputs))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, tf1_scope={self.tf1_scope!r}"

    def _tf1_variables(self):
        name = f"projection_{self.tf1_scope}"
        return {f"{name}/kernel": TF1Variable(self.dense.weight, dense_to_tf1, dense_from_tf1),
                f"{name}/bias": TF1Variable(self.dense.bias)}
