"""Keras ``EncoderRNN``: Tacotron-2's bidirectional zoneout LSTM encoder with sequence lengths."""
from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from speechblocks.tf1_names import encoder_lstm_scope, encoder_rnn_tf1_variables

from ._validation import check_float_tensor, check_lengths
from .tf1_exchange import TF1WeightsMixin
from .zoneout_lstm_cell import (
    ZoneoutLSTMCell,
    check_mask,
    check_zoneout,
    effective_bias,
    keep_masks,
    lstm_from_gates,
    zoneout,
)


def _cell_step(x, c, h, kernel, bias, keep_c, keep_h, zoneout_cell: float, zoneout_output: float):
    """One zoneout-LSTM step over ``[x, h]`` (TF1 kernel layout): ``(next c, next h, raw output)``; the step every
    loop of this module runs."""
    # BiasAdd, not a broadcast add: TensorFlow's CPU graph fuses MatMul + BiasAdd into one kernel (oneDNN), which
    # took 10-15 % off the encoder (bench/bench_recurrent.py); the same sums
    c_new, h_new = lstm_from_gates(tf.nn.bias_add(tf.matmul(tf.concat([x, h], -1), kernel), bias), c)
    return zoneout(c_new, c, zoneout_cell, keep_c), zoneout(h_new, h, zoneout_output, keep_h), h_new


def direction_scan(xs, kernel, bias, active, keep_c, keep_h, zoneout_cell: float, zoneout_output: float):
    """One direction of a zoneout LSTM over a batch sorted by decreasing length.

    Each step computes TF1's ``concat([x_t, h]) @ kernel + bias`` for the ``active[t]`` leading rows only (the
    sequences still running at step ``t``); the other rows output zeros (their final states are not needed) -- exactly
    ``dynamic_rnn(sequence_length=...)``, whose per-step work on finished rows is discarded anyway. Two
    ``tf.while_loop`` s: the steps where every sequence runs (no slicing at all), then the tail (no iterations
    when every sequence is full length).

    Args:
        xs: ``(time, batch, in)`` inputs, time-major, rows sorted by decreasing length.
        kernel: TF1 kernel ``(in + u, 4u)``; bias: effective bias ``(4u,)`` (forget bias included).
        active: ``(time,)`` int32, number of sequences with ``length > t``.
        keep_c, keep_h: ``(time, batch, u)`` keep-masks (training) or None (inference).

    Returns:
        ``(time, batch, u)`` raw outputs, zeros past each length.
    """
    n_steps, batch = tf.shape(xs)[0], tf.shape(xs)[1]
    units = kernel.shape[-1] // 4
    zero = tf.zeros(tf.stack([batch, units]), xs.dtype)
    outputs = tf.TensorArray(xs.dtype, size=n_steps, element_shape=tf.TensorShape([None, units]))

    def full_body(t, c, h, outputs):  # every sequence still running: no slicing
        c, h, h_new = _cell_step(xs[t], c, h, kernel, bias, None if keep_c is None else keep_c[t],
                                 None if keep_h is None else keep_h[t], zoneout_cell, zoneout_output)
        return t + 1, c, h, outputs.write(t, h_new)

    def partial_body(t, c, h, outputs):  # only the ``active[t]`` leading rows run
        # ``active`` never grows and only outputs are returned: the state shrinks to the running rows (the
        # finished rows' frozen states are never read again), so no concatenation back to ``batch`` rows
        k = active[t]
        c, h = c[:k], h[:k]
        c, h, h_new = _cell_step(xs[t, :k], c, h, kernel, bias, None if keep_c is None else keep_c[t, :k],
                                 None if keep_h is None else keep_h[t, :k], zoneout_cell, zoneout_output)
        out = tf.pad(h_new, tf.stack([tf.stack([0, batch - k]), [0, 0]]))
        return t + 1, c, h, outputs.write(t, out)

    state_shape = tf.TensorShape([None, units])
    invariants = (tf.TensorShape([]), state_shape, state_shape, tf.TensorShape(None))
    n_full = tf.reduce_sum(tf.cast(tf.equal(active, batch), tf.int32))  # steps where all rows run
    loop = (tf.constant(0), zero, zero, outputs)
    loop = tf.while_loop(lambda t, *_: t < n_full, full_body, loop, shape_invariants=invariants)
    _, _, _, outputs = tf.while_loop(lambda t, *_: t < n_steps, partial_body, loop, shape_invariants=invariants)
    return outputs.stack()


