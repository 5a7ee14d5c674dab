"""Legacy builders of the Tacotron-2 masks and masked losses (``BUILDERS``: name -> build function).

Written from the semantics of the TF1 originals with the original ``tf.compat.v1`` ops
(``tf.compat.v1.losses.mean_squared_error(weights=...)``, ``weighted_cross_entropy_with_logits``,
``count_nonzero``, ``tf.sequence_mask`` over the length rounded up to a multiple of ``r``). Each loss
builder also returns ``tf.gradients(loss, outputs)`` as ``grad/outputs`` and
``tf.gradients(loss, targets)`` as ``grad/targets``.

Inputs: ``targets``, ``outputs`` (float32), ``lengths`` (int32) and optionally ``mask`` (the seed's
``mask=`` override). Config: ``outputs_per_step`` and the hparams the loss reads (``pos_weight``,
``sample_rate``, ``num_freq``).

A loss graph has no variables, but the runner always saves a checkpoint and ``tf.compat.v1.train.Saver``
refuses to save nothing, so each builder creates one unused scalar variable (``<scope>/saver_anchor``).
"""
from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1


def _anchor():
    v1.get_variable("saver_anchor", shape=[], dtype=tf.float32, initializer=v1.zeros_initializer(), trainable=False)


def _padded_length(lengths, r):
    """max(lengths) rounded up to a multiple of r, with the TF1 graph's cond on the remainder."""
    longest = tf.reduce_max(lengths)
    r = tf.convert_to_tensor(r, dtype=longest.dtype)
    remainder = tf.math.floormod(longest, r)
    return tf.cond(tf.equal(remainder, 0), lambda: longest, lambda: longest + r - remainder)


def tf1_sequence_mask(lengths, r, expand=True):
    mask = tf.sequence_mask(lengths, maxlen=_padded_length(lengths, r), dtype=tf.float32)
    return tf.expand_dims(mask, axis=-1) if expand else mask


def _channel_mask(mask, targets):
    """(batch, time, 1) mask times ones (batch, time, channels), shape-asserted against targets."""
    ones = tf.ones(tf.stack([tf.shape(mask)[0], tf.shape(mask)[1], tf.shape(targets)[-1]]), dtype=tf.float32)
    weights = mask * ones
    return weights, tf.debugging.assert_equal(tf.shape(targets), tf.shape(weights))


def tf1_masked_mse(targets, outputs, lengths, r, mask=None):
    if mask is None:
        mask = tf1_sequence_mask(lengths, r, True)
    weights, check = _channel_mask(mask, targets)
    with tf.control_dependencies([check]):
        return v1.losses.mean_squared_error(labels=targets, predictions=outputs, weights=weights)


def tf1_masked_sigmoid_cross_entropy(targets, outputs, lengths, r, pos_weight, mask=None):
    if mask is None:
        mask = tf1_sequence_mask(lengths, r, False)
    with tf.control_dependencies([tf.debugging.assert_equal(tf.shape(targets), tf.shape(mask))]):
        losses = v1.nn.weighted_cross_entropy_with_logits(targets=targets, logits=outputs, pos_weight=pos_weight)
    masked = losses * mask
    return tf.reduce_sum(masked) / v1.count_nonzero(masked, dtype=tf.float32)


def tf1_masked_linear_loss(targets, outputs, lengths, r, sample_rate, num_freq, mask=None):
    if mask is None:
        mask = tf1_sequence_mask(lengths, r, True)
    weights, check = _channel_mask(mask, targets)
    n_priority = int(2000 / (sample_rate * 0.5) * num_freq)
    with tf.control_dependencies([check]):
        masked_l1 = tf.abs(targets - outputs) * weights
    low = masked_l1[:, :, 0:n_priority]
    mean_l1 = tf.reduce_sum(masked_l1) / tf.reduce_sum(weights)
    mean_l1_low = tf.reduce_sum(low) / tf.reduce_sum(weights)
    return 0.5 * mean_l1 + 0.5 * mean_l1_low


def _loss_outputs(loss, inputs):
    grad_outputs, grad_targets = tf.gradients(loss, [inputs["outputs"], inputs["targets"]])
    return {"loss": loss, "grad/outputs": grad_outputs, "grad/targets": grad_targets}


def build_sequence_mask(config, inputs, training, options):
    scope = config.get("tf1_scope") or "sequence_mask"
    with v1.variable_scope(scope):
        _anchor()
        return scope, {"mask": tf1_sequence_mask(inputs["lengths"], config["r"], config.get("expand", True))}


def build_masked_mse(config, inputs, training, options):
    scope = config.get("tf1_scope") or "MaskedMSE"
    with v1.variable_scope(scope):
        _anchor()
        loss = tf1_masked_mse(inputs["targets"], inputs["outputs"], inputs["lengths"], config["outputs_per_step"],
                              inputs.get("mask"))
    return scope, _loss_outputs(loss, inputs)


def build_masked_sigmoid_cross_entropy(config, inputs, training, options):
    scope = config.get("tf1_scope") or "MaskedSigmoidCrossEntropy"
    with v1.variable_scope(scope):
        _anchor()
        loss = tf1_masked_sigmoid_cross_entropy(inputs["targets"], inputs["outputs"], inputs["lengths"],
                                                config["outputs_per_step"], config.get("pos_weight", 1.0),
                                                inputs.get("mask"))
    return scope, _loss_outputs(loss, inputs)


def build_masked_linear_loss(config, inputs, training, options):
    scope = config.get("tf1_scope") or "MaskedLinearLoss"
    with v1.variable_scope(scope):
        _anchor()
        loss = tf1_masked_linear_loss(inputs["targets"], inputs["outputs"], inputs["lengths"],
                                      config["outputs_per_step"], config["sample_rate"], config["num_freq"],
                                      inputs.get("mask"))
    return scope, _loss_outputs(loss, inputs)


BUILDERS = {
    "sequence_mask": build_sequence_mask,
    "MaskedMSE": build_masked_mse,
    "MaskedSigmoidCrossEntropy": build_masked_sigmoid_cross_entropy,
    "MaskedLinearLoss": build_masked_linear_loss,
}
