"""TF1-style graph code of the whole Tacotron-2 (RTVC / Rayhane), written from the originals' semantics.

Runs only inside the legacy subprocess (``tf.compat.v1`` under ``TF_USE_LEGACY_KERAS=1``). ``tf.contrib`` is
gone, so the parts the originals took from it are written here in the same TF1 style:

* :class:`LocationSensitiveAttention` -- the Bahdanau-style attention mechanism with location features:
  ``memory_layer`` (a no-bias ``Dense``) is applied to the masked memory where the mechanism is built (the
  model's ``inference`` scope); each step opens ``variable_scope(None, default_name="Location_Sensitive_Attention")``
  in the caller's scope (the decoder's) for ``query_layer``, ``location_features_convolution``,
  ``location_features_layer``, ``attention_variable_projection`` and ``attention_bias``.
* :func:`dynamic_decode` -- contrib's loop: ``tf.compat.v1.while_loop`` over TensorArrays inside
  ``variable_scope(None, default_name="decoder")``, ``impute_finished=False`` (every row keeps its outputs
  after it finished), the loop ends when every row is finished or at ``maximum_iterations``; the body is
  traced once, so the step's variable scopes are created once.
* :class:`TrainingHelper` / :class:`TestHelper` -- teacher forcing on ``targets[:, r-1::r]`` (ratio 1.0, the
  only supported schedule, so the original's ``tf.cond`` on a uniform draw always takes the target) and the
  free-running stop rule (``tf.round`` of the stop probabilities, AND over the batch, ANY/ALL over the r frames).

The blocks come from :mod:`.tf1_blocks`, :mod:`.tf1_recurrent` and :mod:`.tf1_cbhg`. Injected 0/1 keep-masks
(the spec's ``noise_masks``) replace the random dropout / zoneout draws: conv-stack and prenet masks as
``x / (1 - rate) * mask`` (conv masks whenever given, prenet masks in every mode), zoneout masks through
``ZoneoutLSTM.step_masks`` (used by that cell in training only, as the existing legacy cell does).
"""
from __future__ import annotations

import collections

import tensorflow as tf

from .builders_losses import tf1_masked_linear_loss, tf1_masked_mse, tf1_masked_sigmoid_cross_entropy
from .tf1_blocks import conv1d, encoder_convolutions, frame_projection, postnet, prenet, stop_projection
from .tf1_cbhg import cbhg
from .tf1_recurrent import LSTMStateTuple, decoder_rnn_step, encoder_rnn

v1 = tf.compat.v1

#: substrings of a TF1 variable name that exclude it from the L2 regularisation (the originals' ``add_loss``)
REGULARIZATION_EXCLUDED = ("bias", "Bias", "_projection", "inputs_embedding", "RNN", "LSTM")

LOSS_NAMES = ("before_loss", "after_loss", "stop_token_loss", "linear_loss", "regularization_loss", "loss")


def _identity(t):
    return t


# -- blocks with injectable keep-masks ------------------------------------------------------------------
def conv1d_with_keep_mask(inputs, kernel_size, channels, activation, training, drop_rate, scope,
                          bn_position="before", keep_mask=None):
    """The TF1 ``conv1d`` block; with ``keep_mask`` its dropout is ``x / (1 - rate) * keep_mask`` (whatever
    ``training`` says) instead of the random ``tf.layers.dropout``. Same variables as :func:`tf1_blocks.conv1d`."""
    if keep_mask is None:
        return conv1d(inputs, kernel_size, channels, activation, training, drop_rate, scope, bn_position)[0]
    with v1.variable_scope(scope):
        x = v1.layers.conv1d(inputs, filters=channels, kernel_size=kernel_size, activation=None, padding="same")
        if bn_position == "before":
            x = activation(v1.layers.batch_normalization(x, training=training))
        else:
            x = v1.layers.batch_normalization(activation(x), training=training)
        return x / (1.0 - drop_rate) * keep_mask


def _masks_given(masks):
    return masks is not None and any(m is not None for m in masks)


