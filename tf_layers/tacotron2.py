"""Keras ``Tacotron2``: the whole TF1 Tacotron-2 feature-prediction model (RTVC and Rayhane), number for number."""
from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from speechblocks.distributed import DEFAULT_LOSS_REDUCTION, check_loss_reduction, check_sync_batch_norm
from speechblocks.tacotron2_hparams import Tacotron2HParams, resolve_hparams
from speechblocks.tacotron2_schema import checkpoint_hparams

from ._validation import check_float_tensor, check_lengths
from .cbhg import CBHG
from .encoder_convolutions import EncoderConvolutions
from .encoder_rnn import EncoderRNN
from .frame_projection import FrameProjection
from .postnet import Postnet
from .tacotron2_decoder import Tacotron2Decoder
from .tacotron2_loss import tacotron2_loss
from .tacotron2_synthesis import infer, model_outputs
from .tf1_exchange import TF1Variable, TF1WeightsMixin

_MODEL_KWARGS = ("name", "dtype", "trainable")
_INPUT_KEYS = ("inputs", "input_lengths", "speaker_embeddings", "mel_targets", "max_iters", "noise_masks")


def _prefixed(prefix: str, variables: dict) -> dict:
    return {f"{prefix}/{k}": v for k, v in variables.items()}


@keras.saving.register_keras_serializable(package="speechblocks")
class Tacotron2(TF1WeightsMixin, keras.Model):
    """TF1 Tacotron-2 (Rayhane-mamah / Real-Time-Voice-Cloning synthesizer) as a Keras model.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.

    ``inputs_embedding`` -> :class:`EncoderConvolutions` -> :class:`EncoderRNN` -> (RTVC: the speaker embedding
    tiled over time and concatenated) -> :class:`Tacotron2Decoder` (location-sensitive attention, teacher-forced
    or free-running loop) -> :class:`Postnet` + ``postnet_projection`` residual -> (``predict_linear``:
    :class:`CBHG` + ``cbhg_linear_specs_projection``). Rayhane's ``clip_outputs`` clips the decoder, mel and
    linear outputs to the mel range (lower bound minus ``lower_bound_decay``). Variables are created at
    construction from the hparams; every one has its TF1 name (``tf1_weights()``).

    Prenet dropout stays on at inference, as in the original (``tacotron_dropout_rate=0`` for deterministic
    synthesis). ``training=True`` needs ``mel_targets`` (the original trains teacher-forced only); it gives
    batch-norm batch statistics, conv dropout, random zoneout, stop **logits** and no step cap.

    Args:
        hparams: preset name (``"rtvc"``, ``"rayhane"``), mapping or hparams object with the original names
            (``tacotron2_hparams``); ``None`` is RTVC. Unused names are ignored; bad values raise ValueError.
        n_symbols: rows of the character embedding (default 66, the original symbol table).
        seed: optional int seed of every dropout/zoneout draw.
        sync_batch_norm: bool (not an hparam of the original): under ``tf.distribute`` with several replicas, batch
            statistics of the **global** batch in every batch norm (encoder convolutions, postnet, CBHG; Keras
            ``BatchNormalization(synchronized=True)``); default False: each replica's own slice, as the original's
            multi-GPU towers. Bit-identical in one process; TF1 names unchanged.
        loss_reduction: ``"global"`` (default) or ``"per_replica"``: the ``reduction`` of :func:`tacotron2_loss` used
            by ``fit``/``evaluate`` (:meth:`compute_loss`) under ``tf.distribute``. ``"global"`` with
            ``sync_batch_norm=True``: a data-parallel step equals the single-process step on the global batch;
            ``"per_replica"`` with ``sync_batch_norm=False``: the original's towers (mean of the towers' losses).
        **overrides: hparams by original name (and ``name``/``dtype``/``trainable`` of ``keras.Model``).

    Call arguments:
        inputs: int ``(batch, T_in)`` symbol ids (or a dict holding every argument below, as ``fit`` passes it).
        input_lengths: int ``(batch,)``; ``None`` is full length.
        speaker_embeddings: float ``(batch, speaker_embedding_size)`` -- required exactly when the model has one.
        mel_targets: float ``(batch, T_out, num_mels)``: teacher forcing (``T_out >= r``); free running when None.
        max_iters: int overriding ``hparams.max_iters`` (caps decoding whenever not training).
        training: bool.
        noise_masks: optional dict of 0/1 keep-masks replacing random draws (exact cross-framework runs):
            ``"prenet"`` (list per layer ``(batch, steps, size)``), ``"encoder_convolutions"`` (list per layer
            ``(batch, T_in, channels)``), ``"encoder_LSTM"`` (``((fw_c, fw_h), (bw_c, bw_h))`` each
            ``(batch, T_in, units)``), ``"decoder_LSTM"`` (list per layer of ``(c_keep, h_keep)`` each
            ``(batch, steps, units)``), ``"postnet_convolutions"`` (list per layer ``(batch, steps * r, channels)``).

    Returns:
        dict: ``decoder_outputs`` ``(batch, steps * r, num_mels)``, ``mel_outputs`` (same), ``stop_token_prediction``
        ``(batch, steps * r)`` (logits in training, probabilities otherwise), ``alignments`` ``(batch, T_in, steps)``
        and, with ``predict_linear``, ``linear_outputs`` ``(batch, steps * r, num_freq)``.

    Masking: ``input_lengths`` masks the encoder RNN and the attention (``mask_encoder``); the convolutions and
    batch statistics see padding as in TF1; decoder padding is the loss's business (``mask_decoder``).

    Synthesis: an eager inference call ``model(inputs, ...)`` runs what :meth:`synthesize` runs (numpy out, optional
    per-step ``progress`` callback): the encoder and the post-net in cached ``tf.function`` s and the decoder loop
    :func:`tf_layers.decoding_plan.plan_decoding` names for the call -- in float32 on the CPU the native step
    (``SPEECHBLOCKS_NATIVE=0``: the compiled graph loop). A traced call (``fit``, ``evaluate``, ``predict`` -- Keras
    traces ``call`` in a ``tf.function`` -- a caller's ``tf.function``, the exports) builds the whole graph with the
    decoder's ``tf.while_loop``: the same numbers within float32 rounding. :meth:`synthesize_batch`: a list of id
    sequences decoded in one batched loop; numpy results per sentence, each equal to the sentence synthesized
    alone.

    Serving: :meth:`export_serving` writes free-running synthesis as a TensorFlow SavedModel (the decoder loop in the
    graph; reloads with ``tf.saved_model.load``, no speechblocks code needed). Not for XLA (``jit_compile``): see
    :class:`EncoderRNN` and :class:`Tacotron2Decoder`.

    Example:
    >>> model = Tacotron2("rtvc", tacotron_dropout_rate=0.0)
    >>> out = model(np.array([[10, 20, 30, 1]]), np.array([4]), speaker_embeddings=np.ones((1, 256), "float32"),
    ...             max_iters=3)
    >>> out["mel_outputs"].shape
    TensorShape([1, 6, 80])
    """

    def __init__(self, hparams=None, n_symbols: int | None = None, seed: int | None = None, *,
                 sync_batch_norm: bool = False, loss_reduction: str = DEFAULT_LOSS_REDUCTION, **overrides):
        model_kwargs = {k: overrides.pop(k) for k in _MODEL_KWARGS if k in overrides}
        super().__init__(**model_kwargs)
        self.hparams: Tacotron2HParams = resolve_hparams(hparams, n_symbols, **overrides)
        self.seed = seed
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, "Tacotron2")
        self.loss_reduction = check_loss_reduction(loss_reduction, "Tacotron2 (loss_reduction)")
        sync = self.sync_batch_norm
        hp = self.hparams
        policy = self.dtype_policy
        sub = (lambda i: None) if seed is None else (lambda i: int(seed) + 10 * i)  # noqa: E731
        self.embedding = keras.layers.Embedding(hp.n_symbols, hp.embedding_dim, embeddings_initializer="glorot_uniform",
                                                dtype=policy, name="inputs_embedding")
        self.encoder_convolutions = EncoderConvolutions(
            hp.enc_conv_kernel_size, hp.enc_conv_channels, hp.enc_conv_num_layers, hp.tacotron_dropout_rate, "relu",
            tf1_scope="encoder_convolutions", bn_position=hp.batch_norm_position, seed=sub(1), dtype=policy,
            name="encoder_convolutions", sync_batch_norm=sync)
        self.encoder_lstm = EncoderRNN(hp.encoder_lstm_units, hp.tacotron_zoneout_rate, tf1_scope="encoder_LSTM",
                                       seed=sub(2), dtype=policy, name="encoder_LSTM")
        self.decoder = Tacotron2Decoder(
            hp.num_mels, hp.outputs_per_step, hp.prenet_layers, hp.tacotron_dropout_rate, hp.decoder_layers,
            hp.decoder_lstm_units, hp.tacotron_zoneout_rate, hp.attention_dim, hp.attention_filters,
            hp.attention_kernel, hp.mask_encoder, hp.smoothing, hp.cumulative_weights, hp.max_iters, hp.stop_at_any,
            seed=sub(3), dtype=policy, name="decoder")
        self.postnet = Postnet(hp.postnet_kernel_size, hp.postnet_channels, hp.postnet_num_layers,
                               hp.tacotron_dropout_rate, "tanh", tf1_scope="postnet_convolutions",
                               bn_position=hp.batch_norm_position, seed=sub(4), dtype=policy,
                               name="postnet_convolutions", sync_batch_norm=sync)
        self.postnet_projection = FrameProjection(hp.num_mels, tf1_scope="postnet_projection", dtype=policy,
                                                  name="postnet_projection")
        self.post_cbhg = self.linear_projection = None
        if hp.predict_linear:
            self.post_cbhg = CBHG(hp.cbhg_kernels, hp.cbhg_conv_channels, hp.cbhg_pool_size,
                                  [hp.cbhg_projection, hp.num_mels], hp.cbhg_projection_kernel_size,
                                  hp.cbhg_highwaynet_layers, hp.cbhg_highway_units, hp.cbhg_rnn_units,
                                  tf1_scope="CBHG_postnet", bn_position=hp.batch_norm_position, dtype=policy,
                                  name="CBHG_postnet", sync_batch_norm=sync)
            self.linear_projection = FrameProjection(hp.num_freq, tf1_scope="cbhg_linear_specs_projection",
                                                     dtype=policy, name="cbhg_linear_specs_projection")
        self._build_all()

    # -- construction -------------------------------------------------------------------------
    def _build_all(self):
        hp = self.hparams
        self.embedding.build((None, None))
        self.encoder_convolutions.build((None, None, hp.embedding_dim))
        self.encoder_lstm.build((None, None, hp.enc_conv_channels))
        self.decoder.build_from_memory_size(hp.memory_size)
        self.postnet.build((None, None, hp.num_mels))
        self.postnet_projection.build((None, None, hp.postnet_channels))
        if self.post_cbhg is not None:
            self.post_cbhg.build((None, None, hp.num_mels))
            self.linear_projection.build((None, None, 2 * hp.cbhg_rnn_units))
        self.built = True

    def build(self, *args, **kwargs):  # every variable exists from the constructor on
        self.built = True

    def get_config(self):
        config = super().get_config()  # name, trainable, dtype
        config.update({"hparams": self.hparams.to_dict(), "n_symbols": self.hparams.n_symbols, "seed": self.seed,
                       "sync_batch_norm": self.sync_batch_norm, "loss_reduction": self.loss_reduction})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)

    # -- input checks -------------------------------------------------------------------------
    def _check_inputs(self, inputs, input_lengths, speaker_embeddings, mel_targets):
        hp = self.hparams
        block = "Tacotron2"
        inputs = tf.convert_to_tensor(inputs)
        if not inputs.dtype.is_integer:
            raise ValueError(f"{block}: argument `inputs` must be an integer tensor of symbol ids, shape (batch, "
                             f"T_in); got dtype {inputs.dtype.name}.")
        if inputs.shape.rank is not None and inputs.shape.rank != 2:
            raise ValueError(f"{block}: argument `inputs` must have shape (batch, T_in); got shape {inputs.shape}.")
        inputs = tf.cast(inputs, tf.int32)
        eager = tf.executing_eagerly()
        if eager:
            ids = inputs.numpy()
            if ids.size and (ids.min() < 0 or ids.max() >= hp.n_symbols):
                bad = ids[(ids < 0) | (ids >= hp.n_symbols)]
                raise ValueError(f"{block}: argument `inputs` holds ids outside [0, n_symbols={hp.n_symbols}): "
                                 f"{sorted(set(bad.tolist()))[:10]}.")
            if ids.shape[1] == 0:
                raise ValueError(f"{block}: argument `inputs` must hold at least one symbol per row; got shape "
                                 f"{ids.shape}.")
        else:
            inputs = _assert_ids(inputs, hp.n_symbols)
        if input_lengths is not None:
            input_lengths = tf.cast(check_lengths(input_lengths, "input_lengths", block, batch_dim=inputs.shape[0]),
                                    tf.int32)
            if eager:
                lens, t = input_lengths.numpy(), int(inputs.shape[1])
                if lens.size and (lens.min() < 1 or lens.max() > t):
                    raise ValueError(f"{block}: argument `input_lengths` must lie in [1, T_in={t}]; got "
                                     f"{lens.tolist()}.")
                if lens.shape[0] != inputs.shape[0]:
                    raise ValueError(f"{block}: argument `input_lengths` must have shape (batch={inputs.shape[0]},); "
                                     f"got {lens.shape}.")
            else:
                input_lengths = _assert_lengths(input_lengths, tf.shape(inputs)[1])
        e = hp.speaker_embedding_size
        if e:
            if speaker_embeddings is None:
                raise ValueError(f"{block}: argument `speaker_embeddings` (batch, {e}) is required: this model "
                                 f"concatenates a {e}-d speaker embedding to the encoder outputs (RTVC).")
            speaker_embeddings = tf.convert_to_tensor(speaker_embeddings)
            check_float_tensor(speaker_embeddings, "speaker_embeddings", block, rank=2, last_dim=e,
                               shape_doc=f"(batch, {e})")
        elif speaker_embeddings is not None:
            raise ValueError(f"{block}: argument `speaker_embeddings` given, but this model has no speaker embedding "
                             f"(speaker_embedding_size is None; its memory is the encoder outputs only).")
        if mel_targets is not None:
            mel_targets = tf.convert_to_tensor(mel_targets)
            check_float_tensor(mel_targets, "mel_targets", block, rank=3, last_dim=hp.num_mels,
                               shape_doc=f"(batch, T_out, {hp.num_mels})")
        return inputs, input_lengths, speaker_embeddings, mel_targets

    # -- forward ------------------------------------------------------------------------------
    def call(self, inputs, input_lengths=None, speaker_embeddings=None, mel_targets=None, max_iters=None,
             training=None, noise_masks=None):
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - set(_INPUT_KEYS))
            if unknown:
                raise ValueError(f"Tacotron2: the input dict has unknown keys {unknown}; known: {list(_INPUT_KEYS)}.")
            given = dict(inputs)
            inputs = given.pop("inputs")
            input_lengths = given.get("input_lengths", input_lengths)
            speaker_embeddings = given.get("speaker_embeddings", speaker_embeddings)
            mel_targets = given.get("mel_targets", mel_targets)
            max_iters = given.get("max_iters", max_iters)
            noise_masks = given.get("noise_masks", noise_masks)
        inputs, input_lengths, speaker_embeddings, mel_targets = self._check_inputs(
            inputs, input_lengths, speaker_embeddings, mel_targets)
        noise = dict(noise_masks or {})
        unknown = sorted(set(noise) - {"prenet", "encoder_convolutions", "encoder_LSTM", "decoder_LSTM",
                                       "postnet_convolutions"})
        if unknown:
            raise ValueError(f"Tacotron2: argument `noise_masks` has unknown keys {unknown}.")
        training = bool(training)
        if tf.executing_eagerly() and not training:  # what synthesize runs: the decoder's planned loop
            return infer(self, inputs, input_lengths, speaker_embeddings, mel_targets, max_iters, noise)
        memory = self._memory(inputs, input_lengths, speaker_embeddings, training, noise)
        decoder_noise = {k: noise[k] for k in ("prenet", "decoder_LSTM") if k in noise} or None
        frames, stop, alignments = self.decoder(memory, input_lengths, mel_targets=mel_targets, max_iters=max_iters,
                                                training=training, noise_masks=decoder_noise)
        return model_outputs(frames, stop, alignments,
                             self._postprocess(frames, training, noise.get("postnet_convolutions")))

    def _memory(self, inputs, input_lengths, speaker_embeddings, training, noise):
        """The decoder's memory ``(batch, T_in, memory_size)``: embedding, encoder (+ the tiled speaker embedding)."""
        x = self.embedding(inputs)
        x = self.encoder_convolutions(x, training=training, dropout_masks=noise.get("encoder_convolutions"))
        encoder_outputs = self.encoder_lstm(x, input_lengths, training=training,
                                            zoneout_masks=noise.get("encoder_LSTM"))
        memory = encoder_outputs
        if self.hparams.speaker_embedding_size:
            spk = tf.cast(speaker_embeddings, encoder_outputs.dtype)
            memory = tf.concat([encoder_outputs, tf.tile(spk[:, None, :], tf.stack([1, tf.shape(memory)[1], 1]))], -1)
        return memory

    def _memory_each(self, inputs, input_lengths, speaker_embeddings):
        """Inference memory of a padded batch whose every row equals the row's sentence encoded alone (up to float
        rounding): each encoder convolution reads zeros past the row's length, as the ``'same'`` padding of the
        sentence alone does (:meth:`_memory` lets the convolutions read the padding, as the original batch does),
        the LSTM honours the lengths, and the memory is zero past each length (the rows :meth:`synthesize_batch`
        padded the sentences' memories with)."""
        x = self.embedding(inputs)
        inside = tf.sequence_mask(input_lengths, tf.shape(inputs)[1])[:, :, None]
        for block in self.encoder_convolutions.blocks:
            x = block(tf.where(inside, x, tf.zeros_like(x)), training=False)
        memory = self.encoder_lstm(x, input_lengths, training=False)
        if self.hparams.speaker_embedding_size:
            spk = tf.cast(speaker_embeddings, memory.dtype)
            memory = tf.concat([memory, tf.tile(spk[:, None, :], tf.stack([1, tf.shape(memory)[1], 1]))], -1)
        return tf.where(inside, memory, tf.zeros_like(memory))

    def _postprocess(self, frames, training=False, postnet_masks=None):
        """Decoder frames ``(batch, steps, r * num_mels)`` -> ``decoder_outputs``, ``mel_outputs`` (postnet residual)
        and, with ``predict_linear``, ``linear_outputs``."""
        decoder_outputs = self._clip(tf.reshape(frames, tf.stack([tf.shape(frames)[0], -1, self.hparams.num_mels])))
        residual = self.postnet(decoder_outputs, training=training, dropout_masks=postnet_masks)
        mel_outputs = self._clip(decoder_outputs + self.postnet_projection(residual))
        out = dict(decoder_outputs=decoder_outputs, mel_outputs=mel_outputs)
        if self.post_cbhg is not None:
            out["linear_outputs"] = self._clip(self.linear_projection(self.post_cbhg(mel_outputs, None,
                                                                                      training=training)))
        return out

    def _clip(self, x):
        hp = self.hparams
        if not hp.clip_outputs:
            return x
        lo, hi = hp.output_range
        return tf.minimum(tf.maximum(x, tf.cast(lo - hp.lower_bound_decay, x.dtype)), tf.cast(hi, x.dtype))

    # -- synthesis and exports (tf_layers/tacotron2_synthesis.py, tf_layers/tacotron2_export.py) ----------
    def synthesize(self, inputs, input_lengths=None, speaker_embeddings=None, max_iters=None, *, mel_targets=None,
                   progress=None):
        """Free-running (or GTA, with ``mel_targets``) inference through one cached ``tf.function`` per input
        structure (unknown batch and time): the documented fast path. Free running in float32 on the CPU without
        ``progress``, the decoder runs the native step between the cached encoder and post-net functions (the
        batch-1 step for one sentence, the batched step for more: :mod:`tf_layers._native`; the same numbers up to
        float32 rounding; ``SPEECHBLOCKS_NATIVE=0`` turns it off).

        Args:
            inputs: int ``(batch, T_in)`` symbol ids (pad id 0 past ``input_lengths``).
            input_lengths: int ``(batch,)``; ``None`` is full length.
            speaker_embeddings: float ``(batch, speaker_embedding_size)``, exactly when the model has one.
            max_iters: int ``>= 1`` overriding ``hparams.max_iters``.
            mel_targets: float ``(batch, T_out, num_mels)``: GTA synthesis (teacher forced) instead of free running.
            progress: optional callable ``progress(step: int, stop_probability: float)``, called after every
                free-running decoder step with the number of steps done and the step's largest stop probability
                (over the batch and the ``r`` frames; the original rule stops once it rounds to 1 for every entry).
                The native step's loop calls it after every step; where the graph runs instead, it runs inside
                the graph (a ``tf.numpy_function`` in the decoder's while loop, in step order) of the decoder's
                compiled loop traced with a report. The outputs are the same as without it (bitwise with the
                prenet dropout off). An exception it raises ends the synthesis and propagates. Not with
                ``mel_targets``.

        Returns:
            dict of numpy arrays: the model's outputs (see :class:`Tacotron2`), stop probabilities.
        """
        from .tacotron2_synthesis import synthesize

        return synthesize(self, inputs, input_lengths, speaker_embeddings, max_iters, mel_targets, progress)

    def synthesize_batch(self, sequences, speaker_embeddings=None, max_iters=None, *, progress=None) -> list[dict]:
        """Synthesizes several sentences with one batched decoder loop; each result equals the sentence
        synthesized alone (:meth:`synthesize` of that one sentence), up to float rounding.

        The id sequences are padded with the pad id 0 into one batch. The decoder loop runs the batch until every
        sentence's own stop rule has fired at some step (or ``max_iters`` steps): sentence ``i`` stops at the first
        step at which its stop probability rounds to 1 (``stop_at_any``: at any of the ``r`` frames, else at all of
        them), that step's frames included -- where it would stop alone. (The original's rule for a batch, which
        :meth:`synthesize` keeps, stops only at a step at which every entry's rule fires together, so it may run
        much longer; the kept frames would be the same.) A sentence leaves the loop at its stop: the steps after it
        run the sentences still going only (their decoder state and attention memory gathered at the steps at which
        some sentence stops). Rows never interact in the decoder: the attention masks
        the memory past each sentence's length (``mask_encoder``, on in both presets). The encoder runs once for
        the batch, each convolution reading zeros past each sentence's length (what the sentence alone reads: the
        original batch would let them read the padding), the memory zero past each length. The postnet (and CBHG)
        runs per sentence on its own frames (batched, it would see the padding and cost the padded frames' work:
        it is compute-bound). In float32 on the CPU the loop is the native batched step (:mod:`tf_layers._native`;
        ``SPEECHBLOCKS_NATIVE=0``: the graph loop).

        Args:
            sequences: list of 1-D integer symbol-id sequences (lists or numpy arrays), each non-empty.
            speaker_embeddings: float ``(len(sequences), speaker_embedding_size)``, or one ``(speaker_embedding_size,)``
                for every sentence; exactly when the model has a speaker embedding.
            max_iters: int ``>= 1`` overriding ``hparams.max_iters``: the step cap of the batch.
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
        from .tacotron2_synthesis import synthesize_batch

        return synthesize_batch(self, sequences, speaker_embeddings, max_iters, progress)

    def export_serving(self, filepath, max_iters: int | None = None, verbose: bool = False) -> str:
        """Exports free-running synthesis as a TensorFlow SavedModel for serving (Keras ``ExportArchive``).

        The endpoint ``serve`` (also the ``serving_default`` signature) takes ``inputs`` int32 ``(batch, T_in)``,
        ``input_lengths`` int32 ``(batch,)`` and, exactly when the model has one, ``speaker_embeddings`` float32
        ``(batch, speaker_embedding_size)`` -- batch and time unknown -- and returns a dict of ``mel_outputs``
        ``(batch, steps * r, num_mels)``, ``alignments`` ``(batch, T_in, steps)`` and ``stop_token_prediction``
        ``(batch, steps * r)`` (probabilities): the model's inference call, the whole decoder loop (``tf.while_loop``
        with the original stop rule) inside the graph. The reloaded model needs TensorFlow only::

            served = tf.saved_model.load(path)
            out = served.serve(inputs=ids, input_lengths=lengths, speaker_embeddings=spk)

        The prenet dropout is always on, as in the original: export a model built with
        ``tacotron_dropout_rate=0`` for deterministic synthesis (the graph then equals :meth:`synthesize`).

        Args:
            filepath: the SavedModel directory to write.
            max_iters: decoder step cap baked into the graph (``>= 1``); default ``hparams.max_iters``.
            verbose: print Keras' export summary.

        Returns:
            ``filepath``.
        """
        from .tacotron2_export import export_serving

        return export_serving(self, filepath, max_iters, verbose)

    def export_litert(self, directory) -> str:
        """Exports synthesis for LiteRT with TFLite builtin ops only: ``encoder.tflite``, ``decoder_step.tflite``,
        ``postnet.tflite`` and ``manifest.json`` in ``directory`` (created if missing; the files written all or
        nothing). Run them with ``speechblocks.litert.LiteRTTacotron2(directory).synthesize(ids, lengths,
        speaker_embeddings, max_iters=...)``: a numpy host loop over the ``ai_edge_litert`` interpreter with the
        original stop rule, no TensorFlow needed (see :mod:`tf_layers.tacotron2_litert`).

        The decoder step is :meth:`Tacotron2Decoder.step`; the encoder runs :class:`EncoderRNN`'s masked formulation.
        The prenet dropout (always on in the original) becomes keep-mask inputs of the step model, drawn by the host
        loop (seedable) or given by the caller; ``tacotron_dropout_rate=0`` gives deterministic synthesis equal to
        :meth:`synthesize`. float32 models without ``predict_linear`` only (the CBHG's GRU loop is no builtin).

        Returns:
            ``directory``.
        """
        from .tacotron2_export import export_litert

        return export_litert(self, directory)

    # -- training -----------------------------------------------------------------------------
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The original ``add_loss`` for ``fit``: ``y`` is a dict with ``mel_targets``, ``stop_token_targets``,
        ``targets_lengths`` (and ``linear_targets`` for Rayhane's ``predict_linear``). ``evaluate`` runs the
        teacher-forced inference pass (GTA, ``max_iters`` caps it) and recovers the stop logits from the
        probabilities (exact up to the 1e-7 clipping of saturated probabilities). Under ``tf.distribute`` the loss is
        each replica's share by ``loss_reduction`` (see :func:`tacotron2_loss`), as ``fit`` sums the gradients."""
        if not isinstance(y, dict):
            raise ValueError("Tacotron2.fit: targets `y` must be a dict with keys 'mel_targets', 'stop_token_targets', "
                             "'targets_lengths' (and 'linear_targets' for Rayhane's predict_linear).")
        if not training:  # evaluate(): inference outputs carry stop probabilities; the loss takes logits
            p = tf.clip_by_value(tf.cast(y_pred["stop_token_prediction"], tf.float32), 1e-7, 1 - 1e-7)
            y_pred = dict(y_pred, stop_token_prediction=tf.math.log(p) - tf.math.log1p(-p))
        losses = tacotron2_loss(self, y_pred, y["mel_targets"], y["stop_token_targets"], y.get("targets_lengths"),
                                y.get("linear_targets"), reduction=self.loss_reduction)
        return losses["loss"]

    def tf1_loss_and_gradients(self, inputs, input_lengths, mel_targets, stop_token_targets, targets_lengths,
                               speaker_embeddings=None, linear_targets=None, noise_masks=None):
        """One training-mode pass: ``(losses, gradients)`` -- python floats of :func:`tacotron2_loss`, and the gradient
        of ``loss`` for every trainable variable keyed by its TF1 name (relative to ``Tacotron_model/inference/``), in
        TF1 layout: what the TF1 graph's ``tf.gradients(loss, tf.trainable_variables())`` gives."""
        variables = self.tf1_trainable_variables()
        self._check_inputs(inputs, input_lengths, speaker_embeddings, mel_targets)  # eager messages first
        fn = self.__dict__.get("_tf1_loss_and_gradients_fn")
        if fn is None:
            def loss_and_grads(*args):
                with tf.GradientTape() as tape:
                    out = self(*args[:4], training=True, noise_masks=args[6])
                    losses = tacotron2_loss(self, out, args[3], args[4], args[5], args[7])
                return losses, tape.gradient(losses["loss"], list(self.tf1_trainable_variables().values()))

            # the forward pass and its gradient in one graph (a gradient taped eagerly around the compiled decoder
            # loop runs TF's while-loop gradient as a separate function, which can fail with AlreadyExistsError on
            # its AddN temporaries when called again in the same process); made once per model, so a second call
            # with inputs of the same structure (a finite-difference check, a training script) does not re-trace
            fn = tf.function(loss_and_grads, reduce_retracing=True)
            object.__setattr__(self, "_tf1_loss_and_gradients_fn", fn)
        as_tensor = lambda a: None if a is None else tf.convert_to_tensor(a)  # noqa: E731
        losses, grads = fn(*(as_tensor(a) for a in (inputs, input_lengths, speaker_embeddings, mel_targets,
                                                     stop_token_targets, targets_lengths)),
                           None if noise_masks is None else tf.nest.map_structure(tf.convert_to_tensor, noise_masks),
                           as_tensor(linear_targets))
        spec = self._tf1_variables()
        out_grads = {}
        for (name, v), g in zip(variables.items(), grads):
            g = np.zeros(v.shape, np.float32) if g is None else np.asarray(tf.convert_to_tensor(g))
            conv = spec[name].to_tf1
            out_grads[name] = conv(g) if conv is not None else g
        return {k: float(v) for k, v in losses.items()}, out_grads

    def tf1_trainable_variables(self) -> dict:
        """``{TF1 name: keras.Variable}`` of the trainable variables (batch-norm moving statistics left out), by name
        relative to ``Tacotron_model/inference/``; the variables are in Keras' layout (``tf1_weights()`` gives TF1's).
        """
        return {k: v.variable for k, v in self._tf1_variables().items() if v.variable.trainable}

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_describe(self) -> str:
        return f"Tacotron2(name={self.name!r})"

    @property
    def tf1_scope(self) -> str:
        return "Tacotron_model/inference"

    def _tf1_variables(self):
        out = {"inputs_embedding": TF1Variable(self.embedding.embeddings)}
        out.update(_prefixed("encoder_convolutions", self.encoder_convolutions._tf1_variables()))
        out.update(_prefixed("encoder_LSTM", self.encoder_lstm._tf1_variables()))
        for name, var in self.decoder._tf1_variables().items():
            out[name[3:] if name.startswith("../") else f"decoder/{name}"] = var
        out.update(_prefixed("postnet_convolutions", self.postnet._tf1_variables()))
        out.update(_prefixed("postnet_projection", self.postnet_projection._tf1_variables()))
        if self.post_cbhg is not None:
            out.update(_prefixed("CBHG_postnet", self.post_cbhg._tf1_variables()))
            out.update(_prefixed("cbhg_linear_specs_projection", self.linear_projection._tf1_variables()))
        return out

    @classmethod
    def from_tf1_checkpoint(cls, path, hparams=None, use_ema: bool = False, *, sync_batch_norm: bool = False,
                            loss_reduction: str = DEFAULT_LOSS_REDUCTION, allow_nonfinite: bool = False,
                            **overrides) -> Tacotron2:
        """Builds the model a TF1 checkpoint holds and loads every variable of ``Tacotron_model/inference/``.

        The shapes give ``n_symbols``, every size, ``outputs_per_step``, the speaker embedding size and
        ``predict_linear`` (see ``speechblocks.tacotron2_schema.INFERABLE``); the rest (rates, stop rule,
        ``max_iters``, masking, smoothing, cumulative weights, batch-norm position, clipping, loss settings) come
        from ``hparams`` -- by default the RTVC preset for a checkpoint with a speaker embedding, else Rayhane's --
        and ``overrides``. ``sync_batch_norm`` and ``loss_reduction`` as for :class:`Tacotron2` (data-parallel
        training of the loaded model). The checkpoint is validated, then decoded in numpy
        (``speechblocks.tf1_checkpoint.read_tf1_weights``); variables holding NaN/inf are refused unless
        ``allow_nonfinite`` (then a ``NonFiniteWeightsWarning``); float16/float64 ones are cast to float32.

        Raises:
            ValueError: ``hparams``/``overrides`` that contradict the shapes (one message lists every mismatch),
                a checkpoint without a Tacotron-2 model; ``CheckpointError`` (a ``ValueError``): a truncated,
                corrupted or hostile checkpoint (one line: file, tensor, problem), ``NonFiniteWeightsError``.
            FileNotFoundError: no checkpoint at ``path`` (``CheckpointNotFoundError``).
        """
        from speechblocks.tf1_checkpoint import read_tf1_weights  # numpy: TensorFlow's reader is not needed

        weights = read_tf1_weights(path, "Tacotron_model/inference", use_ema=use_ema, require_ema=use_ema,
                                   allow_nonfinite=allow_nonfinite)
        if not weights:
            raise ValueError(f"TF1 checkpoint {os.fspath(path)!r} holds no variable under 'Tacotron_model/inference/'.")
        hp = checkpoint_hparams({k: tuple(v.shape) for k, v in weights.items()}, hparams, overrides,
                                source=f"TF1 checkpoint {os.fspath(path)!r}")
        model = cls(hp, sync_batch_norm=sync_batch_norm, loss_reduction=loss_reduction)
        model.load_tf1_weights(weights)
        return model

    @classmethod
    def from_migrated(cls, path, hparams=None, *, sync_batch_norm: bool = False,
                      loss_reduction: str = DEFAULT_LOSS_REDUCTION, **overrides) -> Tacotron2:
        """The whole model from a file of ``speechblocks migrate CKPT --to keras OUT`` (``.weights.h5``).

        The file carries the hparams the migration resolved; ``hparams`` replaces them and ``overrides`` apply last
        (sizes must agree with the stored tensors; e.g. ``tacotron_dropout_rate=0.0`` for deterministic synthesis).
        ``sync_batch_norm`` and ``loss_reduction`` as for :class:`Tacotron2`.
        A torch ``.pt`` file cannot be read here: the error names ``torch_layers.Tacotron2.from_migrated``.

        Raises:
            FileNotFoundError: no such file.
            ValueError: a torch file, a file of blocks only (read it with ``tf_layers.checkpoint.load_migrated``),
                a damaged file, or hparams that contradict the tensors.
        """
        from speechblocks.migration.migrated_file import model_from_keras_file

        return model_from_keras_file(path, cls, hparams, overrides,
                                     model_kwargs=dict(sync_batch_norm=sync_batch_norm, loss_reduction=loss_reduction))


def _assert_ids(inputs, n_symbols):
    with tf.control_dependencies([
            tf.debugging.assert_non_negative(inputs, message="Tacotron2: argument `inputs` holds negative ids"),
            tf.debugging.assert_less(inputs, n_symbols,
                                     message=f"Tacotron2: argument `inputs` holds ids >= n_symbols={n_symbols}")]):
        return tf.identity(inputs)


def _assert_lengths(lengths, max_time):
    with tf.control_dependencies([
            tf.debugging.assert_positive(lengths, message="Tacotron2: argument `input_lengths` must be >= 1"),
            tf.debugging.assert_less_equal(lengths, max_time,
                                           message="Tacotron2: argument `input_lengths` exceeds the time axis "
                                                   "of `inputs`")]):
        return tf.identity(lengths)
