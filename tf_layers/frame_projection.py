"""Keras ``FrameProjection``: Tacotron-2's dense projection to ``r * num_mels`` (or ``num_mels``) frames."""
from __future__ import annotations

import keras

from ._validation import check_build_shape, check_features
from .tf1_exchange import TF1Variable, TF1WeightsMixin


class ProjectionBase(TF1WeightsMixin, keras.layers.Layer):
    """Shared machinery of the dense projections (``FrameProjection``, ``StopProjection``); not public.

    One ``Dense(shape)`` named ``projection_<tf1_scope>`` in TF1; subclasses choose the activation the
    dense layer applies (``_dense_activation``) and write ``call``.
    """

    def __init__(self, shape: int, activation, tf1_scope: str | None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(shape, bool) or int(shape) != shape or int(shape) < 1:
            raise ValueError(f"{type(self).__name__}: `shape` must be an integer >= 1; got {shape!r}.")
        self.shape = int(shape)
        self.activation = keras.activations.get(activation)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.dense = keras.layers.Dense(self.shape, activation=self._dense_activation(), dtype=self.dtype_policy,
                                        name="projection")
        self.in_features = None

    def _dense_activation(self):
        raise NotImplementedError

    def build(self, input_shape):
        shape = check_build_shape(input_shape, type(self).__name__)
        self.in_features = int(shape[-1])
        self.dense.build(shape)

    def _checked_dense(self, inputs):
        check_features(inputs, "inputs", type(self).__name__, self.in_features)
        return self.dense(inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.shape,)

    def get_config(self):
        config = super().get_config()
        config.update(shape=self.shape, activation=keras.activations.serialize(self.activation),
                      tf1_scope=self.tf1_scope)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    @property
    def _tf1_dense_name(self) -> str:
        return f"projection_{self.tf1_scope}"

    def _tf1_variables(self):
        return {f"{self._tf1_dense_name}/kernel": TF1Variable(self.dense.kernel),
                f"{self._tf1_dense_name}/bias": TF1Variable(self.dense.bias)}

    def _tf1_input_shape(self, weights):
        return (None, int(weights[f"{self._tf1_dense_name}/kernel"].shape[0]))


@keras.saving.register_keras_serializable(package="speechblocks")
class FrameProjection(ProjectionBase):
    """Dense projection ``activation(inputs @ kernel + bias)`` under the TF1 name ``projection_<tf1_scope>``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Args:
        shape: int, output units (``r * num_mels`` for the decoder, ``num_mels`` after the postnet).
        activation: Keras activation name or callable; ``None`` (seed default) is a linear projection.
        tf1_scope: TF1 scope; ``None`` -> ``"Linear_projection"`` (Rayhane: ``"linear_transform_projection"``,
            ``"postnet_projection"``). The dense variables are ``projection_<tf1_scope>/{kernel,bias}``.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, in_features)`` or ``(batch, time, in_features)``.
        training: unused (no dropout, no batch norm).

    Returns:
        float tensor ``(..., shape)``.

    Masking: frame by frame; padding needs no mask.

    Example:
    >>> proj = FrameProjection(shape=160)
    >>> proj(tf.zeros((2, 1536))).shape
    TensorShape([2, 160])
    """

    default_tf1_scope = "Linear_projection"

    def __init__(self, shape: int = 80, activation=None, tf1_scope: str | None = None, **kwargs):
        super().__init__(shape, activation, tf1_scope, **kwargs)

    def _dense_activation(self):
        return self.activation

    def call(self, inputs, training=None):
        return self._checked_dense(inputs)
