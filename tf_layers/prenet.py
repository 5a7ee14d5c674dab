"""Keras ``Prenet``: Tacotron-2's decoder pre-net, with dropout that stays on at inference."""
from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from speechblocks.arguments import check_drop_rate, check_dropout_mode
from speechblocks.block_hparams import prenet_hparams

from ._dropout import tf1_dropout
from ._validation import check_build_shape, check_features
from .tf1_exchange import TF1Variable, TF1WeightsMixin


@keras.saving.register_keras_serializable(package="speechblocks")
class Prenet(TF1WeightsMixin, keras.layers.Layer):
    """Tacotron-2 decoder pre-net: dense layers ``dense_{i}`` with ``activation``, each followed by dropout.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    **The dropout is always on**, at inference too, as in the paper and the TF1 seed (it brings
    diversity to generation): ``training=`` does not switch it off. Each layer computes
    ``x = activation(x @ kernel + bias)`` then TF1 keep-prob dropout ``x / (1 - drop_rate) * keep`` with
    ``keep ~ Bernoulli(1 - drop_rate)``. For reproducible or cross-framework runs, pass ``seed=`` or
    inject the keep-masks with ``dropout_masks=``; ``drop_rate=0`` makes the block deterministic.

    Args:
        layers_sizes: sequence of ints, units of each dense layer (seed: ``[256, 256]``).
        drop_rate: float in [0, 1), dropout rate of every layer, training and inference.
        activation: Keras activation name or callable of every layer; ``None`` is the identity.
        tf1_scope: TF1 scope; ``None`` -> ``"prenet"`` (Rayhane's decoder uses ``"decoder_prenet"``).
        seed: optional int seed of the dropout noise.
        dropout: ``"always"`` (Tacotron-2: training and inference) or ``"training"`` (keithito/tacotron and mimic2:
            ``tf.layers.dropout(training=is_training)``, off at inference). Injected ``dropout_masks`` apply in
            either mode.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, in_features)`` (one decoder step) or ``(batch, time, in_features)``.
        training: bool; switches the dropout only with ``dropout="training"`` (on by default it is on either way).
        dropout_masks: optional list with one 0/1 keep-mask per layer, of shape ``(..., layers_sizes[i])``
            (or ``None`` entries), replacing the random masks.
        seed: optional int32 tensor ``(2,)``: draw the keep-masks statelessly (``tf.random.stateless_uniform``,
            layer ``i`` with ``seed + [0, i]``) instead of from the layer's seed generator -- what a decoder loop
            passes per step (a fresh, reproducible draw at every step of a ``tf.while_loop``).

    Returns:
        float tensor ``(..., layers_sizes[-1])``.

    Masking: works frame by frame; padding needs no mask.

    Deployment: SavedModel and XLA. LiteRT: TFLite builtins with ``drop_rate=0``; the always-on dropout
    (``drop_rate > 0``) draws stateless random numbers, which need ``SELECT_TF_OPS``: the converted model runs
    only in an interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> prenet = Prenet(layers_sizes=(256, 256), drop_rate=0.5, seed=1)
    >>> prenet(tf.zeros((2, 80))).shape
    TensorShape([2, 256])
    """

    default_tf1_scope = "prenet"

    def __init__(self, layers_sizes: Sequence[int] = (256, 256), drop_rate: float = 0.5, activation="relu",
                 tf1_scope: str | None = None, seed: int | None = None, dropout: str = "always", **kwargs):
        super().__init__(**kwargs)
        self.dropout = check_dropout_mode(dropout, "Prenet")
        if isinstance(layers_sizes, (int, str)) or len(layers_sizes) == 0:
            raise ValueError(f"Prenet: `layers_sizes` must be a non-empty sequence of ints; got {layers_sizes!r}.")
        for s in layers_sizes:
            if isinstance(s, bool) or int(s) != s or int(s) < 1:
                raise ValueError(f"Prenet: `layers_sizes` entries must be integers >= 1; got {list(layers_sizes)!r}.")
        check_drop_rate(drop_rate, "Prenet")
        self.layers_sizes = [int(s) for s in layers_sizes]
        self.drop_rate = float(drop_rate)
        self.activation = keras.activations.get(activation)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        self.dense_layers = [keras.layers.Dense(size, activation=self.activation, dtype=self.dtype_policy,
                                                name=f"dense_{i + 1}") for i, size in enumerate(self.layers_sizes)]
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.in_features = None

    @classmethod
    def from_hparams(cls, hp, **kwargs):
        """Builds the block from Rayhane-style hparams (``prenet_layers``, ``tacotron_dropout_rate``)."""
        config = prenet_hparams(hp)
        config.update(kwargs)
        return cls(**config)

    def build(self, input_shape):
        shape = check_build_shape(input_shape, "Prenet")
        self.in_features = int(shape[-1])
        for dense in self.dense_layers:
            dense.build(shape)
            shape = shape[:-1] + (dense.units,)

    def _check_masks(self, dropout_masks):
        n = len(self.dense_layers)
        if dropout_masks is None:
            return [None] * n
        if not isinstance(dropout_masks, (list, tuple)) or len(dropout_masks) != n:
            got = len(dropout_masks) if isinstance(dropout_masks, (list, tuple)) else type(dropout_masks).__name__
            raise ValueError(f"Prenet: argument `dropout_masks` must be a list of {n} keep-masks, mask i of shape "
                             f"(..., layers_sizes[i]) = {self.layers_sizes}; got {got}.")
        out = []
        for i, m in enumerate(dropout_masks):
            if m is not None:
                m = tf.convert_to_tensor(m)
                if m.shape.rank is not None and m.shape[-1] not in (None, self.layers_sizes[i]):
                    raise ValueError(f"Prenet: argument `dropout_masks[{i}]` must have shape (..., "
                                     f"{self.layers_sizes[i]}); got shape {m.shape}.")
            out.append(m)
        return out

    def call(self, inputs, training=None, dropout_masks=None, seed=None):
        check_features(inputs, "inputs", "Prenet", self.in_features)
        masks = self._check_masks(dropout_masks)
        x = inputs
        for i, (dense, mask) in enumerate(zip(self.dense_layers, masks)):
            x = dense(x)
            if mask is None and seed is not None and self.drop_rate > 0:
                # a stateless draw: layer i of a step seeded ``seed`` uses ``seed + [0, i]``
                u = tf.random.stateless_uniform(tf.shape(x), seed=seed + tf.constant([0, i], seed.dtype))
                mask = tf.cast(u >= self.drop_rate, x.dtype)
            if mask is None and self.dropout == "training" and not training:
                continue  # keithito/mimic2: tf.layers.dropout(training=is_training)
            # Tacotron-2: dropout on regardless of `training` (seed: training=True hard-coded)
            x = tf1_dropout(x, self.drop_rate, self.seed_generator, mask, name=f"dropout_masks[{i}]")
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.layers_sizes[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            layers_sizes=list(self.layers_sizes),
            drop_rate=self.drop_rate,
            activation=keras.activations.serialize(self.activation),
            tf1_scope=self.tf1_scope,
            seed=self.seed,
            dropout=self.dropout,
        )
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        out = {}
        for i, dense in enumerate(self.dense_layers):
            out[f"dense_{i + 1}/kernel"] = TF1Variable(dense.kernel)
            out[f"dense_{i + 1}/bias"] = TF1Variable(dense.bias)
        return out

    def _tf1_input_shape(self, weights):
        return (None, int(weights["dense_1/kernel"].shape[0]))
