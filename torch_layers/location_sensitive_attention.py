"""Torch ``LocationSensitiveAttention``: Tacotron-2's hybrid (content + location) Bahdanau attention."""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._functional import tf_same_padding
from ._validation import check_float_tensor, check_lengths, check_positive_int
from .tf1_exchange import (
    TF1Variable,
    TF1WeightsMixin,
    conv1d_from_tf1,
    conv1d_to_tf1,
    dense_from_tf1,
    dense_to_tf1,
)

__all__ = ["LocationSensitiveAttention", "attention_step", "check_memory_lengths", "memory_mask", "normalize_energy",
           "score_bias_of"]


def check_memory_lengths(lengths: Tensor, name: str, block: str, batch: int, max_time: int) -> None:
    """``(batch,)`` integer lengths with every entry in ``[1, max_time]`` (TorchScript compatible)."""
    check_lengths(lengths, name, block, batch)
    if lengths.numel() > 0:
        lo = int(lengths.min())
        hi = int(lengths.max())
        if lo < 1 or hi > max_time:
            raise ValueError(block + ": argument `" + name + "` must hold lengths in [1, " + str(max_time)
                             + "] (shape (batch,), at most the time axis of the memory); got values in ["
                             + str(lo) + ", " + str(hi) + "].")


def memory_mask(lengths: Tensor, max_time: int, dtype: torch.dtype) -> Tensor:
    """``(batch, max_time)`` mask, 1 where ``t < length`` (``tf.sequence_mask``)."""
    ar = torch.arange(max_time, device=lengths.device).unsqueeze(0)
    return (ar < lengths.unsqueeze(1)).to(dtype)


def normalize_energy(energy: Tensor, smoothing: bool) -> Tensor:
    """Alignments from (masked) energies ``(batch, T_in)``: softmax, or ``sigmoid(e) / sum(sigmoid(e))``.

    A row whose energies hold a NaN (or +inf) is NaN in every position, masked ones included: that is what
    ``exp(e - max e) / sum exp(e - max e)`` gives in IEEE arithmetic, and it is stated here rather than left to
    the softmax kernel (oneDNN's, on AVX-512, returns 0 at the finite entries of such a row).
    """
    if smoothing:
        s = torch.sigmoid(energy)
        return s / s.sum(-1, keepdim=True)
    clean = (torch.isfinite(energy) | (energy == -math.inf)).all(-1, keepdim=True)
    return torch.where(clean, torch.softmax(energy, -1), math.nan)


def attention_step(query: Tensor, state: Tensor, values: Tensor, keys: Tensor, score_bias: Optional[Tensor],
                   query_weight: Tensor, location_weight: Tensor, v_a: Tensor, pad_before: int, pad_after: int,
                   smoothing: bool, cumulate: bool) -> tuple[Tensor, Tensor, Tensor]:
    """One step of the attention in the form every caller runs (:meth:`LocationSensitiveAttention.step`, the
    decoder loop, the exported decoder step): the location convolution and ``location_features_layer`` folded into
    one convolution, keys laid out ``(batch, units, T_in)`` with every constant bias already added to them.

    Args:
        query: ``(batch, query_size)``.
        state: ``(batch, T_in)`` previous (cumulative) alignments.
        values: ``(batch, T_in, memory_size)``.
        keys: ``(batch, units, T_in)``: ``values @ memory_layer`` + ``attention_bias`` + the fused location bias.
        score_bias: ``(batch, T_in)`` 0 / -inf past the lengths, or ``None`` (nothing masked).
        query_weight: ``(units, query_size)``.
        location_weight: ``(units, 1, kernel)`` from :meth:`LocationSensitiveAttention.fused_location_weights`.
        v_a: ``(units,)``.
        pad_before, pad_after: TF ``'same'`` padding of the location convolution.
        smoothing, cumulate: the normalisation and the state rule.

    Returns:
        ``(context, alignments, next_state)``: ``(batch, memory_size)``, ``(batch, T_in)``, ``(batch, T_in)``.
    """
    s = state.unsqueeze(1)
    if pad_before == pad_after:
        location = F.conv1d(s, location_weight, None, 1, pad_before)
    else:
        location = F.conv1d(F.pad(s, [pad_before, pad_after]), location_weight)
    energy = torch.matmul(v_a, torch.tanh(keys + F.linear(query, query_weight).unsqueeze(2) + location))
    if score_bias is not None:  # replaced, not added (TF1's score mask): a NaN energy past the length gives -inf
        energy = torch.where(score_bias < 0, score_bias, energy)
    alignments = normalize_energy(energy, smoothing)
    context = torch.bmm(alignments.unsqueeze(1), values).squeeze(1)
    next_state = alignments + state if cumulate else alignments
    return context, alignments, next_state


