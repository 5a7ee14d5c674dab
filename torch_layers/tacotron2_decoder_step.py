"""Export: a Tacotron-2 decoder as a per-utterance memory module and one step (the loop stays in the caller), for
``torch.export`` / ONNX with dynamic batch and ``T_in`` (:meth:`Tacotron2Decoder.step_module
<torch_layers.tacotron2_decoder.Tacotron2Decoder.step_module>`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._decoder_containers import AttentionMemory, DecoderState
from .location_sensitive_attention import memory_mask, score_bias_of
from .prenet import prenet_step
from .tacotron2_decoder_loops import decoder_step

__all__ = ["DecoderStep", "DecoderAttentionMemory"]


class DecoderAttentionMemory(nn.Module):
    """Per utterance, before the decoder steps: ``(memory, memory_lengths) -> (values, keys, score_bias)``, the
    attention inputs :class:`DecoderStep` takes (what :class:`Tacotron2Decoder` computes before its loop).

    No input checks and no data-dependent branch, so ``torch.export`` / ONNX take it with dynamic batch and
    ``T_in``; it shares the decoder's parameters (no copy). From :meth:`Tacotron2Decoder.step_module`.

    Returns:
        ``values`` ``(batch, T_in, memory_size)`` (memory zeroed past the lengths when ``mask_encoder``), ``keys``
        ``(batch, units, T_in)`` (memory layer, plus the attention bias and the fused location bias) and
        ``score_bias`` ``(batch, T_in)`` (0, or -inf past the lengths when ``mask_encoder``).
    """

    def __init__(self, decoder: nn.Module):  # a Tacotron2Decoder
        super().__init__()
        self.decoder = decoder

    def forward(self, memory: Tensor, memory_lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        att = self.decoder.attention
        score_bias = torch.zeros(memory.shape[0], memory.shape[1], dtype=memory.dtype, device=memory.device)
        values = memory
        if att.mask_encoder:
            lengths = memory_lengths.to(memory.device)
            values = memory * memory_mask(lengths, memory.shape[1], memory.dtype).unsqueeze(-1)
            score_bias = score_bias_of(lengths, memory.shape[1], memory.dtype)
        _, location_bias = att.fused_location_weights()
        keys = F.linear(values, att.memory_layer.weight, att.attention_bias + location_bias)
        return values, keys.transpose(1, 2).contiguous(), score_bias


class DecoderStep(nn.Module):
    """One free-running step of :class:`Tacotron2Decoder` in inference, state in -> state out, for
    ``torch.export`` / ONNX with dynamic batch and ``T_in`` (the loop and the stop rule stay in the caller).

    The same maths as a step of :func:`decoder_loop` in ``eval()``: pre-net (dropout always on when its rate is
    not 0, as the original; random masks drawn in the graph), decoder LSTMs with inference zoneout, location-
    sensitive attention with the new LSTM output as query, frame and stop projections (stop probabilities).
    It shares the decoder's parameters (no copy); :attr:`attention_memory` prepares ``values``, ``keys`` and
    ``score_bias`` once per utterance and :meth:`initial_state` gives the zero state. From
    :meth:`Tacotron2Decoder.step_module`.

    The caller's loop (the original rule; see :class:`Tacotron2Decoder`)::

        values, keys, score_bias = step.attention_memory(memory, memory_lengths)
        frame, context, attention_state, cells, hiddens = step.initial_state(values)
        for t in range(max_iters):
            frames, stop, alignments, context, attention_state, cells, hiddens = step(
                frame, context, attention_state, cells, hiddens, values, keys, score_bias)
            frame = frames[:, -num_mels:]                       # the last of the r frames
            if batch_fired(stop, stop_at_any):                  # torch_layers.tacotron2_stop_rule
                break
    """

    def __init__(self, decoder: nn.Module):  # a Tacotron2Decoder
        super().__init__()
        self.decoder = decoder

    @property
    def attention_memory(self) -> DecoderAttentionMemory:
        """The per-utterance :class:`DecoderAttentionMemory` of this decoder (a separate module to export)."""
        return DecoderAttentionMemory(self.decoder)

    def initial_state(self, values: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """``(frame, context, attention_state, cells, hiddens)`` zeros: ``(batch, num_mels)`` go frame,
        ``(batch, memory_size)``, ``(batch, T_in)``, and ``(layers, batch, units)`` twice."""
        d = self.decoder
        batch, max_time = values.shape[0], values.shape[1]
        z = values.new_zeros
        cells = z(d._n_layers, batch, d._units)
        return z(batch, d.num_mels), z(batch, d.memory_size), z(batch, max_time), cells, torch.zeros_like(cells)

    def forward(self, frame: Tensor, context: Tensor, attention_state: Tensor, cells: Tensor, hiddens: Tensor,
                values: Tensor, keys: Tensor, score_bias: Tensor
                ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """
        Args:
            frame: ``(batch, num_mels)`` the previous frame (zeros at the first step).
            context: ``(batch, memory_size)`` the previous attention context.
            attention_state: ``(batch, T_in)`` the previous (cumulative) alignments.
            cells, hiddens: ``(layers, batch, units)`` the decoder LSTM states.
            values, keys, score_bias: from :attr:`attention_memory`.

        Returns:
            ``(frames, stop, alignments, context, attention_state, cells, hiddens)``: ``(batch, r * num_mels)``,
            ``(batch, r)`` stop probabilities, ``(batch, T_in)``, then the new state.
        """
        d = self.decoder
        w = d.step_weights()
        cfg = d.step_config()
        x = prenet_step(frame, w.prenet_weights, w.prenet_biases, cfg.prenet_activation, cfg.prenet_rate)
        state = DecoderState(context, attention_state, list(cells.unbind(0)), list(hiddens.unbind(0)))
        projected, alignments, state, _ = decoder_step(x, state, AttentionMemory(values, keys, score_bias), w, cfg)
        frame_size = cfg.frame_size
        return (projected[:, :frame_size], torch.sigmoid(projected[:, frame_size:]), alignments, state.context,
                state.attention_state, torch.stack(state.cells, 0), torch.stack(state.hiddens, 0))
