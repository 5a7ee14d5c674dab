"""Keras ``SpeakerEncoder``: twin of the torch GE2E speaker encoder, with torch state-dict exchange.

Torch state-dict exchange: :class:`tf_layers.torch_exchange.TorchStateMixin`.
"""
from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from speechblocks.speaker_encoder import check_speaker_encoder_arguments, encoder_checkpoint_state, ge2e_eer
from speechblocks.state_dict import one_line
from speechblocks.torch_file import read_torch_file

from ._validation import check_float_tensor
from .torch_exchange import TorchExchange, TorchStateMixin

__all__ = ["SpeakerEncoder"]


def _stat_dtype(dtype):
    """float64 stays float64; float16/bfloat16/float32 compute in float32."""
    return tf.float64 if tf.as_dtype(dtype) == tf.float64 else tf.float32


def _l2_normalise(x, eps: float | None):
    """``x / (||x|| + eps)`` over the last axis, computed in float32 (float64 for float64), in ``x``'s dtype."""
    x32 = tf.cast(x, _stat_dtype(x.dtype))
    norm = tf.norm(x32, axis=-1, keepdims=True)
    if eps is not None:
        norm = norm + eps
    return tf.cast(x32 / norm, x.dtype)


@keras.saving.register_keras_serializable(package="speechblocks")
class SpeakerEncoder(TorchStateMixin, keras.layers.Layer):
    """GE2E speaker encoder (Real-Time-Voice-Cloning), the Keras twin of ``torch_layers.SpeakerEncoder``.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    ``model_num_layers`` stacked LSTMs over mel frames; the last layer's final hidden state goes
    through a dense layer + ReLU and is L2-normalised (``e / (||e|| + 1e-5)``). ``similarity_matrix``
    and ``loss`` are GE2E's (inclusive centroids for other speakers, exclusive for the own speaker,
    ``w * cos + b`` with ``w = 10``, ``b = -5`` initially, mean softmax cross-entropy).

    Torch exchange (``torch_state_dict`` / ``load_torch_state_dict``) uses the torch keys ``lstm.*``,
    ``linear.*``, ``similarity_weight``, ``similarity_bias``. Keras' LSTM gate order (i, f, c, o) equals
    torch's (i, f, g, o), so kernels are transposes. Torch keeps two LSTM biases (``bias_ih``,
    ``bias_hh``) that are only ever added: the Keras bias stores their **sum**; on export ``bias_ih_l{k}``
    carries the sum and ``bias_hh_l{k}`` is zero (same outputs; a torch->Keras->torch round trip keeps
    the outputs, not the split).

    Args:
        mel_n_channels: mel channels per frame.
        model_hidden_size: LSTM units.
        model_num_layers: LSTM layers.
        model_embedding_size: embedding size.
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        utterances: float tensor ``(batch, frames, mel_n_channels)``.
        training: unused (no dropout); accepted for the Keras contract.

    Returns:
        ``(batch, model_embedding_size)`` L2-normalised embeddings (in the compute dtype; the
        normalisation is done in float32).

    Masking: not mask-aware; every frame is used (utterances of a batch share a length, as upstream).

    Deployment: SavedModel and XLA. LiteRT conversion needs ``SELECT_TF_OPS`` (the LSTM loop's TensorList ops with
    an unknown batch): the converted model runs only in an interpreter with the flex delegate (TensorFlow
    kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> enc = SpeakerEncoder(mel_n_channels=40)
    >>> enc(tf.zeros((3, 50, 40))).shape
    TensorShape([3, 256])
    """

    def __init__(self, mel_n_channels: int = 40, model_hidden_size: int = 256, model_num_layers: int = 3,
                 model_embedding_size: int = 256, **kwargs):
        super().__init__(**kwargs)
        check_speaker_encoder_arguments(mel_n_channels, model_hidden_size, model_num_layers, model_embedding_size)
        self.mel_n_channels = int(mel_n_channels)
        self.model_hidden_size = int(model_hidden_size)
        self.model_num_layers = int(model_num_layers)
        self.model_embedding_size = int(model_embedding_size)
        self.lstms = [
            keras.layers.LSTM(self.model_hidden_size, return_sequences=k < self.model_num_layers - 1,
                              dtype=self.dtype_policy, name=f"lstm_{k}")
            for k in range(self.model_num_layers)
        ]
        self.linear = keras.layers.Dense(self.model_embedding_size, activation="relu", dtype=self.dtype_policy,
                                         name="linear")
        self._shape_doc = f"(batch, frames, {self.mel_n_channels})"

    def build(self, input_shape=None):
        shape = (None, None, self.mel_n_channels)
        for lstm in self.lstms:
            lstm.build(shape)
            shape = (None, None, self.model_hidden_size)
        self.linear.build((None, self.model_hidden_size))
        self.similarity_weight = self.add_weight(shape=(1,), initializer=keras.initializers.Constant(10.0),
                                                 name="similarity_weight")
        self.similarity_bias = self.add_weight(shape=(1,), initializer=keras.initializers.Constant(-5.0),
                                               name="similarity_bias")

    def call(self, utterances, training=None):
        check_float_tensor(utterances, "utterances", "SpeakerEncoder", rank=3, last_dim=self.mel_n_channels,
                           shape_doc=self._shape_doc)
        x = utterances
        for lstm in self.lstms:
            x = lstm(x, training=training)
        return _l2_normalise(self.linear(x), 1e-5)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.model_embedding_size)

    def get_config(self):
        config = super().get_config()
        config.update(mel_n_channels=self.mel_n_channels, model_hidden_size=self.model_hidden_size,
                      model_num_layers=self.model_num_layers, model_embedding_size=self.model_embedding_size)
        return config

    # -- a recording's embedding -----------------------------------------------------------------
    def embed_wav(self, wav_or_path, source_sr: int | None = None, using_partials: bool = True,
                  return_partials: bool = False, preprocess: bool = True, partial_utterance_n_frames: int = 160,
                  min_pad_coverage: float = 0.75, overlap: float = 0.5):
        """Embeds a recording, as RTVC's ``embed_utterance(preprocess_wav(wav_or_path, source_sr))``.

        :func:`speechblocks.audio.speaker.embed_speaker_wav` with this layer as the network (eager, inference):
        preprocessing (16 kHz, -30 dBFS, long silences cut), the waveform zero-padded to the last 1.6 s partial's
        end, its power mel, the partials embedded in one batch, the mean of the partial embeddings L2-normalised.
        The same pipeline as ``torch_layers.SpeakerEncoder.embed_wav``. Needs ``mel_n_channels == 40``.

        Args:
            wav_or_path: an audio file (what soundfile reads) or a float waveform ``(samples,)``.
            source_sr: the waveform's sampling rate (``None``: 16 kHz); ignored for a file.
            using_partials: average 1.6 s partials (default) or embed the whole mel at once.
            return_partials: also return the partial embeddings and the waveform slices.
            preprocess: ``False``: ``wav_or_path`` is a waveform already preprocessed at 16 kHz.
            partial_utterance_n_frames: frames of a partial utterance.
            min_pad_coverage: minimum covered fraction of the last partial.
            overlap: overlap of consecutive partials.

        Returns:
            float32 **numpy** embedding ``(model_embedding_size,)`` (as the original and the torch twin); with
            ``return_partials``, ``(embedding, partials (n_partials, model_embedding_size), wav_slices)``
            (``(embedding, None, None)`` without ``using_partials``).

        Raises:
            ValueError: one line naming the file or argument (not audio, empty, silent, shorter than one mel window,
                NaN, a ``source_sr`` that is no positive int, no speech found), or ``mel_n_channels != 40``.
        """
        from speechblocks.audio.speaker import SPEAKER_N_MELS, embed_speaker_wav

        if self.mel_n_channels != SPEAKER_N_MELS:
            raise ValueError(f"SpeakerEncoder.embed_wav: needs mel_n_channels == {SPEAKER_N_MELS} (the encoder's "
                             f"mel); this encoder has {self.mel_n_channels}.")

        def embed_frames(frames: np.ndarray) -> np.ndarray:
            return np.asarray(keras.ops.convert_to_numpy(self(tf.convert_to_tensor(frames), training=False)),
                              dtype=np.float32)

        return embed_speaker_wav(embed_frames, wav_or_path, source_sr, using_partials, return_partials, preprocess,
                                 partial_utterance_n_frames, min_pad_coverage, overlap)

    # -- GE2E ---------------------------------------------------------------------------------
    def similarity_matrix(self, embeds):
        """GE2E similarity matrix, scaled: ``w * cos + b`` (computed in float32, or float64 for float64 input).

        Args:
            embeds: ``(speakers_per_batch, utterances_per_speaker, embedding_size)``.

        Returns:
            float32 (float64) ``(speakers_per_batch, utterances_per_speaker, speakers_per_batch)``; entry ``[j, i, k]``
            compares utterance ``i`` of speaker ``j`` with speaker ``k``'s centroid (exclusive when
            ``k == j``).
        """
        embeds = tf.convert_to_tensor(embeds)
        check_float_tensor(embeds, "embeds", "SpeakerEncoder", rank=3,
                           shape_doc="(speakers_per_batch, utterances_per_speaker, embedding_size)")
        n_utt_static = embeds.shape[1]
        if n_utt_static is not None and n_utt_static < 2:
            raise ValueError("SpeakerEncoder: argument `embeds` needs >= 2 utterances per speaker (exclusive "
                             "centroids), expected shape (speakers_per_batch, utterances_per_speaker, "
                             f"embedding_size); got shape {embeds.shape}.")
        if not self.built:
            self.build()
        dt = _stat_dtype(embeds.dtype)
        e = tf.cast(embeds, dt)
        n_spk = tf.shape(e)[0]
        n_utt = tf.cast(tf.shape(e)[1], dt)
        incl = _l2_normalise(tf.reduce_mean(e, axis=1), 1e-5)  # (S, D)
        excl = _l2_normalise((tf.reduce_sum(e, axis=1, keepdims=True) - e) / (n_utt - 1.0), 1e-5)  # (S, U, D)
        cross = tf.einsum("sud,kd->suk", e, incl)
        own = tf.reduce_sum(e * excl, axis=2)
        eye = tf.cast(tf.eye(n_spk), tf.bool)[:, tf.newaxis, :]
        sim = tf.where(eye, own[:, :, tf.newaxis], cross)
        w = tf.cast(keras.ops.convert_to_tensor(self.similarity_weight), dt)
        b = tf.cast(keras.ops.convert_to_tensor(self.similarity_bias), dt)
        return sim * w + b

    def loss(self, embeds, compute_eer: bool = False):
        """GE2E softmax loss (mean cross-entropy of each utterance against its own speaker).

        Args:
            embeds: ``(speakers_per_batch, utterances_per_speaker, embedding_size)``.
            compute_eer: also compute the equal error rate (eager only; scikit-learn + scipy, as the
                torch module). Off by default here so the loss works inside ``tf.function``.

        Returns:
            ``(loss, eer)``: float32 scalar tensor; float EER or ``None``.
        """
        sim = self.similarity_matrix(embeds)
        n_spk = tf.shape(sim)[0]
        n_utt = tf.shape(sim)[1]
        logits = tf.reshape(sim, (-1, n_spk))
        labels = tf.repeat(tf.range(n_spk), n_utt)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        eer = None
        if compute_eer:
            eer = ge2e_eer(np.asarray(logits))
        return loss, eer

    # -- checkpoints --------------------------------------------------------------------------
    @classmethod
    def from_torch_checkpoint(cls, path: str | os.PathLike, strict: bool = True, **kwargs) -> SpeakerEncoder:
        """Builds an encoder from an upstream torch checkpoint without torch, sizes inferred from the weights.

        The same files as ``torch_layers.SpeakerEncoder.from_checkpoint``: a bare state dict, RTVC's ``encoder.pt``
        or Resemblyzer's ``pretrained.pt`` (``{"model_state": state_dict, "step": int, ...}``), zip or torch's
        legacy format. Read by :func:`speechblocks.torch_file.read_torch_file` (plain data and dense tensors only,
        as ``torch.load(weights_only=True)``; the zip members' CRC-32 checked), loaded with
        ``load_torch_state_dict`` (all or nothing).

        Args:
            path: checkpoint file.
            strict: as ``load_torch_state_dict``.
            **kwargs: base layer arguments (``name``, ``dtype``, ...).

        Returns:
            the built layer with the checkpoint's weights.

        Raises:
            FileNotFoundError: no such file.
            ValueError: one line naming the file: damaged, refused (anything else than tensors and plain data), no
                encoder state dict, or one with wrong, missing, extra or mis-shaped keys (listed on that line).
        """
        what = "SpeakerEncoder.from_torch_checkpoint: checkpoint"
        path = os.fspath(path)
        state, sizes = encoder_checkpoint_state(read_torch_file(path, what), path, what)
        try:
            layer = cls(**sizes, **kwargs)
            layer.load_torch_state_dict(state, strict=strict)
        except ValueError as e:
            raise ValueError(f"{what} {path!r} does not fit the encoder its shapes describe: "
                             f"{one_line(getattr(e, 'problems', [str(e)]))}") from None
        return layer

    # -- torch exchange -----------------------------------------------------------------------
    def _build_from_torch_state(self, state):
        self.build()

    def _torch_exchanges(self):
        h = self.model_hidden_size
        out = []
        for k, lstm in enumerate(self.lstms):
            cell = lstm.cell
            n_in = self.mel_n_channels if k == 0 else h
            out.append(TorchExchange(cell.kernel, (f"lstm.weight_ih_l{k}",), ((4 * h, n_in),),
                                     lambda v: (v.T,), lambda p: p[0].T))
            out.append(TorchExchange(cell.recurrent_kernel, (f"lstm.weight_hh_l{k}",), ((4 * h, h),),
                                     lambda v: (v.T,), lambda p: p[0].T))
            out.append(TorchExchange(cell.bias, (f"lstm.bias_ih_l{k}", f"lstm.bias_hh_l{k}"), ((4 * h,), (4 * h,)),
                                     lambda v: (v, np.zeros_like(v)), lambda p: p[0] + p[1]))
        e = self.model_embedding_size
        out.append(TorchExchange(self.linear.kernel, ("linear.weight",), ((e, h),), lambda v: (v.T,),
                                 lambda p: p[0].T))
        out.append(TorchExchange(self.linear.bias, ("linear.bias",), ((e,),)))
        out.append(TorchExchange(self.similarity_weight, ("similarity_weight",), ((1,),)))
        out.append(TorchExchange(self.similarity_bias, ("similarity_bias",), ((1,),)))
        return out
