"""Parity of ``Conv1DBlock``: TF1 legacy reference -> Keras / torch, Keras <-> torch, training masks."""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare, stat_row
from ._common import (
    FLOAT32_TOL,
    keras_from_checkpoint,
    keras_to_torch,
    randn,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "Conv1DBlock"

# (label, config, input shape): odd/even kernels, both BN positions, batch 1, time 1
CASES = [
    ("k5 before relu", dict(kernel_size=5, channels=16, activation="relu", drop_rate=0.5, bn_position="before"),
     (3, 9, 8)),
    ("k4 after tanh", dict(kernel_size=4, channels=12, activation="tanh", drop_rate=0.5, bn_position="after"),
     (2, 7, 6)),
    ("k2 B1 T1 linear", dict(kernel_size=2, channels=5, activation="linear", drop_rate=0.0), (1, 1, 3)),
]


def legacy_specs():
    specs = []
    for i, (_, config, shape) in enumerate(CASES):
        x = randn(shape, seed=10 + i)
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i))
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i, training=True))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.Conv1DBlock(**config)


def _torch(config, in_channels):
    import torch_layers

    return torch_layers.Conv1DBlock(in_channels, **config)


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        infer, train = legacy[2 * i], legacy[2 * i + 1]
        x = infer.spec.inputs["inputs"]
        kb = keras_from_checkpoint(_keras(config), infer)
        tb = torch_from_checkpoint(_torch(config, shape[-1]), infer).eval()
        ref = infer.outputs["outputs"]
        out.append(compare(BLOCK, "TF1->Keras", f"{label}: outputs", kb(x, training=False), ref, FLOAT32_TOL))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch", f"{label}: outputs", to_numpy(tb(torch_tensor(x))), ref,
                               FLOAT32_TOL))

        # training mode: batch statistics + the dropout masks TF1 drew
        kt = keras_from_checkpoint(_keras(config), train)
        tt = torch_from_checkpoint(_torch(config, shape[-1]), train).train()
        mask = train.outputs.get("mask/0")
        ref_t = train.outputs["outputs"]
        out.append(compare(BLOCK, "TF1->Keras train", f"{label}: outputs (injected masks)",
                           kt(x, training=True, dropout_mask=mask), ref_t, FLOAT32_TOL))
        with torch.no_grad():
            yt = tt(torch_tensor(x), dropout_mask=None if mask is None else torch_tensor(mask))
        out.append(compare(BLOCK, "TF1->torch train", f"{label}: outputs (injected masks)", to_numpy(yt), ref_t,
                           FLOAT32_TOL))

        # Keras <-> torch through tf1_weights, fresh random initialisation
        kr = _keras(config)
        xr = randn(shape, seed=100 + i)
        yk = kr(xr, training=False)
        tr = keras_to_torch(kr, _torch(config, shape[-1])).eval()
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs", to_numpy(tr(torch_tensor(xr))), yk,
                               FLOAT32_TOL))

    # the dropout rate holds statistically (both frameworks, random masks)
    cfg = dict(kernel_size=3, channels=64, activation="linear", drop_rate=0.5)
    x = randn((8, 64, 4), seed=7)
    kb = _keras(cfg)
    yk = np.asarray(kb(x, training=True))
    tb = keras_to_torch(kb, _torch(cfg, 4)).train()
    with torch.no_grad():
        yt = to_numpy(tb(torch_tensor(x)))
    out.append(stat_row(BLOCK, "Keras dropout rate", "fraction dropped", float(np.mean(yk == 0)), 0.5, 0.02))
    out.append(stat_row(BLOCK, "torch dropout rate", "fraction dropped", float(np.mean(yt == 0)), 0.5, 0.02))
    return out
