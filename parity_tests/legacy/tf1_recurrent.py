"""TF1-style graph code of the recurrent Tacotron-2 blocks, written from the seed's semantics.

Runs only inside the legacy subprocess (``TF_USE_LEGACY_KERAS=1``). ``tf.contrib`` is gone: the LSTM is
``tf.compat.v1.nn.rnn_cell.LSTMCell``, which has exactly ``LSTMBlockCell``'s maths and variable names
(``kernel`` over ``concat([x, h])`` with gates i, j, f, o, ``bias``, forget bias 1.0 added at run time).
``ZoneoutLSTM`` is our own TF1 ``RNNCell`` wrapper around it; like the seed it overrides ``__call__`` so it
adds no variable scope of its own. For training-mode parity its keep-masks can be fed from outside: they ride
along the input sequence (concatenated to the features) and :class:`MaskFeeder` hands each step's slice to the
zoneout cells, so ``bidirectional_dynamic_rnn`` reverses them together with the inputs.

Functions take ``(inputs..., config, training)`` (``config`` = the Keras constructor keywords) and return
``(output_tensor, masks)``; masks fed from outside are not repeated in ``masks`` (it is empty).
"""
from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1
LSTMStateTuple = v1.nn.rnn_cell.LSTMStateTuple


class ZoneoutLSTM(v1.nn.rnn_cell.RNNCell):
    """``LSTMCell`` + zoneout on the state; returns the raw LSTM output, the state carries zoned-out (c, h).

    Training: ``c = (1 - z) * dropout(c' - c, keep_prob=1 - z) + c`` -- the TF1 keep-prob reading of the
    seed -- with a random mask, or with ``step_masks`` (a 0/1 keep-mask pair) when the caller sets them.
    Inference: ``c = (1 - z) * c' + z * c``.
    """

    def __init__(self, num_units, zoneout_cell, zoneout_output, training, name):
        super().__init__(name=f"{name}_zoneout")
        if not (0.0 <= zoneout_cell <= 1.0 and 0.0 <= zoneout_output <= 1.0):
            raise ValueError("zoneout factors must lie in [0, 1]")
        self._cell = v1.nn.rnn_cell.LSTMCell(num_units, name=name)
        self._num_units = num_units
        self._zc = float(zoneout_cell)
        self._zh = float(zoneout_output)
        self._training = training
        self.step_masks = None

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def _zoneout(self, new, prev, z, keep):
        if not self._training:
            return (1.0 - z) * new + z * prev
        if keep is None:
            dropped = v1.nn.dropout(new - prev, keep_prob=1.0 - z)
        else:
            dropped = (new - prev) / (1.0 - z) * keep
        return (1.0 - z) * dropped + prev

    def __call__(self, inputs, state, scope=None):
        output, (new_c, new_h) = self._cell(inputs, state)
        prev_c, prev_h = state
        keep_c, keep_h = self.step_masks if self.step_masks is not None else (None, None)
        c = self._zoneout(new_c, prev_c, self._zc, keep_c)
        h = self._zoneout(new_h, prev_h, self._zh, keep_h)
        return output, LSTMStateTuple(c, h)


class MaskFeeder(v1.nn.rnn_cell.RNNCell):
    """Runs ``inner`` on the first ``n_in`` input features; the rest are per-step zoneout keep-masks.

    ``assignments``: ``[(zoneout_cell, c_offset, h_offset)]`` -- feature offsets of that cell's masks.
    Overrides ``__call__`` (no variable scope of its own), so the inner cells keep their TF1 names.
    """

    def __init__(self, inner, n_in, units, assignments):
        super().__init__(name="mask_feeder")
        self._inner = inner
        self._n_in = n_in
        self._units = units
        self._assignments = assignments

    @property
    def state_size(self):
        return self._inner.state_size

    @property
    def output_size(self):
        return self._inner.output_size

    def __call__(self, inputs, state, scope=None):
        u = self._units
        for cell, oc, oh in self._assignments:
            cell.step_masks = (inputs[:, oc:oc + u], inputs[:, oh:oh + u])
        return self._inner(inputs[:, :self._n_in], state)


def _check_z(config):
    z = float(config.get("zoneout", 0.1))
    if not 0.0 <= z <= 1.0:
        raise ValueError("zoneout must lie in [0, 1]")
    return z


def zoneout_lstm_sequence(inputs, initial_state, config, training, zoneout_masks=None):
    """One ``ZoneoutLSTMCell`` (config: ``num_units``, ``zoneout_factor_cell``, ``zoneout_factor_output``,
    ``tf1_scope``) stepped over ``inputs`` ``(batch, time, in)`` from ``initial_state`` ``(c, h)``.

    Variables ``<current scope>/<tf1_scope>/{kernel,bias}``. Returns ``((outputs, (c, h)), [])``.
    """
    name = config.get("tf1_scope") or "lstm_cell"
    u = int(config["num_units"])
    cell = ZoneoutLSTM(u, config.get("zoneout_factor_cell", 0.0), config.get("zoneout_factor_output", 0.0), training,
                       name)
    x, runner = inputs, cell
    if zoneout_masks is not None:
        n_in = int(inputs.shape[-1])
        x = tf.concat([inputs, *zoneout_masks], axis=-1)
        runner = MaskFeeder(cell, n_in, u, [(cell, n_in, n_in + u)])
    vs = v1.get_variable_scope()
    outputs, state = v1.nn.dynamic_rnn(runner, x, initial_state=LSTMStateTuple(*initial_state), scope=vs)
    return (outputs, (state.c, state.h)), []


