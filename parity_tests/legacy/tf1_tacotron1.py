"""TF1-style graph code of the Tacotron-1 family (keithito/tacotron, both layouts, and MycroftAI/mimic2), written
from the originals' semantics (legacy subprocess only: ``tf.compat.v1`` under ``TF_USE_LEGACY_KERAS=1``).

The real ``tf.compat.v1`` pieces are used where TF 2.21 still has them: ``nn.rnn_cell.GRUCell``,
``MultiRNNCell``, ``ResidualWrapper`` (no scope of its own, so ``cell_{1,2}/gru_cell``),
``nn.bidirectional_dynamic_rnn`` and ``tf.compat.v1.layers``. ``tf.contrib`` is gone, so its parts are written
here in the same TF1 style, with contrib's class names so that every ``RNNCell`` opens the variable scope its
class name gives (snake case), exactly as in the original graphs:

* :class:`AttentionWrapper` (``attention_layer_size=None``, ``output_attention=False``, alignment history): the
  cell sees ``concat(inputs, previous context)``; its output is the inner cell's; the state carries the context
  (the alignment-weighted sum of the memory) and the alignments.
* :class:`BahdanauAttention` (``normalize=False``): ``memory_layer`` (``Dense(use_bias=False)``) runs on the
  memory where the mechanism is built; each call opens ``variable_scope(None, "bahdanau_attention")`` for
  ``query_layer`` and ``attention_v``. :class:`LocationSensitiveAttention` (mimic2 ``models/attention.py``) adds
  ``location_conv`` (no bias, 'same') and ``location_layer`` (no bias) over the PREVIOUS step's alignments inside
  ``variable_scope(None, "location_sensitive_attention")``. No memory mask unless ``memory_sequence_length`` is
  given (the originals never give it); given, the memory is zeroed past the lengths and the scores there are
  ``-inf`` before the softmax (contrib's ``_prepare_memory`` / ``_maybe_mask_score``).
* :class:`OutputProjectionWrapper` (``kernel``/``bias`` in its own scope, contrib ``core_rnn_cell``),
  keithito's :class:`DecoderPrenetWrapper` and :class:`ConcatOutputAndAttentionWrapper`.
* keithito's ``TacoTrainingHelper`` (the same teacher forcing as Tacotron-2's: :class:`.tf1_tacotron2.TrainingHelper`,
  ``targets[:, r-1::r]``, ``floor(T_out / r)`` steps), :class:`TacoTestHelper` (keithito ``models/helpers.py``)
  and :func:`dynamic_decode` over a :class:`BasicDecoder` (``variable_scope(None, "decoder")``,
  ``impute_finished=False``, a row once finished stays finished, the loop ends when all rows are finished or at
  ``maximum_iterations``).

Injected keep-masks (the spec's ``noise_masks``) replace the random pre-net dropout as ``x / (1 - 0.5) * mask`` in
any mode; without a mask a layer drops at random in training only (keithito's ``prenet``).
"""
from __future__ import annotations

import collections

import tensorflow as tf

from .tf1_blocks import conv1d, highway
from .tf1_tacotron2 import TrainingHelper

v1 = tf.compat.v1
RNNCell = v1.nn.rnn_cell.RNNCell
DROP_RATE = 0.5
#: CBHG bank sizes of the originals (constants there, not hparams)
ENCODER_BANK, POSTNET_BANK = 16, 8
LAYOUTS = ("keithito-20170720", "keithito-20180906", "mimic2")


def _identity(t):
    return t


# -- keithito modules.py ---------------------------------------------------------------------------------------
def prenet(inputs, training, layer_sizes, scope, keep_masks=None):
    """Dense (relu) layers ``dense_{i}``, each followed by dropout 0.5 in training only; a given keep-mask replaces
    that layer's dropout (``x / 0.5 * mask``) whatever ``training`` says."""
    x = inputs
    with v1.variable_scope(scope):
        for i, size in enumerate(layer_sizes):
            dense = v1.layers.dense(x, units=size, activation=tf.nn.relu, name=f"dense_{i + 1}")
            mask = None if keep_masks is None else keep_masks[i]
            if mask is None:
                x = v1.layers.dropout(dense, rate=DROP_RATE if training else 0.0, training=training,
                                      name=f"dropout_{i + 1}")
            else:
                x = dense / (1.0 - DROP_RATE) * mask
    return x


