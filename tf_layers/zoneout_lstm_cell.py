"""Keras ``ZoneoutLSTMCell``: TF1 ``LSTMBlockCell`` maths with zoneout, as a Keras RNN cell."""
from __future__ import annotations

import keras
import tensorflow as tf

from speechblocks.arguments import check_zoneout as check_zoneout  # re-exported for the recurrent blocks
from speechblocks.layouts import DEFAULT_FORGET_BIAS as FORGET_BIAS

from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin


def effective_bias(bias, dtype):
    """TF1 adds ``forget_bias`` (1.0) to the ``f`` block (third of i, j, f, o) at run time; folded here once."""
    units = bias.shape[0] // 4
    wide = tf.float64 if tf.as_dtype(dtype) == tf.float64 else tf.float32  # half dtypes add in float32
    offset = tf.concat([tf.zeros([2 * units], wide), tf.fill([units], tf.constant(FORGET_BIAS, wide)),
                        tf.zeros([units], wide)], 0)
    return tf.cast(tf.cast(bias, wide) + offset, dtype)


def lstm_from_gates(gates, c_prev):
    """TF1 LSTM update from pre-activations ``gates`` ``(..., 4u)`` (forget bias already included)."""
    i, j, f, o = tf.split(gates, 4, axis=-1)
    c_new = tf.sigmoid(f) * c_prev + tf.sigmoid(i) * tf.tanh(j)
    h_new = tf.sigmoid(o) * tf.tanh(c_new)
    return c_new, h_new


def zoneout(new, prev, factor: float, keep=None):
    """Zoneout of one state tensor.

    Training (``keep`` given, a 0/1 keep-mask ~ Bernoulli(1 - factor)): ``keep * new + (1 - keep) * prev``, i.e.
    TF1's ``prev + (1 - factor) * tf.nn.dropout(new - prev, keep_prob=1 - factor)`` (equal up to one rounding).
    Written so that ``prev`` feeds one op: inside a while loop's gradient a tensor with three consumers gets a
    3-input AddN, which TensorFlow's memory optimizer may turn into a temporary variable that fails on the next
    call (AlreadyExistsError, tensorflow#23780).
    Inference (``keep`` None): ``(1 - factor) * new + factor * prev``.
    """
    if keep is not None:
        return keep * new + (1 - keep) * prev
    if factor == 0.0:
        return new
    return tf.constant(1.0 - factor, new.dtype) * new + tf.constant(factor, new.dtype) * prev


def keep_masks(shape, factor: float, seed_generator, dtype):
    """Random 0/1 keep-mask ~ Bernoulli(1 - factor) (one draw for every element)."""
    u = keras.random.uniform(shape, seed=seed_generator, dtype="float32")
    return tf.cast(u >= factor, dtype)


def check_mask(mask, name: str, block: str, shape_doc: str, rank: int):
    mask = tf.convert_to_tensor(mask)
    if mask.shape.rank is not None and mask.shape.rank != rank:
        raise ValueError(f"{block}: argument `{name}` must be a 0/1 keep-mask of shape {shape_doc}; got shape "
                         f"{mask.shape}.")
    return mask


