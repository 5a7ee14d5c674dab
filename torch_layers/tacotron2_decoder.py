"""Torch ``Tacotron2Decoder``: Tacotron-2's attention decoder and its TF1 ``dynamic_decode`` loop.

The per-step maths and the loop are one TorchScript function (:func:`decoder_loop`): it takes the weights
as tensors, so an eager call runs the whole loop in the TorchScript interpreter, and ``torch.jit.script``
of the module (or of :class:`~torch_layers.Tacotron2`) compiles it as is. Per utterance, before the loop:
the attention keys, the fused location features (convolution and ``location_features_layer`` folded into
one convolution, the biases into the keys) and, when teacher-forced, the pre-net and the input half of the
first LSTM layer for every step at once. Per step: one matmul per LSTM layer over ``[input, h]``, one
attention (query matmul, one convolution, tanh, energies, softmax, context), one matmul for the frame and
stop projections together (their weights concatenated). With a progress callback (:func:`loop_options`, what
``Tacotron2.synthesize(progress=...)`` sets) an eager call runs the same function uncompiled, as Python, and reports
every step: TorchScript cannot call back into Python, and the fast path stays compiled. An eager free-running call
at batch 1 without gradient (float32, CPU) runs the native step instead (:meth:`Tacotron2Decoder._native_loop`,
:mod:`torch_layers._native`: the same maths in one C call a step; ``SPEECHBLOCKS_NATIVE=0`` turns it off).
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _native
from ._decoder_containers import AttentionMemory, DecoderConfig, DecoderState, DecoderWeights
from ._packed_linear import ONEDNN, StepInputs, WeightGradTap, can_pack, pack, pack_hint
from ._validation import check_float_tensor, check_positive_int, hparam
from .decoder_rnn import DecoderRNN, lstm_stack_step
from .frame_projection import FrameProjection
from .location_sensitive_attention import (
    LocationSensitiveAttention,
    attention_step,
    check_memory_lengths,
    memory_mask,
    score_bias_of,
)
from .prenet import Prenet, prenet_step
from .stop_projection import StopProjection
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import check_zoneout, effective_bias, keep_masks

__all__ = ["Tacotron2Decoder", "DecoderStep", "DecoderAttentionMemory", "decoder_loop", "decoder_step",
           "DecoderWeights", "DecoderConfig", "DecoderState", "AttentionMemory", "flatten_noise_masks",
           "NOISE_MASK_KEYS"]

#: LSTM weights of decoders in inference laid out for their products (:func:`~torch_layers._packed_linear.pack`),
#: keyed by the module: ``(weights' key, {(hint, threads): packed})``
#: (see Tacotron2Decoder._inference_packs)
_PACKED_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: the keys of ``noise_masks`` (the injected dropout / zoneout keep-masks of a Tacotron-2 model)
NOISE_MASK_KEYS = ("prenet", "encoder_convolutions", "encoder_LSTM", "decoder_LSTM", "postnet_convolutions")


def _as_mask(x, name: str, block: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray) or isinstance(x, (float, int)):
        return torch.as_tensor(np.asarray(x, dtype=np.float32))
    raise ValueError(f"{block}: argument `noise_masks[{name!r}]` must hold 0/1 keep-mask tensors (or numpy arrays); "
                     f"got {type(x).__name__}.")


@torch.jit.unused
def flatten_noise_masks(noise_masks: Optional[dict[str, list[Tensor]]], block: str
                        ) -> Optional[dict[str, list[Tensor]]]:
    """The spec's nested ``noise_masks`` as the flat ``Dict[str, List[Tensor]]`` the TorchScript code takes.

    ``"encoder_LSTM": ((fw_c, fw_h), (bw_c, bw_h))`` becomes ``[fw_c, fw_h, bw_c, bw_h]``; ``"decoder_LSTM"``
    (one ``(c_keep, h_keep)`` pair per layer) becomes ``[c_0, h_0, c_1, h_1, ...]``; the other entries are
    lists of one mask per layer. Already-flat entries pass unchanged, ``None`` entries are dropped, numpy
    arrays become tensors. Eager only (a scripted module takes the flat form directly).

    Raises:
        ValueError: an unknown key, or an entry that is not a (nested) sequence of masks.
    """
    if noise_masks is None:
        return None
    if not isinstance(noise_masks, Mapping):
        raise ValueError(f"{block}: argument `noise_masks` must be a dict with keys among {list(NOISE_MASK_KEYS)}; "
                         f"got {type(noise_masks).__name__}.")
    unknown = sorted(str(k) for k in noise_masks if k not in NOISE_MASK_KEYS)
    if unknown:
        raise ValueError(f"{block}: argument `noise_masks` has unknown key(s) {unknown}; expected keys among "
                         f"{list(NOISE_MASK_KEYS)}.")
    out: dict[str, list[Tensor]] = {}
    for key, value in noise_masks.items():
        if value is None:
            continue
        if isinstance(value, (Tensor, np.ndarray)) or not isinstance(value, Sequence):
            raise ValueError(f"{block}: argument `noise_masks[{key!r}]` must be a list of keep-masks (one per layer"
                             f"{', pairs (c, h)' if key.endswith('LSTM') else ''}); got {type(value).__name__}.")
        flat: list[Tensor] = []
        for item in value:
            if isinstance(item, Sequence) and not isinstance(item, (Tensor, np.ndarray)):
                flat.extend(_as_mask(x, key, block) for x in item)
            else:
                flat.append(_as_mask(item, key, block))
        out[key] = flat
    return out


def _mask_error(block: str, key: str, doc: str, got: str) -> str:
    return block + ": argument `noise_masks['" + key + "']` must be " + doc + "; got " + got + "."


# -- synthesis options of the eager loop (thread-local; a scripted module never sees them) -------------------
_LOOP_OPTIONS = threading.local()


@contextlib.contextmanager
def loop_options(progress: Optional[Callable[[int, float], object]] = None, stop_each: bool = False):
    """Options of the free-running loops that eager :class:`Tacotron2Decoder` calls run in this thread meanwhile.

    Args:
        progress: optional ``progress(step: int, stop_probability: float)``, called after every free-running step
            with the steps done and the step's largest stop probability (over the batch and the ``r`` frames).
            The loop then runs as Python (:func:`_decoder_loop_impl`, the same ops as :func:`decoder_loop`).
        stop_each: stop once every batch entry's own stop rule has fired at some step, instead of the original
            rule (every entry at the same step); the frames each entry keeps up to its own stop are the same. An
            entry leaves the loop at its stop (:func:`_decoder_loop_impl`): its outputs after it are zeros, and
            ``progress`` reports the largest probability over the entries still running.
    """
    old = getattr(_LOOP_OPTIONS, "value", None)
    _LOOP_OPTIONS.value = (progress, bool(stop_each))
    try:
        yield
    finally:
        _LOOP_OPTIONS.value = old


def _report_progress(step: int, probs: Tensor) -> None:
    options = getattr(_LOOP_OPTIONS, "value", None)
    if options is not None and options[0] is not None:
        options[0](step, float(probs.max()))


# -- one decoder step: the containers and the function every path runs ------------------------------------------

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


def _decoder_loop_impl(n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor], go_frame: Tensor,
                       memory: AttentionMemory, w: DecoderWeights, cfg: DecoderConfig,
                       prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor], keep_h: Optional[Tensor],
                       taps: Optional[list[Tensor]], stop_logits: bool, stop_at_any: bool, stop_each: bool = False
                       ) -> tuple[Tensor, Tensor, Tensor, bool, list[Tensor]]:
    """TF1 ``dynamic_decode`` over ``TacotronDecoderCell`` (``impute_finished=False``); :func:`decoder_loop` is its
    TorchScript compilation, this Python original runs when a progress callback is active (:func:`loop_options`)
    and for training with packed weights (:class:`~torch_layers._packed_linear.PackedLinear` is Python).

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
        stop_at_any: the free-running stop rule.
        stop_each: free running: stop once every entry's own rule has fired at some step (default: the original
            rule, every entry at the same step). An entry leaves the loop at the step its rule fires: the loop
            goes on with the rows still running (their state, attention memory and injected masks selected, at
            most once per step at which some entry stops) and writes each step's outputs at their rows; a row's
            outputs after its stop are zeros.

    Returns:
        ``(frames (batch, steps, r * num_mels), stop (batch, steps, r), alignments (batch, T_in, steps),
        finished, step_inputs)``: ``finished`` tells whether the free-running stop rule fired; with ``taps``,
        ``step_inputs`` holds each LSTM layer's ``[input, h]`` of every step ``(steps, batch, in + u)``.
    """
    n_layers = len(w.lstm_weights)
    state = initial_decoder_state(memory, n_layers, w.lstm_weights[0].shape[0] // 4)
    num_mels = go_frame.shape[1]
    frame_size = cfg.frame_size
    step_taps: list[list[Tensor]] = []
    inputs: list[list[Tensor]] = []
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
            keep: Optional[list[Tensor]] = None
            if prenet_keep is not None:
                keep = []
                for m in prenet_keep:
                    keep.append(m[t])
            x = prenet_step(frame_in, w.prenet_weights, w.prenet_biases, cfg.prenet_activation, cfg.prenet_rate, keep)
        kc: Optional[Tensor] = None
        kh: Optional[Tensor] = None
        if keep_c is not None:
            kc = keep_c[t]
        if keep_h is not None:
            kh = keep_h[t]
        tap_t: Optional[list[Tensor]] = None
        if taps is not None:
            tap_t = []
            for k in range(n_layers):
                tap_t.append(step_taps[k][t])
        projected, alignments, state, layer_inputs = decoder_step(x, state, memory, w, cfg, kc, kh, tap_t)
        if taps is not None:
            for k in range(n_layers):
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
            frame_in = frames[:, frame_size - num_mels:]
            # TacoTestHelper: a frame is done when round(p) == 1 (tf.round: half to even, 0.5 -> 0) for every
            # batch entry; stop_at_any: any of the r frames done, else all of them
            if stop_each:  # every entry's own rule has fired at some step; the running rows go on, the others leave
                fired = torch.round(probs) == 1.0
                fired = fired.any(1) if stop_at_any else fired.all(1)
                if bool(fired.any()):
                    finished = bool(fired.all())
                    if not finished and t + 1 < n_run:
                        keep = torch.logical_not(fired).nonzero().squeeze(1)
                        rows = keep if rows is None else rows.index_select(0, keep)
                        state, memory = select_rows(state, memory, keep)
                        frame_in = frame_in.index_select(0, keep)
                        if prenet_keep is not None:
                            kept: list[Tensor] = []
                            for m in prenet_keep:
                                kept.append(m.index_select(1, keep))
                            prenet_keep = kept
                        if keep_c is not None:
                            keep_c = keep_c.index_select(2, keep)
                        if keep_h is not None:
                            keep_h = keep_h.index_select(2, keep)
                        seg_starts.append(t + 1)
                        seg_rows.append(rows)
            else:
                done = (torch.round(probs) == 1.0).all(0)
                finished = bool(done.any()) if stop_at_any else bool(done.all())
            if not torch.jit.is_scripting():
                _report_progress(t + 1, probs)
            if finished:
                break
    step_inputs: list[Tensor] = []
    for k in range(len(inputs)):
        step_inputs.append(torch.stack(inputs[k], 0))
    if len(seg_starts) > 0:
        return (_full_batch(frames_out, seg_starts, seg_rows, batch, 1),
                _full_batch(stops_out, seg_starts, seg_rows, batch, 1),
                _full_batch(aligns_out, seg_starts, seg_rows, batch, 2), finished, step_inputs)
    return torch.stack(frames_out, 1), torch.stack(stops_out, 1), torch.stack(aligns_out, 2), finished, step_inputs


decoder_loop = torch.jit.script(_decoder_loop_impl)
decoder_loop.__doc__ = _decoder_loop_impl.__doc__


def _eager_decoder_loop(*args, python: bool = False):
    """An eager call's loop: the compiled :func:`decoder_loop`, unless :func:`loop_options` asks for progress reports
    (then the Python original, the same ops) or ``python`` (training through packed weights)."""
    options = getattr(_LOOP_OPTIONS, "value", None)
    progress, stop_each = (None, False) if options is None else options
    if progress is None and not python:
        return decoder_loop(*args, stop_each)
    return _decoder_loop_impl(*args, stop_each)


class Tacotron2Decoder(TF1WeightsMixin, nn.Module):
    """Tacotron-2 decoder: pre-net, decoder LSTMs, location-sensitive attention, frame and stop projections.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.

    One step (TF1 ``TacotronDecoderCell``): ``x = prenet(previous frame)`` (dropout **always on**);
    ``lstm_out = DecoderRNN([x, previous context])``; ``(context, alignments) = attention(lstm_out)``;
    ``frames = FrameProjection([lstm_out, context])`` (``r * num_mels``), ``stop = StopProjection(...)`` (``r``;
    logits in ``train()``, sigmoid probabilities in ``eval()``). Context, attention state and LSTM states
    start at zeros; the first input frame is zeros.

    The loop is TF1's ``dynamic_decode`` with the original helpers:

    * teacher-forced (``mel_targets`` given): ``floor(T_out / r)`` steps, the input of step ``t >= 1`` is
      ``mel_targets[:, r*t - 1]``; in ``eval()`` (GTA) ``max_iters`` caps the steps too, in ``train()`` it does not;
    * free running (``eval()`` only: the original trains teacher-forced): the input of step ``t >= 1`` is the last
      of the ``r`` frames of step ``t - 1``; after each step the decoder stops when, for some (``stop_at_any``)
      or all of the ``r`` frames, every batch entry's stop probability rounds to 1 (``round`` half to even:
      exactly 0.5 does not stop), or after ``max_iters`` steps. The stopping step is kept; at least one step
      runs; all batch entries run the same steps.

    TF1 variables relative to ``tf1_scope`` (``"decoder"``): ``decoder_prenet/dense_{i}/...``,
    ``Location_Sensitive_Attention/...``, ``decoder_LSTM/multi_rnn_cell/...``,
    ``linear_transform_projection/projection_linear_transform_projection/...``,
    ``stop_token_projection/projection_stop_token_projection/...``, and the attention's memory layer as
    ``../memory_layer/kernel`` (a TF1 model holds it one level up, at ``Tacotron_model/inference/memory_layer``).

    Export (tested): the whole decoder does not ``torch.export`` (the memory lengths are checked by value, the
    loop runs a data-dependent number of steps); :meth:`step_module` gives one step and the per-utterance
    attention memory as modules that export (and run in ONNX Runtime) with dynamic batch and ``T_in``, the loop in
    the caller. ``torch.compile`` runs it without recompiling per length.

    Args:
        memory_size: memory features (encoder outputs, + speaker embedding for RTVC).
        num_mels: mel channels.
        outputs_per_step: ``r``, frames per decoder step.
        prenet_layers: pre-net sizes.
        drop_rate: pre-net dropout rate (always on).
        decoder_layers: LSTM layers.
        decoder_lstm_units: LSTM units.
        zoneout: zoneout factor of the LSTMs.
        attention_dim, attention_filters, attention_kernel, mask_encoder, smoothing, cumulative_weights:
            :class:`LocationSensitiveAttention`'s ``units``, ``filters``, ``kernel_size``, ``mask_encoder``,
            ``smoothing``, ``cumulate_weights``.
        max_iters: default cap of the steps (free running, and teacher-forced in ``eval()``).
        stop_at_any: the stop rule (see above).
        tf1_scope: TF1 scope; ``None`` -> ``"decoder"``.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> dec = Tacotron2Decoder(16, num_mels=6, outputs_per_step=2, prenet_layers=(8, 8), attention_dim=8,
        ...                        decoder_layers=1, decoder_lstm_units=16, max_iters=5).eval()
        >>> frames, stop, align = dec(torch.randn(2, 7, 16), torch.tensor([7, 3]))
        >>> frames.shape[0], frames.shape[2], stop.shape[2], align.shape[1]
        (2, 12, 2, 7)
    """

    default_tf1_scope = "decoder"

    def __init__(self, memory_size: int, num_mels: int = 80, outputs_per_step: int = 1,
                 prenet_layers: Sequence[int] = (256, 256), drop_rate: float = 0.5, decoder_layers: int = 2,
                 decoder_lstm_units: int = 1024, zoneout: float = 0.1, attention_dim: int = 128,
                 attention_filters: int = 32, attention_kernel: int = 31, mask_encoder: bool = True,
                 smoothing: bool = False, cumulative_weights: bool = True, max_iters: int = 2000,
                 stop_at_any: bool = True, tf1_scope: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        block = "Tacotron2Decoder"
        self.memory_size = check_positive_int(memory_size, "memory_size", block)
        self.num_mels = check_positive_int(num_mels, "num_mels", block)
        self.outputs_per_step = check_positive_int(outputs_per_step, "outputs_per_step", block)
        self.max_iters = check_positive_int(max_iters, "max_iters", block)
        self.stop_at_any = bool(stop_at_any)
        self.zoneout = check_zoneout(zoneout, "zoneout", block)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        factory = {"device": device, "dtype": dtype}
        self.prenet = Prenet(num_mels, prenet_layers, drop_rate, "relu", tf1_scope="decoder_prenet", **factory)
        self.attention = LocationSensitiveAttention(decoder_lstm_units, memory_size, attention_dim, attention_filters,
                                                    attention_kernel, mask_encoder, smoothing, cumulative_weights,
                                                    **factory)
        self.decoder_lstm = DecoderRNN(self.prenet.layers_sizes[-1] + memory_size, decoder_layers, decoder_lstm_units,
                                       zoneout, tf1_scope="decoder_LSTM", **factory)
        self.frame_projection = FrameProjection(decoder_lstm_units + memory_size, num_mels * outputs_per_step,
                                                tf1_scope="linear_transform_projection", **factory)
        self.stop_projection = StopProjection(decoder_lstm_units + memory_size, outputs_per_step,
                                              tf1_scope="stop_token_projection", **factory)
        self._prenet_sizes = list(self.prenet.layers_sizes)
        self._n_layers = self.decoder_lstm.layers
        self._units = self.decoder_lstm.size
        self._onednn = ONEDNN

    @classmethod
    def from_hparams(cls, hp, memory_size: Optional[int] = None, **kwargs) -> Tacotron2Decoder:
        """Builds the decoder from Tacotron-2 hparams (original names; a mapping, an object or
        :class:`speechblocks.Tacotron2HParams`); ``memory_size`` defaults to ``hp.memory_size``."""
        if memory_size is None:
            memory_size = hp.memory_size if hasattr(hp, "memory_size") else 2 * int(hparam(hp, "encoder_lstm_units"))
        kernel = hparam(hp, "attention_kernel")
        kernel = kernel[0] if isinstance(kernel, (list, tuple)) else kernel
        config = dict(num_mels=hparam(hp, "num_mels"), outputs_per_step=hparam(hp, "outputs_per_step"),
                      prenet_layers=list(hparam(hp, "prenet_layers")), drop_rate=hparam(hp, "tacotron_dropout_rate"),
                      attention_dim=hparam(hp, "attention_dim"), attention_filters=hparam(hp, "attention_filters"),
                      attention_kernel=kernel, mask_encoder=hparam(hp, "mask_encoder"),
                      smoothing=hparam(hp, "smoothing"), cumulative_weights=hparam(hp, "cumulative_weights"),
                      decoder_layers=hparam(hp, "decoder_layers"), decoder_lstm_units=hparam(hp, "decoder_lstm_units"),
                      zoneout=hparam(hp, "tacotron_zoneout_rate"), max_iters=hparam(hp, "max_iters"),
                      stop_at_any=hparam(hp, "stop_at_any"))
        config.update(kwargs)
        return cls(memory_size, **config)

    def forward(self, memory: Tensor, memory_lengths: Optional[Tensor] = None, mel_targets: Optional[Tensor] = None,
                max_iters: Optional[int] = None, noise_masks: Optional[dict[str, list[Tensor]]] = None
                ) -> tuple[Tensor, Tensor, Tensor]:
        """
        Args:
            memory: ``(batch, T_in, memory_size)``.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``; ``None`` means full length.
            mel_targets: ``(batch, T_out, num_mels)`` with ``T_out >= r``: teacher forcing; ``None``: free running
                (``eval()`` only).
            max_iters: step cap (``>= 1``) replacing the constructor's; ignored when teacher-forced in ``train()``.
            noise_masks: optional 0/1 keep-masks (dict, every key optional): ``"prenet"``: one ``(batch, steps,
                prenet_layers[i])`` per layer (step ``t`` uses ``[:, t]``; applied in every mode);
                ``"decoder_LSTM"``: one pair ``(c_keep, h_keep)`` per layer, each ``(batch, steps, units)``
                (applied whenever given). ``steps`` must cover the steps run (free running: ``max_iters``, or
                at least up to the stop). Other keys of :data:`NOISE_MASK_KEYS` are ignored here. A scripted
                module takes the flat form ``{"decoder_LSTM": [c_0, h_0, c_1, h_1, ...], "prenet": [...]}``.

        Returns:
            ``(frames, stop, alignments)``: ``(batch, steps, r * num_mels)``, ``(batch, steps, r)`` (logits in
            ``train()``, probabilities in ``eval()``), ``(batch, T_in, steps)`` (each step's alignments).
        """
        block = "Tacotron2Decoder"
        if not torch.jit.is_scripting():
            noise_masks = flatten_noise_masks(noise_masks, block)
        n_steps = self._check_inputs(memory, memory_lengths, mel_targets, max_iters)
        prenet_masks, keep_c, keep_h, mask_steps = self._injected_masks(noise_masks, memory, n_steps,
                                                                        mel_targets is not None)
        memory_in = self.attention_memory(memory, memory_lengths, checked=True)
        teacher_prenet: Optional[Tensor] = None
        prenet_keep: Optional[list[Tensor]] = None
        if mel_targets is not None:
            teacher_prenet, keep_c, keep_h = self._teacher_forcing_inputs(mel_targets, n_steps, prenet_masks,
                                                                          keep_c, keep_h, memory_in.values)
        elif prenet_masks is not None:
            prenet_keep = [m.transpose(0, 1) for m in prenet_masks]
        frames, stop, alignments, finished = self._decode(n_steps, mask_steps, teacher_prenet, memory_in, prenet_keep,
                                                          keep_c, keep_h)
        if not finished and mask_steps < n_steps:
            raise ValueError(block + ": argument `noise_masks` covers " + str(mask_steps) + " decoder steps but the "
                             "decoder has not stopped after them; pass masks of shape (batch, max_iters, size) or a "
                             "smaller `max_iters`.")
        return frames, stop, alignments

    def _check_inputs(self, memory: Tensor, memory_lengths: Optional[Tensor], mel_targets: Optional[Tensor],
                      max_iters: Optional[int]) -> int:
        """Checks :meth:`forward`'s arguments; returns the steps to run (teacher-forced ``floor(T_out / r)``, capped
        by the step cap in ``eval()``; free running the step cap)."""
        block = "Tacotron2Decoder"
        check_float_tensor(memory, "memory", block, 3, self.memory_size, "(batch, T_in, " + str(self.memory_size) + ")")
        batch, max_time = memory.shape[0], memory.shape[1]
        if max_time < 1:
            raise ValueError(block + ": argument `memory` must have at least one time step, expected shape (batch, "
                             "T_in >= 1, " + str(self.memory_size) + "); got shape " + str(list(memory.shape)) + ".")
        if memory_lengths is not None:
            check_memory_lengths(memory_lengths, "memory_lengths", block, batch, max_time)
        limit = self.max_iters
        if max_iters is not None:
            if max_iters < 1:
                raise ValueError(block + ": argument `max_iters` must be an integer >= 1; got " + str(max_iters) + ".")
            limit = max_iters
        r = self.outputs_per_step
        n_mels = self.num_mels
        if mel_targets is None:
            if self.training:
                raise ValueError(block + ": argument `mel_targets` (batch, T_out, " + str(n_mels) + ") is required in "
                                 "train(): the original trains teacher-forced only; call eval() to synthesize.")
            return limit
        check_float_tensor(mel_targets, "mel_targets", block, 3, n_mels, "(batch, T_out, " + str(n_mels) + ")")
        if mel_targets.shape[0] != batch or mel_targets.shape[1] < r:
            raise ValueError(block + ": argument `mel_targets` must have shape (batch=" + str(batch)
                             + ", T_out >= outputs_per_step=" + str(r) + ", " + str(n_mels) + "); got shape "
                             + str(list(mel_targets.shape)) + ".")
        n_steps = mel_targets.shape[1] // r
        if not self.training:
            n_steps = min(n_steps, limit)
        return n_steps

    def _injected_masks(self, noise_masks: Optional[dict[str, list[Tensor]]], memory: Tensor, n_steps: int,
                        teacher_forced: bool) -> tuple[Optional[list[Tensor]], Optional[Tensor], Optional[Tensor], int]:
        """The injected keep-masks, validated: the pre-net's (per layer ``(batch, steps, size)``), the LSTMs'
        (``(steps, layers, batch, units)`` for cells and outputs), and the steps they cover (``n_steps + 1``
        without masks): the free-running loop may use at most that many."""
        mask_steps = n_steps + 1
        prenet_masks: Optional[list[Tensor]] = None
        keep_c: Optional[Tensor] = None
        keep_h: Optional[Tensor] = None
        if noise_masks is None:
            return prenet_masks, keep_c, keep_h, mask_steps
        if "prenet" in noise_masks:
            prenet_masks, mask_steps = self._prenet_masks(noise_masks["prenet"], memory, mask_steps)
        if "decoder_LSTM" in noise_masks:
            keep_c, keep_h, mask_steps = self._lstm_masks(noise_masks["decoder_LSTM"], memory, mask_steps)
        if teacher_forced and mask_steps < n_steps:
            raise ValueError("Tacotron2Decoder: argument `noise_masks` must cover the " + str(n_steps)
                             + " teacher-forced decoder steps, masks of shape (batch, >= " + str(n_steps)
                             + ", size); got masks of " + str(mask_steps) + " steps.")
        return prenet_masks, keep_c, keep_h, mask_steps

    def _prenet_masks(self, given: list[Tensor], memory: Tensor, mask_steps: int) -> tuple[list[Tensor], int]:
        """``noise_masks["prenet"]`` checked and moved to the memory's device and dtype; ``mask_steps`` capped by
        their steps."""
        doc = ("a list of " + str(len(self._prenet_sizes)) + " keep-masks (batch, steps, size), sizes "
               + str(self._prenet_sizes))
        if len(given) != len(self._prenet_sizes):
            raise ValueError(_mask_error("Tacotron2Decoder", "prenet", doc, str(len(given)) + " masks"))
        masks: list[Tensor] = []
        for i, m in enumerate(given):
            if m.dim() != 3 or m.shape[0] != memory.shape[0] or m.shape[2] != self._prenet_sizes[i]:
                raise ValueError(_mask_error("Tacotron2Decoder", "prenet", doc, "mask " + str(i) + " of shape "
                                             + str(list(m.shape))))
            mask_steps = min(mask_steps, m.shape[1])
            masks.append(m.to(device=memory.device, dtype=memory.dtype))
        return masks, mask_steps

    def _lstm_masks(self, given: list[Tensor], memory: Tensor, mask_steps: int) -> tuple[Tensor, Tensor, int]:
        """``noise_masks["decoder_LSTM"]`` (``[c_0, h_0, c_1, h_1, ...]``) checked and stacked as ``(steps, layers,
        batch, units)`` cell and output keep-masks on the memory's device and dtype; ``mask_steps`` capped by their
        steps."""
        n_layers = self._n_layers
        units = self._units
        doc = "a list of " + str(n_layers) + " pairs (c_keep, h_keep), each (batch, steps, " + str(units) + ")"
        if len(given) != 2 * n_layers:
            raise ValueError(_mask_error("Tacotron2Decoder", "decoder_LSTM", doc, str(len(given)) + " masks"))
        for i, m in enumerate(given):
            if m.dim() != 3 or m.shape[0] != memory.shape[0] or m.shape[2] != units:
                raise ValueError(_mask_error("Tacotron2Decoder", "decoder_LSTM", doc, "mask " + str(i) + " of shape "
                                             + str(list(m.shape))))
            mask_steps = min(mask_steps, m.shape[1])
        keep_c = torch.stack([given[2 * k] for k in range(n_layers)], 0).permute(2, 0, 1, 3).to(
            device=memory.device, dtype=memory.dtype)  # (steps, layers, batch, units)
        keep_h = torch.stack([given[2 * k + 1] for k in range(n_layers)], 0).permute(2, 0, 1, 3).to(
            device=memory.device, dtype=memory.dtype)
        return keep_c, keep_h, mask_steps

    def _teacher_forcing_inputs(self, mel_targets: Tensor, n_steps: int, prenet_masks: Optional[list[Tensor]],
                                keep_c: Optional[Tensor], keep_h: Optional[Tensor], values: Tensor
                                ) -> tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """The pre-net of every teacher input at once, ``(steps, batch, prenet)`` (step ``t >= 1`` reads
        ``mel_targets[:, r*t - 1]``, step 0 zeros), and the LSTMs' keep-masks: the injected ones, else in
        ``train()`` fresh zoneout draws."""
        r = self.outputs_per_step
        batch = mel_targets.shape[0]
        go = torch.zeros(batch, 1, self.num_mels, dtype=mel_targets.dtype, device=mel_targets.device)
        inputs = torch.cat([go, mel_targets[:, r - 1::r][:, :n_steps - 1]], 1)  # (batch, steps, num_mels)
        step_masks: Optional[list[Tensor]] = None
        if prenet_masks is not None:
            step_masks = [m[:, :n_steps] for m in prenet_masks]
        teacher_prenet = self.prenet(inputs, step_masks).transpose(0, 1)  # (steps, batch, prenet)
        if self.training and keep_c is None and self.zoneout > 0.0:
            keep_c = keep_masks([n_steps, self._n_layers, batch, self._units], self.zoneout, values)
            keep_h = keep_masks([n_steps, self._n_layers, batch, self._units], self.zoneout, values)
        return teacher_prenet, keep_c, keep_h

    def _decode(self, n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor], memory: AttentionMemory,
                prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor], keep_h: Optional[Tensor]
                ) -> tuple[Tensor, Tensor, Tensor, bool]:
        """The loop, ``(frames, stop, alignments, finished)``: scripted, :func:`decoder_loop` (the LSTM weights
        packed per call when no gradient is recorded: no cache here); eager, :meth:`_eager_decode`."""
        values = memory.values
        go_frame = torch.zeros(values.shape[0], self.num_mels, dtype=values.dtype, device=values.device)
        cfg = self.step_config()
        if torch.jit.is_scripting():
            w = self.step_weights()
            if not torch.is_grad_enabled() and can_pack(w.lstm_weights[0], self._onednn):
                packed: list[Tensor] = []
                for x in w.lstm_weights:
                    packed.append(pack(x, values.shape[0]))
                w = with_packed(w, packed)
            frames, stop, alignments, finished, _ = decoder_loop(
                n_steps, mask_steps, teacher_prenet, go_frame, memory, w, cfg, prenet_keep, keep_c, keep_h, None,
                self.training, self.stop_at_any)
        else:
            frames, stop, alignments, finished = self._eager_decode(n_steps, mask_steps, teacher_prenet, go_frame,
                                                                    memory, cfg, prenet_keep, keep_c, keep_h)
        return frames, stop, alignments, finished

    @torch.jit.unused
    def _eager_decode(self, n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor], go_frame: Tensor,
                      memory: AttentionMemory, cfg: DecoderConfig, prenet_keep: Optional[list[Tensor]],
                      keep_c: Optional[Tensor], keep_h: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, bool]:
        """An eager call's loop (:func:`_eager_decoder_loop`) with the weights of :meth:`_loop_weights`; training
        through weight-gradient taps, it hands the steps' LSTM inputs to the taps' holder."""
        if teacher_prenet is None and keep_c is None and keep_h is None:
            native = self._native_loop(memory, cfg)
            if native is not None:
                options = getattr(_LOOP_OPTIONS, "value", None)
                progress, stop_each = (None, False) if options is None else options
                if isinstance(native, _native.NativeBatchLoop):
                    return native.run(min(n_steps, mask_steps), prenet_keep, progress, stop_each)
                return native.run(min(n_steps, mask_steps), prenet_keep, progress)
        w, taps, holder = self._loop_weights(teacher_prenet is not None, n_steps, go_frame.shape[0])
        frames, stop, alignments, finished, step_inputs = _eager_decoder_loop(
            n_steps, mask_steps, teacher_prenet, go_frame, memory, w, cfg, prenet_keep, keep_c, keep_h, taps,
            self.training, self.stop_at_any, python=w.lstm_packed_t is not None)
        if holder is not None:
            holder.inputs = list(step_inputs)
        return frames, stop, alignments, finished

    @torch.jit.unused
    def _native_loop(self, memory: AttentionMemory, cfg: DecoderConfig
                     ) -> Union[_native.NativeDecoderLoop, _native.NativeBatchLoop, None]:
        """The native free-running loop (:mod:`torch_layers._native`) for this call, or ``None`` when it does not
        apply: the batch-1 step at batch 1, the batched step for more; float32 on the CPU, no gradient recorded, no
        graph recorded (``torch.jit.trace``, ``torch.compile``), a ReLU pre-net, the sizes its C step holds (the
        shapes checked here, so a mis-shaped weight goes to the TorchScript loop and its error), the library
        built."""
        values = memory.values
        if values.dtype != torch.float32 or values.device.type != "cpu":
            return None
        if cfg.prenet_activation != "relu" or not _native.enabled() or _native.recording_a_graph():
            return None
        w = self.step_weights()
        tensors = (w.prenet_weights + w.prenet_biases + w.lstm_weights + w.lstm_biases
                   + [w.query_weight, w.location_weight, w.v_a, w.projection_weight, w.projection_bias, memory.keys])
        if torch.is_grad_enabled() and any(x.requires_grad for x in tensors + [values]):
            return None
        if not all(x.dtype == torch.float32 and x.device.type == "cpu" for x in tensors):
            return None
        if not _native.shapes_fit(w, cfg, memory, self.num_mels):
            return None
        lib = _native.library()
        if lib is None:
            return None
        loop = _native.NativeDecoderLoop if values.shape[0] == 1 else _native.NativeBatchLoop
        return loop(lib, w, cfg, memory, self.num_mels, self.stop_at_any, torch.get_num_threads())

    @torch.jit.unused
    def step_module(self) -> DecoderStep:
        """One decoder step as a module for ``torch.export`` / ONNX (dynamic batch and ``T_in``), sharing these
        parameters: :class:`DecoderStep` (its ``attention_memory`` prepares the memory once per utterance). The
        whole decoder does not export: its loop runs a data-dependent number of steps (the stop rule) and its
        checks read tensor values; the caller loops over the step instead."""
        return DecoderStep(self)

    @torch.jit.export
    def step_weights(self) -> DecoderWeights:
        """The weights of a step in the forms :func:`decoder_step` uses (small tensors derived from the parameters
        per call: the fused location kernel ``location_features_layer @ location_features_convolution``, the LSTM
        biases with the forget bias, the frame and stop projections stacked; the large LSTM weights as they are,
        no copy, and not packed)."""
        att = self.attention
        lstm_weights: list[Tensor] = []
        lstm_biases: list[Tensor] = []
        for cell in self.decoder_lstm.cells:
            lstm_weights.append(cell.weight)
            lstm_biases.append(effective_bias(cell.bias, cell.forget_bias))
        prenet_weights: list[Tensor] = []
        prenet_biases: list[Tensor] = []
        for layer in self.prenet.layers:
            prenet_weights.append(layer.weight)
            b = layer.bias
            assert b is not None
            prenet_biases.append(b)
        location_weight, _ = att.fused_location_weights()
        fp = self.frame_projection.dense
        sp = self.stop_projection.dense
        fb, sb = fp.bias, sp.bias
        assert fb is not None and sb is not None
        return DecoderWeights(prenet_weights, prenet_biases, lstm_weights, lstm_biases, att.query_layer.weight,
                              location_weight, att.attention_variable_projection, torch.cat([fp.weight, sp.weight], 0),
                              torch.cat([fb, sb], 0), None, None)

    @torch.jit.export
    def step_config(self) -> DecoderConfig:
        """The constants of a step (:class:`DecoderConfig`)."""
        att = self.attention
        return DecoderConfig(self.prenet.activation, self.prenet.drop_rate, self.zoneout, att.pad_before,
                             att.pad_after, att.smoothing, att.cumulate_weights, self.outputs_per_step * self.num_mels)

    @torch.jit.export
    def attention_memory(self, memory: Tensor, memory_lengths: Optional[Tensor] = None, checked: bool = False
                         ) -> AttentionMemory:
        """The utterance's :class:`AttentionMemory` (values, keys with every constant bias, the energy mask).

        Args:
            memory: ``(batch, T_in, memory_size)``.
            memory_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``, or ``None`` (full length).
            checked: the lengths were checked (skip the check, and the mask when every length is ``T_in``).
        """
        att = self.attention
        max_time = memory.shape[1]
        values = memory
        score_bias: Optional[Tensor] = None
        if memory_lengths is not None and att.mask_encoder:
            if not checked:
                check_memory_lengths(memory_lengths, "memory_lengths", "Tacotron2Decoder", memory.shape[0], max_time)
            if not checked or int(memory_lengths.min()) < max_time:
                lengths = memory_lengths.to(memory.device)
                values = memory * memory_mask(lengths, max_time, memory.dtype).unsqueeze(-1)
                score_bias = score_bias_of(lengths, max_time, memory.dtype)
        _, location_bias = att.fused_location_weights()
        keys = F.linear(values, att.memory_layer.weight, att.attention_bias + location_bias)
        return AttentionMemory(values, keys.transpose(1, 2).contiguous(), score_bias)

    @torch.jit.unused
    def _loop_weights(self, teacher_forced: bool, n_steps: int, batch: int
                      ) -> tuple[DecoderWeights, Optional[list[Tensor]], Optional[StepInputs]]:
        """The weights an eager call's loop runs with, and the weight-gradient taps when it trains.

        Without gradient (inference, GTA): the LSTM weights laid out for ``batch`` rows (one row: split by rows for
        the threads; more: oneDNN's matrix-matrix layout; :func:`~torch_layers._packed_linear.pack`), cached until a
        weight changes; under ``torch.compile`` unpacked (the cache is Python state dynamo would guard on).
        Teacher-forced with gradient: the LSTM weights detached in the loop, their gradients from one product over
        all steps (:class:`~torch_layers._packed_linear.WeightGradTap`), the steps' products packed when possible
        (packed again at every call: the weights change between training steps).
        """
        w = self.step_weights()
        lstm_weights, lstm_biases = w.lstm_weights, w.lstm_biases
        recording = torch.is_grad_enabled() and any(x.requires_grad for x in lstm_weights + lstm_biases)
        packable = all(can_pack(x) for x in lstm_weights)
        if not recording:
            # under torch.compile the weights stay as they are: the cache of packed weights is Python state keyed
            # on data pointers, which dynamo guards on (a graph break, and a recompilation when the cache changes)
            packed = packable and not _native.recording_a_graph()
            return w._replace(lstm_packed=self._inference_packs(batch) if packed else None), None, None
        if not teacher_forced:
            return w, None, None
        holder = StepInputs(len(lstm_weights))
        taps = [WeightGradTap.apply(lstm_weights[k], lstm_biases[k], n_steps, batch, holder, k)
                for k in range(len(lstm_weights))]
        detached = [x.detach() for x in lstm_weights]
        w = w._replace(lstm_weights=detached, lstm_biases=[x.detach() for x in lstm_biases])
        if packable:
            threads = torch.get_num_threads()
            w = w._replace(lstm_packed=[pack(x, batch, threads) for x in detached],
                           lstm_packed_t=[pack(x.t(), batch, threads) for x in detached])
        return w, taps, holder

    @torch.jit.unused
    def _inference_packs(self, batch: int) -> list[Tensor]:
        weights = [cell.weight for cell in self.decoder_lstm.cells]
        key = tuple((x.data_ptr(), x._version) for x in weights)
        cached = _PACKED_CACHE.get(self)
        if cached is None or cached[0] != key:
            cached = (key, {})
            _PACKED_CACHE[self] = cached
        layout = (pack_hint(batch), torch.get_num_threads())
        if layout not in cached[1]:
            cached[1][layout] = [pack(x, batch, layout[1]) for x in weights]
        return cached[1][layout]

    def extra_repr(self) -> str:
        return (f"memory_size={self.memory_size}, num_mels={self.num_mels}, outputs_per_step={self.outputs_per_step}, "
                f"max_iters={self.max_iters}, stop_at_any={self.stop_at_any}, tf1_scope={self.tf1_scope!r}")

    @torch.jit.unused
    def _tf1_variables(self):
        out = {}
        for module in (self.prenet, self.decoder_lstm, self.frame_projection, self.stop_projection):
            for name, var in module._tf1_variables().items():
                out[f"{module.tf1_scope}/{name}"] = var
        attention = self.attention._tf1_variables()
        out["../memory_layer/kernel"] = attention.pop("memory_layer/kernel")  # TF1: at the model scope
        for name, var in attention.items():
            out[f"{self.attention.tf1_scope}/{name}"] = var
        return out


# -- export: the decoder as a per-utterance memory module and one step (the loop stays in the caller) -------------

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

    def __init__(self, decoder: Tacotron2Decoder):
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
            done = (torch.round(stop) == 1).all(0)              # every batch entry
            if (done.any() if stop_at_any else done.all()):
                break
    """

    def __init__(self, decoder: Tacotron2Decoder):
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