def masked_direction_scan(xs, kernel, bias, lengths, keep_c, keep_h, zoneout_cell: float, zoneout_output: float):
    """One direction of a zoneout LSTM over the padded length: every row runs every step, masked past its length.

    The same numbers as :func:`direction_scan` (up to float rounding: the matmuls see every row) without its
    shrinking state: at step ``t`` the rows with ``length <= t`` keep their state and output zeros. Static shapes
    inside the loop and no ``TensorArray`` (each step's output is scattered into a ``(time, batch, u)`` tensor), so
    the loop compiles under XLA and converts to TFLite builtins (``WHILE``, ``SELECT_V2``, the scatter).

    Args:
        xs: ``(time, batch, in)`` inputs, time-major (any row order).
        kernel, bias: as :func:`direction_scan`.
        lengths: ``(batch,)`` int32 or None (every row full length).
        keep_c, keep_h: ``(time, batch, u)`` keep-masks (training) or None (inference).

    Returns:
        ``(time, batch, u)`` raw outputs, zeros past each length.
    """
    n_steps, batch = tf.shape(xs)[0], tf.shape(xs)[1]
    units = kernel.shape[-1] // 4
    zero = tf.zeros(tf.stack([batch, units]), xs.dtype)

    def body(t, c, h, outputs):
        c_next, h_next, h_new = _cell_step(tf.gather(xs, t), c, h, kernel, bias,
                                           None if keep_c is None else tf.gather(keep_c, t),
                                           None if keep_h is None else tf.gather(keep_h, t), zoneout_cell,
                                           zoneout_output)
        out = h_new
        if lengths is not None:
            running = tf.expand_dims(t < lengths, 1)  # (batch, 1)
            c_next, h_next = tf.where(running, c_next, c), tf.where(running, h_next, h)
            out = tf.where(running, h_new, tf.zeros_like(h_new))
        outputs = tf.tensor_scatter_nd_update(outputs, tf.reshape(t, [1, 1]), tf.expand_dims(out, 0))
        return t + 1, c_next, h_next, outputs

    outputs = tf.zeros(tf.stack([n_steps, batch, units]), xs.dtype)
    _, _, _, outputs = tf.while_loop(lambda t, *_: t < n_steps, body, (tf.constant(0), zero, zero, outputs))
    return outputs


def _in_xla_context() -> bool:
    """True while tracing inside ``tf.function(jit_compile=True)`` (TensorFlow marks the graph with an XLA context)."""
    from tensorflow.python.ops import control_flow_util  # noqa: PLC0415 -- private, read at trace time only

    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