@keras.saving.register_keras_serializable(package="speechblocks")
class ZoneoutLSTMCell(TF1WeightsMixin, keras.layers.Layer):
    """LSTM cell with zoneout (Krueger et al. 2016), TF1 Tacotron-2's ``ZoneoutLSTMCell``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    LSTM maths of TF1 ``LSTMCell``/``LSTMBlockCell``: one ``kernel`` ``(in + units, 4 * units)`` over
    ``concat([x, h])``, one ``bias``, gate blocks i, j, f, o, forget bias 1.0 added at run time (not stored):
    ``c' = σ(f + 1)·c + σ(i)·tanh(j)``, ``h' = σ(o)·tanh(c')``.
    Zoneout of the state: inference ``c = (1 - z_c)·c' + z_c·c``, ``h`` likewise; training
    ``c = c + m ⊙ (c' - c)`` with ``m ~ Bernoulli(1 - z_c)`` drawn per element per step (TF1 keep-prob
    semantics). The cell **returns the raw LSTM output** ``h'`` while the returned state carries the
    zoned-out ``(c, h)``. A proper Keras RNN cell: ``keras.layers.RNN(ZoneoutLSTMCell(256))`` works.

    Args:
        num_units: int, LSTM units.
        zoneout_factor_cell: float in [0, 1], zoneout of the cell state.
        zoneout_factor_output: float in [0, 1], zoneout of the hidden state.
        tf1_scope: TF1 name of the cell (default ``"lstm_cell"``); TF1 keys ``kernel``, ``bias``.
        seed: optional int seed of the zoneout noise.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, input_size)``.
        states: ``[c, h]``, each ``(batch, num_units)``; ``None`` is the zero state.
        training: bool, random zoneout when True.
        zoneout_masks: optional ``(c_keep, h_keep)`` 0/1 keep-masks ``(batch, num_units)``; when given they
            replace the random masks (training-mode zoneout with exactly these masks).

    Returns:
        ``(output, [c, h])``: ``output`` ``(batch, num_units)`` is the raw LSTM output.

    Masking: a single step; sequence masking is the caller's (``EncoderRNN`` honours lengths).

    Example:
    >>> cell = ZoneoutLSTMCell(8, 0.1, 0.1)
    >>> keras.layers.RNN(cell, return_sequences=True)(tf.zeros((2, 5, 3))).shape
    TensorShape([2, 5, 8])
    """

    default_tf1_scope = "lstm_cell"

    def __init__(self, num_units: int, zoneout_factor_cell: float = 0.0, zoneout_factor_output: float = 0.0,
                 tf1_scope: str | None = None, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if int(num_units) < 1:
            raise ValueError(f"ZoneoutLSTMCell: `num_units` must be >= 1; got {num_units}.")
        self.num_units = int(num_units)
        self.zoneout_factor_cell = check_zoneout(zoneout_factor_cell, "zoneout_factor_cell", "ZoneoutLSTMCell")
        self.zoneout_factor_output = check_zoneout(zoneout_factor_output, "zoneout_factor_output", "ZoneoutLSTMCell")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.input_size = None

    @property
    def state_size(self):
        return [self.num_units, self.num_units]

    @property
    def output_size(self):
        return self.num_units

    def build(self, input_shape):
        self.input_size = int(input_shape[-1])
        self.kernel = self.add_weight(shape=(self.input_size + self.num_units, 4 * self.num_units),
                                      initializer="glorot_uniform", name="kernel")
        self.bias = self.add_weight(shape=(4 * self.num_units,), initializer="zeros", name="bias")

    def get_initial_state(self, batch_size=None):
        """The zero state ``[c, h]``, each ``(batch_size, num_units)`` in the compute dtype."""
        z = tf.zeros([batch_size, self.num_units], self.compute_dtype)
        return [z, z]

    def call(self, inputs, states=None, training=None, zoneout_masks=None):
        block = "ZoneoutLSTMCell"
        doc = f"(batch, {self.input_size})"
        check_float_tensor(inputs, "inputs", block, rank=2, last_dim=self.input_size, shape_doc=doc)
        dtype = self.compute_dtype
        x = tf.cast(inputs, dtype)
        if states is None:
            c_prev, h_prev = self.get_initial_state(tf.shape(x)[0])
        else:
            if len(states) != 2:
                raise ValueError(f"{block}: argument `states` must be [c, h], each (batch, {self.num_units}); "
                                 f"got {len(states)} tensors.")
            c_prev, h_prev = (tf.cast(s, dtype) for s in states)
            for s, n in ((c_prev, "states[0] (c)"), (h_prev, "states[1] (h)")):
                check_float_tensor(s, n, block, rank=2, last_dim=self.num_units, shape_doc=f"(batch, {self.num_units})")
        gates = (tf.matmul(tf.concat([x, h_prev], axis=-1), tf.cast(self.kernel, dtype))
                 + effective_bias(self.bias, dtype))
        c_new, h_new = lstm_from_gates(gates, c_prev)
        keep_c = keep_h = None
        if zoneout_masks is not None:
            if len(zoneout_masks) != 2:
                raise ValueError(f"{block}: argument `zoneout_masks` must be (c_keep, h_keep), each (batch, "
                                 f"{self.num_units}).")
            keep_c, keep_h = (tf.cast(check_mask(m, "zoneout_masks", block, f"(batch, {self.num_units})", 2), dtype)
                              for m in zoneout_masks)
        elif training:
            shape = tf.shape(c_new)
            keep_c = keep_masks(shape, self.zoneout_factor_cell, self.seed_generator, dtype)
            keep_h = keep_masks(shape, self.zoneout_factor_output, self.seed_generator, dtype)
        c = zoneout(c_new, c_prev, self.zoneout_factor_cell, keep_c)
        h = zoneout(h_new, h_prev, self.zoneout_factor_output, keep_h)
        return h_new, [c, h]

    def compute_output_shape(self, inputs_shape, states_shape=None):
        s = (inputs_shape[0], self.num_units)
        return s, [s, s]

    def get_config(self):
        config = super().get_config()
        config.update(num_units=self.num_units, zoneout_factor_cell=self.zoneout_factor_cell,
                      zoneout_factor_output=self.zoneout_factor_output, tf1_scope=self.tf1_scope, seed=self.seed)
        return config

    # -- TF1 exchange (the variables hold the TF1 layout) -----------------------------------------
    def _tf1_variables(self):
        return {"kernel": TF1Variable(self.kernel), "bias": TF1Variable(self.bias)}

    def _tf1_input_shape(self, weights):
        return (None, int(weights["kernel"].shape[0]) - self.num_units)