def tacotron_encoder_convolutions(inputs, hp, training, keep_masks=None):
    """``EncoderConvolutions(scope="encoder_convolutions")`` of the model; ``keep_masks``: one per layer or None."""
    config = dict(kernel_size=hp.enc_conv_kernel_size, channels=hp.enc_conv_channels, num_layers=hp.enc_conv_num_layers,
                  drop_rate=hp.tacotron_dropout_rate, activation="relu", tf1_scope="encoder_convolutions",
                  bn_position=hp.batch_norm_position)
    if not _masks_given(keep_masks):
        return encoder_convolutions(inputs, config, training)[0]
    scope = config["tf1_scope"]
    x = inputs
    with v1.variable_scope(scope):
        for i in range(hp.enc_conv_num_layers):
            x = conv1d_with_keep_mask(x, hp.enc_conv_kernel_size, hp.enc_conv_channels, tf.nn.relu, training,
                                      hp.tacotron_dropout_rate, f"conv_layer_{i + 1}_{scope}", hp.batch_norm_position,
                                      keep_masks[i])
    return x


def tacotron_postnet(inputs, hp, training, keep_masks=None):
    """``Postnet(scope="postnet_convolutions")``: tanh layers, the last (linear) one hard-coded ``conv_layer_5_``."""
    if hp.postnet_num_layers > 5:
        raise ValueError("postnet_num_layers > 5: the original's hard-coded last scope conv_layer_5 would collide")
    config = dict(kernel_size=hp.postnet_kernel_size, channels=hp.postnet_channels, num_layers=hp.postnet_num_layers,
                  drop_rate=hp.tacotron_dropout_rate, activation="tanh", tf1_scope="postnet_convolutions",
                  bn_position=hp.batch_norm_position)
    if not _masks_given(keep_masks):
        return postnet(inputs, config, training)[0]
    scope = config["tf1_scope"]
    n = hp.postnet_num_layers
    x = inputs
    with v1.variable_scope(scope):
        for i in range(n):
            last = i == n - 1
            x = conv1d_with_keep_mask(x, hp.postnet_kernel_size, hp.postnet_channels, _identity if last else tf.nn.tanh,
                                      training, hp.tacotron_dropout_rate,
                                      f"conv_layer_{5 if last else i + 1}_{scope}", hp.batch_norm_position,
                                      keep_masks[i])
    return x


def decoder_prenet(inputs, hp, keep_masks=None):
    """``Prenet(scope="decoder_prenet")``: dropout always on; ``keep_masks`` (one per layer, this step's) replace it."""
    rate = hp.tacotron_dropout_rate
    scope = "decoder_prenet"
    if not _masks_given(keep_masks):
        config = dict(layers_sizes=list(hp.prenet_layers), drop_rate=rate, activation="relu", tf1_scope=scope)
        return prenet(inputs, config, True)[0]
    x = inputs
    with v1.variable_scope(scope):
        for i, size in enumerate(hp.prenet_layers):
            dense = v1.layers.dense(x, units=size, activation=tf.nn.relu, name=f"dense_{i + 1}")
            if keep_masks[i] is None:
                x = v1.layers.dropout(dense, rate=rate, training=True, name=f"dropout_{i + 1}{scope}")
            else:
                x = dense / (1.0 - rate) * keep_masks[i]
    return x


