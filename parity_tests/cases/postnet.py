"""Parity of ``Postnet``: TF1 legacy reference -> Keras / torch, Keras <-> torch, training masks."""
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


def legacy_specs():
    specs = []
    for i, (_, config, shape) in enumerate(CASES):
        x = randn(shape, seed=30 + i)
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i))
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i, training=True))
    specs.append(LegacySpec(BLOCK, RATE_CONFIG, {"inputs": randn(RATE_SHAPE, seed=39)}, seed=19, training=True))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.Postnet(**config)


def _torch(config, in_channels):
    import torch_layers

    return torch_layers.Postnet(in_channels, **config)


def _masks(result, n):
    masks = [result.outputs.get(f"mask/{j}") for j in range(n)]
    return None if all(m is None for m in masks) else masks


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        infer, train = legacy[2 * i], legacy[2 * i + 1]
        x = infer.spec.inputs["inputs"]
        n = config["num_layers"]
        rel = i == RAYHANE
        kb = keras_from_checkpoint(_keras(config), infer)
        tb = torch_from_checkpoint(_torch(config, shape[-1]), infer).eval()
        ref = infer.outputs["outputs"]
        out.append(compare(BLOCK, "TF1->Keras", f"{label}: outputs", kb(x, training=False), ref, FLOAT32_TOL, relative=rel))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch", f"{label}: outputs", to_numpy(tb(torch_tensor(x))), ref, FLOAT32_TOL, relative=rel))

        # training mode: batch statistics + the dropout masks TF1 drew
        masks = _masks(train, n)
        kt = keras_from_checkpoint(_keras(config), train)
        tt = torch_from_checkpoint(_torch(config, shape[-1]), train).train()
        ref_t = train.outputs["outputs"]
        out.append(compare(BLOCK, "TF1->Keras train", f"{label}: outputs (injected masks)",
                           kt(x, training=True, dropout_masks=masks), ref_t, FLOAT32_TOL, relative=rel))
        with torch.no_grad():
            yt = tt(torch_tensor(x), None if masks is None else [torch_tensor(m) for m in masks])
        out.append(compare(BLOCK, "TF1->torch train", f"{label}: outputs (injected masks)", to_numpy(yt), ref_t,
                           FLOAT32_TOL, relative=rel))

        # Keras <-> torch through tf1_weights, fresh random initialisation, inference and training
        kr = _keras(config)
        xr = randn(shape, seed=200 + i)
        yk = kr(xr, training=False)
        tr = keras_to_torch(kr, _torch(config, shape[-1])).eval()
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs", to_numpy(tr(torch_tensor(xr))), yk,
                               FLOAT32_TOL, relative=rel))
        rm = [(np.random.default_rng(300 + i + j).random(shape[:2] + (config["channels"],)) >= 0.5).astype(np.float32)
              for j in range(n)]
        yk_t = kr(xr, training=True, dropout_masks=rm)
        with torch.no_grad():
            yt_t = tr.train()(torch_tensor(xr), [torch_tensor(m) for m in rm])
        out.append(compare(BLOCK, "Keras<->torch train", f"{label}: outputs (same masks)", to_numpy(yt_t), yk_t,
                           FLOAT32_TOL, relative=rel))

    # dropout rate: TF1's drawn masks (tanh layer: activations are never exactly 0) and both frameworks' own
    out.append(stat_row(BLOCK, "TF1 dropout rate", "1-layer (linear) postnet: 1 - mean(mask)",
                        1.0 - float(np.mean(legacy[-1].outputs["mask/0"])), 0.5, 0.02))

    # float64: the Rayhane-size training path agrees to 1e-9 (separates float32 noise from maths bugs)
    label, config, shape = CASES[RAYHANE]
    weights = keras_from_checkpoint(_keras(config), legacy[2 * RAYHANE + 1]).tf1_weights()
    k64 = _keras({**config, "dtype": "float64"})
    k64.load_tf1_weights(weights)
    t64 = _torch({**config, "dtype": torch.float64}, shape[-1]).train()
    t64.load_tf1_weights(weights)
    x64 = randn(shape, seed=400).astype(np.float64)
    rm = [(np.random.default_rng(500 + j).random(shape[:2] + (config["channels"],)) >= 0.5).astype(np.float64)
          for j in range(config["num_layers"])]
    yk64 = k64(x64, training=True, dropout_masks=rm)
    with torch.no_grad():
        yt64 = t64(torch_tensor(x64), [torch_tensor(m) for m in rm])
    out.append(compare(BLOCK, "Keras<->torch float64 train", f"{label}: outputs (same masks)", to_numpy(yt64), yk64,
                       1e-9))

    cfg = dict(kernel_size=3, channels=64, num_layers=2, drop_rate=0.5)  # the last layer is linear
    x = randn((8, 64, 4), seed=8)
    kb = _keras(cfg)
    yk = np.asarray(kb(x, training=True))
    tb = keras_to_torch(kb, _torch(cfg, 4)).train()
    with torch.no_grad():
        yt = to_numpy(tb(torch_tensor(x)))
    out.append(stat_row(BLOCK, "Keras dropout rate", "fraction dropped", float(np.mean(yk == 0)), 0.5, 0.02))
    out.append(stat_row(BLOCK, "torch dropout rate", "fraction dropped", float(np.mean(yt == 0)), 0.5, 0.02))
    with torch.no_grad():
        ye = to_numpy(tb.eval()(torch_tensor(x)))
    out.append(stat_row(BLOCK, "torch eval: no dropout", "fraction dropped", float(np.mean(ye == 0)), 0.0, 0.0))
    return out