def cbhg(inputs, input_lengths, training, scope, K, projections, depth):
    """keithito's CBHG: bank of ``K`` convs (128 channels, conv -> relu -> BN), max-pool 2, two projections
    (kernel 3), residual, ``dense`` to ``depth // 2`` when the widths differ, 4 highway layers, BiGRU."""
    with v1.variable_scope(scope):
        with v1.variable_scope("conv_bank"):
            bank = tf.concat([conv1d(inputs, k, 128, tf.nn.relu, training, 0.0, f"conv1d_{k}", "after")[0]
                              for k in range(1, K + 1)], axis=-1)
        pooled = v1.layers.max_pooling1d(bank, pool_size=2, strides=1, padding="same")
        proj1 = conv1d(pooled, 3, projections[0], tf.nn.relu, training, 0.0, "proj_1", "after")[0]
        proj2 = conv1d(proj1, 3, projections[1], _identity, training, 0.0, "proj_2", "after")[0]
        x = proj2 + inputs
        half = depth // 2
        if x.shape[2] != half:
            x = v1.layers.dense(x, half)
        for i in range(4):
            x = highway(x, half, f"highway_{i + 1}")
        outputs, _ = v1.nn.bidirectional_dynamic_rnn(v1.nn.rnn_cell.GRUCell(half), v1.nn.rnn_cell.GRUCell(half), x,
                                                     sequence_length=input_lengths, dtype=tf.float32)
        return tf.concat(outputs, axis=2)


# -- attention mechanisms (contrib attention_wrapper.py, mimic2 attention.py) -----------------------------------
class BahdanauAttention:
    """Content-based additive attention (``normalize=False``).

    Args:
        num_units: attention depth.
        memory: ``[B, T, E]``.
        memory_sequence_length: int ``[B]`` or None (the originals: None, no masking at all).
    """

    scope_name = "bahdanau_attention"

    def __init__(self, num_units, memory, memory_sequence_length=None):
        self._num_units = num_units
        self._lengths = memory_sequence_length
        values = memory
        if memory_sequence_length is not None:
            mask = tf.sequence_mask(memory_sequence_length, maxlen=tf.shape(memory)[1], dtype=memory.dtype)
            values = memory * tf.expand_dims(mask, -1)
        self.values = values
        self.memory_layer = v1.layers.Dense(num_units, use_bias=False, name="memory_layer")
        self.keys = self.memory_layer(values)
        self.query_layer = v1.layers.Dense(num_units, use_bias=False, name="query_layer")

    def initial_alignments(self, batch_size):
        """Zero alignments ``[B, T]``."""
        return tf.zeros(tf.stack([batch_size, tf.shape(self.keys)[1]]), dtype=tf.float32)

    def _score(self, processed_query, extra=None):
        v = v1.get_variable("attention_v", [self._num_units], dtype=tf.float32)
        energy = self.keys + processed_query if extra is None else self.keys + processed_query + extra
        return tf.reduce_sum(v * tf.tanh(energy), [2])

    def _probability(self, score):
        if self._lengths is not None:
            valid = tf.sequence_mask(self._lengths, maxlen=tf.shape(score)[1])
            score = tf.where(valid, score, tf.fill(tf.shape(score), float("-inf")))
        return tf.nn.softmax(score)

    def _location(self, state):
        return None

    def __call__(self, query, state):
        """``(alignments [B, T], next_state = alignments)`` for ``query`` ``[B, q]`` and the previous alignments."""
        with v1.variable_scope(None, self.scope_name, [query]):
            extra = self._location(state)
            processed_query = tf.expand_dims(self.query_layer(query), 1)
            score = self._score(processed_query, extra)
        alignments = self._probability(score)
        return alignments, alignments


class LocationSensitiveAttention(BahdanauAttention):
    """mimic2's location-sensitive attention: Bahdanau plus ``location_layer(location_conv(previous alignments))``
    (both without bias; the previous step's alignments, not their running sum)."""

    scope_name = "location_sensitive_attention"

    def __init__(self, num_units, memory, memory_sequence_length=None, filters=20, kernel_size=7):
        super().__init__(num_units, memory, memory_sequence_length)
        self.location_conv = v1.layers.Conv1D(filters, kernel_size, padding="same", use_bias=False,
                                              name="location_conv")
        self.location_layer = v1.layers.Dense(num_units, use_bias=False, dtype=tf.float32, name="location_layer")

    def _location(self, state):
        return self.location_layer(self.location_conv(tf.expand_dims(state, axis=2)))