# -- attention ---------------------------------------------------------------------------------------------
class LocationSensitiveAttention:
    """Location-sensitive (hybrid) attention of Chorowski et al. as the TF1 synthesizers ran it.

    Building it masks the memory past ``memory_lengths`` (when ``mask_encoder``) into ``values`` and applies
    ``memory_layer`` (no bias) at the current variable scope to get ``keys``. Calling it is one step.

    Args:
        units: attention dimension.
        memory: ``[B, T, D]``.
        memory_lengths: int ``[B]`` (ignored when ``mask_encoder`` is False: no memory zeroing, no score mask).
        filters, kernel_size: the location convolution.
        mask_encoder, smoothing, cumulate_weights: as the originals' hparams.
    """

    def __init__(self, units, memory, memory_lengths=None, filters=32, kernel_size=31, mask_encoder=True,
                 smoothing=False, cumulate_weights=True):
        self._lengths = memory_lengths if mask_encoder else None
        self._smoothing = smoothing
        self._cumulate = cumulate_weights
        values = memory
        if self._lengths is not None:
            seq_mask = tf.sequence_mask(self._lengths, maxlen=tf.shape(memory)[1], dtype=memory.dtype)
            values = memory * tf.expand_dims(seq_mask, -1)
        self.values = values
        self.memory_layer = v1.layers.Dense(units, use_bias=False, name="memory_layer")
        self.keys = self.memory_layer(values)
        self.query_layer = v1.layers.Dense(units, use_bias=False, name="query_layer")
        self.location_convolution = v1.layers.Conv1D(filters=filters, kernel_size=kernel_size, padding="same",
                                                     use_bias=True, bias_initializer=v1.zeros_initializer(),
                                                     name="location_features_convolution")
        self.location_layer = v1.layers.Dense(units, use_bias=False, name="location_features_layer")
        self._units = units

    def initial_state(self, batch_size):
        """Zero previous alignments ``[B, T]``."""
        return tf.zeros(tf.stack([batch_size, tf.shape(self.keys)[1]]), dtype=tf.float32)

    def _normalize(self, energy):
        if self._lengths is not None:
            check = tf.debugging.assert_positive(self._lengths, message="memory lengths must be > 0")
            with tf.control_dependencies([check]):
                valid = tf.sequence_mask(self._lengths, maxlen=tf.shape(energy)[1])
            energy = tf.where(valid, energy, tf.fill(tf.shape(energy), float("-inf")))
        if self._smoothing:
            s = tf.nn.sigmoid(energy)
            return s / tf.reduce_sum(s, axis=-1, keepdims=True)
        return tf.nn.softmax(energy)

    def __call__(self, query, state):
        """One step: ``(query [B, q], previous cumulative alignments [B, T]) -> (context, alignments, next_state)``."""
        with v1.variable_scope(None, default_name="Location_Sensitive_Attention"):
            processed_query = tf.expand_dims(self.query_layer(query), 1)
            location = self.location_convolution(tf.expand_dims(state, axis=2))
            processed_location = self.location_layer(location)
            v_a = v1.get_variable("attention_variable_projection", shape=[self._units], dtype=tf.float32,
                                  initializer=v1.glorot_uniform_initializer())
            b_a = v1.get_variable("attention_bias", shape=[self._units], dtype=tf.float32,
                                  initializer=v1.zeros_initializer())
            energy = tf.reduce_sum(v_a * tf.tanh(self.keys + processed_query + processed_location + b_a), [2])
        alignments = self._normalize(energy)
        next_state = alignments + state if self._cumulate else alignments
        context = tf.squeeze(tf.matmul(tf.expand_dims(alignments, 1), self.values), [1])
        return context, alignments, next_state


# -- decoder cell, helpers, loop ---------------------------------------------------------------------------
DecoderState = collections.namedtuple("DecoderState", ("cell_state", "attention", "alignments"))


class TacotronDecoderCell:
    """One decoder step: prenet -> [.. ; previous context] -> DecoderRNN -> attention -> frame / stop projections.

    ``noise``: optional dict with ``"prenet"`` (per layer ``[B, steps, size]``) and ``"decoder_LSTM"`` (per layer
    ``(c_keep, h_keep)`` ``[B, steps, units]``); step ``t`` uses ``[:, t]``.
    """

    def __init__(self, hp, attention, training, noise=None):
        self._hp = hp
        self._attention = attention
        self._training = training
        self._noise = noise or {}

    def zero_state(self, batch_size):
        """Zero LSTM states, zero context ``[B, memory width]``, zero previous alignments."""
        hp = self._hp
        width = int(self._attention.values.shape[-1])
        zeros = tf.zeros(tf.stack([batch_size, hp.decoder_lstm_units]), dtype=tf.float32)
        cell_state = tuple(LSTMStateTuple(zeros, zeros) for _ in range(hp.decoder_layers))
        return DecoderState(cell_state=cell_state,
                            attention=tf.zeros(tf.stack([batch_size, width]), dtype=tf.float32),
                            alignments=self._attention.initial_state(batch_size))

    def step(self, time, inputs, state):
        """``(frames [B, r*M], stop [B, r], alignments [B, T_in], next_state)`` of step ``time``."""
        hp = self._hp
        pre_masks = self._noise.get("prenet")
        if _masks_given(pre_masks):
            pre_masks = [None if m is None else m[:, time] for m in pre_masks]
        x = decoder_prenet(inputs, hp, pre_masks)
        lstm_input = tf.concat([x, state.attention], axis=-1)
        z_masks = self._noise.get("decoder_LSTM")
        if z_masks is not None:
            z_masks = [(c[:, time], h[:, time]) for c, h in z_masks]
        config = dict(layers=hp.decoder_layers, size=hp.decoder_lstm_units, zoneout=hp.tacotron_zoneout_rate,
                      tf1_scope="decoder_LSTM")
        (lstm_output, cell_state), _ = decoder_rnn_step(lstm_input, state.cell_state, config, self._training, z_masks)
        context, alignments, att_state = self._attention(lstm_output, state.alignments)
        projection_input = tf.concat([lstm_output, context], axis=-1)
        frames, _ = frame_projection(projection_input, dict(shape=hp.num_mels * hp.outputs_per_step,
                                                            tf1_scope="linear_transform_projection"), self._training)
        stop, _ = stop_projection(projection_input, dict(shape=hp.outputs_per_step, tf1_scope="stop_token_projection"),
                                  self._training)
        return frames, stop, alignments, DecoderState(tuple(cell_state), context, att_state)


