"""Small normalisation registry (``norms.get``) with asteroid's layer norms and parameter names.

``gLN`` (global layer norm) and ``cLN`` (channel-wise layer norm) carry a ``gamma`` (ones) and a
``beta`` (zeros) of shape ``[channels]``, as asteroid's ``GlobLN`` / ``ChanLN``, so asteroid state
dicts (``norm.gamma``, ``norm.beta``) load unchanged. Inputs are ``(batch, channels, *)``.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["GlobLN", "ChanLN", "get", "EPS"]

EPS = 1e-8


class _ChannelAffineNorm(nn.Module):
    """Base: per-channel ``gamma``/``beta`` applied on axis 1 of ``(batch, channels, *)``."""

    def __init__(self, channel_size: int, device=None, dtype=None):
        super().__init__()
        if channel_size < 1:
            raise ValueError(f"{type(self).__name__}: `channel_size` must be >= 1; got {channel_size}.")
        self.channel_size = channel_size
        self._name = type(self).__name__
        self.eps = EPS
        self.gamma = nn.Parameter(torch.ones(channel_size, device=device, dtype=dtype))
        self.beta = nn.Parameter(torch.zeros(channel_size, device=device, dtype=dtype))

    def _affine(self, normed: torch.Tensor) -> torch.Tensor:
        shape = [1, self.channel_size] + [1] * (normed.dim() - 2)
        return torch.addcmul(self.beta.view(shape), normed, self.gamma.view(shape))

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() < 2 or x.shape[1] != self.channel_size:
            raise ValueError(self._name + ": argument `x` must have shape (batch, "
                             + str(self.channel_size) + ", *); got shape " + str(list(x.shape)) + ".")

    def extra_repr(self) -> str:
        return f"{self.channel_size}"


class GlobLN(_ChannelAffineNorm):
    """Global layer norm: ``(x - mean) / sqrt(var + 1e-8)`` over every non-batch axis, then per-channel
    ``gamma``/``beta`` (asteroid's ``GlobLN``; biased variance).

    Args:
        channel_size: number of channels (axis 1).
        device: factory keyword.
        dtype: factory keyword.

    Shape:
        ``x``: ``(batch, channel_size, *)``; output of the same shape.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: ``(batch, channel_size, *)``.

        Returns:
            normalised tensor of the same shape.
        """
        self._check(x)
        dims = list(range(1, x.dim()))
        var, mean = torch.var_mean(x, dim=dims, correction=0, keepdim=True)
        return self._affine((x - mean) / torch.sqrt(var + self.eps))


class ChanLN(_ChannelAffineNorm):
    """Channel-wise layer norm: ``(x - mean) / sqrt(var + 1e-8)`` over the channel axis only, at each
    position, then per-channel ``gamma``/``beta`` (asteroid's ``ChanLN``; biased variance).

    Args:
        channel_size: number of channels (axis 1).
        device: factory keyword.
        dtype: factory keyword.

    Shape:
        ``x``: ``(batch, channel_size, *)``; output of the same shape.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: ``(batch, channel_size, *)``.

        Returns:
            normalised tensor of the same shape.
        """
        self._check(x)
        var, mean = torch.var_mean(x, dim=1, correction=0, keepdim=True)
        return self._affine((x - mean) / torch.sqrt(var + self.eps))


_NORMS: dict[str, Callable[..., nn.Module]] = {"gLN": GlobLN, "cLN": ChanLN}


def get(identifier: str) -> Callable[..., nn.Module]:
    """Returns the norm class for a name (``"gLN"`` or ``"cLN"``, as asteroid spells them).

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(identifier, str) and identifier in _NORMS:
        return _NORMS[identifier]
    raise ValueError(f"norm_type must be one of {sorted(_NORMS)}; got {identifier!r}.")
