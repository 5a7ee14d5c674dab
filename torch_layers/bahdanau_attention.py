"""Torch ``BahdanauAttention``: TF contrib's content-only Bahdanau attention (keithito/tacotron's decoder)."""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._validation import check_float_tensor, check_positive_int
from .location_sensitive_attention import check_memory_lengths, memory_mask
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1

__all__ = ["BahdanauAttention", "bahdanau_scores", "attend", "score_mask"]


def bahdanau_scores(keys: Tensor, processed_query: Tensor, v: Tensor) -> Tensor:
    """``sum_k v[k] * tanh(keys[b, j, k] + processed_query[b, k])`` (contrib ``_bahdanau_score``, unnormalised).

    Args:
        keys: ``(batch, T_in, units)`` (any extra term, such as location features, already added).
        processed_query: ``(batch, units)``.
        v: ``(units,)``.

    Returns:
        ``(batch, T_in)`` scores.
    """
    return torch.matmul(torch.tanh(keys + processed_query.unsqueeze(1)), v)


def attend(score: Tensor, values: Tensor, mask: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """Softmax of the scores (``-inf`` where ``mask`` is False) and the alignment-weighted sum of the values.

    Args:
        score: ``(batch, T_in)``.
        values: ``(batch, T_in, memory_size)``.
        mask: ``(batch, T_in)`` bool, True at the attended positions, or ``None`` (every position).

    Returns:
        ``(context, alignments)``: ``(batch, memory_size)``, ``(batch, T_in)``.
    """
    if mask is not None:
        score = torch.where(mask, score, torch.full_like(score, -math.inf))
    alignments = torch.softmax(score, -1)
    context = torch.bmm(alignments.unsqueeze(1), values).squeeze(1)
    return context, alignments


def score_mask(memory_lengths: Tensor, max_time: int, device: torch.device) -> Tensor:
    """``(batch, max_time)`` bool mask, True where ``t < length`` (the positions ``mask_memory`` attends)."""
    return memory_mask(memory_lengths.to(device), max_time, torch.float32) > 0


class BahdanauAttention(TF1WeightsMixin, nn.Module):
    """Content-only Bahdanau attention as TF 1.x ``tf.contrib.seq2seq.BahdanauAttention(units, memory)`` builds it
    (``normalize=False``, softmax), the mechanism of keithito/tacotron's decoder.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    ``keys = memory @ memory_layer`` (no bias, computed once per utterance: :meth:`process_memory`); one step with
    query ``q`` ``(batch, query_size)``::

        score[b, j] = sum_k attention_v[k] * tanh(keys[b, j, k] + (q @ query_layer)[b, k])
        alignments = softmax(score, -1);  context = sum_j alignments[b, j] * values[b, j]

    As keithito's model (built without ``memory_sequence_length``), nothing is masked by default: padded memory
    positions are attended. ``mask_memory=True`` (not the original) sets the scores at positions ``>= length`` to
    ``-inf`` before the softmax. The previous alignments are accepted (the mechanisms share one call signature)
    and unused.

    TF1 variables relative to ``tf1_scope``: ``memory_layer/kernel`` ``[memory_size, units]``,
    ``query_layer/kernel`` ``[query_size, units]``, ``attention_v`` ``[units]`` (in keithito's graph
    ``memory_layer`` sits at the model scope: :class:`~torch_layers.tacotron1_decoder.Tacotron1Decoder` maps it).

    Args:
        units: attention depth (``attention_depth``).
        memory_size: memory features ``E`` (the encoder outputs' width).
        query_size: query features (default ``units``: the attention GRU's).
        mask_memory: mask the scores past ``memory_lengths``.
        tf1_scope: TF1 scope of the block.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> att = BahdanauAttention(16, memory_size=8)
        >>> memory = torch.randn(2, 5, 8)
        >>> keys = att.process_memory(memory)
        >>> context, align = att(torch.randn(2, 16), keys, memory, torch.zeros(2, 5))
        >>> context.shape, align.shape
        (torch.Size([2, 8]), torch.Size([2, 5]))
    """

    def __init__(self, units: int, *, memory_size: int, query_size: Optional[int] = None, mask_memory: bool = False,
                 tf1_scope: str = "bahdanau_attention", device=None, dtype=None):
        super().__init__()
        block = type(self).__name__
        self.block_name = block
        self.units = check_positive_int(units, "units", block)
        self.memory_size = check_positive_int(memory_size, "memory_size", block)
        self.query_size = check_positive_int(units if query_size is None else query_size, "query_size", block)
        self.mask_memory = bool(mask_memory)
        self.tf1_scope = tf1_scope
        factory = {"device": device, "dtype": dtype}
        self.memory_layer = nn.Linear(self.memory_size, self.units, bias=False, **factory)
        self.query_layer = nn.Linear(self.query_size, self.units, bias=False, **factory)
        self.attention_v = nn.Parameter(torch.empty(self.units, **factory))
        self._reset_attention()

    def _reset_attention(self) -> None:
        """TF1's initialisation: Glorot-uniform kernels and ``attention_v`` (fans ``units``, ``units``)."""
        nn.init.xavier_uniform_(self.memory_layer.weight)
        nn.init.xavier_uniform_(self.query_layer.weight)
        bound = math.sqrt(3.0 / self.units)
        nn.init.uniform_(self.attention_v, -bound, bound)

    @torch.jit.export
    def process_memory(self, memory: Tensor) -> Tensor:
        """The keys of a memory (once per utterance).

        Args:
            memory: ``(batch, T_in, memory_size)``.

        Returns:
            ``(batch, T_in, units)``: ``memory @ memory_layer``.
        """
        check_float_tensor(memory, "memory", self.block_name, 3, self.memory_size,
                           "(batch, T_in, " + str(self.memory_size) + ")")
        return F.linear(memory, self.memory_layer.weight)

    def _check_step(self, query: Tensor, keys: Tensor, values: Tensor, previous_alignments: Tensor,
                    memory_lengths: Optional[Tensor]) -> Optional[Tensor]:
        """Checks a step's arguments; returns the score mask (``mask_memory`` with lengths) or ``None``."""
        block = self.block_name
        check_float_tensor(query, "query", block, 2, self.query_size, "(batch, " + str(self.query_size) + ")")
        check_float_tensor(values, "values", block, 3, self.memory_size,
                           "(batch, T_in, " + str(self.memory_size) + ")")
        batch, max_time = values.shape[0], values.shape[1]
        check_float_tensor(keys, "keys", block, 3, self.units, "(batch, T_in, " + str(self.units) + ")")
        check_float_tensor(previous_alignments, "previous_alignments", block, 2, max_time,
                           "(batch, T_in=" + str(max_time) + ")")
        if (query.shape[0] != batch or keys.shape[:2] != values.shape[:2]
                or previous_alignments.shape[0] != batch):
            raise ValueError(block + ": arguments `query` (batch, " + str(self.query_size) + "), `keys` (batch, T_in, "
                             + str(self.units) + "), `values` (batch, T_in, " + str(self.memory_size) + ") and "
                             "`previous_alignments` (batch, T_in) must agree on batch and T_in; got shapes "
                             + str(list(query.shape)) + ", " + str(list(keys.shape)) + ", " + str(list(values.shape))
                             + ", " + str(list(previous_alignments.shape)) + ".")
        if memory_lengths is None or not self.mask_memory:
            return None
        check_memory_lengths(memory_lengths, "memory_lengths", block, batch, max_time)
        return score_mask(memory_lengths, max_time, values.device)

    def scores(self, processed_query: Tensor, keys: Tensor, previous_alignments: Tensor) -> Tensor:
        """The step's scores ``(batch, T_in)`` from the projected query ``(batch, units)`` (no checks; the
        location-sensitive subclass adds its location term)."""
        return bahdanau_scores(keys, processed_query, self.attention_v)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, previous_alignments: Tensor,
                memory_lengths: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """One attention step.

        Args:
            query: ``(batch, query_size)`` (the attention GRU's new output).
            keys: ``(batch, T_in, units)`` from :meth:`process_memory`.
            values: ``(batch, T_in, memory_size)`` (the memory).
            previous_alignments: ``(batch, T_in)`` (the previous step's alignments; zeros at the first step).
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``; used only when ``mask_memory``.

        Returns:
            ``(context, alignments)``: ``(batch, memory_size)``, ``(batch, T_in)``.
        """
        mask = self._check_step(query, keys, values, previous_alignments, memory_lengths)
        score = self.scores(F.linear(query, self.query_layer.weight), keys, previous_alignments)
        return attend(score, values, mask)

    def extra_repr(self) -> str:
        return (f"{self.units}, memory_size={self.memory_size}, query_size={self.query_size}, "
                f"mask_memory={self.mask_memory}, tf1_scope={self.tf1_scope!r}")

    @torch.jit.unused
    def _tf1_variables(self) -> dict[str, TF1Variable]:
        return {
            "memory_layer/kernel": TF1Variable(self.memory_layer.weight, dense_to_tf1, dense_from_tf1),
            "query_layer/kernel": TF1Variable(self.query_layer.weight, dense_to_tf1, dense_from_tf1),
            "attention_v": TF1Variable(self.attention_v),
        }