def _go_frames(batch_size, num_mels):
    return tf.zeros(tf.stack([batch_size, num_mels]), dtype=tf.float32)


class TrainingHelper:
    """Teacher forcing: step ``t >= 1`` gets ``targets[:, r*t - 1]``; ``floor(T_out / r)`` steps."""

    def __init__(self, batch_size, targets, hp):
        r = hp.outputs_per_step
        self._batch_size = batch_size
        self._num_mels = hp.num_mels
        check = tf.debugging.assert_greater_equal(tf.shape(targets)[1], r,
                                                  message=f"mel_targets must hold at least outputs_per_step={r} frames")
        with tf.control_dependencies([check]):
            self._targets = tf.identity(targets[:, r - 1::r, :])
        self._lengths = tf.tile([tf.shape(self._targets)[1]], [batch_size])

    def initialize(self):
        """``(finished [B] all False, go frames)``."""
        return tf.tile([False], [self._batch_size]), _go_frames(self._batch_size, self._num_mels)

    def next_inputs(self, time, frames, stop):
        """``(finished [B], next inputs)``."""
        return time + 1 >= self._lengths, self._targets[:, time, :]


class TestHelper:
    """Free running: feed the last predicted frame; finish when the rounded stop probabilities say so."""

    def __init__(self, batch_size, hp):
        self._batch_size = batch_size
        self._num_mels = hp.num_mels
        self._stop_at_any = hp.stop_at_any

    def initialize(self):
        """``(finished [B] all False, go frames)``."""
        return tf.tile([False], [self._batch_size]), _go_frames(self._batch_size, self._num_mels)

    def next_inputs(self, time, frames, stop):
        """``(finished scalar, last of the r frames)``."""
        done = tf.cast(tf.round(stop), tf.bool)
        every_row = tf.reduce_all(done, axis=0)
        finished = tf.reduce_any(every_row) if self._stop_at_any else tf.reduce_all(every_row)
        return finished, frames[:, -self._num_mels:]


def dynamic_decode(cell, helper, batch_size, maximum_iterations=None):
    """contrib ``dynamic_decode(impute_finished=False)`` of a :class:`TacotronDecoderCell`.

    Returns ``(frames [B, steps, r*M], stop [B, steps, r], alignments [B, T_in, steps])``.
    """
    with v1.variable_scope(None, default_name="decoder"):
        if maximum_iterations is not None:
            maximum_iterations = tf.convert_to_tensor(maximum_iterations, dtype=tf.int32, name="maximum_iterations")
        finished0, inputs0 = helper.initialize()
        if maximum_iterations is not None:
            finished0 = tf.logical_or(finished0, 0 >= maximum_iterations)
        state0 = cell.zero_state(batch_size)
        arrays0 = tuple(tf.TensorArray(tf.float32, size=0, dynamic_size=True) for _ in range(3))

        def condition(time, inputs, state, finished, frames_ta, stop_ta, align_ta):
            return tf.logical_not(tf.reduce_all(finished))

        def body(time, inputs, state, finished, frames_ta, stop_ta, align_ta):
            frames, stop, alignments, next_state = cell.step(time, inputs, state)
            helper_finished, next_inputs = helper.next_inputs(time, frames, stop)
            next_finished = tf.logical_or(helper_finished, finished)
            if maximum_iterations is not None:
                next_finished = tf.logical_or(next_finished, time + 1 >= maximum_iterations)
            return (time + 1, next_inputs, next_state, next_finished, frames_ta.write(time, frames),
                    stop_ta.write(time, stop), align_ta.write(time, alignments))

        result = v1.while_loop(condition, body, (tf.constant(0, dtype=tf.int32), inputs0, state0, finished0, *arrays0),
                               maximum_iterations=maximum_iterations)
        frames_ta, stop_ta, align_ta = result[4:]
        frames = tf.transpose(frames_ta.stack(), [1, 0, 2])
        stop = tf.transpose(stop_ta.stack(), [1, 0, 2])
        alignments = tf.transpose(align_ta.stack(), [1, 2, 0])
    return frames, stop, alignments