def attend(mechanism, query, previous_alignments):
    """contrib ``_compute_attention`` without an attention layer: ``(context [B, E], alignments [B, T])``."""
    alignments, _ = mechanism(query, previous_alignments)
    context = tf.squeeze(tf.matmul(tf.expand_dims(alignments, 1), mechanism.values), [1])
    return context, alignments


# -- RNN cells: contrib's and keithito's wrappers ------------------------------------------------------------------
AttentionWrapperState = collections.namedtuple("AttentionWrapperState", ("cell_state", "attention", "alignments"))


class _Wrapper(RNNCell):
    """A cell around ``cell`` with its state and output sizes; the scope is the subclass's name in snake case."""

    def __init__(self, cell):
        super().__init__()
        self._cell = cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size


class AttentionWrapper(_Wrapper):
    """contrib ``AttentionWrapper(cell, mechanism, alignment_history=True, output_attention=False)`` with no
    attention layer: ``attention`` in the state is the context itself (width of the memory)."""

    def __init__(self, cell, attention_mechanism):
        super().__init__(cell)
        self._mechanism = attention_mechanism

    @property
    def state_size(self):
        return AttentionWrapperState(self._cell.state_size, int(self._mechanism.values.shape[-1]), None)

    def call(self, inputs, state):
        cell_inputs = tf.concat([inputs, state.attention], axis=-1)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        context, alignments = attend(self._mechanism, cell_output, state.alignments)
        return cell_output, AttentionWrapperState(next_cell_state, context, alignments)


class DecoderPrenetWrapper(_Wrapper):
    """keithito's wrapper: ``decoder_prenet`` on the inputs, then the cell. ``keep_masks`` (one ``[B, steps, d]``
    per layer, or None) give step ``step_time``'s slice, set by the decoding loop."""

    def __init__(self, cell, training, layer_sizes, keep_masks=None):
        super().__init__(cell)
        self._training = training
        self._layer_sizes = layer_sizes
        self._keep_masks = keep_masks
        self.step_time = None

    def call(self, inputs, state):
        masks = None
        if self._keep_masks is not None:
            masks = [None if m is None else m[:, self.step_time] for m in self._keep_masks]
        out = prenet(inputs, self._training, self._layer_sizes, "decoder_prenet", masks)
        return self._cell(out, state)


class ConcatOutputAndAttentionWrapper(_Wrapper):
    """keithito's wrapper: ``concat(cell output, state.attention)``."""

    @property
    def output_size(self):
        return self._cell.output_size + self._cell.state_size.attention

    def call(self, inputs, state):
        output, res_state = self._cell(inputs, state)
        return tf.concat([output, res_state.attention], axis=-1), res_state


class OutputProjectionWrapper(_Wrapper):
    """contrib ``OutputProjectionWrapper``: ``kernel`` ``[in, out]`` and ``bias`` in its own scope, no activation."""

    def __init__(self, cell, output_size):
        super().__init__(cell)
        self._output_size = output_size

    @property
    def output_size(self):
        return self._output_size

    def call(self, inputs, state):
        output, res_state = self._cell(inputs, state)
        kernel = v1.get_variable("kernel", [int(output.shape[-1]), self._output_size], dtype=tf.float32)
        bias = v1.get_variable("bias", [self._output_size], dtype=tf.float32, initializer=v1.zeros_initializer())
        return tf.nn.bias_add(tf.matmul(output, kernel), bias), res_state


# -- helpers, decoder, loop (keithito helpers.py, contrib BasicDecoder / dynamic_decode) -------------------------
def _go_frames(batch_size, output_dim):
    return tf.tile([[0.0]], [batch_size, output_dim])


class TacoTestHelper:
    """Free running: the last frame of the step is the next input; a row is finished when all its outputs are
    exactly 0.0."""

    def __init__(self, batch_size, output_dim, r):
        self._batch_size = batch_size
        self._output_dim = output_dim
        self._end_token = tf.tile([0.0], [output_dim * r])

    def initialize(self):
        return tf.tile([False], [self._batch_size]), _go_frames(self._batch_size, self._output_dim)

    def next_inputs(self, time, outputs, stop=None):
        finished = tf.reduce_all(tf.equal(outputs, self._end_token), axis=1)
        return finished, outputs[:, -self._output_dim:]


