"""Parity of ``EncoderConvolutions``: TF1 legacy reference -> Keras / torch, Keras <-> torch, training masks."""
from __future__ import annotations

from ._conv_stack import ConvStack, conv_stack_rows, conv_stack_specs

BLOCK = "EncoderConvolutions"

# (label, config, input shape): odd/even kernels, both BN positions, batch 1, time 1, Rayhane sizes and names
CASES = [
    ("k5 3x16 relu", dict(kernel_size=5, channels=16, num_layers=3, drop_rate=0.5), (2, 9, 12)),
    ("k4 2x8 tanh bn-after B1 T1", dict(kernel_size=4, channels=8, num_layers=2, drop_rate=0.5, activation="tanh",
                                         bn_position="after"), (1, 1, 6)),
    ("k2 1x6 scope=enc", dict(kernel_size=2, channels=6, num_layers=1, drop_rate=0.2, tf1_scope="enc"), (3, 5, 4)),
    ("Rayhane 3x512 k5 encoder_convolutions", dict(kernel_size=5, channels=512, num_layers=3, drop_rate=0.5,
                                                    tf1_scope="encoder_convolutions"), (2, 6, 512)),
]
RAYHANE = 3  # index of the default-size case: its outputs are compared relative to their scale
# TF1's dropout rate, from the masks of a linear stack (no activation zero hides a kept unit)
RATE_CONFIG = dict(kernel_size=3, channels=64, num_layers=1, drop_rate=0.5, activation="linear")
RATE_SHAPE = (8, 32, 4)


def _keras(config):
    import tf_layers

    return tf_layers.EncoderConvolutions(**config)


def _torch(config, in_channels):
    import torch_layers

    return torch_layers.EncoderConvolutions(in_channels, **config)


STACK = ConvStack(BLOCK, _keras, _torch, CASES, RAYHANE, RATE_CONFIG, RATE_SHAPE,
                  rate_label='linear stack: 1 - mean(mask)',
                  stat_config=dict(kernel_size=3, channels=64, num_layers=2, drop_rate=0.5, activation="linear"),
                  input_seed=20, rate_input_seed=29, rate_spec_seed=9, stat_seed=7)


def legacy_specs():
    return conv_stack_specs(STACK)


def rows(legacy):
    return conv_stack_rows(STACK, legacy)
