"""Keras ``StopProjection``: Tacotron-2's stop-token projection (logits in training, sigmoid at inference)."""
from __future__ import annotations

import keras

from .prenet import check_build_shape, check_features
from .tf1_exchange import TF1Variable, TF1WeightsMixin


@keras.saving.register_keras_serializable(package="speechblocks")
class StopProjection(TF1WeightsMixin, keras.layers.Layer):
    """Linear projection to ``shape`` stop-token logits under the TF1 name ``projection_<tf1_scope>``.

    As in the seed, the output depends on the mode: **logits** when ``training`` is true (the
    sigmoid lives inside the training loss) and ``activation(logits)`` (sigmoid probabilities by
    default) at inference.

    Args:
        shape: int, outputs (``outputs_per_step`` in Rayhane's decoder; seed default 1).
        activation: Keras activation name or callable applied at inference only (default ``"sigmoid"``);
            ``None`` returns logits in both modes.
        tf1_scope: TF1 scope; ``None`` -> ``"stop_token_projection"``. Variables
            ``projection_<tf1_scope>/{kernel,bias}``.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, in_features)`` or ``(batch, time, in_features)``.
        training: bool; True returns logits.

    Returns:
        float tensor ``(..., shape)``: logits (training) or ``activation(logits)`` (inference).

    Masking: frame by frame; padding needs no mask.

    Example:
    >>> stop = StopProjection(shape=2)
    >>> stop(tf.zeros((3, 1536))).shape
    TensorShape([3, 2])
    """

    default_tf1_scope = "stop_token_projection"

    def __init__(self, shape: int = 1, activation="sigmoid", tf1_scope: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(shape, bool) or int(shape) != shape or int(shape) < 1:
            raise ValueError(f"StopProjection: `shape` must be an integer >= 1; got {shape!r}.")
        self.shape = int(shape)
        self.activation = keras.activations.get(activation)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.dense = keras.layers.Dense(self.shape, activation=None, dtype=self.dtype_policy, name="projection")
        self.in_features = None

    def build(self, input_shape):
        shape = check_build_shape(input_shape, "StopProjection")
        self.in_features = int(shape[-1])
        self.dense.build(shape)

    def call(self, inputs, training=None):
        check_features(inputs, "inputs", "StopProjection", self.in_features)
        logits = self.dense(inputs)
        if training:
            return logits
        return self.activation(logits)

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