class BasicDecoder:
    """contrib ``BasicDecoder`` (no output layer): ``step`` calls the cell, then the helper."""

    def __init__(self, cell, helper, initial_state):
        self.cell = cell
        self.helper = helper
        self.initial_state = initial_state

    def initialize(self):
        finished, inputs = self.helper.initialize()
        return finished, inputs, self.initial_state

    def step(self, time, inputs, state):
        outputs, next_state = self.cell(inputs, state)
        finished, next_inputs = self.helper.next_inputs(time, outputs, None)
        return outputs, next_state, next_inputs, finished


def dynamic_decode(decoder, maximum_iterations, before_step=None, alignments_of=None):
    """contrib ``dynamic_decode(decoder, maximum_iterations=...)`` with ``impute_finished=False``.

    ``before_step(time)`` runs before the step is traced (the pre-net's keep-mask slice); ``alignments_of(state)``
    picks the alignments (the original's ``alignment_history``) from a step's state.

    Returns ``(outputs [B, steps, out], alignments [B, T_in, steps])``.
    """
    with v1.variable_scope(None, default_name="decoder"):
        finished, inputs, state = decoder.initialize()
        max_iters = tf.convert_to_tensor(maximum_iterations, dtype=tf.int32)
        finished = tf.logical_or(finished, 0 >= max_iters)
        out_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        align_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def cond(time, finished, *rest):
            return tf.logical_not(tf.reduce_all(finished))

        def body(time, finished, inputs, state, out_ta, align_ta):
            if before_step is not None:
                before_step(time)
            outputs, next_state, next_inputs, step_finished = decoder.step(time, inputs, state)
            next_finished = tf.logical_or(tf.logical_or(step_finished, finished), time + 1 >= max_iters)
            return (time + 1, next_finished, next_inputs, next_state, out_ta.write(time, outputs),
                    align_ta.write(time, alignments_of(next_state)))

        result = v1.while_loop(cond, body, (tf.constant(0, dtype=tf.int32), finished, inputs, state, out_ta, align_ta))
    out_ta, align_ta = result[4], result[5]
    return tf.transpose(out_ta.stack(), [1, 0, 2]), tf.transpose(align_ta.stack(), [1, 2, 0])


# -- the model (keithito / mimic2 models/tacotron.py) ------------------------------------------------------------
def default_layout(hp):
    """``"mimic2"`` for the mimic2 variant, ``"keithito-20180906"`` otherwise."""
    return "mimic2" if hp.variant == "mimic2" else "keithito-20180906"