def score_bias_of(lengths: Tensor, max_time: int, dtype: torch.dtype) -> Tensor:
    """``(batch, T_in)`` additive energy mask: 0 within the lengths, -inf past them."""
    valid = memory_mask(lengths, max_time, dtype)
    return torch.zeros_like(valid).masked_fill(valid == 0, float("-inf"))


class LocationSensitiveAttention(TF1WeightsMixin, nn.Module):
    """Location-sensitive attention (Chorowski et al., 2015) as TF1 Tacotron-2 builds it.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.
    (:func:`normalize_energy` defines that row; the softmax kernel no longer chooses.)

    ``values`` are the memory zeroed past each length (``mask_encoder``); ``keys = values @ memory_layer``
    (no bias). One step with query ``q`` ``(batch, query_size)`` and state ``s`` (the previous cumulative
    alignments, ``(batch, T_in)``, zeros at the start)::

        f = conv1d(s, location_features_convolution, TF 'same' padding) + bias     # (batch, T_in, filters)
        energy = sum(v_a * tanh(keys + q @ W_query + f @ W_location + b_a), -1)    # (batch, T_in)
        energy[t >= length] = -inf                          # mask_encoder only
        alignments = softmax(energy)  (smoothing: sigmoid(energy) / sum(sigmoid(energy)))
        next_state = state + alignments  (cumulate_weights; else alignments)
        context = sum_t alignments * values                                        # (batch, memory_size)

    With ``mask_encoder=False`` neither the memory nor the energies are masked (lengths are ignored).
    TF1 variables relative to ``tf1_scope``: ``query_layer/kernel`` ``[query_size, units]``,
    ``location_features_convolution/kernel`` ``[kernel_size, 1, filters]`` and ``/bias``,
    ``location_features_layer/kernel`` ``[filters, units]``, ``attention_variable_projection`` ``[units]``,
    ``attention_bias`` ``[units]``, and ``memory_layer/kernel`` ``[memory_size, units]`` (in a TF1 Tacotron-2
    graph that one lives at the model scope, ``Tacotron_model/inference/memory_layer``: ``Tacotron2`` maps it).

    Export (tested by ``run_torch_module_test``): :func:`check_memory_lengths` reads the lengths' values, so
    ``torch.export`` fails and ``torch.compile`` specializes on them (compiles again for new lengths). The decoder
    step of :meth:`Tacotron2Decoder.step_module` holds the same attention without checks and exports.

    Args:
        query_size: query features (the decoder LSTM units).
        memory_size: memory features (encoder outputs, plus the speaker embedding for RTVC).
        units: attention depth (hparams ``attention_dim``).
        filters: location convolution filters (``attention_filters``).
        kernel_size: location convolution width (``attention_kernel``); even widths pad as TF ``'same'``.
        mask_encoder: mask the memory and the energies past ``memory_lengths``.
        smoothing: sigmoid normalisation instead of softmax.
        cumulate_weights: the state accumulates the alignments (else it is the last alignments).
        tf1_scope: TF1 scope; ``None`` -> ``"Location_Sensitive_Attention"``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> att = LocationSensitiveAttention(1024, 768)
        >>> memory, lengths = torch.randn(2, 9, 768), torch.tensor([9, 4])
        >>> values, keys = att.process_memory(memory, lengths)
        >>> ctx, align, state = att.step(torch.randn(2, 1024), att.initial_state(2, 9), values, keys, lengths)
        >>> ctx.shape, align.shape
        (torch.Size([2, 768]), torch.Size([2, 9]))
    """

    default_tf1_scope = "Location_Sensitive_Attention"

    def __init__(self, query_size: int, memory_size: int, units: int = 128, filters: int = 32, kernel_size: int = 31,
                 mask_encoder: bool = True, smoothing: bool = False, cumulate_weights: bool = True,
                 tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        block = "LocationSensitiveAttention"
        self.query_size = check_positive_int(query_size, "query_size", block)
        self.memory_size = check_positive_int(memory_size, "memory_size", block)
        self.units = check_positive_int(units, "units", block)
        self.filters = check_positive_int(filters, "filters", block)
        self.kernel_size = check_positive_int(kernel_size, "kernel_size", block)
        self.mask_encoder = bool(mask_encoder)
        self.smoothing = bool(smoothing)
        self.cumulate_weights = bool(cumulate_weights)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.pad_before, self.pad_after = tf_same_padding(kernel_size)
        factory = {"device": device, "dtype": dtype}
        self.query_layer = nn.Linear(query_size, units, bias=False, **factory)
        self.memory_layer = nn.Linear(memory_size, units, bias=False, **factory)
        self.location_convolution = nn.Conv1d(1, filters, kernel_size, **factory)  # TF 'same' padding by hand
        self.location_layer = nn.Linear(filters, units, bias=False, **factory)
        self.attention_variable_projection = nn.Parameter(torch.empty(units, **factory))
        self.attention_bias = nn.Parameter(torch.empty(units, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """TF1's initialisation: Glorot-uniform kernels (and ``v_a``), zero biases."""
        for lin in (self.query_layer, self.memory_layer, self.location_layer):
            nn.init.xavier_uniform_(lin.weight)
        k, f = self.kernel_size, self.filters
        bound = math.sqrt(6.0 / (k * 1 + k * f))  # TF fans of a [k, 1, filters] kernel
        nn.init.uniform_(self.location_convolution.weight, -bound, bound)
        nn.init.zeros_(self.location_convolution.bias)
        bound = math.sqrt(3.0 / self.units)  # xavier of a 1-D [units] variable: fan_in = fan_out = units
        nn.init.uniform_(self.attention_variable_projection, -bound, bound)
        nn.init.zeros_(self.attention_bias)

    @torch.jit.export
    def initial_state(self, batch_size: int, max_time: int) -> Tensor:
        """The initial state (previous alignments): zeros ``(batch_size, max_time)``."""
        w = self.attention_bias
        return torch.zeros(batch_size, max_time, device=w.device, dtype=w.dtype)

    @torch.jit.export
    def process_memory(self, memory: Tensor, memory_lengths: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """Values and keys of a memory (computed once per utterance).

        Args:
            memory: ``(batch, T_in, memory_size)``.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``, or ``None`` (full length).

        Returns:
            ``(values, keys)``: ``(batch, T_in, memory_size)`` memory zeroed past the lengths (``mask_encoder``)
            and ``(batch, T_in, units)`` keys ``values @ memory_layer``.
        """
        block = "LocationSensitiveAttention"
        check_float_tensor(memory, "memory", block, 3, self.memory_size, "(batch, T_in, " + str(self.memory_size) + ")")
        values = memory
        if memory_lengths is not None and self.mask_encoder:
            check_memory_lengths(memory_lengths, "memory_lengths", block, memory.shape[0], memory.shape[1])
            values = memory * memory_mask(memory_lengths.to(memory.device), memory.shape[1], memory.dtype).unsqueeze(-1)
        return values, F.linear(values, self.memory_layer.weight)

    @torch.jit.export
    def step(self, query: Tensor, state: Tensor, values: Tensor, keys: Tensor,
             memory_lengths: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """One attention step.

        Args:
            query: ``(batch, query_size)`` (the new output of the decoder LSTM).
            state: ``(batch, T_in)`` previous (cumulative) alignments.
            values: ``(batch, T_in, memory_size)`` from :meth:`process_memory`.
            keys: ``(batch, T_in, units)`` from :meth:`process_memory`.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]`` or ``None``; masks the energies when
                ``mask_encoder``.

        Returns:
            ``(context, alignments, next_state)``: ``(batch, memory_size)``, ``(batch, T_in)``, ``(batch, T_in)``
            (:func:`attention_step`, the step every caller runs).
        """
        block = "LocationSensitiveAttention"
        check_float_tensor(query, "query", block, 2, self.query_size, "(batch, " + str(self.query_size) + ")")
        check_float_tensor(values, "values", block, 3, self.memory_size, "(batch, T_in, " + str(self.memory_size) + ")")
        batch, max_time = values.shape[0], values.shape[1]
        check_float_tensor(keys, "keys", block, 3, self.units, "(batch, T_in, " + str(self.units) + ")")
        check_float_tensor(state, "state", block, 2, max_time, "(batch, T_in=" + str(max_time) + ")")
        if query.shape[0] != batch or state.shape[0] != batch or keys.shape[0] != batch or keys.shape[1] != max_time:
            raise ValueError(block + ": arguments `query` (batch, " + str(self.query_size) + "), `state` (batch, "
                             "T_in), `values` (batch, T_in, " + str(self.memory_size) + ") and `keys` (batch, T_in, "
                             + str(self.units) + ") must agree on batch and T_in; got shapes " + str(list(query.shape))
                             + ", " + str(list(state.shape)) + ", " + str(list(values.shape)) + ", "
                             + str(list(keys.shape)) + ".")
        score_bias: Optional[Tensor] = None
        if memory_lengths is not None and self.mask_encoder:
            check_memory_lengths(memory_lengths, "memory_lengths", block, batch, max_time)
            score_bias = score_bias_of(memory_lengths.to(values.device), max_time, values.dtype)
        location_weight, location_bias = self.fused_location_weights()
        keys_t = (keys + (self.attention_bias + location_bias)).transpose(1, 2)
        return attention_step(query, state, values, keys_t, score_bias, self.query_layer.weight, location_weight,
                              self.attention_variable_projection, self.pad_before, self.pad_after, self.smoothing,
                              self.cumulate_weights)

    def forward(self, query: Tensor, state: Tensor, memory: Tensor,
                memory_lengths: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`process_memory` then :meth:`step` (a decoder loop calls them separately, keys once).

        Args:
            query: ``(batch, query_size)``.
            state: ``(batch, T_in)`` previous (cumulative) alignments.
            memory: ``(batch, T_in, memory_size)``.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``, or ``None`` (full length).

        Returns:
            ``(context, alignments, next_state)``: ``(batch, memory_size)``, ``(batch, T_in)``, ``(batch, T_in)``.
        """
        values, keys = self.process_memory(memory, memory_lengths)
        return self.step(query, state, values, keys, memory_lengths)

    @torch.jit.export
    def fused_location_weights(self) -> tuple[Tensor, Tensor]:
        """The location convolution and ``location_features_layer`` folded into one convolution.

        Both are linear with nothing between them, so ``conv(s, W_c) @ W_l + b_c @ W_l`` equals one
        convolution with the kernel ``W_l W_c`` ``(units, 1, kernel_size)`` and the bias ``b_c @ W_l``
        ``(units,)`` -- the same function up to float rounding (the form :func:`attention_step` takes).
        """
        w_l = self.location_layer.weight  # (units, filters)
        kernel = torch.mm(w_l, self.location_convolution.weight.squeeze(1)).unsqueeze(1)
        conv_bias = self.location_convolution.bias
        assert conv_bias is not None
        return kernel, F.linear(conv_bias, w_l)

    def extra_repr(self) -> str:
        return (f"{self.query_size}, {self.memory_size}, units={self.units}, filters={self.filters}, "
                f"kernel_size={self.kernel_size}, mask_encoder={self.mask_encoder}, smoothing={self.smoothing}, "
                f"cumulate_weights={self.cumulate_weights}, tf1_scope={self.tf1_scope!r}")

    @torch.jit.unused
    def _tf1_variables(self):
        return {
            "query_layer/kernel": TF1Variable(self.query_layer.weight, dense_to_tf1, dense_from_tf1),
            "location_features_convolution/kernel": TF1Variable(self.location_convolution.weight, conv1d_to_tf1,
                                                                conv1d_from_tf1),
            "location_features_convolution/bias": TF1Variable(self.location_convolution.bias),
            "location_features_layer/kernel": TF1Variable(self.location_layer.weight, dense_to_tf1, dense_from_tf1),
            "attention_variable_projection": TF1Variable(self.attention_variable_projection),
            "attention_bias": TF1Variable(self.attention_bias),
            "memory_layer/kernel": TF1Variable(self.memory_layer.weight, dense_to_tf1, dense_from_tf1),
        }
