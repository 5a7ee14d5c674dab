"""Keras ``GaussianEmbedding``: twin of the torch TalkNet Gaussian embedding, and ``repeat_merge``.

Same numbers as ``torch_layers.GaussianEmbedding`` (blank-free variant by default, standard TalkNet with
``blank_free=False``); weights move with ``torch_state_dict()`` / ``load_torch_state_dict()`` under the
upstream key ``embed.weight``.
"""
from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np
import tensorflow as tf

from speechblocks.gaussian_embedding import (
    BLOCK,
    EPS,
    LOG_SQRT_2PI,
    check_gaussian_embedding_arguments,
    interleave_message,
    outside_vocabulary_message,
    text_shape_doc,
)

from .torch_exchange import IncompatibleKeys, check_torch_state_dict, to_numpy

__all__ = ["GaussianEmbedding", "repeat_merge"]


def _is_integer(dtype) -> bool:
    dtype = tf.as_dtype(dtype)
    return dtype.is_integer


def _check_pair(x, reps, block: str, x_name: str, reps_name: str, shape_doc: str) -> None:
    """Static checks of an ``(x, reps)`` pair, plus value checks when running eagerly."""
    if x.shape.rank is not None and x.shape.rank != 2:
        raise ValueError(f"{block}: argument `{x_name}` must have rank 2, expected shape {shape_doc}; "
                         f"got shape {x.shape}.")
    if not _is_integer(reps.dtype):
        raise ValueError(f"{block}: argument `{reps_name}` must be an integer tensor, expected shape {shape_doc}; "
                         f"got dtype {reps.dtype.name}.")
    if not x.shape.is_compatible_with(reps.shape):
        raise ValueError(f"{block}: argument `{reps_name}` must have the shape of `{x_name}` {x.shape}, expected "
                         f"shape {shape_doc}; got shape {reps.shape}.")
    if tf.executing_eagerly():
        if tuple(x.shape) != tuple(reps.shape):
            raise ValueError(f"{block}: argument `{reps_name}` must have the shape of `{x_name}` {tuple(x.shape)}; "
                             f"got shape {tuple(reps.shape)}.")
        r = reps.numpy()
        if r.size and r.min() < 0:
            raise ValueError(f"{block}: argument `{reps_name}` must be non-negative; got minimum {r.min()}.")


def _graph_asserts(x, reps, block: str, x_name: str, reps_name: str) -> list:
    """Run-time checks for graph mode (``tf.function`` with unknown shapes)."""
    if tf.executing_eagerly():
        return []
    return [
        tf.debugging.assert_equal(tf.shape(x), tf.shape(reps),
                                  message=f"{block}: argument `{reps_name}` must have the shape of `{x_name}`"),
        tf.debugging.assert_non_negative(reps, message=f"{block}: argument `{reps_name}` must be non-negative"),
    ]


def _merge_indices(reps):
    """Index of the element covering each frame, ``length`` past a row's end: ``(batch, max total)`` int64."""
    reps = tf.cast(reps, tf.int64)
    batch = tf.shape(reps, out_type=tf.int64)[0]
    ends = tf.cumsum(reps, axis=1)
    total = (tf.maximum(tf.reduce_max(tf.reduce_sum(reps, axis=1)), 0) if reps.shape[0] != 0
             else tf.constant(0, tf.int64))
    frames = tf.broadcast_to(tf.range(total, dtype=tf.int64)[tf.newaxis, :], tf.stack([batch, total]))
    # the element covering frame f is the number of elements that end at or before f
    return tf.searchsorted(ends, frames, side="right", out_type=tf.int64)


def _gather_or_pad(x, idx, pad):
    n = tf.shape(x, out_type=tf.int64)[1]
    gathered = tf.gather(x, tf.minimum(idx, tf.maximum(n - 1, 0)), batch_dims=1)
    return tf.where(idx < n, gathered, tf.cast(pad, x.dtype))


def repeat_merge(x, reps, pad):
    """Repeats every element of each row ``reps`` times, then right-pads the rows to a common length.

    NeMo's ``repeat_merge``: row ``b`` becomes ``repeat_interleave(x[b], reps[b])``, padded with ``pad``
    to the longest row. Vectorised with one ``searchsorted`` over the cumulative repeats.

    Args:
        x: ``(batch, length)`` values.
        reps: ``(batch, length)`` non-negative integer repeat counts.
        pad: value of the padding frames.

    Returns:
        ``(batch, max_b sum(reps[b]))`` tensor of the dtype of ``x``.

    Example:
    >>> repeat_merge([[1, 2, 3], [4, 5, 6]], [[2, 0, 1], [1, 1, 0]], 0).numpy()
    array([[1, 1, 3],
           [4, 5, 0]], dtype=int32)
    """
    x = tf.convert_to_tensor(x)
    reps = tf.convert_to_tensor(reps)
    _check_pair(x, reps, "repeat_merge", "x", "reps", "(batch, length)")
    with tf.control_dependencies(_graph_asserts(x, reps, "repeat_merge", "x", "reps")):
        if x.shape.rank == 2 and x.shape[1] == 0:
            return tf.fill(tf.stack([tf.shape(x)[0], 0]), tf.cast(pad, x.dtype))
        return _gather_or_pad(x, _merge_indices(reps), pad)


