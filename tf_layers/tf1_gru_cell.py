"""Keras ``TF1GRUCell`` (TF1 ``GRUCell`` maths and variables) and a fast bidirectional GRU over it.

TF1's GRU applies the reset gate *before* the candidate matmul (``concat([x, r·h]) @ K``); Keras'
``GRU(reset_after=False)`` does the same maths with another layout (see :mod:`tf_layers._gru_layout`).
The cell stores TF1's layout so checkpoints load without conversion.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from ._fan_out import fan_out
from ._sequence import reverse_within_lengths
from .tf1_exchange import TF1Variable, TF1WeightsMixin

__all__ = ["TF1GRUCell", "bidirectional_tf1_gru"]


@keras.saving.register_keras_serializable(package="speechblocks")
class TF1GRUCell(TF1WeightsMixin, keras.layers.Layer):
    """A Keras RNN cell with the maths and variables of ``tf.compat.v1.nn.rnn_cell.GRUCell``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    ``[r, u] = σ(concat([x, h]) @ gates/kernel + gates/bias)``,
    ``c = tanh(concat([x, r·h]) @ candidate/kernel + candidate/bias)``, ``h' = u·h + (1 − u)·c``.

    Args:
        units: int, state size.
        tf1_scope: TF1 scope of the cell (e.g. ``"bidirectional_rnn/fw/CBHG_forward_RNN"``).
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, input_size)``.
        states: ``[h]`` with ``h`` of shape ``(batch, units)``.

    Returns:
        ``(h', [h'])``.

    Masking: a single step knows no lengths; inside ``keras.layers.RNN`` a Keras mask holds the state at
    padded steps (Keras semantics), while ``bidirectional_tf1_gru`` / ``CBHG`` take explicit lengths with
    TF1's ``sequence_length`` semantics (zeros past a length, state frozen at it).

    Example:
    >>> rnn = keras.layers.RNN(TF1GRUCell(16), return_sequences=True)
    >>> rnn(tf.zeros((2, 5, 8))).shape
    TensorShape([2, 5, 16])
    """

    default_tf1_scope = "gru_cell"

    def __init__(self, units: int, tf1_scope: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if int(units) < 1:
            raise ValueError(f"TF1GRUCell: `units` must be >= 1; got {units}.")
        self.units = int(units)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.state_size = self.units
        self.output_size = self.units
        self.input_size = None

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError("TF1GRUCell: the last axis of `inputs` must be known.")
        self.input_size = int(input_shape[-1])
        u = self.units
        self.gates_kernel = self.add_weight(shape=(self.input_size + u, 2 * u), initializer="glorot_uniform",
                                            name="gates_kernel")
        self.gates_bias = self.add_weight(shape=(2 * u,), initializer=keras.initializers.Constant(1.0),
                                          name="gates_bias")
        self.candidate_kernel = self.add_weight(shape=(self.input_size + u, u), initializer="glorot_uniform",
                                                name="candidate_kernel")
        self.candidate_bias = self.add_weight(shape=(u,), initializer="zeros", name="candidate_bias")

    def call(self, inputs, states, training=None):
        h = states[0] if isinstance(states, (list, tuple)) else states
        dt = inputs.dtype
        # bias_add, not `+`: TF fuses MatMul + BiasAdd into one oneDNN kernel (3-4x faster at batch 1)
        gates = tf.sigmoid(tf.nn.bias_add(tf.matmul(tf.concat([inputs, h], -1), tf.cast(self.gates_kernel, dt)),
                                          tf.cast(self.gates_bias, dt)))
        r, u = tf.split(gates, 2, axis=-1)
        c = tf.tanh(tf.nn.bias_add(tf.matmul(tf.concat([inputs, r * h], -1), tf.cast(self.candidate_kernel, dt)),
                                   tf.cast(self.candidate_bias, dt)))
        new_h = u * h + (1.0 - u) * c
        return new_h, [new_h]

    def get_initial_state(self, batch_size=None):
        return [tf.zeros((batch_size, self.units), dtype=self.compute_dtype)]

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, tf1_scope=self.tf1_scope)
        return config

    def _tf1_variables(self):
        return {
            "gates/kernel": TF1Variable(self.gates_kernel),
            "gates/bias": TF1Variable(self.gates_bias),
            "candidate/kernel": TF1Variable(self.candidate_kernel),
            "candidate/bias": TF1Variable(self.candidate_bias),
        }

    def _tf1_input_shape(self, weights):
        return (None, int(weights["gates/kernel"].shape[0]) - self.units)


def bidirectional_tf1_gru(inputs, fw_cell: TF1GRUCell, bw_cell: TF1GRUCell, lengths=None):
    """``bidirectional_dynamic_rnn(fw_cell, bw_cell, inputs, sequence_length=lengths)`` from the zero state.

    Both directions advance in one loop; the input halves of both matmuls are computed for all steps at once,
    so each step only does the recurrent halves (with the biases). The backward direction sees each
    sequence reversed within its own length; outputs past a length are zeros.

    Args:
        inputs: float tensor ``(batch, time, in)``; both cells must be built for ``in``.
        fw_cell: forward :class:`TF1GRUCell`.
        bw_cell: backward :class:`TF1GRUCell` (same ``units``).
        lengths: ``(batch,)`` integer lengths or ``None`` (every sequence full length).

    Returns:
        ``(fw_outputs, bw_outputs)``, each ``(batch, time, units)``.
    """
    dt = inputs.dtype
    n_in = fw_cell.input_size

    def time_major(x):
        return tf.transpose(x, [1, 0, 2])

    elems, recurrent = [], []
    for cell, x in ((fw_cell, inputs), (bw_cell, reverse_within_lengths(inputs, lengths))):
        gk, ck = tf.cast(cell.gates_kernel, dt), tf.cast(cell.candidate_kernel, dt)
        elems.append(time_major(tf.matmul(x, gk[:n_in])))
        elems.append(time_major(tf.matmul(x, ck[:n_in])))
        recurrent.append((gk[n_in:], ck[n_in:], tf.cast(cell.gates_bias, dt), tf.cast(cell.candidate_bias, dt)))

    def one_step(h, xg_t, xc_t, gh, ch, gb, cb):
        h_gates, h_reset, h_update = fan_out(h, 3)  # three uses: no 3-input AddN in the scan's gradient
        # the biases go with the recurrent products: MatMul + BiasAdd is one fused oneDNN kernel (TF1's GRUCell
        # runs that form); a plain MatMul is Eigen's, which spins on a busy machine
        gates = tf.sigmoid(xg_t + tf.nn.bias_add(tf.matmul(h_gates, gh), gb))
        r, z = tf.split(gates, 2, axis=-1)
        c = tf.tanh(xc_t + tf.nn.bias_add(tf.matmul(r * h_reset, ch), cb))
        return z * h_update + (1.0 - z) * c

    def step(state, e):
        return (one_step(state[0], e[0], e[1], *recurrent[0]), one_step(state[1], e[2], e[3], *recurrent[1]))

    h0 = tf.zeros(tf.stack([tf.shape(inputs)[0], fw_cell.units]), dtype=dt)
    fw_out, bw_out = tf.scan(step, tuple(elems), initializer=(h0, h0))  # (T, B, u) each
    fw_out = time_major(fw_out)
    bw_out = reverse_within_lengths(time_major(bw_out), lengths)
    if lengths is not None:
        valid = tf.sequence_mask(lengths, maxlen=tf.shape(inputs)[1])[:, :, None]
        zeros = tf.zeros_like(fw_out)
        fw_out = tf.where(valid, fw_out, zeros)
        bw_out = tf.where(valid, bw_out, zeros)
    return fw_out, bw_out
