"""Torch ``Tacotron2Decoder``: Tacotron-2's attention decoder and its TF1 ``dynamic_decode`` loop.

The per-step maths is one function, :func:`~torch_layers.tacotron2_decoder_loops.decoder_step`, and the loop one
TorchScript function over it (:func:`~torch_layers.tacotron2_decoder_loops.decoder_loop`, in
:mod:`torch_layers.tacotron2_decoder_loops`): it takes the weights as tensors, so an eager call runs the whole loop
in the TorchScript interpreter, and ``torch.jit.script`` of the module (or of :class:`~torch_layers.Tacotron2`)
compiles it as is. Per utterance, before the loop: the attention keys, the fused location features (convolution and
``location_features_layer`` folded into one convolution, the biases into the keys) and, when teacher-forced, the
pre-net and the input half of the first LSTM layer for every step at once. Per step: one matmul per LSTM layer over
``[input, h]``, one attention (query matmul, one convolution, tanh, energies, softmax, context), one matmul for the
frame and stop projections together (their weights concatenated).

Which loop an eager call runs is decided in one place, :func:`torch_layers.decoding_plan.plan_decoding`: the native
C step (batch 1) or batched step (free running, float32 on the CPU, no gradient; ``SPEECHBLOCKS_NATIVE=0`` turns them
off), the TorchScript loop, or the same loop run as Python (a progress callback, which TorchScript cannot call; the
training taps through packed weights). :meth:`Tacotron2Decoder.decode` takes the loop options (``progress``,
``stop_each``) explicitly. The export modules :class:`DecoderStep` / :class:`DecoderAttentionMemory` live in
:mod:`torch_layers.tacotron2_decoder_step`, the noise-mask helpers in :mod:`torch_layers.tacotron2_noise_masks`; their
names stay importable from here.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechblocks.decoding import DecodingPlan

from . import _native
from ._decoder_containers import AttentionMemory, DecoderConfig, DecoderState, DecoderWeights
from ._packed_linear import ONEDNN, StepInputs, WeightGradTap, can_pack, pack, pack_hint
from ._validation import check_float_tensor, check_positive_int, hparam
from .decoder_rnn import DecoderRNN
from .decoding_plan import lstm_records_gradients, plan_decoding
from .frame_projection import FrameProjection
from .location_sensitive_attention import (
    LocationSensitiveAttention,
    check_memory_lengths,
    memory_mask,
    score_bias_of,
)
from .prenet import Prenet
from .stop_projection import StopProjection
from .tacotron2_decoder_loops import (
    decoder_loop,
    decoder_loop_python,
    decoder_step,
    initial_decoder_state,
    select_rows,
    with_packed,
)
from .tacotron2_decoder_step import DecoderAttentionMemory, DecoderStep
from .tacotron2_noise_masks import NOISE_MASK_KEYS, _mask_error, flatten_noise_masks
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import check_zoneout, effective_bias, keep_masks

__all__ = ["Tacotron2Decoder", "DecoderStep", "DecoderAttentionMemory", "decoder_loop", "decoder_step",
           "DecoderWeights", "DecoderConfig", "DecoderState", "AttentionMemory", "flatten_noise_masks",
           "NOISE_MASK_KEYS", "initial_decoder_state", "select_rows", "with_packed"]

#: LSTM weights of decoders in inference laid out for their products (:func:`~torch_layers._packed_linear.pack`),
#: keyed by the module: ``(weights' key, {(hint, threads): packed})``
#: (see Tacotron2Decoder._inference_packs)
_PACKED_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

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
        if not torch.jit.is_scripting():  # eager: the loop plan_decoding picks (decode)
            return self.decode(memory, memory_lengths, mel_targets, max_iters, noise_masks)
        n_steps, mask_steps, teacher_prenet, memory_in, prenet_keep, keep_c, keep_h = self._loop_inputs(
            memory, memory_lengths, mel_targets, max_iters, noise_masks)
        frames, stop, alignments, finished = self._scripted_loop(n_steps, mask_steps, teacher_prenet, memory_in,
                                                                 prenet_keep, keep_c, keep_h)
        self._check_stopped(finished, mask_steps, n_steps)
        return frames, stop, alignments

    @torch.jit.unused
    def decode(self, memory: Tensor, memory_lengths: Optional[Tensor] = None, mel_targets: Optional[Tensor] = None,
               max_iters: Optional[int] = None, noise_masks: Optional[dict[str, list[Tensor]]] = None, *,
               progress: Optional[Callable[[int, float], object]] = None, stop_each: bool = False
               ) -> tuple[Tensor, Tensor, Tensor]:
        """The eager call (what :meth:`forward` runs outside TorchScript) with the loop options explicit: the loop
        :func:`~torch_layers.decoding_plan.plan_decoding` picks for the call runs with them.

        Args:
            memory, memory_lengths, mel_targets, max_iters, noise_masks: as :meth:`forward` (``noise_masks`` nested
                or flat).
            progress: free running: ``progress(step, largest stop probability)`` after every step (over the batch
                entries still running and the ``r`` frames); the outputs are the same as without it. Not with
                ``mel_targets``.
            stop_each: free running: each batch entry leaves the loop at its own stop (its outputs after it are
                zeros) instead of the original rule (every entry at one step); the frames each entry keeps up to its
                own stop are the same.
        """
        noise_masks = flatten_noise_masks(noise_masks, "Tacotron2Decoder")
        n_steps, mask_steps, teacher_prenet, memory_in, prenet_keep, keep_c, keep_h = self._loop_inputs(
            memory, memory_lengths, mel_targets, max_iters, noise_masks)
        plan = plan_decoding(self, memory_in, mel_targets=mel_targets, noise_masks=noise_masks, progress=progress,
                             stop_each=bool(stop_each))
        frames, stop, alignments, finished = self._run_plan(plan, n_steps, mask_steps, teacher_prenet, memory_in,
                                                            prenet_keep, keep_c, keep_h)
        self._check_stopped(finished, mask_steps, n_steps)
        return frames, stop, alignments

    def _loop_inputs(self, memory: Tensor, memory_lengths: Optional[Tensor], mel_targets: Optional[Tensor],
                     max_iters: Optional[int], noise_masks: Optional[dict[str, list[Tensor]]]
                     ) -> tuple[int, int, Optional[Tensor], AttentionMemory, Optional[list[Tensor]], Optional[Tensor],
                                Optional[Tensor]]:
        """:meth:`forward`'s arguments checked and prepared for a loop: ``(n_steps, mask_steps, teacher_prenet,
        attention memory, prenet_keep, keep_c, keep_h)`` (the loop functions' arguments of those names)."""
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
        return n_steps, mask_steps, teacher_prenet, memory_in, prenet_keep, keep_c, keep_h

    def _check_stopped(self, finished: bool, mask_steps: int, n_steps: int) -> None:
        if not finished and mask_steps < n_steps:
            raise ValueError("Tacotron2Decoder: argument `noise_masks` covers " + str(mask_steps) + " decoder steps "
                             "but the decoder has not stopped after them; pass masks of shape (batch, max_iters, size) "
                             "or a smaller `max_iters`.")

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


    def _scripted_loop(self, n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor], memory: AttentionMemory,
                       prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor], keep_h: Optional[Tensor]
                       ) -> tuple[Tensor, Tensor, Tensor, bool]:
        """A scripted module's loop, ``(frames, stop, alignments, finished)``: :func:`decoder_loop` (the LSTM weights
        packed per call when no gradient is recorded: no cache here)."""
        values = memory.values
        go_frame = torch.zeros(values.shape[0], self.num_mels, dtype=values.dtype, device=values.device)
        w = self.step_weights()
        if not torch.is_grad_enabled() and can_pack(w.lstm_weights[0], self._onednn):
            packed: list[Tensor] = []
            for x in w.lstm_weights:
                packed.append(pack(x, values.shape[0]))
            w = with_packed(w, packed)
        frames, stop, alignments, finished, _ = decoder_loop(
            n_steps, mask_steps, teacher_prenet, go_frame, memory, w, self.step_config(), prenet_keep, keep_c, keep_h,
            None, self.training, self.stop_at_any)
        return frames, stop, alignments, finished

    @torch.jit.unused
    def _run_plan(self, plan: DecodingPlan, n_steps: int, mask_steps: int, teacher_prenet: Optional[Tensor],
                  memory: AttentionMemory, prenet_keep: Optional[list[Tensor]], keep_c: Optional[Tensor],
                  keep_h: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, bool]:
        """An eager call's loop as ``plan`` says, with its ``progress`` and ``stop_each``: a native loop
        (:meth:`_native_loop`), else :func:`decoder_loop` or its Python original with the weights of
        :meth:`_loop_weights`; training through weight-gradient taps, it hands the steps' LSTM inputs to the taps'
        holder."""
        if plan.native:
            return self._native_loop(plan, memory).run(min(n_steps, mask_steps), prenet_keep, plan.progress,
                                                       plan.stop_each)
        values = memory.values
        go_frame = torch.zeros(values.shape[0], self.num_mels, dtype=values.dtype, device=values.device)
        w, taps, holder = self._loop_weights(plan, teacher_prenet is not None, n_steps, values.shape[0])
        loop = decoder_loop_python if plan.loop == "python" else decoder_loop
        frames, stop, alignments, finished, step_inputs = loop(
            n_steps, mask_steps, teacher_prenet, go_frame, memory, w, self.step_config(), prenet_keep, keep_c, keep_h,
            taps, self.training, self.stop_at_any, plan.stop_each, plan.progress)
        if holder is not None:
            # detached: the taps' ``dW = dyᵀ x`` needs no graph through ``x``, and a graph tensor held here (the
            # tap's ctx -> holder -> x -> x.grad_fn -> ... -> the tap) is a cycle through autograd's C++ nodes that
            # no garbage collection frees: every training step's graph stayed alive (~9 MB a step at the demo sizes)
            holder.inputs = [x.detach() for x in step_inputs]
        return frames, stop, alignments, finished

    @torch.jit.unused
    def _native_loop(self, plan: DecodingPlan, memory: AttentionMemory
                     ) -> Union[_native.NativeDecoderLoop, _native.NativeBatchLoop]:
        """The native free-running loop ``plan`` chose (:mod:`torch_layers._native`): the batch-1 step or the batched
        one, reading :meth:`step_weights` (the location kernel folded there)."""
        loop = _native.NativeDecoderLoop if plan.loop == "native-step" else _native.NativeBatchLoop
        return loop(_native.library(), self.step_weights(), self.step_config(), memory, self.num_mels,
                    self.stop_at_any, _native.native_threads())

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
    def _loop_weights(self, plan: DecodingPlan, teacher_forced: bool, n_steps: int, batch: int
                      ) -> tuple[DecoderWeights, Optional[list[Tensor]], Optional[StepInputs]]:
        """The weights an eager call's loop runs with, and the weight-gradient taps when it trains.

        Without gradient (inference, GTA): the LSTM weights laid out for ``batch`` rows (one row: split by rows for
        the threads; more: oneDNN's matrix-matrix layout; :func:`~torch_layers._packed_linear.pack`), cached until a
        weight changes; under ``torch.compile`` unpacked (the cache is Python state dynamo would guard on).
        Teacher-forced with gradient: the LSTM weights detached in the loop, their gradients from one product over
        all steps (:class:`~torch_layers._packed_linear.WeightGradTap`), the steps' products packed when the plan
        runs the Python loop (packed again at every call: the weights change between training steps).
        """
        w = self.step_weights()
        lstm_weights, lstm_biases = w.lstm_weights, w.lstm_biases
        if not lstm_records_gradients(self.decoder_lstm.cells):
            # under torch.compile the weights stay as they are: the cache of packed weights is Python state keyed
            # on data pointers, which dynamo guards on (a graph break, and a recompilation when the cache changes)
            packed = all(can_pack(x) for x in lstm_weights) and not _native.recording_a_graph()
            return w._replace(lstm_packed=self._inference_packs(batch) if packed else None), None, None
        if not teacher_forced:
            return w, None, None
        holder = StepInputs(len(lstm_weights))
        taps = [WeightGradTap.apply(lstm_weights[k], lstm_biases[k], n_steps, batch, holder, k)
                for k in range(len(lstm_weights))]
        detached = [x.detach() for x in lstm_weights]
        w = w._replace(lstm_weights=detached, lstm_biases=[x.detach() for x in lstm_biases])
        if plan.loop == "python":  # plan_decoding: packable weights
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