@keras.saving.register_keras_serializable(package="speechblocks")
class EncoderRNN(TF1WeightsMixin, keras.layers.Layer):
    """Bidirectional one-layer zoneout LSTM, TF1 Tacotron-2's ``EncoderRNN``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Exactly ``tf.nn.bidirectional_dynamic_rnn(sequence_length=input_lengths)`` over two
    :class:`ZoneoutLSTMCell` (``encoder_fw_LSTM``, ``encoder_bw_LSTM``): the backward direction runs each
    sequence reversed within its own length, outputs past a sequence's length are zeros and the states stop
    at the length. The batch is sorted by decreasing length so each step only computes the sequences still
    running (what ``dynamic_rnn`` keeps; a batch already in that order, e.g. all full length, is not
    gathered); the two directions are independent ``tf.while_loop`` s that TensorFlow runs concurrently. (Measured
    on CPU, TF1's per-step ``concat([x, h]) @ kernel`` does the same work as a separate input projection before
    the loop -- see ``bench/bench_recurrent.py``.)

    Args:
        size: int, LSTM units per direction.
        zoneout: float in [0, 1], zoneout factor of cell and hidden state.
        tf1_scope: TF1 scope (default ``"encoder_LSTM"``); keys
            ``bidirectional_rnn/{fw,bw}/encoder_{fw,bw}_LSTM/{kernel,bias}``.
        seed: optional int seed of the zoneout noise.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, time, input_size)``.
        input_lengths: int tensor ``(batch,)``; ``None`` means every sequence is full length.
        training: bool, random zoneout when True.
        zoneout_masks: optional ``((fw_c, fw_h), (bw_c, bw_h))`` 0/1 keep-masks ``(batch, time, size)``; entry
            ``t`` applies to the step that consumes ``inputs[:, t]`` (for the backward direction too). Given
            masks replace the random ones.
        masked: bool or None: the masked formulation (see below); None: masked only under XLA (``jit_compile``) or
            inside :meth:`masked_formulation`.

    Returns:
        float tensor ``(batch, time, 2 * size)``: forward outputs then backward outputs.

    Masking: honours ``input_lengths``; padding beyond a length never changes the valid outputs.

    Two formulations of the same numbers (within float rounding, ~1e-7), chosen by ``masked``:

    * the shrinking loop (default, eager and traced): each step computes only the rows still running, the fastest on
      CPU for batches of mixed lengths; its state changes shape inside the ``tf.while_loop``, so it neither
      compiles under XLA nor converts to TFLite builtins;
    * the masked loop (``masked=True``, and automatically while tracing under ``tf.function(jit_compile=True)``):
      every row runs every step over the padded length, states frozen and outputs zeroed past each length
      (:func:`masked_direction_scan`). It compiles under XLA and converts to LiteRT with TFLite builtins only (what
      ``Tacotron2.export_litert`` uses).

    Deployment: exports as a SavedModel (unknown batch and time); XLA (the masked loop). LiteRT: the default
    (shrinking) loop needs ``SELECT_TF_OPS`` (its TensorList ops with an unknown batch, ``InvertPermutation``) and
    runs only in an interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s; a model
    calling the layer with ``masked=True`` converts to builtins and runs in ``ai_edge_litert``.

    Example:
    >>> enc = EncoderRNN(size=8)
    >>> enc(tf.zeros((2, 5, 3)), tf.constant([5, 2])).shape
    TensorShape([2, 5, 16])
    """

    default_tf1_scope = "encoder_LSTM"

    def __init__(self, size: int = 256, zoneout: float = 0.1, tf1_scope: str | None = None, seed: int | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        if int(size) < 1:
            raise ValueError(f"EncoderRNN: `size` must be >= 1; got {size}.")
        self.size = int(size)
        self.zoneout = check_zoneout(zoneout, "zoneout", "EncoderRNN")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.fw_cell = ZoneoutLSTMCell(self.size, self.zoneout, self.zoneout, tf1_scope="encoder_fw_LSTM",
                                       dtype=self.dtype_policy, name="encoder_fw_LSTM")
        self.bw_cell = ZoneoutLSTMCell(self.size, self.zoneout, self.zoneout, tf1_scope="encoder_bw_LSTM",
                                       dtype=self.dtype_policy, name="encoder_bw_LSTM")
        self.input_size = None

    def build(self, input_shape):
        self.input_size = int(input_shape[-1])
        self.fw_cell.build((None, self.input_size))
        self.bw_cell.build((None, self.input_size))

    def _masks(self, zoneout_masks, x):
        block, u = "EncoderRNN", self.size
        doc = f"((fw_c, fw_h), (bw_c, bw_h)), each (batch, time, {u})"
        try:
            (fc, fh), (bc, bh) = zoneout_masks
        except (TypeError, ValueError):
            raise ValueError(f"EncoderRNN: argument `zoneout_masks` must be {doc}.") from None
        ms = [tf.cast(check_mask(m, "zoneout_masks", block, doc, 3), self.compute_dtype) for m in (fc, fh, bc, bh)]
        for m in ms:
            if m.shape.rank == 3 and not m.shape.is_compatible_with(x.shape[:2].concatenate([u])):
                raise ValueError(f"EncoderRNN: argument `zoneout_masks` must be {doc}; got shape {m.shape}.")
        return ms

    def call(self, inputs, input_lengths=None, training=None, zoneout_masks=None, masked=None):
        block = "EncoderRNN"
        check_float_tensor(inputs, "inputs", block, rank=3, last_dim=self.input_size,
                           shape_doc=f"(batch, time, {self.input_size})")
        dtype = self.compute_dtype
        x = tf.cast(inputs, dtype)
        batch, n_steps = tf.shape(x)[0], tf.shape(x)[1]
        u = self.size
        masks = None if zoneout_masks is None else self._masks(zoneout_masks, x)
        if masked is None:
            masked = self.__dict__.get("_masked_default", False) or (not tf.executing_eagerly() and _in_xla_context())
        if masked:
            return self._masked_call(x, input_lengths, training, masks)
        if input_lengths is None:  # every sequence full length: no sorting, plain reversal
            lens = None
            active = tf.fill(tf.reshape(n_steps, [1]), batch)

            def restore(y):
                return y
        else:
            lengths = tf.cast(check_lengths(input_lengths, "input_lengths", block, batch_dim=x.shape[0]), tf.int32)
            # sort by decreasing length so that the running sequences of step t are the leading rows; a batch
            # already in that order (e.g. all full length) skips the gathers
            in_order = tf.reduce_all(lengths[:-1] >= lengths[1:])
            order = tf.argsort(lengths, direction="DESCENDING", stable=True)

            def sort(a):
                return tf.cond(in_order, lambda: tf.identity(a), lambda: tf.gather(a, order))

            def restore(y):
                return tf.cond(in_order, lambda: tf.identity(y),
                               lambda: tf.gather(y, tf.math.invert_permutation(order)))

            lens = sort(lengths)
            active = tf.reduce_sum(tf.cast(lens[None, :] > tf.range(n_steps)[:, None], tf.int32), axis=1)
            x = sort(x)
            if masks is not None:
                masks = [sort(m) for m in masks]

        def time_major(a):
            return tf.transpose(a, [1, 0, 2])

        def reverse(a):  # time-major reverse_within_lengths: saves transposes around the backward direction
            if lens is None:
                return tf.reverse(a, axis=[0])
            return tf.reverse_sequence(a, tf.cast(lens, tf.int64), seq_axis=0, batch_axis=1)

        keeps = [None] * 4
        if masks is not None:
            fc, fh, bc, bh = (time_major(m) for m in masks)
            keeps = [fc, fh, reverse(bc), reverse(bh)]
        elif training:
            shape = tf.stack([n_steps, batch, u])
            keeps = [keep_masks(shape, self.zoneout, self.seed_generator, dtype) for _ in range(4)]
        xt = time_major(x)
        outs = []
        for d, (cell, xs) in enumerate(((self.fw_cell, xt), (self.bw_cell, reverse(xt)))):
            outs.append(direction_scan(xs, tf.cast(cell.kernel, dtype), effective_bias(cell.bias, dtype), active,
                                       keeps[2 * d], keeps[2 * d + 1], self.zoneout, self.zoneout))
        return restore(time_major(tf.concat([outs[0], reverse(outs[1])], axis=-1)))

    @contextlib.contextmanager
    def masked_formulation(self):
        """While tracing a caller's function (an export): calls with ``masked=None`` run the masked formulation."""
        old = self.__dict__.get("_masked_default", False)
        object.__setattr__(self, "_masked_default", True)
        try:
            yield
        finally:
            object.__setattr__(self, "_masked_default", old)

    def _masked_call(self, x, input_lengths, training, masks):
        """The masked formulation (:func:`masked_direction_scan`): no sorting, no shrinking state."""
        dtype = self.compute_dtype
        batch, n_steps = tf.shape(x)[0], tf.shape(x)[1]
        lens = None
        if input_lengths is not None:
            lens = tf.cast(check_lengths(input_lengths, "input_lengths", "EncoderRNN", batch_dim=x.shape[0]), tf.int32)

        def time_major(a):
            return tf.transpose(a, [1, 0, 2])

        def reverse(a):
            if lens is None:
                return tf.reverse(a, axis=[0])
            return tf.reverse_sequence(a, lens, seq_axis=0, batch_axis=1)

        keeps = [None] * 4
        if masks is not None:
            fc, fh, bc, bh = (time_major(m) for m in masks)
            keeps = [fc, fh, reverse(bc), reverse(bh)]
        elif training:
            shape = tf.stack([n_steps, batch, self.size])
            keeps = [keep_masks(shape, self.zoneout, self.seed_generator, dtype) for _ in range(4)]
        xt = time_major(x)
        outs = []
        for d, (cell, xs) in enumerate(((self.fw_cell, xt), (self.bw_cell, reverse(xt)))):
            outs.append(masked_direction_scan(xs, tf.cast(cell.kernel, dtype), effective_bias(cell.bias, dtype), lens,
                                              keeps[2 * d], keeps[2 * d + 1], self.zoneout, self.zoneout))
        return time_major(tf.concat([outs[0], reverse(outs[1])], axis=-1))

    def compute_output_shape(self, inputs_shape, input_lengths_shape=None):
        return tuple(inputs_shape[:-1]) + (2 * self.size,)

    def get_config(self):
        config = super().get_config()
        config.update(size=self.size, zoneout=self.zoneout, tf1_scope=self.tf1_scope, seed=self.seed)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return encoder_rnn_tf1_variables(self.fw_cell, self.bw_cell)

    def _tf1_input_shape(self, weights):
        return (None, None, int(weights[f"{encoder_lstm_scope('fw')}/kernel"].shape[0]) - self.size)
