"""Keras ``DecoderRNN``: Tacotron-2's stack of unidirectional zoneout LSTMs (``MultiRNNCell``)."""
from __future__ import annotations

from typing import NamedTuple

import keras
import tensorflow as tf

from speechblocks.tf1_names import decoder_lstm_scope, decoder_rnn_tf1_variables

from ._loop_weight_gradient import StepInputs, weight_gradient_tap
from ._validation import check_float_tensor
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


class LSTMStackWeights(NamedTuple):
    """The variables of a zoneout LSTM stack in the compute dtype, read once before a loop calls :func:`stack_step`.

    ``kernels[k]`` is layer ``k``'s TF1 kernel ``(in_k + u, 4u)``; layer 1's is also split by rows into
    ``input_kernel`` (the rows of the input that is new at each step: its ``n_input`` leading rows, which a
    teacher-forced or sequence loop applies to every step at once) and ``recurrent_kernel`` (the rest: any input
    carried over from the previous step, then ``h``). ``biases[k]``: the effective bias (forget bias folded).
    """

    kernels: tuple
    input_kernel: tf.Tensor
    recurrent_kernel: tf.Tensor
    biases: tuple


def stack_weights(cells, dtype, n_input: int) -> LSTMStackWeights:
    """:class:`LSTMStackWeights` of ``cells`` (``ZoneoutLSTMCell`` s) whose first layer's new input has ``n_input``
    features."""
    kernels = tuple(tf.cast(c.kernel, dtype) for c in cells)
    return LSTMStackWeights(kernels, kernels[0][:n_input], kernels[0][n_input:],
                            tuple(effective_bias(c.bias, dtype) for c in cells))


class LoopGates:
    """The per-step gates of a loop over :func:`stack_step` whose layer-1 input gates ``gx`` ``(steps, batch, 4u)``
    (input rows and bias) were computed for every step beforehand; the one set-up of the teacher-forced decoder loop
    and :func:`stacked_scan`.

    The gates are read from tensor lists (:meth:`read`: a list read's gradient is one step, a slice's a full-size
    tensor at every step). With ``weight_taps`` (training) each kernel's gradient comes from one product after the
    loop (:mod:`._loop_weight_gradient`): :attr:`w` has every kernel the loop multiplies detached, ``gx`` is tapped
    for layer 1's recurrent rows and each upper layer's bias, broadcast over the steps, for its kernel; the loop
    carries :meth:`records` as a loop variable, :meth:`record` s each step's product inputs (``stack_step``'s
    ``return_inputs``) and hands them to the taps with :meth:`finish` before the gradient is taken.
    """

    def __init__(self, w: LSTMStackWeights, gx, weight_taps: bool):
        self.steps, self.batch = tf.shape(gx)[0], tf.shape(gx)[1]
        self._dtype = gx.dtype
        self._holder = bias = None
        if weight_taps:
            self._holder = StepInputs(len(w.kernels))
            self._rows = [w.recurrent_kernel.shape[0]] + [k.shape[0] for k in w.kernels[1:]]
            bias = [None] + [weight_gradient_tap(tf.broadcast_to(w.biases[k], tf.shape(gx)), w.kernels[k],
                                                 self._holder, k) for k in range(1, len(w.kernels))]
            gx = weight_gradient_tap(gx, w.recurrent_kernel, self._holder, 0)
            w = w._replace(kernels=tuple(tf.stop_gradient(k) for k in w.kernels),
                           recurrent_kernel=tf.stop_gradient(w.recurrent_kernel))
        self.w = w
        self._gx = self._list().unstack(gx)
        self._bias = None if bias is None else [b if b is None else self._list().unstack(b) for b in bias]

    def _list(self):
        return tf.TensorArray(self._dtype, size=self.steps)

    def read(self, t):
        """``(input_gates, bias_gates)`` of step ``t`` for :func:`stack_step` (``bias_gates`` None without taps)."""
        return self._gx.read(t), None if self._bias is None else [b if b is None else b.read(t) for b in self._bias]

    def records(self) -> tuple:
        """The loop variable :meth:`record` fills: one tensor list per layer with taps, else ``()``."""
        return () if self._holder is None else tuple(self._list() for _ in self._rows)

    def record(self, records: tuple, t, inputs) -> tuple:
        """``records`` with step ``t``'s product inputs ``inputs`` (per layer ``(batch, rows)``) written, detached."""
        if self._holder is None:
            return records
        return tuple(r.write(t, tf.stop_gradient(x)) for r, x in zip(records, inputs))

    def finish(self, records: tuple) -> None:
        """After the loop: the stacked inputs ``(steps, batch, rows)`` to the taps (reshaped: a loop of no steps
        stacks its empty lists to shape ``(0,)``)."""
        if self._holder is not None:
            self._holder.inputs = [tf.reshape(r.stack(), tf.stack([self.steps, self.batch, n]))
                                   for r, n in zip(records, self._rows)]


