"""TF1 semantics as small torch functions: 'same' padding, keep-prob dropout."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F


def tf_same_padding(kernel_size: int) -> tuple[int, int]:
    """TF ``'same'`` padding for stride 1: ``(k-1)//2`` before, the rest after."""
    total = kernel_size - 1
    return total // 2, total - total // 2


def pad_time_same(x: torch.Tensor, kernel_size: int, value: float = 0.0) -> torch.Tensor:
    """Pads the last axis of ``(batch, channels, time)`` as TF ``'same'`` does."""
    before, after = tf_same_padding(kernel_size)
    if before == 0 and after == 0:
        return x
    return F.pad(x, (before, after), value=value)


def tf1_dropout(x: torch.Tensor, rate: float, mask: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Inverted dropout ``x / (1 - rate) * keep_mask`` with ``keep_mask ~ Bernoulli(1 - rate)``.

    Dropped entries are *selected* to 0 (TF's ``dropout`` is ``where(keep, x * scale, 0)``): a NaN/inf that
    is dropped gives 0, as in the TF1 reference, not ``0 * NaN``.

    Args:
        x: input of any shape.
        rate: drop probability in [0, 1).
        mask: optional 0/1 keep-mask of ``x``'s shape (injected for cross-framework comparison).
        generator: optional ``torch.Generator`` for the random mask.

    Returns:
        tensor of ``x``'s shape.
    """
    if mask is None:
        if rate == 0.0:
            return x
        # rand_like: the numbers of rand(x.shape) (x is a fresh product), in a form torch.export takes with dynamic
        # shapes
        if generator is None:  # the overload without a generator: the one ONNX maps (RandomUniformLike)
            u = torch.rand_like(x, dtype=torch.float32)
        else:
            u = torch.rand_like(x, dtype=torch.float32, generator=generator)
        mask = (u >= rate).to(x.dtype)
    else:
        if mask.shape != x.shape:
            raise ValueError("argument `dropout_mask` must have the shape of the dropped tensor "
                             + str(list(x.shape)) + "; got " + str(list(mask.shape)) + ".")
        mask = mask.to(x.dtype)
    # selection, as TF's `dropout` (`where(keep, x * scale, 0)`): a dropped NaN/inf gives 0, not 0 * NaN
    kept = x * mask if rate == 0.0 else x * (1.0 / (1.0 - rate)) * mask
    return torch.where(mask != 0, kept, torch.zeros_like(kept))
