"""Keras ``HighwayNet``: one Tacotron-2 highway layer (``H``/``T`` dense pair)."""
from __future__ import annotations

import keras

from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin


@keras.saving.register_keras_serializable(package="speechblocks")
class HighwayNet(TF1WeightsMixin, keras.layers.Layer):
    """Highway layer ``y = H(x)·T(x) + x·(1 − T(x))`` as TF1 Tacotron-2's ``HighwayNet``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    ``H`` is a relu dense layer, ``T`` a sigmoid dense layer whose bias starts at −1 (the gate
    initially favours the carry path). Both are ``units`` wide, so the input must be ``units`` wide too.

    Args:
        units: int, width of the input and of the output.
        tf1_scope: TF1 variable scope (default ``"HighwayNet"``); TF1 names are ``H/kernel``,
            ``H/bias``, ``T/kernel``, ``T/bias`` under it.
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``(batch, time, units)``.
        training: unused (the layer is deterministic); accepted for uniformity.

    Returns:
        float tensor ``(batch, time, units)``.

    Masking: position-wise; padded frames stay independent of valid ones.

    Example:
    >>> layer = HighwayNet(128)
    >>> layer(tf.zeros((2, 7, 128))).shape
    TensorShape([2, 7, 128])
    """

    default_tf1_scope = "HighwayNet"

    def __init__(self, units: int, tf1_scope: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if int(units) < 1:
            raise ValueError(f"HighwayNet: `units` must be >= 1; got {units}.")
        self.units = int(units)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.H = keras.layers.Dense(self.units, activation="relu", dtype=self.dtype_policy, name="H")
        self.T = keras.layers.Dense(self.units, activation="sigmoid",
                                    bias_initializer=keras.initializers.Constant(-1.0),
                                    dtype=self.dtype_policy, name="T")

    def _shape_doc(self) -> str:
        return f"(batch, time, {self.units})"

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"HighwayNet: argument `inputs` must have rank 3, expected shape {self._shape_doc()}; "
                             f"got shape {tuple(input_shape)}.")
        if input_shape[-1] is not None and int(input_shape[-1]) != self.units:
            raise ValueError(f"HighwayNet: argument `inputs` must have {self.units} channels (input size must equal "
                             f"`units`), expected shape {self._shape_doc()}; got shape {tuple(input_shape)}.")
        shape = tuple(input_shape[:-1]) + (self.units,)
        self.H.build(shape)
        self.T.build(shape)

    def call(self, inputs, training=None):
        check_float_tensor(inputs, "inputs", "HighwayNet", rank=3, last_dim=self.units, shape_doc=self._shape_doc())
        h = self.H(inputs)
        t = self.T(inputs)
        return h * t + inputs * (1.0 - t)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, tf1_scope=self.tf1_scope)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return {
            "H/kernel": TF1Variable(self.H.kernel),
            "H/bias": TF1Variable(self.H.bias),
            "T/kernel": TF1Variable(self.T.kernel),
            "T/bias": TF1Variable(self.T.bias),
        }

    def _tf1_input_shape(self, weights):
        return (None, None, int(weights["H/kernel"].shape[0]))
