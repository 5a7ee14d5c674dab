"""TF1-style graph code of the Tacotron-2 feed-forward blocks, written from the seed's semantics.

Runs only inside the legacy subprocess (``tf.compat.v1.layers`` under ``TF_USE_LEGACY_KERAS=1``).
Functions return ``(output, masks)`` where ``masks`` are the keep-masks the random dropout drew,
recovered from the graph so the other frameworks can be fed the same masks.
"""
from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1

ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.nn.tanh, "sigmoid": tf.nn.sigmoid, None: lambda t: t,
               "linear": lambda t: t}


def keep_mask(dropped):
    """The keep-mask of a dropout output (where the pre-dropout value was 0 the mask is irrelevant)."""
    return tf.cast(tf.not_equal(dropped, 0.0), tf.float32)


def conv1d(inputs, kernel_size, channels, activation, is_training, drop_rate, scope, bn_position="before"):
    """TF1 ``conv1d`` helper: conv -> BN -> activation -> dropout (or conv -> act -> BN -> dropout)."""
    with v1.variable_scope(scope):
        x = v1.layers.conv1d(inputs, filters=channels, kernel_size=kernel_size, activation=None, padding="same")
        if bn_position == "before":
            x = activation(v1.layers.batch_normalization(x, training=is_training))
        else:
            x = v1.layers.batch_normalization(activation(x), training=is_training)
        out = v1.layers.dropout(x, rate=drop_rate, training=is_training, name=f"dropout_{scope}")
        return out, [keep_mask(out)] if (is_training and drop_rate > 0) else []


def highway(inputs, units, scope):
    with v1.variable_scope(scope):
        h = v1.layers.dense(inputs, units, activation=tf.nn.relu, name="H")
        t = v1.layers.dense(inputs, units, activation=tf.nn.sigmoid, name="T",
                            bias_initializer=tf.constant_initializer(-1.0))
        return h * t + inputs * (1.0 - t)
