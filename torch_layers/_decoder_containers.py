"""The typed containers of one Tacotron-2 decoder step (TorchScript named tuples).

No ``from __future__ import annotations`` here: TorchScript reads these fields' annotations at run time.
"""
from typing import NamedTuple, Optional

from torch import Tensor

__all__ = ["DecoderWeights", "DecoderConfig", "AttentionMemory", "DecoderState"]


class DecoderWeights(NamedTuple):
    """A decoder's weights in the forms :func:`decoder_step` takes (:meth:`Tacotron2Decoder.step_weights`).

    ``prenet_weights``/``prenet_biases``: per pre-net layer ``(out, in)``/``(out,)``; ``lstm_weights``/
    ``lstm_biases``: per LSTM layer ``(4u, in + u)`` over ``[input, h]`` (torch gate order i, f, g, o; layer 1's
    input is ``[pre-net output, previous context]``) and ``(4u,)`` with the forget bias; ``query_weight``
    ``(units, u)``; ``location_weight`` ``(units, 1, kernel)`` (the fused location kernel); ``v_a`` ``(units,)``;
    ``projection_weight``/``projection_bias``: the frame and stop projections stacked, ``(r * num_mels + r,
    u + memory_size)``; ``lstm_packed``/``lstm_packed_t``: the LSTM weights packed for oneDNN (and their transposes)
    or ``None`` (:mod:`torch_layers._packed_linear`).
    """
    prenet_weights: list[Tensor]
    prenet_biases: list[Tensor]
    lstm_weights: list[Tensor]
    lstm_biases: list[Tensor]
    query_weight: Tensor
    location_weight: Tensor
    v_a: Tensor
    projection_weight: Tensor
    projection_bias: Tensor
    lstm_packed: Optional[list[Tensor]]
    lstm_packed_t: Optional[list[Tensor]]


class DecoderConfig(NamedTuple):
    """The constants of a decoder step: the pre-net's activation and dropout rate (always on), the LSTMs' zoneout,
    the location convolution's TF ``'same'`` padding, the attention's normalisation and state rule, and
    ``frame_size = r * num_mels`` (the projection's first columns; the last ``r`` are the stop logits)."""
    prenet_activation: str
    prenet_rate: float
    zoneout: float
    pad_before: int
    pad_after: int
    smoothing: bool
    cumulate: bool
    frame_size: int


class AttentionMemory(NamedTuple):
    """Per utterance, before the steps: ``values`` ``(batch, T_in, memory_size)`` (memory zeroed past the lengths
    with ``mask_encoder``), ``keys`` ``(batch, units, T_in)`` (memory layer + attention bias + fused location bias),
    ``score_bias`` ``(batch, T_in)`` 0 / -inf past the lengths, or ``None``."""
    values: Tensor
    keys: Tensor
    score_bias: Optional[Tensor]


class DecoderState(NamedTuple):
    """The recurrent state between steps: ``context`` ``(batch, memory_size)``, ``attention_state`` ``(batch,
    T_in)`` (cumulative alignments), ``cells`` and ``hiddens``: per LSTM layer ``(batch, u)``."""
    context: Tensor
    attention_state: Tensor
    cells: list[Tensor]
    hiddens: list[Tensor]
