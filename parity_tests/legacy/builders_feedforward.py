"""Legacy builders of the feed-forward Tacotron-2 blocks (``BUILDERS``: name -> build function).

A build function takes ``(config, inputs, training, options)`` and returns ``(block_scope, outputs)``.
"""
from __future__ import annotations

from . import tf1_blocks
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


def _block_builder(fn, default_scope):
    """Builder of a ``fn(inputs, config, training) -> (output, masks)`` legacy function."""

    def build(config, inputs, training, options):
        out, masks = fn(inputs["inputs"], config, training)
        outputs = {"outputs": out}
        outputs.update({f"mask/{i}": m for i, m in enumerate(masks)})
        return config.get("tf1_scope") or default_scope, outputs

    return build


BUILDERS = {
    "Conv1DBlock": build_conv1d_block,
    "HighwayNet": build_highway_net,
    "EncoderConvolutions": _block_builder(tf1_blocks.encoder_convolutions, "enc_conv_layers"),
    "Postnet": _block_builder(tf1_blocks.postnet, "postnet_convolutions"),
    "Prenet": _block_builder(tf1_blocks.prenet, "prenet"),
    "FrameProjection": _block_builder(tf1_blocks.frame_projection, "Linear_projection"),
    "StopProjection": _block_builder(tf1_blocks.stop_projection, "stop_token_projection"),
}