def tacotron1(hp, layout, inputs, input_lengths, training, mel_targets=None, max_iters=None, noise=None,
              mask_memory=False):
    """The whole Tacotron-1 graph at the current variable scope (``model/inference`` in real checkpoints).

    Args:
        hp: :class:`speechblocks.Tacotron1HParams`; layout: one of :data:`LAYOUTS`.
        inputs: int ``[B, T_in]``; input_lengths: int ``[B]``.
        training: ``is_training`` (random pre-net dropout where no mask is given, BN batch statistics).
        mel_targets: ``[B, T_out, M]``: teacher forcing; free running when None (training requires them).
        max_iters: ``maximum_iterations`` of the loop (default ``hp.max_iters``; the originals always cap).
        noise: optional ``{"encoder_prenet": [mask per layer], "decoder_prenet": [mask per layer]}`` keep-masks
            ``[B, T_in, d_i]`` / ``[B, steps, d_i]``.
        mask_memory: not the original: the attention masks the memory past ``input_lengths``.

    Returns:
        dict ``decoder_outputs`` ``[B, steps, M*r]``, ``mel_outputs``, ``linear_outputs``, ``alignments``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}; got {layout!r}")
    located = layout == "mimic2"
    if located != (hp.attention == "location_sensitive"):
        raise ValueError(f"layout {layout!r} does not match attention={hp.attention!r}")
    if training and mel_targets is None:
        raise ValueError("training needs mel_targets (teacher forcing)")
    noise = noise or {}
    batch_size = tf.shape(inputs)[0]
    m, r = hp.num_mels, hp.outputs_per_step

    table = v1.get_variable("embedding", [hp.n_symbols, hp.embed_depth], dtype=tf.float32,
                            initializer=v1.truncated_normal_initializer(stddev=0.5))
    embedded = tf.nn.embedding_lookup(table, inputs)
    pre = prenet(embedded, training, hp.prenet_depths, "prenet", noise.get("encoder_prenet"))
    memory = cbhg(pre, input_lengths, training, "encoder_cbhg", ENCODER_BANK, [128, int(pre.shape[-1])],
                  hp.encoder_depth)

    lengths = input_lengths if mask_memory else None
    if located:
        mechanism = LocationSensitiveAttention(hp.attention_depth, memory, lengths, filters=hp.location_filters,
                                               kernel_size=hp.location_kernel_size)
    else:
        mechanism = BahdanauAttention(hp.attention_depth, memory, lengths)
    gru = v1.nn.rnn_cell.GRUCell(hp.attention_depth)
    if layout == "keithito-20180906":
        prenet_cell = DecoderPrenetWrapper(AttentionWrapper(gru, mechanism), training, hp.prenet_depths,
                                           noise.get("decoder_prenet"))
        attention_cell = prenet_cell
    else:
        prenet_cell = DecoderPrenetWrapper(gru, training, hp.prenet_depths, noise.get("decoder_prenet"))
        attention_cell = AttentionWrapper(prenet_cell, mechanism)
    concat_cell = ConcatOutputAndAttentionWrapper(attention_cell)
    decoder_cell = v1.nn.rnn_cell.MultiRNNCell([
        OutputProjectionWrapper(concat_cell, hp.decoder_depth),
        v1.nn.rnn_cell.ResidualWrapper(v1.nn.rnn_cell.GRUCell(hp.decoder_depth)),
        v1.nn.rnn_cell.ResidualWrapper(v1.nn.rnn_cell.GRUCell(hp.decoder_depth))], state_is_tuple=True)
    output_cell = OutputProjectionWrapper(decoder_cell, m * r)

    width = int(memory.shape[-1])
    zeros = tf.zeros(tf.stack([batch_size, hp.attention_depth]), dtype=tf.float32)
    dec_zeros = tf.zeros(tf.stack([batch_size, hp.decoder_depth]), dtype=tf.float32)
    init_state = (AttentionWrapperState(zeros, tf.zeros(tf.stack([batch_size, width]), dtype=tf.float32),
                                        mechanism.initial_alignments(batch_size)), dec_zeros, dec_zeros)
    if mel_targets is not None:
        helper = TrainingHelper(batch_size, mel_targets, hp)  # keithito's TacoTrainingHelper, as Tacotron-2's
    else:
        helper = TacoTestHelper(batch_size, m, r)

    def before_step(time):
        prenet_cell.step_time = time

    decoder_outputs, alignments = dynamic_decode(
        BasicDecoder(output_cell, helper, init_state), hp.max_iters if max_iters is None else max_iters,
        before_step=before_step, alignments_of=lambda state: state[0].alignments)
    mel_outputs = tf.reshape(decoder_outputs, [batch_size, -1, m])
    post = cbhg(mel_outputs, None, training, "post_cbhg", POSTNET_BANK, [256, m], hp.postnet_depth)
    linear_outputs = v1.layers.dense(post, hp.num_freq)
    return {"decoder_outputs": decoder_outputs, "mel_outputs": mel_outputs, "linear_outputs": linear_outputs,
            "alignments": alignments}


LOSS_NAMES = ("mel_loss", "linear_loss", "loss")


def tacotron1_loss(hp, outputs, mel_targets, linear_targets):
    """keithito's ``add_loss`` (no masking) under ``variable_scope("loss")`` -> dict of :data:`LOSS_NAMES`."""
    with v1.variable_scope("loss"):
        mel_loss = tf.reduce_mean(tf.abs(mel_targets - outputs["mel_outputs"]))
        l1 = tf.abs(linear_targets - outputs["linear_outputs"])
        n_priority = int(3000 / (hp.sample_rate * 0.5) * hp.num_freq)
        linear_loss = 0.5 * tf.reduce_mean(l1) + 0.5 * tf.reduce_mean(l1[:, :, 0:n_priority])
    return {"mel_loss": mel_loss, "linear_loss": linear_loss, "loss": mel_loss + linear_loss}
