"""Parity of ``Postnet``: TF1 legacy reference -> Keras / torch, Keras <-> torch, training masks."""
from __future__ import annotations

from ._conv_stack import ConvStack, conv_stack_rows, conv_stack_specs

BLOCK = "Postnet"

# (label, config, input shape): odd/even kernels, the seed's hard-coded last scope with fewer layers,
# the opt-in corrected naming with more than 5 layers, batch 1, time 1, Rayhane sizes and names
CASES = [
    ("k5 5x16 tanh", dict(kernel_size=5, channels=16, num_layers=5, drop_rate=0.5), (2, 8, 10)),
    ("k2 3 layers (last = conv_layer_5) B1 T1", dict(kernel_size=2, channels=6, num_layers=3, drop_rate=0.5),
     (1, 1, 4)),
    ("k4 6 layers last_layer_scope_index=6 relu bn-after",
     dict(kernel_size=4, channels=8, num_layers=6, drop_rate=0.3, activation="relu", bn_position="after",
          last_layer_scope_index=6), (2, 5, 4)),
    ("Rayhane 5x512 k5 on 80 mels postnet_convolutions",
     dict(kernel_size=5, channels=512, num_layers=5, drop_rate=0.5, tf1_scope="postnet_convolutions"), (2, 6, 80)),
]
RAYHANE = 3  # index of the default-size case: its outputs are compared relative to their scale
# TF1's dropout rate, from the masks of a 1-layer postnet (its only layer is linear: no activation zero
# hides a kept unit)
RATE_CONFIG = dict(kernel_size=3, channels=64, num_layers=1, drop_rate=0.5)
RATE_SHAPE = (8, 32, 4)


def _keras(config):
    import tf_layers

    return tf_layers.Postnet(**config)


def _torch(config, in_channels):
    import torch_layers

    return torch_layers.Postnet(in_channels, **config)


STACK = ConvStack(BLOCK, _keras, _torch, CASES, RAYHANE, RATE_CONFIG, RATE_SHAPE,
                  rate_label='1-layer (linear) postnet: 1 - mean(mask)',
                  stat_config=dict(kernel_size=3, channels=64, num_layers=2, drop_rate=0.5), input_seed=30,
                  rate_input_seed=39, rate_spec_seed=19, stat_seed=8)


def legacy_specs():
    return conv_stack_specs(STACK)


def rows(legacy):
    return conv_stack_rows(STACK, legacy)
