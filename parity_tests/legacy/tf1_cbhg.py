"""TF1-style graph code of Tacotron-2's CBHG, written from the seed's semantics (legacy subprocess only).

Uses ``tf.compat.v1.layers`` and ``tf.compat.v1.nn.rnn_cell.GRUCell`` with
``tf.compat.v1.nn.bidirectional_dynamic_rnn`` so that variable names are the real checkpoint names.
The dimension-fix dense follows the original intent (``tf.layers.dense(x, highway_units)``, named
``dense``), since the seed's line for it cannot run (docs/ARCHITECTURE.md, semantics).
"""
from __future__ import annotations

import tensorflow as tf

from .tf1_blocks import conv1d, highway

v1 = tf.compat.v1


def cbhg(inputs, input_lengths, config, training):
    """CBHG of the seed. ``config``: the Keras constructor keywords (optional ``tf1_scope``).

    ``config["bn_position"]`` (default ``"before"``, the seed's): ``"after"`` is Rayhane's later CBHG, whose
    bank and both projections run conv -> activation -> batch norm.

    Returns ``(outputs (batch, time, 2 * rnn_units), masks=[])`` (CBHG draws no random masks).
    """
    scope = config.get("tf1_scope") or "CBHG"
    K = config["K"]
    conv_channels = config["conv_channels"]
    projections = config["projections"]
    pks = config["projection_kernel_size"]
    highway_units = config["highway_units"]
    rnn_units = config["rnn_units"]
    bn_position = config.get("bn_position") or "before"
    with v1.variable_scope(scope):
        with v1.variable_scope("conv_bank"):
            bank = tf.concat([conv1d(inputs, k, conv_channels, tf.nn.relu, training, 0.0, f"conv1d_{k}",
                                     bn_position)[0]
                              for k in range(1, K + 1)], axis=-1)
        pooled = v1.layers.max_pooling1d(bank, pool_size=config["pool_size"], strides=1, padding="same")
        proj1, _ = conv1d(pooled, pks, projections[0], tf.nn.relu, training, 0.0, "proj1", bn_position)
        proj2, _ = conv1d(proj1, pks, projections[1], lambda t: t, training, 0.0, "proj2", bn_position)
        x = proj2 + inputs
        if x.shape[2] != highway_units:
            x = v1.layers.dense(x, highway_units)
        for i in range(config["n_highwaynet_layers"]):
            x = highway(x, highway_units, f"{scope}_highwaynet_{i + 1}")
        fw_cell = v1.nn.rnn_cell.GRUCell(rnn_units, name=f"{scope}_forward_RNN")
        bw_cell = v1.nn.rnn_cell.GRUCell(rnn_units, name=f"{scope}_backward_RNN")
        outputs, _ = v1.nn.bidirectional_dynamic_rnn(fw_cell, bw_cell, x, sequence_length=input_lengths,
                                                     dtype=tf.float32)
        return tf.concat(outputs, axis=2), []