def stack_step(x, carried, cs, hs, w: LSTMStackWeights, z: float, keep_c=None, keep_h=None, *, input_gates=None,
               bias_gates=None, return_inputs: bool = False):
    """One step of a ``MultiRNNCell`` of zoneout LSTMs: every layer feeds the next its raw output, the states carry
    the zoned-out ``(c, h)``. The one place the decoders spell it (``DecoderRNN`` and ``Tacotron2Decoder``).

    Layer 1's input is ``concat([x, carried])`` (``carried`` None: ``x``). Two spellings of the same maths, each
    the number-for-number formulation of its callers (they differ in float rounding only):

    * default (free running, one step): TF1's ``concat([input, h]) @ kernel + bias`` per layer -- one product over
      each kernel. (Splitting each product into its recurrent rows, which do not wait for the step's new input, and
      its input rows was tried: on 2 cores the two products of a layer then compete for the cores and a whole
      synthesis step was 8 % slower, interleaved in one process.)
    * ``input_gates`` (``x`` unused): layer 1's ``x @ input_kernel + bias`` computed beforehand for every step (a
      teacher-forced or sequence loop), plus ``concat([carried, h]) @ recurrent_kernel``; the other layers as default.

    Args:
        x: ``(batch, n_input)`` the step's new input of layer 1 (None with ``input_gates``).
        carried: ``(batch, n_carried)`` or None, the rest of layer 1's input (known from the previous step).
        cs, hs: tuples of per-layer states ``(batch, u)``.
        w: :class:`LSTMStackWeights`.
        z: zoneout factor (inference zoneout when the keep-masks are None).
        keep_c, keep_h: per-layer 0/1 keep-masks (anything indexable by layer, ``(batch, u)`` each) or None.
        input_gates: ``(batch, 4u)`` or None.
        bias_gates: per layer ``(batch, 4u)`` added instead of that layer's bias (layers after the first; entries
            None: the bias), or None: a teacher-forced training loop passes its
            :func:`~tf_layers._loop_weight_gradient.weight_gradient_tap` of each bias here (:class:`LoopGates`).
        return_inputs: also return each layer's product input (``[carried, h]`` for layer 1 with ``input_gates``,
            else ``[input, h]``), ``(batch, rows of the kernel it multiplies)``.

    Returns:
        ``(output (batch, u), new_cs, new_hs)``: the last layer's raw output and the zoned-out states; with
        ``return_inputs`` a 4th item, the tuple of the layers' product inputs.
    """
    new_c, new_h, products = [], [], []
    for k in range(len(cs)):
        if k == 0 and input_gates is not None:
            recurrent = hs[0] if carried is None else tf.concat([carried, hs[0]], -1)
            products.append(recurrent)
            gates = input_gates + tf.matmul(recurrent, w.recurrent_kernel)
        else:
            inputs = tf.concat([x, hs[k]] if k > 0 or carried is None else [x, carried, hs[0]], -1)
            products.append(inputs)
            if bias_gates is None or bias_gates[k] is None:  # BiasAdd: fused with the MatMul (see encoder_rnn)
                gates = tf.nn.bias_add(tf.matmul(inputs, w.kernels[k]), w.biases[k])
            else:
                gates = tf.matmul(inputs, w.kernels[k]) + bias_gates[k]
        c_new, x = lstm_from_gates(gates, cs[k])
        new_c.append(zoneout(c_new, cs[k], z, None if keep_c is None else keep_c[k]))
        new_h.append(zoneout(x, hs[k], z, None if keep_h is None else keep_h[k]))
    if return_inputs:
        return x, tuple(new_c), tuple(new_h), tuple(products)
    return x, tuple(new_c), tuple(new_h)