# -- the model ---------------------------------------------------------------------------------------------
def output_range(hp):
    """Rayhane's ``T2_output_range``."""
    return (-hp.max_abs_value, hp.max_abs_value) if hp.symmetric_mels else (0.0, hp.max_abs_value)


def _clip(x, hp):
    lo, hi = output_range(hp)
    return tf.minimum(tf.maximum(x, lo - hp.lower_bound_decay), hi)


def tacotron2(hp, inputs, input_lengths, training, speaker_embeddings=None, mel_targets=None, max_iters=None,
              noise=None):
    """The whole Tacotron-2 graph at the current variable scope (``Tacotron_model/inference`` in real models).

    Args:
        hp: :class:`speechblocks.Tacotron2HParams`.
        inputs: int ``[B, T_in]``; input_lengths: int ``[B]``.
        training: ``is_training`` (logits from the stop projection, batch statistics, conv dropout, zoneout).
        speaker_embeddings: ``[B, E]`` (RTVC, ``hp.speaker_embedding_size > 0``).
        mel_targets: ``[B, T_out, M]`` for teacher forcing (required in training); free running when None.
        max_iters: ``maximum_iterations`` of the loop (None in training).
        noise: optional injected keep-masks, keys of the spec's ``noise_masks``.

    Returns:
        dict ``decoder_outputs, mel_outputs, stop_token_prediction, alignments`` (+ ``linear_outputs``).
    """
    noise = noise or {}
    spk = hp.speaker_embedding_size
    if spk and speaker_embeddings is None:
        raise ValueError("speaker_embeddings are required by a model with speaker_embedding_size > 0")
    if not spk and speaker_embeddings is not None:
        raise ValueError("speaker_embeddings given to a model without speaker embedding")
    if training and mel_targets is None:
        raise ValueError("training needs mel_targets (teacher forcing)")
    batch_size = tf.shape(inputs)[0]

    table = v1.get_variable("inputs_embedding", [hp.n_symbols, hp.embedding_dim], dtype=tf.float32)
    embedded = tf.nn.embedding_lookup(table, inputs)
    conv_out = tacotron_encoder_convolutions(embedded, hp, training, noise.get("encoder_convolutions"))
    enc_masks = noise.get("encoder_LSTM")
    if enc_masks is not None:
        (fw_c, fw_h), (bw_c, bw_h) = enc_masks
        enc_masks = (fw_c, fw_h, bw_c, bw_h)
    encoder_outputs, _ = encoder_rnn(conv_out, input_lengths, dict(size=hp.encoder_lstm_units,
                                                                   zoneout=hp.tacotron_zoneout_rate,
                                                                   tf1_scope="encoder_LSTM"),
                                     training, enc_masks)
    memory = encoder_outputs
    if spk:
        tiled = tf.tile(tf.reshape(speaker_embeddings, [-1, 1, spk]), [1, tf.shape(encoder_outputs)[1], 1])
        memory = tf.concat([encoder_outputs, tiled], axis=2)

    attention = LocationSensitiveAttention(hp.attention_dim, memory, tf.reshape(input_lengths, [-1]),
                                           filters=hp.attention_filters, kernel_size=hp.attention_kernel,
                                           mask_encoder=hp.mask_encoder, smoothing=hp.smoothing,
                                           cumulate_weights=hp.cumulative_weights)
    cell = TacotronDecoderCell(hp, attention, training, noise)
    if mel_targets is not None:
        helper = TrainingHelper(batch_size, mel_targets, hp)
    else:
        helper = TestHelper(batch_size, hp)
    frames, stop, alignments = dynamic_decode(cell, helper, batch_size, None if training else max_iters)

    decoder_outputs = tf.reshape(frames, [batch_size, -1, hp.num_mels])
    stop_token_prediction = tf.reshape(stop, [batch_size, -1])
    if hp.clip_outputs:
        decoder_outputs = _clip(decoder_outputs, hp)
    residual = tacotron_postnet(decoder_outputs, hp, training, noise.get("postnet_convolutions"))
    projected, _ = frame_projection(residual, dict(shape=hp.num_mels, tf1_scope="postnet_projection"), training)
    mel_outputs = decoder_outputs + projected
    if hp.clip_outputs:
        mel_outputs = _clip(mel_outputs, hp)
    out = {"decoder_outputs": decoder_outputs, "mel_outputs": mel_outputs,
           "stop_token_prediction": stop_token_prediction, "alignments": alignments}
    if hp.predict_linear:
        config = dict(K=hp.cbhg_kernels, conv_channels=hp.cbhg_conv_channels, pool_size=hp.cbhg_pool_size,
                      projections=[hp.cbhg_projection, hp.num_mels],
                      projection_kernel_size=hp.cbhg_projection_kernel_size,
                      n_highwaynet_layers=hp.cbhg_highwaynet_layers, highway_units=hp.cbhg_highway_units,
                      rnn_units=hp.cbhg_rnn_units, tf1_scope="CBHG_postnet", bn_position=hp.batch_norm_position)
        post, _ = cbhg(mel_outputs, None, config, training)
        linear, _ = frame_projection(post, dict(shape=hp.num_freq, tf1_scope="cbhg_linear_specs_projection"), training)
        if hp.clip_outputs:
            linear = _clip(linear, hp)
        out["linear_outputs"] = linear
    return out