def encoder_rnn(inputs, input_lengths, config, training, zoneout_masks=None):
    """The seed's ``EncoderRNN``: ``bidirectional_dynamic_rnn(sequence_length=input_lengths)`` of two
    zoneout LSTMs ``encoder_{fw,bw}_LSTM`` under ``config["tf1_scope"]`` (default ``encoder_LSTM``).

    ``zoneout_masks``: optional ``(fw_c, fw_h, bw_c, bw_h)`` keep-masks ``(batch, time, size)`` indexed by the
    input position (the backward ones are reversed with the inputs). Returns ``(batch, time, 2 * size)``.
    """
    scope = config.get("tf1_scope") or "encoder_LSTM"
    size = int(config.get("size", 256))
    z = _check_z(config)
    fw = ZoneoutLSTM(size, z, z, training, "encoder_fw_LSTM")
    bw = ZoneoutLSTM(size, z, z, training, "encoder_bw_LSTM")
    x, fw_run, bw_run = inputs, fw, bw
    if zoneout_masks is not None:
        n_in = int(inputs.shape[-1])
        x = tf.concat([inputs, *zoneout_masks], axis=-1)
        fw_run = MaskFeeder(fw, n_in, size, [(fw, n_in, n_in + size)])
        bw_run = MaskFeeder(bw, n_in, size, [(bw, n_in + 2 * size, n_in + 3 * size)])
    with v1.variable_scope(scope):
        outputs, _ = v1.nn.bidirectional_dynamic_rnn(fw_run, bw_run, x, sequence_length=input_lengths,
                                                     dtype=tf.float32, swap_memory=True)
    return tf.concat(outputs, axis=2), []


def decoder_rnn_sequence(inputs, config, training, zoneout_masks=None, return_state=False):
    """The seed's one-step ``DecoderRNN`` (``MultiRNNCell`` of ``decoder_LSTM_{k}`` under ``config["tf1_scope"]``,
    default ``decoder_rnn``) run over ``inputs`` ``(batch, time, in)`` from the zero state.

    Each step is the seed's ``with variable_scope(scope): cell(inputs, states)``; the loop is ``dynamic_rnn``
    re-entering that same scope, so the variables are ``<scope>/multi_rnn_cell/cell_{k}/decoder_LSTM_{k+1}/...``.
    ``zoneout_masks``: optional per-layer ``(c_keep, h_keep)`` ``(batch, time, size)``.
    Returns ``(outputs (batch, time, size), masks)`` or, with ``return_state``, ``((outputs, final_state), masks)``.
    """
    scope = config.get("tf1_scope") or "decoder_rnn"
    size = int(config.get("size", 1024))
    n_layers = int(config.get("layers", 2))
    z = _check_z(config)
    cells = [ZoneoutLSTM(size, z, z, training, f"decoder_LSTM_{k + 1}") for k in range(n_layers)]
    multi = v1.nn.rnn_cell.MultiRNNCell(cells, state_is_tuple=True)
    x, runner = inputs, multi
    if zoneout_masks is not None:
        n_in = int(inputs.shape[-1])
        flat = [m for pair in zoneout_masks for m in pair]
        x = tf.concat([inputs, *flat], axis=-1)
        runner = MaskFeeder(multi, n_in, size,
                            [(cells[k], n_in + 2 * k * size, n_in + (2 * k + 1) * size) for k in range(n_layers)])
    with v1.variable_scope(scope) as vs:
        outputs, state = v1.nn.dynamic_rnn(runner, x, dtype=tf.float32, scope=vs)
    if return_state:
        return (outputs, state), []
    return outputs, []


def decoder_rnn_step(inputs, states, config, training, zoneout_masks=None):
    """One step of the seed's ``DecoderRNN``: ``with variable_scope(scope): MultiRNNCell(inputs, states)``.

    ``zoneout_masks``: optional per-layer ``(c_keep, h_keep)`` ``(batch, size)``.
    """
    scope = config.get("tf1_scope") or "decoder_rnn"
    size = int(config.get("size", 1024))
    z = _check_z(config)
    cells = [ZoneoutLSTM(size, z, z, training, f"decoder_LSTM_{k + 1}") for k in range(int(config.get("layers", 2)))]
    for cell, masks in zip(cells, zoneout_masks or ()):
        cell.step_masks = masks
    multi = v1.nn.rnn_cell.MultiRNNCell(cells, state_is_tuple=True)
    with v1.variable_scope(scope):
        return multi(inputs, tuple(LSTMStateTuple(c, h) for c, h in states)), []
