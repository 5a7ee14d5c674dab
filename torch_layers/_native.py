"""The torch adapters of the native kernels (:mod:`speechblocks.native`), inference only.

- The decoder step: a :class:`NativeDecoderLoop` (batch 1) or a :class:`NativeBatchLoop` (larger batches) runs an
  eager decoder call when :func:`torch_layers.decoding_plan.plan_decoding` says it qualifies; the
  batch-1 C step reads the decoder's tensors in place (torch's ``(out, in)`` layouts, the forms
  :meth:`~torch_layers.tacotron2_decoder.Tacotron2Decoder.step_weights` gives), the batched one packs them once per
  call into its column panels.
- The Tacotron-1 decoder's free-running inference: :func:`tacotron1_decode` runs
  :meth:`Tacotron1Decoder._loop <torch_layers.tacotron1_decoder.Tacotron1Decoder>`'s whole loop in one C call
  (``tacotron1_step.c``, the module's ``(out, in)`` weights read in place) when the plan names it.
- The encoder LSTM at inference: :meth:`EncoderRNN._native_inference <torch_layers.encoder_rnn.EncoderRNN>` runs
  its recurrence through :func:`encoder_scan` instead of the TorchScript loop when :func:`encoder_scan_applies`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from speechblocks import native
from speechblocks.native import MAX_ATTENTION_UNITS, MAX_LAYERS, PHASES, enabled, library, phase_profile

__all__ = ["NativeDecoderLoop", "NativeBatchLoop", "tacotron1_decode", "encoder_scan", "encoder_scan_applies",
           "recording_a_graph", "shapes_fit", "enabled", "library", "unavailable_reason", "native_threads",
           "phase_profile", "PHASES"]


def shapes_fit(w, cfg, memory, num_mels: int) -> bool:
    """Whether a decoder's step weights (:class:`~torch_layers.tacotron2_decoder.DecoderWeights`), config and
    attention memory have the shapes the C steps read (any batch up to ``MAX_BATCH``): they trust them, so anything
    else goes to the TorchScript loop (and its shape errors)."""
    def shape(x: Optional[Tensor]) -> tuple:
        return tuple(x.shape) if x is not None else ()

    layers, n_pre = len(w.lstm_weights), len(w.prenet_weights)
    if not (1 <= layers <= MAX_LAYERS and 1 <= n_pre <= MAX_LAYERS and len(w.lstm_biases) == layers
            and len(w.prenet_biases) == n_pre):
        return False
    values, keys = memory.values, memory.keys
    if values.dim() != 3 or not 1 <= values.shape[0] <= native.batch_loop.MAX_BATCH:
        return False
    batch, max_time, memory_size = values.shape
    sizes, n_in = [], num_mels
    for x, b in zip(w.prenet_weights, w.prenet_biases):
        if x.dim() != 2 or x.shape[1] != n_in or shape(b) != (x.shape[0],) or x.shape[0] < 1:
            return False
        sizes.append(int(x.shape[0]))
        n_in = x.shape[0]
    u4 = w.lstm_weights[0].shape[0]
    u = u4 // 4
    if u < 1 or u4 != 4 * u:
        return False
    for k, (x, b) in enumerate(zip(w.lstm_weights, w.lstm_biases)):
        n = (sizes[-1] + memory_size if k == 0 else u) + u
        if shape(x) != (4 * u, n) or shape(b) != (4 * u,):
            return False
    units = w.query_weight.shape[0]
    if not 1 <= units <= MAX_ATTENTION_UNITS or shape(w.query_weight) != (units, u) or shape(w.v_a) != (units,):
        return False
    if (w.location_weight.dim() != 3 or w.location_weight.shape[:2] != (units, 1)
            or shape(keys) != (batch, units, max_time)):
        return False
    if cfg.pad_before < 0 or cfg.pad_after < 0 or cfg.pad_before + cfg.pad_after != w.location_weight.shape[2] - 1:
        return False
    if memory.score_bias is not None and shape(memory.score_bias) != (batch, max_time):
        return False
    rows = w.projection_weight.shape[0]
    if shape(w.projection_weight) != (rows, u + memory_size) or shape(w.projection_bias) != (rows,):
        return False
    return num_mels <= cfg.frame_size < rows and max_time >= 1 and 0.0 <= cfg.prenet_rate < 1.0


def _array(x: Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.detach().numpy(), np.float32)


def _loop_arrays(w, cfg, memory, num_mels: int, stop_at_any: bool, threads: int) -> dict:
    """The keyword arguments both native loops take from a torch decoder: its kernels in torch's ``(out, in)``
    layout (gates i, f, g, o), the location kernel ``(kernel, att_units)``, the attention memory of the call
    ``(batch, T_in, ...)`` (keys transposed to ``(batch, T_in, att_units)``), the constants."""
    return dict(
        lstm_weights=[_array(x) for x in w.lstm_weights], lstm_biases=[_array(x) for x in w.lstm_biases],
        gates=native.TORCH_GATES, prenet_weights=[_array(x) for x in w.prenet_weights],
        prenet_biases=[_array(x) for x in w.prenet_biases], query_weight=_array(w.query_weight),
        location_weight=_array(w.location_weight[:, 0, :].t()), v_a=_array(w.v_a),
        keys=_array(memory.keys.transpose(1, 2)), values=_array(memory.values),
        score_bias=None if memory.score_bias is None else _array(memory.score_bias),
        projection_weight=_array(w.projection_weight), projection_bias=_array(w.projection_bias), num_mels=num_mels,
        frame_size=cfg.frame_size, zoneout=cfg.zoneout, prenet_rate=cfg.prenet_rate, pad_before=cfg.pad_before,
        smoothing=cfg.smoothing, cumulate=cfg.cumulate, stop_at_any=stop_at_any, threads=threads)


class NativeDecoderLoop:
    """A free-running torch decoder loop at batch 1 over the native step, for one utterance's attention memory.

    Args:
        lib: :func:`speechblocks.native.library`.
        w, cfg, memory: the forms the TorchScript loop takes (``DecoderWeights``, ``DecoderConfig``,
            ``AttentionMemory``), float32 on the CPU, shapes checked by :func:`shapes_fit`.
        num_mels, stop_at_any: the decoder's.
        threads: OpenMP threads of a step (:func:`native_threads`).
    """

    def __init__(self, lib, w, cfg, memory, num_mels: int, stop_at_any: bool, threads: int):
        self.prenet_sizes = [int(x.shape[0]) for x in w.prenet_weights]
        self.loop = native.DecoderLoop(lib, lstm_cols=False, dense_cols=False,
                                       **_loop_arrays(w, cfg, memory, num_mels, stop_at_any, threads))

    def run(self, n_steps: int, prenet_keep: Optional[list[Tensor]] = None,
            progress: Optional[Callable[[int, float], object]] = None, stop_each: bool = False
            ) -> tuple[Tensor, Tensor, Tensor, bool]:
        """Runs up to ``n_steps`` steps (the stop rule ends it earlier; ``stop_each`` is the same rule at batch 1).

        Args:
            n_steps: the most steps to run.
            prenet_keep: per pre-net layer ``(>= n_steps, 1, size)`` 0/1 keep-masks, or ``None``: the dropout draws
                ``torch.rand`` per step, every layer at once, the numbers the TorchScript loop's per-layer
                ``rand_like`` draws for the same seed (the generator advances as much).
            progress: ``progress(step, largest stop probability)`` after every step.

        Returns:
            ``(frames (1, steps, frame_size), stop probabilities (1, steps, r), alignments (1, T_in, steps),
            finished)``.
        """
        keep = None
        if prenet_keep is not None:
            keep = torch.cat([k[:n_steps, 0].to(torch.float32) for k in prenet_keep], 1).numpy()
        total = sum(self.prenet_sizes)
        frames, stop, alignments, finished = self.loop.run(
            n_steps, lambda step: torch.rand(total).numpy(), keep, progress)
        return (torch.from_numpy(frames).unsqueeze(0), torch.from_numpy(stop).unsqueeze(0),
                torch.from_numpy(alignments.T.copy()).unsqueeze(0), finished)


class NativeBatchLoop:
    """A free-running torch decoder loop over a batch in the native batched step (``decoder_batch.c``), for one
    call's attention memory: the kernels packed from torch's ``(out, in)`` rows, gates i, f, g, o.

    Args:
        lib, w, cfg, memory, num_mels, stop_at_any, threads: as for :class:`NativeDecoderLoop`, any batch.
    """

    def __init__(self, lib, w, cfg, memory, num_mels: int, stop_at_any: bool, threads: int):
        self.prenet_sizes = [int(x.shape[0]) for x in w.prenet_weights]
        self.loop = native.BatchDecoderLoop(lib, rows=True, **_loop_arrays(w, cfg, memory, num_mels, stop_at_any,
                                                                           threads))

    def run(self, n_steps: int, prenet_keep: Optional[list[Tensor]] = None,
            progress: Optional[Callable[[int, float], object]] = None, stop_each: bool = False
            ) -> tuple[Tensor, Tensor, Tensor, bool]:
        """Runs up to ``n_steps`` steps (:meth:`speechblocks.native.BatchDecoderLoop.run`).

        Args:
            n_steps: the most steps to run.
            prenet_keep: per pre-net layer ``(>= n_steps, batch, size)`` 0/1 keep-masks, or ``None``: the dropout
                draws ``torch.rand(running, size)`` per layer and step, the numbers the TorchScript loop's per-layer
                ``rand_like`` draws for the same seed.
            progress: ``progress(step, largest stop probability)`` after every step.
            stop_each: each entry leaves at its own stop (:func:`~torch_layers.decoding_plan.plan_decoding`).

        Returns:
            ``(frames (batch, steps, frame_size), stop probabilities (batch, steps, r), alignments
            (batch, T_in, steps), finished)``.
        """
        keep = None
        if prenet_keep is not None:
            keep = torch.cat([k[:n_steps].to(torch.float32) for k in prenet_keep], 2).transpose(0, 1).numpy()

        def draws(step: int, running: int) -> np.ndarray:
            return torch.cat([torch.rand(running, size) for size in self.prenet_sizes], 1).numpy()

        frames, stop, alignments, finished = self.loop.run(n_steps, draws, keep, stop_each, progress)
        return (torch.from_numpy(frames), torch.from_numpy(stop),
                torch.from_numpy(np.ascontiguousarray(alignments.transpose(0, 2, 1))), finished)


def tacotron1_decode(decoder, memory: Tensor, keys: Tensor, mask: Optional[Tensor], max_iters: int
                     ) -> tuple[Tensor, Tensor]:
    """A :class:`~torch_layers.Tacotron1Decoder`'s free-running inference in the native loop
    (:class:`speechblocks.native.Tacotron1Loop`), once :func:`torch_layers.decoding_plan.plan_decoding` named it.

    Args:
        decoder: the decoder (float32 on the CPU); its ``nn.Linear`` weights are read in place, the location kernel
            folded once here (mimic2: :meth:`~torch_layers.Mimic2LocationAttention.fused_location_kernel`).
        memory: ``(batch, T_in, memory_size)`` float32; keys: ``(batch, T_in, attention_depth)`` its keys.
        mask: ``(batch, T_in)`` bool score mask (``mask_memory`` with lengths) or ``None``.
        max_iters: the step cap.

    Returns:
        ``(frames (batch, steps, num_mels * r), alignments (batch, T_in, steps))``, as the TorchScript loop.
    """
    att = decoder.attention
    location, pad_before = None, 0
    if hasattr(att, "fused_location_kernel"):
        location, pad_before = _array(att.fused_location_kernel()[:, 0, :].t()), att.pad_before
    score_bias = None
    if mask is not None:
        score_bias = _array(torch.zeros(mask.shape).masked_fill_(~mask.cpu(), float("-inf")))
    grus = (decoder.attention_gru, decoder.gru1, decoder.gru2)
    loop = native.Tacotron1Loop(
        library(), prenet_weights=[_array(x.weight) for x in decoder.prenet.layers],
        prenet_biases=[_array(x.bias) for x in decoder.prenet.layers],
        gru_weights=[[_array(x) for x in (g.gates.weight, g.gates.bias, g.candidate.weight, g.candidate.bias)]
                     for g in grus],
        query_weight=_array(att.query_layer.weight), v_a=_array(att.attention_v), location_weight=location,
        pad_before=pad_before, keys=_array(keys), values=_array(memory), score_bias=score_bias,
        cell0_weight=_array(decoder.cell0_projection.weight), cell0_bias=_array(decoder.cell0_projection.bias),
        projection_weight=_array(decoder.output_projection.weight),
        projection_bias=_array(decoder.output_projection.bias), num_mels=decoder.num_mels,
        prenet_outside=decoder.prenet_outside, cols=False, threads=native_threads())
    frames, alignments = loop.run(max_iters)
    return torch.from_numpy(frames), torch.from_numpy(alignments)


def unavailable_reason() -> str:
    """Why :func:`speechblocks.native.library` gives ``None`` here (:func:`speechblocks.native.status`; ``""`` when
    it gives the library)."""
    return native.status().reason


def native_threads() -> int:
    """The OpenMP threads of a native call (decoder steps, encoder scan): torch's intra-op threads (the pool the
    two share), at most the CPUs the process may use (:func:`speechblocks.native.cpu_budget`: affinity, cgroup
    quota)."""
    return min(torch.get_num_threads(), native.cpu_budget())


def recording_a_graph() -> bool:
    """Whether ``torch.jit.trace`` or ``torch.compile`` is recording the ops: a native call's result would enter the
    graph as a constant, so the framework's loop runs instead."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def encoder_scan_applies(*tensors: Tensor) -> bool:
    """Whether an ``EncoderRNN`` call on these tensors (inputs and weights) may run the native scan: inference --
    float32 on the CPU without autocast, nothing recording a gradient, no graph being recorded (``torch.compile``,
    ``torch.export``, ``torch.jit.trace``: a C call would enter it as a constant) -- with the library built and
    ``SPEECHBLOCKS_NATIVE`` not 0. (The caller keeps training-mode zoneout and injected masks on its own loop.)"""
    if not enabled() or recording_a_graph() or torch.is_autocast_enabled("cpu"):
        return False
    if not all(x.dtype == torch.float32 and x.device.type == "cpu" for x in tensors):
        return False
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        return False
    return library() is not None


def encoder_scan(gx: Tensor, w_hh: Tensor, lengths: Optional[Tensor], zoneout: float) -> Tensor:
    """The encoder LSTM's bidirectional recurrence through the native scan (after :func:`encoder_scan_applies`).

    Args:
        gx: ``(batch, time, 2, 4u)`` input projections of both directions at every position, gate blocks
            i, f, o, g.
        w_hh: ``(2, u, 4u)`` recurrent weights (any strides), blocks i, f, o, g.
        lengths: ``(batch,)`` integer lengths or ``None``.
        zoneout: the inference zoneout factor of cell and hidden state.

    Returns:
        ``(batch, time, 2u)``: forward then backward outputs, zeros past each length (the layer's output).
    """
    lens = None if lengths is None else lengths.detach().cpu().numpy()
    out = native.encoder_scan(library(), _array(gx), _array(w_hh), lens, zoneout, native_threads())
    return torch.from_numpy(out)