def regularization_weight(hp):
    """``tacotron_reg_weight``, scaled by the output range when ``tacotron_scale_regularization``."""
    if not hp.tacotron_scale_regularization:
        return hp.tacotron_reg_weight
    scale = 1.0 / (2 * hp.max_abs_value) if hp.symmetric_mels else 1.0 / hp.max_abs_value
    return hp.tacotron_reg_weight * scale


def regularized(variables):
    """The variables the originals' ``add_loss`` regularises, selected by their full TF1 names."""
    return [v for v in variables if not any(s in v.name for s in REGULARIZATION_EXCLUDED)]


def tacotron2_loss(hp, outputs, mel_targets, stop_token_targets, targets_lengths, variables, linear_targets=None):
    """The originals' ``add_loss`` (under ``variable_scope("loss")``) -> dict of :data:`LOSS_NAMES`.

    ``hp.speaker_embedding_size`` selects the original: RTVC (mel L1 term when not ``mask_decoder``, never a
    linear loss) or Rayhane (linear loss when ``predict_linear``). ``variables``: the model's trainable ones.
    """
    r = hp.outputs_per_step
    rtvc = bool(hp.speaker_embedding_size)
    dec, mel, stop = outputs["decoder_outputs"], outputs["mel_outputs"], outputs["stop_token_prediction"]
    linear_out = outputs.get("linear_outputs")
    use_linear = (not rtvc) and hp.predict_linear
    if use_linear and linear_targets is None:
        raise ValueError("linear_targets are required by the Rayhane loss with predict_linear")
    zero = tf.constant(0.0, dtype=tf.float32)
    with v1.variable_scope("loss"):
        if hp.mask_decoder:
            before = tf1_masked_mse(mel_targets, dec, targets_lengths, r)
            after = tf1_masked_mse(mel_targets, mel, targets_lengths, r)
            stop_loss = tf1_masked_sigmoid_cross_entropy(stop_token_targets, stop, targets_lengths, r,
                                                         hp.cross_entropy_pos_weight)
            linear_loss = zero
            if use_linear:
                linear_loss = tf1_masked_linear_loss(linear_targets, linear_out, targets_lengths, r, hp.sample_rate,
                                                     hp.num_freq)
        else:
            before = v1.losses.mean_squared_error(mel_targets, dec)
            after = v1.losses.mean_squared_error(mel_targets, mel)
            stop_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=stop_token_targets, logits=stop))
            if rtvc:
                linear_loss = tf.reduce_mean(tf.abs(mel_targets - dec))
            elif use_linear:
                l1 = tf.abs(linear_targets - linear_out)
                n_priority = int(2000 / (hp.sample_rate * 0.5) * hp.num_freq)
                linear_loss = 0.5 * tf.reduce_mean(l1) + 0.5 * tf.reduce_mean(l1[:, :, 0:n_priority])
            else:
                linear_loss = zero
        regularization = tf.add_n([tf.nn.l2_loss(v) for v in regularized(variables)]) * regularization_weight(hp)
        loss = before + after + stop_loss + regularization + linear_loss
    return dict(before_loss=before, after_loss=after, stop_token_loss=stop_loss, linear_loss=linear_loss,
                regularization_loss=regularization, loss=loss)
