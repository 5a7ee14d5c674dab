"""The Tacotron-2 decoder's step and its framework loops (torch): :func:`decoder_step`, the one step every path
runs, and TF1's ``dynamic_decode`` over it -- :func:`decoder_loop` (TorchScript) and its Python original
:func:`decoder_loop_python` (progress reports, training through packed weights). Which loop runs a call is decided
by :func:`torch_layers.decoding_plan.plan_decoding`; the stop rule is :mod:`torch_layers.tacotron2_stop_rule`.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ._decoder_containers import AttentionMemory, DecoderConfig, DecoderState, DecoderWeights
from .decoder_rnn import lstm_stack_step
from .location_sensitive_attention import attention_step
from .prenet import prenet_step
from .tacotron2_stop_rule import batch_fired, entries_fired

__all__ = ["decoder_step", "decoder_loop", "decoder_loop_python", "initial_decoder_state", "with_packed",
           "select_rows"]

def decoder_step(prenet_out: Tensor, state: DecoderState, memory: AttentionMemory, w: DecoderWeights,
                 cfg: DecoderConfig, keep_c: Optional[Tensor] = None, keep_h: Optional[Tensor] = None,
                 taps: Optional[list[Tensor]] = None) -> tuple[Tensor, Tensor, DecoderState, list[Tensor]]:
    """One step of TF1's ``TacotronDecoderCell`` after the pre-net: the LSTM stack over ``[prenet_out, context]``
    (:func:`~torch_layers.decoder_rnn.lstm_stack_step`), the attention with the new output as query
    (:func:`~torch_layers.location_sensitive_attention.attention_step`), the frame and stop projections in one
    product over ``[output, context]``. The scripted loop, its Python original and :class:`DecoderStep` run it.

    Args:
        prenet_out: ``(batch, prenet_layers[-1])``.
        state: the previous :class:`DecoderState`.
        memory: the utterance's :class:`AttentionMemory`.
        w, cfg: :class:`DecoderWeights`, :class:`DecoderConfig`.
        keep_c, keep_h: ``(layers, batch, u)`` zoneout keep-masks (training), or ``None``.
        taps: per layer ``(batch, 4u)`` weight-gradient taps, or ``None``.

    Returns:
        ``(projected, alignments, new_state, layer_inputs)``: ``(batch, r * num_mels + r)`` frames then stop
        logits, ``(batch, T_in)``, the new :class:`DecoderState`, each LSTM layer's ``[input, h]``.
    """
    x, cells, hiddens, layer_inputs = lstm_stack_step(
        torch.cat([prenet_out, state.context], 1), state.cells, state.hiddens, w.lstm_weights, w.lstm_biases,
        cfg.zoneout, keep_c, keep_h, w.lstm_packed, w.lstm_packed_t, taps)
    context, alignments, attention_state = attention_step(
        x, state.attention_state, memory.values, memory.keys, memory.score_bias, w.query_weight, w.location_weight,
        w.v_a, cfg.pad_before, cfg.pad_after, cfg.smoothing, cfg.cumulate)
    projected = F.linear(torch.cat([x, context], 1), w.projection_weight, w.projection_bias)
    return projected, alignments, DecoderState(context, attention_state, cells, hiddens), layer_inputs


def initial_decoder_state(memory: AttentionMemory, layers: int, units: int) -> DecoderState:
    """The zero :class:`DecoderState` of a memory."""
    values = memory.values
    batch = values.shape[0]
    cells: list[Tensor] = []
    hiddens: list[Tensor] = []
    for _ in range(layers):
        cells.append(values.new_zeros(batch, units))
        hiddens.append(values.new_zeros(batch, units))
    return DecoderState(values.new_zeros(batch, values.shape[2]), values.new_zeros(batch, values.shape[1]), cells,
                        hiddens)


def with_packed(w: DecoderWeights, packed: Optional[list[Tensor]], packed_t: Optional[list[Tensor]] = None
                ) -> DecoderWeights:
    """``w`` with its LSTM weights' packed forms (``DecoderWeights._replace``, which TorchScript lacks)."""
    return DecoderWeights(w.prenet_weights, w.prenet_biases, w.lstm_weights, w.lstm_biases, w.query_weight,
                          w.location_weight, w.v_a, w.projection_weight, w.projection_bias, packed, packed_t)


def select_rows(state: DecoderState, memory: AttentionMemory, rows: Tensor) -> tuple[DecoderState, AttentionMemory]:
    """The batch rows ``rows`` (indices) of a :class:`DecoderState` and its :class:`AttentionMemory`, every field."""
    cells: list[Tensor] = []
    hiddens: list[Tensor] = []
    for k in range(len(state.cells)):
        cells.append(state.cells[k].index_select(0, rows))
        hiddens.append(state.hiddens[k].index_select(0, rows))
    score_bias = memory.score_bias
    if score_bias is not None:
        score_bias = score_bias.index_select(0, rows)
    return (DecoderState(state.context.index_select(0, rows), state.attention_state.index_select(0, rows), cells,
                         hiddens),
            AttentionMemory(memory.values.index_select(0, rows), memory.keys.index_select(0, rows), score_bias))


