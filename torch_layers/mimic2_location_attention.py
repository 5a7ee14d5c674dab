"""Torch ``Mimic2LocationAttention``: mimic2's location-sensitive Bahdanau attention (over the previous
step's alignments, not their running sum)."""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._functional import tf_same_padding
from ._validation import check_positive_int
from .bahdanau_attention import BahdanauAttention
from .tf1_exchange import TF1Variable, conv1d_from_tf1, conv1d_to_tf1, dense_from_tf1, dense_to_tf1

__all__ = ["Mimic2LocationAttention", "location_term"]


def location_term(previous_alignments: Tensor, fused_kernel: Tensor, pad_before: int, pad_after: int) -> Tensor:
    """``conv1d_same(previous_alignments[..., None], location_conv) @ location_layer`` as one convolution.

    Args:
        previous_alignments: ``(batch, T_in)``.
        fused_kernel: ``(units, 1, kernel_size)`` from :meth:`Mimic2LocationAttention.fused_location_kernel`.
        pad_before, pad_after: TF ``'same'`` padding of the convolution.

    Returns:
        ``(batch, T_in, units)``.
    """
    s = previous_alignments.unsqueeze(1)
    if pad_before == pad_after:
        f = F.conv1d(s, fused_kernel, None, 1, pad_before)
    else:
        f = F.conv1d(F.pad(s, [pad_before, pad_after]), fused_kernel)
    return f.transpose(1, 2)


class Mimic2LocationAttention(BahdanauAttention):
    """mimic2's ``LocationSensitiveAttention`` (``models/attention.py``): a :class:`BahdanauAttention` whose scores
    add location features of the **previous step's** alignments.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    One step with query ``q`` and previous alignments ``a`` ``(batch, T_in)`` (zeros at the first step)::

        f = conv1d(a[..., None], location_conv, TF 'same' padding, no bias)          # (batch, T_in, filters)
        score = sum_k attention_v[k] * tanh(keys + (q @ query_layer)[:, None] + f @ location_layer)
        alignments = softmax(score, -1);  context = sum_j alignments[:, j] * values[:, j]

    Both location layers are linear without a bias, so they run as one convolution with the kernel
    ``location_layer^T location_conv`` (:meth:`fused_location_kernel`; equal up to float rounding). Nothing is masked
    by default (mimic2 builds it without ``memory_sequence_length``); ``mask_memory=True`` sets the scores past
    ``memory_lengths`` to ``-inf``.

    TF1 variables relative to ``tf1_scope``: those of :class:`BahdanauAttention` plus ``location_conv/kernel``
    ``[kernel_size, 1, filters]`` and ``location_layer/kernel`` ``[filters, units]``.

    Args:
        units: attention depth.
        memory_size: memory features ``E``.
        query_size: query features (default ``units``).
        filters: location convolution filters (mimic2: 20).
        kernel_size: location convolution width (mimic2: 7); even widths pad as TF ``'same'``.
        mask_memory: mask the scores past ``memory_lengths``.
        tf1_scope: TF1 scope of the block.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> att = Mimic2LocationAttention(16, memory_size=8)
        >>> memory = torch.randn(2, 5, 8)
        >>> context, align = att(torch.randn(2, 16), att.process_memory(memory), memory, torch.zeros(2, 5))
        >>> align.shape
        torch.Size([2, 5])
    """

    def __init__(self, units: int, *, memory_size: int, query_size: Optional[int] = None, filters: int = 20,
                 kernel_size: int = 7, mask_memory: bool = False, tf1_scope: str = "location_sensitive_attention",
                 device=None, dtype=None):
        super().__init__(units, memory_size=memory_size, query_size=query_size, mask_memory=mask_memory,
                         tf1_scope=tf1_scope, device=device, dtype=dtype)
        self.filters = check_positive_int(filters, "filters", self.block_name)
        self.kernel_size = check_positive_int(kernel_size, "kernel_size", self.block_name)
        self.pad_before, self.pad_after = tf_same_padding(kernel_size)
        factory = {"device": device, "dtype": dtype}
        self.location_conv = nn.Conv1d(1, filters, kernel_size, bias=False, **factory)  # TF 'same' padding by hand
        self.location_layer = nn.Linear(filters, units, bias=False, **factory)
        bound = math.sqrt(6.0 / (kernel_size * 1 + kernel_size * filters))  # TF fans of a [k, 1, filters] kernel
        nn.init.uniform_(self.location_conv.weight, -bound, bound)
        nn.init.xavier_uniform_(self.location_layer.weight)

    def fused_location_kernel(self) -> Tensor:
        """``(units, 1, kernel_size)``: ``location_conv`` followed by ``location_layer`` as one kernel."""
        return torch.mm(self.location_layer.weight, self.location_conv.weight.squeeze(1)).unsqueeze(1)

    def scores(self, processed_query: Tensor, keys: Tensor, previous_alignments: Tensor) -> Tensor:
        """The step's scores ``(batch, T_in)``: the Bahdanau score with the location term added to the keys."""
        location = location_term(previous_alignments, self.fused_location_kernel(), self.pad_before, self.pad_after)
        return torch.matmul(torch.tanh(keys + processed_query.unsqueeze(1) + location), self.attention_v)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, filters={self.filters}, kernel_size={self.kernel_size}"

    @torch.jit.unused
    def _tf1_variables(self) -> dict[str, TF1Variable]:
        out = super()._tf1_variables()
        out["location_conv/kernel"] = TF1Variable(self.location_conv.weight, conv1d_to_tf1, conv1d_from_tf1)
        out["location_layer/kernel"] = TF1Variable(self.location_layer.weight, dense_to_tf1, dense_from_tf1)
        return out