def stacked_scan(gx0, w: LSTMStackWeights, c0, h0, keep_c, keep_h, z: float, weight_taps: bool = False):
    """A ``MultiRNNCell`` of zoneout LSTMs over time in one ``tf.while_loop`` (:func:`stack_step` per step).

    Args:
        gx0: ``(time, batch, 4u)`` input projection of layer 1 (bias and forget bias included).
        w: :class:`LSTMStackWeights` (layer 1's input rows already applied in ``gx0``).
        c0, h0: tuples of initial states per layer ``(batch, u)``.
        keep_c, keep_h: ``(time, L, batch, u)`` keep-masks (training) or None.
        weight_taps: training: each kernel's gradient from one product after the loop (:class:`LoopGates`)
            instead of TensorFlow's outer product and accumulation at every step; the same numbers up to rounding.

    Returns:
        outputs ``(time, batch, u)`` (raw output of the last layer) and the final ``(c, h)`` tuples.
    """
    gates = LoopGates(w, gx0, weight_taps)
    units = w.recurrent_kernel.shape[0]
    outputs = tf.TensorArray(gx0.dtype, size=gates.steps, element_shape=tf.TensorShape([None, units]))

    def body(t, cs, hs, outputs, records):
        input_gates, bias_gates = gates.read(t)
        x, cs, hs, inputs = stack_step(None, None, cs, hs, gates.w, z, None if keep_c is None else keep_c[t],
                                       None if keep_h is None else keep_h[t], input_gates=input_gates,
                                       bias_gates=bias_gates, return_inputs=True)
        return t + 1, cs, hs, outputs.write(t, x), gates.record(records, t, inputs)

    _, cs, hs, outputs, records = tf.while_loop(lambda t, *_: t < gates.steps, body,
                                                (tf.constant(0), tuple(c0), tuple(h0), outputs, gates.records()))
    gates.finish(records)
    # reshaped: a loop of no steps stacks its empty list to shape (0,)
    return tf.reshape(outputs.stack(), tf.stack([gates.steps, gates.batch, units])), cs, hs


