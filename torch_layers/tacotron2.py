"""Torch ``Tacotron2``: the whole TF1 Tacotron-2 feature predictor (RTVC synthesizer / Rayhane-mamah)."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Optional

import numpy as np
import torch
from torch import Tensor, nn

from speechblocks import Tacotron2HParams, checkpoint_hparams, resolve_hparams
from speechblocks.distributed import check_sync_batch_norm
from speechblocks.tacotron2_schema import MODEL_SCOPE, is_regularized

from . import tacotron2_synthesis
from ._migrated_model import load_migrated_model
from ._validation import check_float_tensor
from .cbhg import CBHG
from .encoder_convolutions import EncoderConvolutions
from .encoder_rnn import EncoderRNN
from .frame_projection import FrameProjection
from .location_sensitive_attention import check_memory_lengths
from .postnet import Postnet
from .tacotron2_decoder import Tacotron2Decoder, flatten_noise_masks
from .tacotron2_export import Tacotron2Encoder
from .tf1_exchange import TF1Variable, TF1WeightsMixin, tf1_training_gradients

__all__ = ["Tacotron2", "Tacotron2Encoder", "MODEL_SCOPE"]


class Tacotron2(TF1WeightsMixin, nn.Module):
    """Tacotron-2 as the TF1 RTVC synthesizer and Rayhane-mamah/Tacotron-2 build it, from their hparams.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.

    ``inputs_embedding`` -> :class:`EncoderConvolutions` (``encoder_convolutions``) -> :class:`EncoderRNN`
    (``encoder_LSTM``) -> memory (RTVC: the speaker embedding tiled over time and concatenated) ->
    :class:`Tacotron2Decoder` (``decoder``: pre-net, decoder LSTMs, :class:`LocationSensitiveAttention`, frame and
    stop projections, the TF1 ``dynamic_decode`` loop) -> :class:`Postnet` (``postnet_convolutions``) +
    ``postnet_projection`` residual -> with ``predict_linear``, :class:`CBHG` (``CBHG_postnet``) ->
    ``cbhg_linear_specs_projection``. Rayhane's ``clip_outputs`` clips decoder, mel and linear outputs to
    ``[lo - lower_bound_decay, hi]``. ``train()``: batch-norm batch statistics, conv dropout, random zoneout,
    stop logits; ``eval()``: moving statistics, no conv dropout, deterministic zoneout, stop probabilities,
    ``max_iters`` caps teacher-forced (GTA) decoding too. The pre-net dropout is always on (use
    ``tacotron_dropout_rate=0`` or injected ``noise_masks`` for deterministic runs).

    Synthesis: :meth:`synthesize` (a padded batch, ``eval()`` and ``no_grad`` for the call, optional per-step
    ``progress`` callback) and :meth:`synthesize_batch` (a list of id sequences decoded in one batched loop; numpy
    results per sentence, each equal to the sentence synthesized alone).

    TF1 exchange: :meth:`tf1_weights` / :meth:`load_tf1_weights` use the names of
    :func:`speechblocks.tf1_variable_shapes` (relative to ``Tacotron_model/inference/``, TF1 layouts).

    Export (tested): the whole model does not ``torch.export`` (ids and lengths are checked by value, the decoder
    loop runs a data-dependent number of steps); :meth:`encoder_module` and :meth:`decoder_step_module` export
    (``torch.export``, ONNX Runtime) with dynamic batch and ``T_in`` and give the model's numbers, the loop over
    the steps in the caller (see :class:`~torch_layers.tacotron2_decoder.DecoderStep`). ``torch.compile`` runs the
    model (graph breaks at the value reads and the TorchScript loop); free running compiles again for every new
    length, teacher forced does not.

    Args:
        hparams: a preset name (``"rtvc"``, ``"rayhane"``), a mapping or an object with the original hparam
            names, or a :class:`speechblocks.Tacotron2HParams`; ``None`` is the RTVC preset.
        n_symbols: rows of ``inputs_embedding`` (default 66, or the given ``Tacotron2HParams``').
        sync_batch_norm: under ``DistributedDataParallel``, batch statistics of the **global** batch in every
            batch norm (encoder convolutions, postnet, CBHG; see :mod:`torch_layers.distributed`); default False:
            each rank's own batch, as the original's multi-GPU towers. Not an hparam of the original: also a keyword
            of :meth:`from_tf1_checkpoint` and :meth:`from_migrated`; ``torch_layers.distributed.set_sync_batch_norm``
            switches a built model.
        device: factory keyword.
        dtype: factory keyword.
        **overrides: hparams by original name (see :func:`speechblocks.resolve_hparams`).

    Example:
        >>> model = Tacotron2("rtvc", max_iters=3).eval()
        >>> out = model(torch.randint(0, 66, (1, 12)), torch.tensor([12]), torch.randn(1, 256))
        >>> sorted(out), out["mel_outputs"].shape[2]
        (['alignments', 'decoder_outputs', 'mel_outputs', 'stop_token_prediction'], 80)
    """

    __jit_ignored_attributes__ = ["hparams"]

    def __init__(self, hparams=None, n_symbols: Optional[int] = None, *, sync_batch_norm: bool = False, device=None,
                 dtype=None, **overrides):
        super().__init__()
        if n_symbols is None and isinstance(hparams, Tacotron2HParams):
            n_symbols = hparams.n_symbols
        hp = resolve_hparams(hparams, n_symbols, **overrides)
        self.hparams = hp
        self.tf1_scope = MODEL_SCOPE
        factory = {"device": device, "dtype": dtype}
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, "Tacotron2")
        sync = {"sync_batch_norm": self.sync_batch_norm}
        self.n_symbols = hp.n_symbols
        self.num_mels = hp.num_mels
        self.outputs_per_step = hp.outputs_per_step
        self.speaker_embedding_size = hp.speaker_embedding_size
        self.max_iters = hp.max_iters
        self.clip_outputs = hp.clip_outputs
        lo, hi = hp.output_range
        self.clip_low = float(lo - hp.lower_bound_decay)
        self.clip_high = float(hi)
        drop, bn = hp.tacotron_dropout_rate, hp.batch_norm_position
        self.embedding = nn.Embedding(hp.n_symbols, hp.embedding_dim, **factory)
        nn.init.xavier_uniform_(self.embedding.weight)  # TF1 get_variable's default (glorot uniform)
        self.encoder_convolutions = EncoderConvolutions(
            hp.embedding_dim, hp.enc_conv_kernel_size, hp.enc_conv_channels, hp.enc_conv_num_layers, drop, "relu",
            tf1_scope="encoder_convolutions", bn_position=bn, **sync, **factory)
        self.encoder_lstm = EncoderRNN(hp.enc_conv_channels, hp.encoder_lstm_units, hp.tacotron_zoneout_rate,
                                       tf1_scope="encoder_LSTM", **factory)
        self.decoder = Tacotron2Decoder.from_hparams(hp, hp.memory_size, **factory)
        self.postnet = Postnet(hp.num_mels, hp.postnet_kernel_size, hp.postnet_channels, hp.postnet_num_layers, drop,
                               "tanh", tf1_scope="postnet_convolutions", bn_position=bn, **sync, **factory)
        self.postnet_projection = FrameProjection(hp.postnet_channels, hp.num_mels, tf1_scope="postnet_projection",
                                                  **factory)
        self.post_cbhg = None
        self.linear_projection = None
        if hp.predict_linear:
            self.post_cbhg = CBHG(hp.num_mels, hp.cbhg_kernels, hp.cbhg_conv_channels, hp.cbhg_pool_size,
                                  [hp.cbhg_projection, hp.num_mels], hp.cbhg_projection_kernel_size,
                                  hp.cbhg_highwaynet_layers, hp.cbhg_highway_units, hp.cbhg_rnn_units,
                                  tf1_scope="CBHG_postnet", bn_position=bn, **sync, **factory)
            self.linear_projection = FrameProjection(2 * hp.cbhg_rnn_units, hp.num_freq,
                                                     tf1_scope="cbhg_linear_specs_projection", **factory)

    def forward(self, inputs: Tensor, input_lengths: Optional[Tensor] = None,
                speaker_embeddings: Optional[Tensor] = None,
                mel_targets: Optional[Tensor] = None, max_iters: Optional[int] = None,
                noise_masks: Optional[dict[str, list[Tensor]]] = None) -> dict[str, Tensor]:
        """
        Args:
            inputs: ``(batch, T_in)`` integer symbol ids in ``[0, n_symbols)``.
            input_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``; ``None`` means every row is full length.
            speaker_embeddings: ``(batch, speaker_embedding_size)``; required by (and only accepted by) a model
                with a speaker embedding (RTVC).
            mel_targets: ``(batch, T_out, num_mels)``, ``T_out >= outputs_per_step``: teacher forcing (training,
                or GTA in ``eval()``); ``None``: free running (``eval()`` only).
            max_iters: step cap ``>= 1`` (default ``hparams.max_iters``); free running and GTA only.
            noise_masks: optional dict of 0/1 keep-masks replacing the random ones (every key optional):
                ``"prenet"`` one ``(batch, steps, prenet_layers[i])`` per layer; ``"encoder_convolutions"`` one
                ``(batch, T_in, enc_conv_channels)`` per layer; ``"encoder_LSTM"`` ``((fw_c, fw_h), (bw_c, bw_h))``
                each ``(batch, T_in, encoder_lstm_units)``; ``"decoder_LSTM"`` one ``(c_keep, h_keep)`` per layer,
                each ``(batch, steps, decoder_lstm_units)``; ``"postnet_convolutions"`` one ``(batch, steps * r,
                postnet_channels)`` per layer (longer masks are cut). Applied as TF1 keep-prob dropout
                ``x / (1 - rate) * mask`` and zoneout ``prev + mask * (new - prev)``, whenever given. A scripted
                model takes the flat form (``"encoder_LSTM": [fw_c, fw_h, bw_c, bw_h]``, ``"decoder_LSTM":
                [c_0, h_0, c_1, h_1, ...]``).

        Returns:
            dict: ``decoder_outputs`` ``(batch, steps * r, num_mels)``, ``mel_outputs`` (same shape),
            ``stop_token_prediction`` ``(batch, steps * r)`` (logits in ``train()``, probabilities in ``eval()``),
            ``alignments`` ``(batch, T_in, steps)``, and with ``predict_linear`` ``linear_outputs``
            ``(batch, steps * r, num_freq)``.
        """
        if not torch.jit.is_scripting():
            noise_masks = flatten_noise_masks(noise_masks, "Tacotron2")
        input_lengths = self._check_inputs(inputs, input_lengths, speaker_embeddings, mel_targets, max_iters)
        conv_masks, lstm_masks, post_masks = self._split_noise_masks(noise_masks)
        memory = self._memory(inputs, input_lengths, speaker_embeddings, conv_masks, lstm_masks)
        frames, stop, alignments = self.decoder(memory, input_lengths, mel_targets, max_iters, noise_masks)
        return self._outputs(frames, stop, alignments, post_masks)

    def _split_noise_masks(self, noise_masks: Optional[dict[str, list[Tensor]]]) -> tuple[
            Optional[list[Tensor]], Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]],
            Optional[list[Tensor]]]:
        """The flat ``noise_masks``' encoder convolution, encoder LSTM (``((fw_c, fw_h), (bw_c, bw_h))``) and postnet
        masks (the decoder reads its own keys)."""
        conv_masks: Optional[list[Tensor]] = None
        lstm_masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]] = None
        post_masks: Optional[list[Tensor]] = None
        if noise_masks is not None:
            if "encoder_convolutions" in noise_masks:
                conv_masks = noise_masks["encoder_convolutions"]
            if "encoder_LSTM" in noise_masks:
                z = noise_masks["encoder_LSTM"]
                if len(z) != 4:
                    raise ValueError("Tacotron2: argument `noise_masks['encoder_LSTM']` must be ((fw_c, fw_h), (bw_c, "
                                     "bw_h)), each (batch, T_in, encoder_lstm_units); got " + str(len(z)) + " masks.")
                lstm_masks = ((z[0], z[1]), (z[2], z[3]))
            if "postnet_convolutions" in noise_masks:
                post_masks = noise_masks["postnet_convolutions"]
        return conv_masks, lstm_masks, post_masks

    def _outputs(self, frames: Tensor, stop: Tensor, alignments: Tensor, post_masks: Optional[list[Tensor]]
                 ) -> dict[str, Tensor]:
        """:meth:`forward`'s dict from the decoder's outputs: the postnet (its masks cut to the frames), the stop
        probabilities per frame."""
        n_frames = frames.shape[1] * self.outputs_per_step
        if post_masks is not None:
            cut: list[Tensor] = []
            for i, pm in enumerate(post_masks):
                if pm.dim() != 3 or pm.shape[1] < n_frames:
                    raise ValueError("Tacotron2: argument `noise_masks['postnet_convolutions'][" + str(i) + "]` must "
                                     "have shape (batch, >= steps * r = " + str(n_frames) + ", postnet_channels); got "
                                     + str(list(pm.shape)) + ".")
                cut.append(pm[:, :n_frames])
            post_masks = cut
        out = self._postprocess(frames, post_masks)
        outputs = {"decoder_outputs": out["decoder_outputs"], "mel_outputs": out["mel_outputs"],
                   "stop_token_prediction": stop.reshape(frames.shape[0], n_frames), "alignments": alignments}
        if "linear_outputs" in out:
            outputs["linear_outputs"] = out["linear_outputs"]
        return outputs

    def _check_inputs(self, inputs: Tensor, input_lengths: Optional[Tensor], speaker_embeddings: Optional[Tensor],
                      mel_targets: Optional[Tensor], max_iters: Optional[int]) -> Tensor:
        """Checks :meth:`forward`'s arguments (ValueErrors naming them); returns ``input_lengths`` (full when None)."""
        block = "Tacotron2"
        if inputs.is_floating_point() or inputs.dtype == torch.bool or inputs.dim() != 2 or inputs.shape[1] < 1:
            raise ValueError(block + ": argument `inputs` must be an integer tensor of symbol ids of shape (batch, "
                             "T_in >= 1); got dtype " + str(inputs.dtype) + " and shape " + str(list(inputs.shape))
                             + ".")
        batch, max_time = inputs.shape[0], inputs.shape[1]
        if inputs.numel() > 0:
            lo, hi = int(inputs.min()), int(inputs.max())
            if lo < 0 or hi >= self.n_symbols:
                raise ValueError(block + ": argument `inputs` (batch, T_in) must hold symbol ids in [0, n_symbols="
                                 + str(self.n_symbols) + "); got ids in [" + str(lo) + ", " + str(hi) + "].")
        if input_lengths is None:
            input_lengths = torch.full((batch,), max_time, dtype=torch.long, device=inputs.device)
        else:
            check_memory_lengths(input_lengths, "input_lengths", block, batch, max_time)
        e = self.speaker_embedding_size
        if e > 0:
            if speaker_embeddings is None:
                raise ValueError(block + ": argument `speaker_embeddings` of shape (batch, " + str(e)
                                 + ") is required: "
                                 "this model has a speaker embedding (speaker_embedding_size=" + str(e) + ").")
            check_float_tensor(speaker_embeddings, "speaker_embeddings", block, 2, e, "(batch, " + str(e) + ")")
            if speaker_embeddings.shape[0] != batch:
                raise ValueError(block + ": argument `speaker_embeddings` must have shape (batch=" + str(batch) + ", "
                                 + str(e) + "); got shape " + str(list(speaker_embeddings.shape)) + ".")
        elif speaker_embeddings is not None:
            raise ValueError(block + ": argument `speaker_embeddings` must be None: this model has no speaker "
                             "embedding (hparam speaker_embedding_size is unset); got shape "
                             + str(list(speaker_embeddings.shape)) + ".")
        m = self.num_mels
        if mel_targets is not None:
            check_float_tensor(mel_targets, "mel_targets", block, 3, m, "(batch, T_out, " + str(m) + ")")
        elif self.training:
            raise ValueError(block + ": argument `mel_targets` (batch, T_out, " + str(m) + ") is required in train(): "
                             "the original trains teacher-forced only; call eval() to synthesize.")
        if max_iters is not None and max_iters < 1:
            raise ValueError(block + ": argument `max_iters` must be an integer >= 1; got " + str(max_iters) + ".")
        return input_lengths

    def _memory(self, inputs: Tensor, input_lengths: Optional[Tensor], speaker_embeddings: Optional[Tensor],
                conv_masks: Optional[list[Tensor]],
                lstm_masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]]) -> Tensor:
        """The decoder's memory ``(batch, T_in, memory_size)``: embedding, encoder (+ the tiled speaker embedding)."""
        x = self.embedding(inputs)
        x = self.encoder_convolutions(x, conv_masks)
        if torch.jit.is_scripting():
            memory = self.encoder_lstm(x, input_lengths, lstm_masks)
        else:
            memory = self._encoder_lstm_eager(x, input_lengths, lstm_masks)
        if speaker_embeddings is not None:
            tiled = speaker_embeddings.to(memory.dtype).unsqueeze(1).expand(
                inputs.shape[0], inputs.shape[1], self.speaker_embedding_size)
            memory = torch.cat([memory, tiled], 2)
        return memory

    @torch.jit.unused
    def _memory_each(self, inputs: Tensor, input_lengths: Tensor, speaker_embeddings: Optional[Tensor]) -> Tensor:
        """Inference memory of a padded batch whose every row equals the row's sentence encoded alone (up to float
        rounding): each encoder convolution reads zeros past the row's length, as the ``'same'`` padding of the
        sentence alone does (:meth:`_memory` lets the convolutions read the padding, as the original batch does),
        the LSTM honours the lengths, and the memory is zero past each length (the rows :meth:`synthesize_batch`
        padded the sentences' memories with)."""
        outside = (torch.arange(inputs.shape[1], device=inputs.device)[None, :] >= input_lengths[:, None])[:, :, None]
        x = self.embedding(inputs)
        for block in self.encoder_convolutions.blocks:
            x = block(x.masked_fill(outside, 0.0), None)
        memory = self._encoder_lstm_eager(x, input_lengths, None)
        if speaker_embeddings is not None:
            tiled = speaker_embeddings.to(memory.dtype).unsqueeze(1).expand(
                inputs.shape[0], inputs.shape[1], self.speaker_embedding_size)
            memory = torch.cat([memory, tiled], 2)
        return memory.masked_fill(outside, 0.0)

    def _postprocess(self, frames: Tensor, post_masks: Optional[list[Tensor]]) -> dict[str, Tensor]:
        """Decoder frames ``(batch, steps, r * num_mels)`` -> ``decoder_outputs``, ``mel_outputs`` (postnet
        residual) and, with ``predict_linear``, ``linear_outputs``."""
        decoder_outputs = frames.reshape(frames.shape[0], frames.shape[1] * self.outputs_per_step, self.num_mels)
        if self.clip_outputs:
            decoder_outputs = torch.clamp(decoder_outputs, self.clip_low, self.clip_high)
        residual = self.postnet(decoder_outputs, post_masks)
        mel_outputs = decoder_outputs + self.postnet_projection(residual)
        if self.clip_outputs:
            mel_outputs = torch.clamp(mel_outputs, self.clip_low, self.clip_high)
        out = {"decoder_outputs": decoder_outputs, "mel_outputs": mel_outputs}
        if self.post_cbhg is not None and self.linear_projection is not None:
            linear = self.linear_projection(self.post_cbhg(mel_outputs, None))
            if self.clip_outputs:
                linear = torch.clamp(linear, self.clip_low, self.clip_high)
            out["linear_outputs"] = linear
        return out

    @torch.jit.unused
    def _encoder_lstm_eager(self, x: Tensor, input_lengths: Optional[Tensor],
                            masks: Optional[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]]) -> Tensor:
        """The encoder LSTM; under autocast its recurrence runs in the parameters' dtype (as autocast keeps
        recurrent state in full precision), its output then follows autocast again."""
        if torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                return self.encoder_lstm(x.to(self.encoder_lstm.fw_cell.weight.dtype), input_lengths, masks)
        return self.encoder_lstm(x, input_lengths, masks)

    # -- synthesis ------------------------------------------------------------------------------------------

    @torch.jit.unused
    def synthesize(self, inputs, input_lengths=None, speaker_embeddings=None, max_iters: Optional[int] = None, *,
                   mel_targets=None, progress: Optional[Callable[[int, float], object]] = None) -> dict[str, Tensor]:
        """Free-running (or GTA, with ``mel_targets``) inference: :meth:`forward` in ``eval()`` under
        ``torch.no_grad()``; the module's train/eval mode is restored afterwards.

        Args:
            inputs: ``(batch, T_in)`` integer symbol ids (tensor or array; pad id 0 past ``input_lengths``).
            input_lengths: ``(batch,)`` integer lengths; ``None`` means full length.
            speaker_embeddings: ``(batch, speaker_embedding_size)``, exactly when the model has one.
            max_iters: step cap ``>= 1`` (default ``hparams.max_iters``).
            mel_targets: ``(batch, T_out, num_mels)``: GTA synthesis (teacher forced) instead of free running.
            progress: optional callable ``progress(step: int, stop_probability: float)``, called after every
                free-running decoder step with the number of steps done and the step's largest stop probability (over
                the batch and the ``r`` frames; the original rule stops once it rounds to 1 for every entry). The loop
                then runs as Python (the TorchScript loop cannot call back) with the same ops: the outputs are the
                same as without it (bitwise with the prenet dropout off). An exception it raises ends the synthesis
                and propagates. Not with ``mel_targets``.

        Returns:
            dict of tensors, as :meth:`forward` in ``eval()`` (stop probabilities).
        """
        return tacotron2_synthesis.synthesize(self, inputs, input_lengths, speaker_embeddings, max_iters,
                                              mel_targets, progress)

    @torch.jit.unused
    def synthesize_batch(self, sequences, speaker_embeddings=None, max_iters: Optional[int] = None, *,
                         progress: Optional[Callable[[int, float], object]] = None) -> list[dict]:
        """Synthesizes several sentences with one batched decoder loop; each result equals the sentence
        synthesized alone (:meth:`synthesize` of that one sentence), up to float rounding.

        The id sequences are padded with the pad id 0 into one batch. The decoder loop runs the batch until every
        sentence's own stop rule has fired at some step (or ``max_iters`` steps): sentence ``i`` stops at the first
        step at which its stop probability rounds to 1 (``stop_at_any``: at any of the ``r`` frames, else at all of
        them), that step's frames included -- where it would stop alone. (The original's rule for a batch, which
        :meth:`synthesize` keeps, stops only at a step at which every entry's rule fires together, so it may run
        much longer; the kept frames would be the same.) A sentence leaves the loop at its stop: the steps after it
        run the sentences still going only (their decoder state and attention memory selected at the steps at which
        some sentence stops). Rows never interact in the decoder: the attention masks
        the memory past each sentence's length (``mask_encoder``, on in both presets). The encoder runs once for
        the batch, each convolution reading zeros past each sentence's length (what the sentence alone reads: the
        original batch would let them read the padding), the memory zero past each length. The postnet (and CBHG)
        runs per sentence on its own frames (batched, it would see the padding and cost the padded frames' work:
        it is compute-bound). Runs in ``eval()`` under
        ``torch.no_grad()`` (the module's mode is restored); in float32 on the CPU the loop is the native batched
        step (:mod:`torch_layers._native`; ``SPEECHBLOCKS_NATIVE=0``: the TorchScript loop).

        Args:
            sequences: list of 1-D integer symbol-id sequences (lists, arrays or tensors), each non-empty.
            speaker_embeddings: ``(len(sequences), speaker_embedding_size)``, or one ``(speaker_embedding_size,)``
                for every sentence; exactly when the model has a speaker embedding.
            max_iters: step cap ``>= 1`` of the batch (default ``hparams.max_iters``).
            progress: optional callable ``progress(step: int, stop_probability: float)`` called after every step of
                the batched loop with the largest stop probability of the step over the sentences still running and
                the ``r`` frames (see :meth:`synthesize`).

        Returns:
            list (input order) of dicts of numpy arrays, sentence ``i`` with ``T_in_i`` ids cut to its own
            ``steps_i`` decoder steps (``frames_i = steps_i * r``): ``mel_outputs`` and ``decoder_outputs``
            ``(frames_i, num_mels)``, ``stop_token_prediction`` ``(frames_i,)`` (probabilities), ``alignments``
            ``(T_in_i, steps_i)``, with ``predict_linear`` ``linear_outputs`` ``(frames_i, num_freq)``, and
            ``stopped`` (bool: whether its stop rule fired; if not, ``steps_i`` is the batch's step count).
        """
        return tacotron2_synthesis.synthesize_batch(self, sequences, speaker_embeddings, max_iters, progress)


    # -- TF1 exchange ---------------------------------------------------------------------------------------

    @torch.jit.unused
    def _tf1_variables(self) -> dict[str, TF1Variable]:
        out: dict[str, TF1Variable] = {"inputs_embedding": TF1Variable(self.embedding.weight)}

        def add(prefix: str, module) -> None:
            for name, var in module._tf1_variables().items():
                out[f"{prefix}/{name}"] = var

        add("encoder_convolutions", self.encoder_convolutions)
        add("encoder_LSTM", self.encoder_lstm)
        for name, var in self.decoder._tf1_variables().items():  # "../memory_layer/kernel" is at the model scope
            out[name[3:] if name.startswith("../") else f"{self.decoder.tf1_scope}/{name}"] = var
        add("postnet_convolutions", self.postnet)
        add("postnet_projection", self.postnet_projection)
        if self.post_cbhg is not None:
            add("CBHG_postnet", self.post_cbhg)
            add("cbhg_linear_specs_projection", self.linear_projection)
        return out

    @torch.jit.unused
    def tf1_trainable_variables(self) -> dict[str, nn.Parameter]:
        """``{TF1 name: parameter}`` of the trainable variables (batch-norm moving statistics left out), by name
        relative to ``Tacotron_model/inference/``; the parameters are in torch's layout (``tf1_weights()`` gives TF1's).
        """
        return {k: v.tensor for k, v in self._tf1_trainable_bindings().items()}

    def _tf1_trainable_bindings(self) -> dict[str, TF1Variable]:
        return {k: v for k, v in self._tf1_variables().items()
                if isinstance(v.tensor, nn.Parameter) and v.tensor.requires_grad}

    @torch.jit.unused
    def regularized_parameters(self) -> dict[str, Tensor]:
        """The parameters ``add_loss`` regularises: trainable variables whose full TF1 name
        (``Tacotron_model/inference/<name>``) contains none of
        ``speechblocks.tacotron2_schema.REGULARIZATION_EXCLUDED``."""
        return {k: v for k, v in self.tf1_trainable_variables().items() if is_regularized(k)}

    @classmethod
    def from_tf1_checkpoint(cls, path: str | os.PathLike, hparams=None, use_ema: bool = False, *,
                            sync_batch_norm: bool = False, device=None, dtype=None, allow_nonfinite: bool = False,
                            **overrides) -> Tacotron2:
        """Builds the model from a TF1 Tacotron-2 checkpoint (read in numpy: no TensorFlow needed).

        The variables under ``Tacotron_model/inference/`` give every size (:func:`speechblocks.infer_hparams`);
        the rest (rates, stop rule, ``max_iters``, masking, clipping, loss settings) comes from ``hparams``, or,
        when ``hparams`` is None, from the preset ``"rtvc"`` if the checkpoint has a speaker embedding, else
        ``"rayhane"``. ``overrides`` apply last.

        Args:
            path: checkpoint prefix (``model.ckpt-1000``) or a directory with a ``checkpoint`` file.
            hparams: as for :class:`Tacotron2`; its sizes must agree with the checkpoint.
            use_ema: load the ``<name>/ExponentialMovingAverage`` shadows instead of the raw weights.
            sync_batch_norm: as for :class:`Tacotron2` (data-parallel training of the loaded model).
            device: factory keyword of the model.
            dtype: factory keyword of the model.
            allow_nonfinite: load variables holding NaN/inf (with a ``NonFiniteWeightsWarning``) instead of
                raising ``NonFiniteWeightsError``.
            **overrides: hparams by original name.

        Returns:
            the model in ``eval()`` mode with every TF1 variable loaded.

        Raises:
            ValueError: no model variable in the checkpoint; ``use_ema`` without shadows; given hparams (or
                overrides) that contradict the checkpoint's shapes (one message listing every mismatch);
                ``CheckpointError``: a truncated, corrupted or hostile checkpoint, validated before it is decoded
                it (one line: file, tensor, problem); ``NonFiniteWeightsError``: NaN/inf values.
            FileNotFoundError: no checkpoint at ``path`` (``CheckpointNotFoundError``).
        """
        from speechblocks.tf1_checkpoint import read_tf1_weights  # numpy: no TensorFlow needed

        weights = read_tf1_weights(path, MODEL_SCOPE, use_ema=use_ema, require_ema=use_ema,
                                   allow_nonfinite=allow_nonfinite)
        if not weights:
            raise ValueError(f"Tacotron2.from_tf1_checkpoint: checkpoint {os.fspath(path)!r} holds no variable under "
                             f"{MODEL_SCOPE!r}.")
        hp = checkpoint_hparams({k: tuple(np.shape(v)) for k, v in weights.items()}, hparams, overrides,
                                source=f"checkpoint {os.fspath(path)!r}")
        model = cls(hp, sync_batch_norm=sync_batch_norm, device=device, dtype=dtype)
        model.load_tf1_weights(weights)
        return model.eval()

    @classmethod
    def from_migrated(cls, path: str | os.PathLike, hparams=None, *, map_location: str | torch.device = "cpu",
                      sync_batch_norm: bool = False, **overrides) -> Tacotron2:
        """The whole model from a file of ``speechblocks migrate`` -- ``--to torch`` (``.pt``, read with
        ``weights_only=True``) or ``--to keras`` (``.weights.h5``, read with h5py; no TensorFlow needed).

        The file carries the hparams the migration resolved; ``hparams`` replaces them and ``overrides`` apply last
        (sizes must agree with the stored tensors; e.g. ``tacotron_dropout_rate=0.0`` for deterministic synthesis).
        ``sync_batch_norm`` as for :class:`Tacotron2` (data-parallel training of the loaded model).

        Returns:
            the model in ``eval()`` mode on ``map_location``.

        Raises:
            FileNotFoundError: no such file.
            ValueError: a file of blocks only (read it with ``torch_layers.load_migrated``), a damaged file, or
                hparams that contradict the tensors.
        """
        return load_migrated_model(path, hparams, overrides, map_location, cls=cls,
                                   model_kwargs=dict(sync_batch_norm=sync_batch_norm))

    @torch.jit.unused
    def tf1_loss_and_gradients(self, inputs: Tensor, input_lengths: Optional[Tensor], mel_targets: Tensor,
                               stop_token_targets: Tensor, targets_lengths: Optional[Tensor],
                               speaker_embeddings: Optional[Tensor] = None, linear_targets: Optional[Tensor] = None,
                               noise_masks=None) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """One training-mode pass, as a TF1 graph's ``add_loss`` and ``tf.gradients`` would compute it.

        Runs the model in ``train()`` (teacher-forced), :func:`~torch_layers.tacotron2_loss`, and autograd.
        The module's mode, its batch-norm moving statistics and the parameters' ``.grad`` are left as they were.

        Args:
            inputs, input_lengths, speaker_embeddings, noise_masks: as :meth:`forward`.
            mel_targets: ``(batch, T_out, num_mels)``, ``T_out`` a multiple of ``outputs_per_step``.
            stop_token_targets: ``(batch, T_out)``.
            targets_lengths: ``(batch,)`` integer lengths (needed when ``mask_decoder``).
            linear_targets: ``(batch, T_out, num_freq)`` (Rayhane with ``predict_linear``).

        Returns:
            ``(losses, gradients)``: ``{before_loss, after_loss, stop_token_loss, linear_loss,
            regularization_loss, loss}`` as Python floats, and ``{TF1 name relative to Tacotron_model/inference/:
            gradient of loss (numpy, TF1 layout)}`` for every trainable variable.
        """
        from .tacotron2_loss import tacotron2_loss

        def losses_fn():
            outputs = self(inputs, input_lengths, speaker_embeddings, mel_targets, None, noise_masks)
            return tacotron2_loss(self, outputs, mel_targets, stop_token_targets, targets_lengths, linear_targets)

        return tf1_training_gradients(self, self._tf1_trainable_bindings(), losses_fn)

    @torch.jit.unused
    def encoder_module(self) -> nn.Module:
        """The encoder as a module for ``torch.export`` / ONNX with dynamic batch and ``T_in``, sharing this model's
        parameters: :class:`Tacotron2Encoder`, ``(inputs, input_lengths[, speaker_embeddings]) -> memory``.

        Export: the whole model does not export (its decoder loop runs a data-dependent number of steps, its input
        checks read tensor values); export :meth:`encoder_module` and :meth:`decoder_step_module` and loop over
        the step in the caller. Both are meant for ``eval()`` (inference)."""
        return Tacotron2Encoder(self)

    @torch.jit.unused
    def decoder_step_module(self) -> nn.Module:
        """One decoder step as a module for ``torch.export`` / ONNX, sharing this model's parameters:
        :class:`~torch_layers.tacotron2_decoder.DecoderStep` (see :meth:`Tacotron2Decoder.step_module`)."""
        return self.decoder.step_module()

    def extra_repr(self) -> str:
        hp = self.hparams
        return (f"variant={hp.variant!r}, n_symbols={hp.n_symbols}, num_mels={hp.num_mels}, "
                f"outputs_per_step={hp.outputs_per_step}, predict_linear={hp.predict_linear}")
