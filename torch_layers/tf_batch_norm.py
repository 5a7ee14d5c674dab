"""Batch normalisation over the last axis with TF1 ``batch_normalization`` semantics."""
from __future__ import annotations

import torch
from torch import nn


class TFBatchNorm(nn.Module):
    """Batch norm of ``(..., channels)`` tensors as ``tf.compat.v1.layers.batch_normalization``.

    Differs from ``nn.BatchNorm1d`` in three TF1 ways: epsilon 1e-3; moving averages
    ``moving = moving * momentum + batch * (1 - momentum)`` with momentum 0.99; the moving variance
    tracks the *biased* batch variance.

    Args:
        num_features: channels (last axis).
        epsilon: variance epsilon.
        momentum: TF-style momentum of the moving averages.
        device: factory keyword.
        dtype: factory keyword.
    """

    def __init__(self, num_features: int, epsilon: float = 1e-3, momentum: float = 0.99,
                 device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.epsilon = epsilon
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(num_features, **factory))
        self.bias = nn.Parameter(torch.zeros(num_features, **factory))
        self.register_buffer("running_mean", torch.zeros(num_features, **factory))
        self.register_buffer("running_var", torch.ones(num_features, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x ``(..., channels)``. Returns: same shape."""
        if self.training:
            dims = [i for i in range(x.dim() - 1)]
            mean = x.mean(dim=dims)
            var = x.var(dim=dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.mul_(self.momentum).add_(mean.detach().to(self.running_mean.dtype), alpha=1.0 - self.momentum)
                self.running_var.mul_(self.momentum).add_(var.detach().to(self.running_var.dtype), alpha=1.0 - self.momentum)
        else:
            mean = self.running_mean.to(x.dtype)
            var = self.running_var.to(x.dtype)
        scale = self.weight.to(x.dtype) * torch.rsqrt(var + self.epsilon)
        return x * scale + (self.bias.to(x.dtype) - mean * scale)

    def extra_repr(self) -> str:
        return f"{self.num_features}, epsilon={self.epsilon}, momentum={self.momentum}"
