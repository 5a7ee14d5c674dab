"""Torch ``HighwayNet``: one Tacotron-2 highway layer (``H``/``T`` dense pair)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1


class HighwayNet(TF1WeightsMixin, nn.Module):
    """Highway layer ``y = H(x)·T(x) + x·(1 − T(x))`` as TF1 Tacotron-2's ``HighwayNet``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    ``H``: relu linear layer; ``T``: sigmoid linear layer with bias initialised to −1. Weights are
    initialised as TF1 does (Glorot-uniform kernels, zero ``H`` bias).

    Args:
        units: width of the input and of the output (the input size must equal ``units``).
        tf1_scope: TF1 scope (default ``"HighwayNet"``); TF1 names ``H/kernel``, ``H/bias``,
            ``T/kernel``, ``T/bias``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> layer = HighwayNet(128)
        >>> layer(torch.zeros(2, 7, 128)).shape
        torch.Size([2, 7, 128])
    """

    default_tf1_scope = "HighwayNet"

    def __init__(self, units: int, tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        if units < 1:
            raise ValueError(f"HighwayNet: `units` must be >= 1; got {units}.")
        self.units = units
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.H = nn.Linear(units, units, device=device, dtype=dtype)
        self.T = nn.Linear(units, units, device=device, dtype=dtype)
        self._shape_doc = f"(batch, time, {units})"
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """TF1 initialisation: Glorot-uniform kernels, ``H`` bias 0, ``T`` bias −1."""
        nn.init.xavier_uniform_(self.H.weight)
        nn.init.zeros_(self.H.bias)
        nn.init.xavier_uniform_(self.T.weight)
        nn.init.constant_(self.T.bias, -1.0)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, time, units)``.

        Returns:
            ``(batch, time, units)``.
        """
        check_float_tensor(inputs, "inputs", "HighwayNet", 3, self.units, self._shape_doc)
        h = torch.relu(self.H(inputs))
        t = torch.sigmoid(self.T(inputs))
        return h * t + inputs * (1.0 - t)

    def _tf1_variables(self):
        return {
            "H/kernel": TF1Variable(self.H.weight, dense_to_tf1, dense_from_tf1),
            "H/bias": TF1Variable(self.H.bias),
            "T/kernel": TF1Variable(self.T.weight, dense_to_tf1, dense_from_tf1),
            "T/bias": TF1Variable(self.T.bias),
        }
