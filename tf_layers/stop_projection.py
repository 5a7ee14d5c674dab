"""Keras ``StopProjection``: Tacotron-2's stop-token projection (logits in training, sigmoid at inference)."""
from __future__ import annotations

import keras

from .frame_projection import ProjectionBase


@keras.saving.register_keras_serializable(package="speechblocks")
class StopProjection(ProjectionBase):
    """Linear projection to ``shape`` stop-token logits under the TF1 name ``projection_<tf1_scope>``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

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
        super().__init__(shape, activation, tf1_scope, **kwargs)

    def _dense_activation(self):
        return None  # the activation applies at inference only, in call()

    def call(self, inputs, training=None):
        logits = self._checked_dense(inputs)
        if training:
            return logits
        return self.activation(logits)