def _full_batch(steps: list[Tensor], starts: list[int], rows: list[Tensor], batch: int, dim: int) -> Tensor:
    """Per-step outputs ``(running rows, ...)`` stacked along ``dim`` into the whole batch: the steps before
    ``starts[0]`` ran every row, those from ``starts[k]`` the rows ``rows[k]`` (indices into the batch); the rows
    that had left are zeros."""
    parts = [torch.stack(steps[:starts[0]], dim)]
    for k in range(len(starts)):
        end = len(steps)
        if k + 1 < len(starts):
            end = starts[k + 1]
        part = torch.stack(steps[starts[k]:end], dim)
        shape = list(part.shape)
        shape[0] = batch
        parts.append(part.new_zeros(shape).index_copy_(0, rows[k], part))
    return torch.cat(parts, dim)



def _at(masks: Optional[Tensor], t: int) -> Optional[Tensor]:
    """Step ``t`` of per-step masks, or ``None``."""
    if masks is None:
        return None
    return masks[t]


def _prenet_at(frame_in: Tensor, prenet_keep: Optional[list[Tensor]], t: int, w: DecoderWeights,
               cfg: DecoderConfig) -> Tensor:
    """The pre-net of a free-running step's input frame, with step ``t`` of the injected keep-masks if any."""
    keep: Optional[list[Tensor]] = None
    if prenet_keep is not None:
        keep = []
        for m in prenet_keep:
            keep.append(m[t])
    return prenet_step(frame_in, w.prenet_weights, w.prenet_biases, cfg.prenet_activation, cfg.prenet_rate, keep)


def _taps_at(step_taps: list[list[Tensor]], t: int) -> Optional[list[Tensor]]:
    """Step ``t`` of every layer's weight-gradient taps, or ``None`` without taps."""
    if len(step_taps) == 0:
        return None
    out: list[Tensor] = []
    for k in range(len(step_taps)):
        out.append(step_taps[k][t])
    return out


def _stacked(frames: list[Tensor], stops: list[Tensor], aligns: list[Tensor], seg_starts: list[int],
             seg_rows: list[Tensor], batch: int) -> tuple[Tensor, Tensor, Tensor]:
    """The steps' outputs stacked over the steps (``stop_each``: written at their rows of the whole batch)."""
    if len(seg_starts) > 0:
        return (_full_batch(frames, seg_starts, seg_rows, batch, 1), _full_batch(stops, seg_starts, seg_rows, batch, 1),
                _full_batch(aligns, seg_starts, seg_rows, batch, 2))
    return torch.stack(frames, 1), torch.stack(stops, 1), torch.stack(aligns, 2)


def _leave(fired: Tensor, rows: Optional[Tensor], state: DecoderState, memory: AttentionMemory, frame_in: Tensor,
           prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor], keep_h: Optional[Tensor]
           ) -> tuple[Tensor, DecoderState, AttentionMemory, Tensor, Optional[list[Tensor]], Optional[Tensor],
                      Optional[Tensor]]:
    """``stop_each``: the rows whose rule ``fired`` leave the loop. Returns the rows still running (indices into the
    whole batch) and every per-row input of the next steps selected to them."""
    keep = torch.logical_not(fired).nonzero().squeeze(1)
    rows = keep if rows is None else rows.index_select(0, keep)
    state, memory = select_rows(state, memory, keep)
    if prenet_keep is not None:
        kept: list[Tensor] = []
        for m in prenet_keep:
            kept.append(m.index_select(1, keep))
        prenet_keep = kept
    if keep_c is not None:
        keep_c = keep_c.index_select(2, keep)
    if keep_h is not None:
        keep_h = keep_h.index_select(2, keep)
    return rows, state, memory, frame_in.index_select(0, keep), prenet_keep, keep_c, keep_h


