"""Legacy builders of the feed-forward Tacotron-2 blocks (``BUILDERS``: name -> build function).

A build function takes ``(config, inputs, training, options)`` and returns ``(block_scope, outputs)``.
"""
from __future__ import annotations

from .tf1_blocks import ACTIVATIONS, conv1d, highway


def build_conv1d_block(config, inputs, training, options):
    scope = config.get("tf1_scope") or "conv1d_block"
    out, masks = conv1d(inputs["inputs"], config["kernel_size"], config["channels"],
                        ACTIVATIONS[config.get("activation", "relu")], training, config.get("drop_rate", 0.0),
                        scope, config.get("bn_position", "before"))
    outputs = {"outputs": out}
    outputs.update({f"mask/{i}": m for i, m in enumerate(masks)})
    return scope, outputs


def build_highway_net(config, inputs, training, options):
    scope = config.get("tf1_scope") or "HighwayNet"
    return scope, {"outputs": highway(inputs["inputs"], config["units"], scope)}


BUILDERS = {
    "Conv1DBlock": build_conv1d_block,
    "HighwayNet": build_highway_net,
}