@keras.saving.register_keras_serializable(package="speechblocks")
class GaussianEmbedding(keras.layers.Layer):
    """TalkNet Gaussian embedding: token embeddings upsampled to frames by Gaussian weights.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    ``blank_free=True`` (the seed's variant): the input interleaves blanks with the tokens,
    ``(blank, tok_1, blank, ..., tok_n, blank)``; the first blank is kept, the others are dropped and
    their durations added to the token before them. ``blank_free=False`` is standard TalkNet. Then two
    ``pad`` tokens of duration 0 are appended; token ``j`` spreads over frames as a normal density with
    centre ``d_j / 2 + sum_{i<j} d_i`` and standard deviation ``d_j / sigma_c + 1e-6``, evaluated at
    ``t + 0.5``; pad tokens get weight 0; weights are normalised per frame (sum ``+ 1e-6``); frames past
    an utterance's end (merged token ``pad``) take the last column's embedding. ``merge_blanks=True``
    uses only the odd columns. Densities below ~2e-38 are flushed to 0 (no output moves by > 1e-36).

    Args:
        num_labels: vocabulary size, rows of the embedding.
        d_emb: embedding size.
        pad: id of the padding token, in ``[0, num_labels)``.
        sigma_c: standard deviation divisor.
        merge_blanks: use only the odd columns for the weights (seed quirk kept: with ``blank_free=True``
            these are every other real token of the blank-free sequence).
        blank_free: drop the interleaved blanks (seed) or keep them (standard TalkNet).
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        text: int tensor ``(batch, 2n+1)`` of token ids with blanks interleaved (any length when
            ``blank_free=False`` and ``merge_blanks=False``); padded entries hold ``pad``.
        durs: int tensor of the shape of ``text``, non-negative durations in frames (0 when padded).
        training: accepted for the Keras contract; the layer behaves the same in training.

    Returns:
        float tensor ``(batch, frames, d_emb)`` in the compute dtype, ``frames = max_b sum(durs[b])``.
        The weights are computed in float32 under mixed precision.

    Masking: frames past an utterance's end hold the embedding of the last (pad) column, as upstream.

    Deployment: SavedModel and XLA. LiteRT conversion needs ``SELECT_TF_OPS``: ``tf.searchsorted``
    (``UpperBound``) and a new-axis slice (``x[:, :, None]``) with unknown dims are no TFLite builtins; the
    converted model runs only in an interpreter with the flex delegate (TensorFlow kernels), not in
    ``ai_edge_litert``'s.

    Example:
    >>> layer = GaussianEmbedding(10, 4, pad=0)
    >>> text = tf.constant([[1, 5, 1, 6, 1]])   # blank, token, blank, token, blank
    >>> durs = tf.constant([[1, 2, 0, 3, 1]])
    >>> layer(text, durs).shape
    TensorShape([1, 7, 4])
    """

    def __init__(self, num_labels: int, d_emb: int, pad: int, sigma_c: float = 2.0, merge_blanks: bool = False,
                 blank_free: bool = True, **kwargs):
        super().__init__(**kwargs)
        check_gaussian_embedding_arguments(num_labels, d_emb, pad, sigma_c)
        self.num_labels = int(num_labels)
        self.d_emb = int(d_emb)
        self.pad = int(pad)
        self.sigma_c = float(sigma_c)
        self.merge_blanks = bool(merge_blanks)
        self.blank_free = bool(blank_free)
        self.embed = None

    def build(self, text_shape=None):
        # torch's nn.Embedding initialises N(0, 1)
        self.embed = self.add_weight(name="embed", shape=(self.num_labels, self.d_emb),
                                     initializer=keras.initializers.RandomNormal(stddev=1.0))

    # -- input checks -----------------------------------------------------------------------------
    def _check_inputs(self, text, durs):
        odd = self.blank_free or self.merge_blanks
        doc = text_shape_doc(odd)
        if not _is_integer(text.dtype):
            raise ValueError(f"{BLOCK}: argument `text` must be an integer tensor of token ids, expected shape {doc}; "
                             f"got dtype {text.dtype.name}.")
        if text.shape.rank is not None and text.shape.rank != 2:
            raise ValueError(f"{BLOCK}: argument `text` must have rank 2, expected shape {doc}; got shape "
                             f"{text.shape}.")
        if odd and text.shape.rank == 2 and text.shape[1] is not None and text.shape[1] % 2 != 1:
            raise ValueError(f"{interleave_message()} with an odd length; got shape {text.shape}.")
        _check_pair(text, durs, BLOCK, "text", "durs", doc)
        if tf.executing_eagerly():
            t = text.numpy()
            if t.size and (t.min() < 0 or t.max() >= self.num_labels):
                raise ValueError(f"{outside_vocabulary_message(self.num_labels)}: min {t.min()}, max {t.max()}.")
            return []
        asserts = _graph_asserts(text, durs, BLOCK, "text", "durs")
        outside = outside_vocabulary_message(self.num_labels)
        asserts.append(tf.debugging.assert_non_negative(text, message=outside))
        asserts.append(tf.debugging.assert_less(text, tf.cast(self.num_labels, text.dtype), message=outside))
        if odd:
            asserts.append(tf.debugging.assert_equal(tf.shape(text)[1] % 2, 1, message=interleave_message()))
        return asserts

    def call(self, text, durs, training=None):
        text = tf.convert_to_tensor(text)
        durs = tf.convert_to_tensor(durs)
        with tf.control_dependencies(self._check_inputs(text, durs)):  # graph mode: run-time checks first
            text, durs = tf.identity(text), tf.identity(durs)
        text = tf.cast(text, tf.int64)
        durs = tf.cast(durs, tf.int64)
        if self.blank_free:
            text = tf.concat([text[:, :1], text[:, 1::2]], axis=1)
            durs = tf.concat([durs[:, :1], durs[:, 1::2] + durs[:, 2::2]], axis=1)
        text = tf.pad(text, [[0, 0], [0, 2]], constant_values=self.pad)
        durs = tf.pad(durs, [[0, 0], [0, 2]], constant_values=0)

        repeats = _gather_or_pad(text, _merge_indices(durs), self.pad)  # (B, T)
        frames = tf.shape(repeats)[1]

        # weights in float32 whatever the compute dtype (times reach thousands of frames)
        d = tf.cast(durs, tf.float32)
        centres = d / 2.0 + tf.cast(tf.cumsum(durs, axis=1, exclusive=True), tf.float32)
        sigmas = d / self.sigma_c + EPS
        if self.merge_blanks:
            centres, sigmas, text = centres[:, 1::2], sigmas[:, 1::2], text[:, 1::2]
        two_var = 2.0 * tf.square(sigmas)
        offset = tf.where(tf.equal(text, self.pad), tf.constant(np.inf, tf.float32),
                          tf.math.log(sigmas) + LOG_SQRT_2PI)

        times = tf.cast(tf.range(frames), tf.float32) + 0.5
        diff = times[tf.newaxis, :, tf.newaxis] - centres[:, tf.newaxis, :]
        z = -tf.square(diff) / two_var[:, tf.newaxis, :] - offset[:, tf.newaxis, :]
        w = tf.exp(tf.maximum(z, -87.0))
        w = tf.where(w > 2e-38, w, 0.0)
        w = w / (tf.reduce_sum(w, axis=-1, keepdims=True) + EPS)
        columns = tf.shape(w)[2]
        last = tf.one_hot(columns - 1, columns, dtype=tf.float32)
        w = tf.where(tf.equal(repeats, self.pad)[:, :, tf.newaxis], last, w)

        emb = tf.gather(tf.cast(self.embed, self.compute_dtype), text)  # (B, N, E)
        return tf.matmul(tf.cast(w, self.compute_dtype), emb)

    def compute_output_shape(self, text_shape):
        return (text_shape[0], None, self.d_emb)

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, d_emb=self.d_emb, pad=self.pad, sigma_c=self.sigma_c,
                      merge_blanks=self.merge_blanks, blank_free=self.blank_free)
        return config

    # -- torch weight exchange ----------------------------------------------------------------------
    def torch_state_dict(self) -> dict[str, np.ndarray]:
        """The upstream torch state dict: ``{"embed.weight": (num_labels, d_emb) float32}``."""
        if not self.built:
            self.build(None)
        return {"embed.weight": np.array(self.embed.numpy())}

    def load_torch_state_dict(self, state_dict: Mapping, strict: bool = True) -> IncompatibleKeys:
        """Loads ``embed.weight`` (numpy arrays or torch tensors), all or nothing.

        Args:
            state_dict: mapping of upstream keys to arrays in torch layout.
            strict: every expected key present and no unknown key; shape errors are always errors.

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)`` (empty when strict).

        Raises:
            TorchStateDictError: (a ``ValueError``) listing every problem; nothing is assigned.
        """
        values = {str(k): to_numpy(v) for k, v in dict(state_dict).items()}
        missing, unexpected = check_torch_state_dict(BLOCK, {"embed.weight": (self.num_labels, self.d_emb)}, values,
                                                     strict)
        if not self.built:
            self.build(None)
        if "embed.weight" in values:
            self.embed.assign(values["embed.weight"].astype(np.float32))
        return IncompatibleKeys(missing, unexpected)