def _decoder_loop_impl(n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor], go_frame: Tensor,
                       memory: AttentionMemory, w: DecoderWeights, cfg: DecoderConfig,
                       prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor], keep_h: Optional[Tensor],
                       taps: Optional[list[Tensor]], stop_logits: bool, stop_at_any: bool, stop_each: bool = False,
                       progress: Any = None) -> tuple[Tensor, Tensor, Tensor, bool, list[Tensor]]:
    """TF1 ``dynamic_decode`` over ``TacotronDecoderCell`` (``impute_finished=False``); :func:`decoder_loop` is its
    TorchScript compilation, this Python original (:func:`decoder_loop_python`) runs when a progress callback is
    given and for training with packed weights (:class:`~torch_layers._packed_linear.PackedLinear` is Python).

    Args:
        n_steps: teacher-forced: the number of steps; free running: ``max_iters``.
        mask_steps: steps the injected masks cover (a larger number when none are injected): the loop runs at
            most ``min(n_steps, mask_steps)`` steps.
        teacher_prenet: ``(steps, batch, prenet)`` the pre-net of every teacher input, or ``None`` (free running).
        go_frame: ``(batch, num_mels)`` zeros, the first input of free running.
        memory, w, cfg: :class:`AttentionMemory`, :class:`DecoderWeights`, :class:`DecoderConfig`.
        prenet_keep: per pre-net layer ``(mask_steps, batch, size)`` keep-masks, or ``None`` (random; free running).
        keep_c, keep_h: ``(>= steps, layers, batch, u)`` training keep-masks, or ``None`` (inference mix).
        taps: per LSTM layer ``(steps, batch, 4u)`` weight-gradient taps (teacher-forced training), or ``None``.
        stop_logits: return stop logits (training) instead of probabilities.
        stop_at_any: the free-running stop rule (:mod:`~torch_layers.tacotron2_stop_rule`).
        stop_each: free running: stop once every entry's own rule has fired at some step (default: the original
            rule, every entry at the same step). An entry leaves the loop at the step its rule fires: the loop
            goes on with the rows still running (their state, attention memory and injected masks selected, at
            most once per step at which some entry stops) and writes each step's outputs at their rows; a row's
            outputs after its stop are zeros.
        progress: free running, Python only (the compiled loop cannot call back; pass ``None`` there):
            ``progress(step, largest stop probability)`` after every step, over the ``r`` frames of the rows
            still running.

    Returns:
        ``(frames (batch, steps, r * num_mels), stop (batch, steps, r), alignments (batch, T_in, steps),
        finished, step_inputs)``: ``finished`` tells whether the free-running stop rule fired; with ``taps``,
        ``step_inputs`` holds each LSTM layer's ``[input, h]`` of every step ``(steps, batch, in + u)``.
    """
    n_layers = len(w.lstm_weights)
    state = initial_decoder_state(memory, n_layers, w.lstm_weights[0].shape[0] // 4)
    frame_size = cfg.frame_size
    frame_start = frame_size - go_frame.shape[1]  # the last of the r frames feeds the next step
    step_taps: list[list[Tensor]] = []  # per layer, its taps of every step
    inputs: list[list[Tensor]] = []  # per layer, its [input, h] of every step (with taps)
    if taps is not None:
        for k in range(n_layers):
            step_taps.append(torch.unbind(taps[k], 0))
            inputs.append([])
    frame_in = go_frame
    frames_out: list[Tensor] = []
    stops_out: list[Tensor] = []
    aligns_out: list[Tensor] = []
    finished = False
    batch = go_frame.shape[0]
    rows: Optional[Tensor] = None  # stop_each: the rows still running (indices into the batch), once some have left
    seg_starts: list[int] = []  # the steps from which fewer rows ran ...
    seg_rows: list[Tensor] = []  # ... and those rows
    n_run = min(n_steps, mask_steps)
    for t in range(n_run):
        if teacher_prenet is not None:
            x = teacher_prenet[t]
        else:
            x = _prenet_at(frame_in, prenet_keep, t, w, cfg)
        projected, alignments, state, layer_inputs = decoder_step(x, state, memory, w, cfg, _at(keep_c, t),
                                                                  _at(keep_h, t), _taps_at(step_taps, t))
        for k in range(len(inputs)):
            inputs[k].append(layer_inputs[k])
        frames = projected[:, :frame_size]
        logits = projected[:, frame_size:]
        frames_out.append(frames)
        aligns_out.append(alignments)
        probs = logits
        if not stop_logits or teacher_prenet is None:
            probs = torch.sigmoid(logits)
        stops_out.append(logits if stop_logits else probs)
        if teacher_prenet is None:
            frame_in = frames[:, frame_start:]
            if stop_each:  # every entry's own rule has fired at some step; the running rows go on, the others leave
                fired = entries_fired(probs, stop_at_any)
                if bool(fired.any()):
                    finished = bool(fired.all())
                    if not finished and t + 1 < n_run:
                        rows, state, memory, frame_in, prenet_keep, keep_c, keep_h = _leave(
                            fired, rows, state, memory, frame_in, prenet_keep, keep_c, keep_h)
                        seg_starts.append(t + 1)
                        seg_rows.append(rows)
            else:
                finished = batch_fired(probs, stop_at_any)
            if not torch.jit.is_scripting():
                if progress is not None:
                    progress(t + 1, float(probs.max()))
            if finished:
                break
    step_inputs: list[Tensor] = []
    for k in range(len(inputs)):
        step_inputs.append(torch.stack(inputs[k], 0))
    frames, stop, alignments = _stacked(frames_out, stops_out, aligns_out, seg_starts, seg_rows, batch)
    return frames, stop, alignments, finished, step_inputs


#: the loop compiled (TorchScript): every eager call without progress reports and every scripted module runs it
decoder_loop = torch.jit.script(_decoder_loop_impl)
decoder_loop.__doc__ = _decoder_loop_impl.__doc__
#: the same loop run as Python (progress reports; training through packed weights)
decoder_loop_python = _decoder_loop_impl
