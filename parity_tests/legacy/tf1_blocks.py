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


# -- feed-forward Tacotron-2 blocks: (inputs, config, training) -> (output, masks) -------------------
# ``config`` holds the Keras constructor keywords (optional ``tf1_scope``); each function opens its own
# variable scope, named as the seed names it.
def _activation(config, default):
    return ACTIVATIONS[config.get("activation", default)]


def encoder_convolutions(inputs, config, training):
    """Seed ``EncoderConvolutions``: ``num_layers`` conv1d blocks ``conv_layer_{i}_<scope>``."""
    scope = config.get("tf1_scope") or "enc_conv_layers"
    masks = []
    with v1.variable_scope(scope):
        x = inputs
        for i in range(config.get("num_layers", 3)):
            x, m = conv1d(x, config.get("kernel_size", 5), config.get("channels", 512), _activation(config, "relu"),
                          training, config.get("drop_rate", 0.5), f"conv_layer_{i + 1}_{scope}",
                          config.get("bn_position", "before"))
            masks += m
    return x, masks


def postnet(inputs, config, training):
    """Seed ``Postnet``: ``num_layers - 1`` activated blocks, then a linear block hard-coded as
    ``conv_layer_5_<scope>`` (or ``conv_layer_<last_layer_scope_index>_<scope>`` when given)."""
    scope = config.get("tf1_scope") or "postnet_convolutions"
    last = config.get("last_layer_scope_index") or 5
    kernel_size, channels = config.get("kernel_size", 5), config.get("channels", 512)
    drop_rate, bn_position = config.get("drop_rate", 0.5), config.get("bn_position", "before")
    masks = []
    with v1.variable_scope(scope):
        x = inputs
        for i in range(config.get("num_layers", 5) - 1):
            x, m = conv1d(x, kernel_size, channels, _activation(config, "tanh"), training, drop_rate,
                          f"conv_layer_{i + 1}_{scope}", bn_position)
            masks += m
        x, m = conv1d(x, kernel_size, channels, lambda t: t, training, drop_rate, f"conv_layer_{last}_{scope}",
                      bn_position)
        masks += m
    return x, masks


def prenet(inputs, config, training):
    """Seed ``Prenet``: dense ``dense_{i}`` then dropout that is on whatever ``training`` says."""
    scope = config.get("tf1_scope") or "prenet"
    drop_rate = config.get("drop_rate", 0.5)
    masks = []
    with v1.variable_scope(scope):
        x = inputs
        for i, size in enumerate(config.get("layers_sizes", (256, 256))):
            dense = v1.layers.dense(x, units=size, activation=_activation(config, "relu"), name=f"dense_{i + 1}")
            x = v1.layers.dropout(dense, rate=drop_rate, training=True, name=f"dropout_{i + 1}{scope}")
            if drop_rate > 0:
                masks.append(keep_mask(x))
    return x, masks


def frame_projection(inputs, config, training):
    """Seed ``FrameProjection``: a Dense layer object named ``projection_<scope>``, called inside ``scope``."""
    scope = config.get("tf1_scope") or "Linear_projection"
    layer = v1.layers.Dense(units=config.get("shape", 80), activation=ACTIVATIONS[config.get("activation")],
                            name=f"projection_{scope}")
    with v1.variable_scope(scope):
        return layer(inputs), []


def stop_projection(inputs, config, training):
    """Seed ``StopProjection``: logits in training, ``activation(logits)`` otherwise."""
    scope = config.get("tf1_scope") or "stop_token_projection"
    with v1.variable_scope(scope):
        logits = v1.layers.dense(inputs, units=config.get("shape", 1), activation=None, name=f"projection_{scope}")
        if training:
            return logits, []
        return ACTIVATIONS[config.get("activation", "sigmoid")](logits), []