@keras.saving.register_keras_serializable(package="speechblocks")
class DecoderRNN(TF1WeightsMixin, keras.layers.Layer):
    """Stack of ``layers`` unidirectional zoneout LSTMs, TF1 Tacotron-2's ``DecoderRNN``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    A ``MultiRNNCell`` of :class:`ZoneoutLSTMCell` named ``decoder_LSTM_1 .. decoder_LSTM_L``: each layer feeds
    the next its raw LSTM output (before zoneout); the states carry the zoned-out ``(c, h)``.

    Two call forms:

    * one step, the seed's API: ``inputs`` ``(batch, input_size)`` and ``states`` -> ``(output, new_states)``;
    * teacher-forced sequence: ``inputs`` ``(batch, time, input_size)`` -> ``(outputs, final_states)``, equal
      to stepping the one-step form over time (the layer-1 input projection is one matmul before the loop).

    Args:
        layers: int, number of LSTM layers.
        size: int, units per layer.
        zoneout: float in [0, 1], zoneout factor of cell and hidden states.
        tf1_scope: TF1 scope (default ``"decoder_rnn"``); keys
            ``multi_rnn_cell/cell_{k}/decoder_LSTM_{k+1}/{kernel,bias}``.
        seed: optional int seed of the zoneout noise.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, input_size)`` (one step) or ``(batch, time, input_size)`` (sequence).
        states: tuple of per-layer ``(c, h)``, each ``(batch, size)``; ``None`` is the zero state.
        training: bool, random zoneout when True.
        zoneout_masks: optional per-layer ``(c_keep, h_keep)`` 0/1 keep-masks, ``(batch, size)`` for one step or
            ``(batch, time, size)`` for a sequence; they replace the random masks.

    Returns:
        ``(output, new_states)``: ``output`` ``(batch, size)`` or ``(batch, time, size)`` (raw output of the last
        layer); ``new_states`` a tuple of per-layer ``(c, h)``.

    Masking: not mask-aware (the Tacotron decoder runs every step).

    Deployment: SavedModel and XLA, both forms. LiteRT: the one-step form converts to TFLite builtins; the
    sequence form needs ``SELECT_TF_OPS`` (its loop's TensorList ops with an unknown batch): the converted model
    runs only in an interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> dec = DecoderRNN(layers=2, size=8)
    >>> out, states = dec(tf.zeros((3, 5)), dec.get_initial_state(3))
    >>> out.shape, len(states)
    (TensorShape([3, 8]), 2)
    """

    default_tf1_scope = "decoder_rnn"

    def __init__(self, layers: int = 2, size: int = 1024, zoneout: float = 0.1, tf1_scope: str | None = None,
                 seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if int(layers) < 1:
            raise ValueError(f"DecoderRNN: `layers` must be >= 1; got {layers}.")
        if int(size) < 1:
            raise ValueError(f"DecoderRNN: `size` must be >= 1; got {size}.")
        self.layers = int(layers)
        self.size = int(size)
        self.zoneout = check_zoneout(zoneout, "zoneout", "DecoderRNN")
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.cells = [ZoneoutLSTMCell(self.size, self.zoneout, self.zoneout, tf1_scope=f"decoder_LSTM_{k + 1}",
                                      dtype=self.dtype_policy, name=f"decoder_LSTM_{k + 1}")
                      for k in range(self.layers)]
        self.input_size = None

    def build(self, input_shape):
        self.input_size = int(input_shape[-1])
        for k, cell in enumerate(self.cells):
            cell.build((None, self.input_size if k == 0 else self.size))

    def get_initial_state(self, batch_size):
        """The zero state: a tuple of ``layers`` pairs ``(c, h)``, each ``(batch_size, size)``."""
        z = tf.zeros(tf.stack([batch_size, self.size]), self.compute_dtype)
        return tuple((z, z) for _ in range(self.layers))

    def _states(self, states, batch, dtype):
        if states is None:
            return self.get_initial_state(batch)
        doc = f"a tuple of {self.layers} pairs (c, h), each (batch, {self.size})"
        try:
            pairs = [tuple(p) for p in states]
            ok = len(pairs) == self.layers and all(len(p) == 2 for p in pairs)
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"DecoderRNN: argument `states` must be {doc}.")
        out = []
        for k, (c, h) in enumerate(pairs):
            for s, n in ((c, f"states[{k}][0]"), (h, f"states[{k}][1]")):
                check_float_tensor(tf.convert_to_tensor(s), n, "DecoderRNN", rank=2, last_dim=self.size,
                                   shape_doc=f"(batch, {self.size})")
            out.append((tf.cast(c, dtype), tf.cast(h, dtype)))
        return tuple(out)

    def _masks(self, zoneout_masks, x, dtype):
        rank = x.shape.rank
        shape = f"(batch, {'time, ' if rank == 3 else ''}{self.size})"
        doc = f"a sequence of {self.layers} pairs (c_keep, h_keep), each {shape}"
        try:
            pairs = [tuple(p) for p in zoneout_masks]
            ok = len(pairs) == self.layers and all(len(p) == 2 for p in pairs)
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"DecoderRNN: argument `zoneout_masks` must be {doc}.")
        out = []
        for pair in pairs:
            ms = []
            for m in pair:
                m = check_mask(m, "zoneout_masks", "DecoderRNN", doc, rank)
                if m.shape.rank == rank and not m.shape.is_compatible_with(x.shape[:-1].concatenate([self.size])):
                    raise ValueError(f"DecoderRNN: argument `zoneout_masks` must be {doc}; got shape {m.shape}.")
                ms.append(tf.cast(m, dtype))
            out.append(tuple(ms))
        return out

    def call(self, inputs, states=None, training=None, zoneout_masks=None):
        block = "DecoderRNN"
        rank = inputs.shape.rank if hasattr(inputs, "shape") and inputs.shape.rank is not None else None
        if rank not in (2, 3):
            raise ValueError(f"DecoderRNN: argument `inputs` must have shape (batch, {self.input_size}) (one step) or "
                             f"(batch, time, {self.input_size}) (sequence); got shape "
                             f"{getattr(inputs, 'shape', None)}.")
        doc = f"(batch, {self.input_size})" if rank == 2 else f"(batch, time, {self.input_size})"
        check_float_tensor(inputs, "inputs", block, rank=rank, last_dim=self.input_size, shape_doc=doc)
        dtype = self.compute_dtype
        x = tf.cast(inputs, dtype)
        states = self._states(states, tf.shape(x)[0], dtype)
        masks = None if zoneout_masks is None else self._masks(zoneout_masks, x, dtype)
        z = self.zoneout
        w = stack_weights(self.cells, dtype, self.input_size)
        if rank == 2:
            if masks is None and training:
                shape = tf.stack([2, self.layers, tf.shape(x)[0], self.size])
                drawn = keep_masks(shape, z, self.seed_generator, dtype)
                masks = [(drawn[0, k], drawn[1, k]) for k in range(self.layers)]
            keep_c = keep_h = None
            if masks is not None:
                keep_c, keep_h = [m[0] for m in masks], [m[1] for m in masks]
            x, cs, hs = stack_step(x, None, tuple(s[0] for s in states), tuple(s[1] for s in states), w, z, keep_c,
                                   keep_h)
            return x, tuple(zip(cs, hs))

        gx0 = tf.einsum("bti,ig->tbg", x, w.input_kernel) + w.biases[0]
        keep_c = keep_h = None
        if masks is not None:
            keep_c = tf.transpose(tf.stack([m[0] for m in masks], 0), [2, 0, 1, 3])  # (time, L, batch, u)
            keep_h = tf.transpose(tf.stack([m[1] for m in masks], 0), [2, 0, 1, 3])
        elif training:
            shape = tf.stack([tf.shape(x)[1], self.layers, tf.shape(x)[0], self.size])
            keep_c = keep_masks(shape, z, self.seed_generator, dtype)
            keep_h = keep_masks(shape, z, self.seed_generator, dtype)
        out, cs, hs = stacked_scan(gx0, w, [s[0] for s in states], [s[1] for s in states], keep_c, keep_h, z,
                                   weight_taps=bool(training))
        return tf.transpose(out, [1, 0, 2]), tuple(zip(cs, hs))

    def compute_output_shape(self, inputs_shape, states_shape=None):
        s = (inputs_shape[0], self.size)
        return tuple(inputs_shape[:-1]) + (self.size,), tuple((s, s) for _ in range(self.layers))

    def get_config(self):
        config = super().get_config()
        config.update(layers=self.layers, size=self.size, zoneout=self.zoneout, tf1_scope=self.tf1_scope,
                      seed=self.seed)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return decoder_rnn_tf1_variables(self.cells)

    def _tf1_input_shape(self, weights):
        return (None, int(weights[f"{decoder_lstm_scope(0)}/kernel"].shape[0]) - self.size)
