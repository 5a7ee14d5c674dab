"""Parity of ``Prenet``: TF1 legacy reference -> Keras / torch, Keras <-> torch, always-on dropout.

The pre-net's dropout is on in inference too, so every row -- inference included -- injects the
keep-masks the TF1 graph drew; statistical rows check the rate of the frameworks' own masks.
"""
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

BLOCK = "Prenet"
DECODER_SCOPE = "Tacotron_model/inference/decoder"

# (label, config, input shape, scope prefix): one decoder step (2-D) and sequences (3-D), batch 1, time 1,
# Rayhane's sizes and names (decoder/decoder_prenet/dense_{1,2})
CASES = [
    ("Rayhane [256,256] decoder_prenet on 80 mels", dict(layers_sizes=[256, 256], drop_rate=0.5,
                                                         tf1_scope="decoder_prenet"), (3, 80), DECODER_SCOPE),
    ("[8,6] tanh rate 0.3 sequence", dict(layers_sizes=[8, 6], drop_rate=0.3, activation="tanh"), (2, 5, 7), None),
    ("[4] B1 T1", dict(layers_sizes=[4], drop_rate=0.5), (1, 1, 3), None),
    ("[5,5,3] linear rate 0", dict(layers_sizes=[5, 5, 3], drop_rate=0.0, activation="linear"), (2, 4), None),
]
# TF1's inference-time dropout rate: a linear pre-net, so no activation zero hides a kept unit
RATE_CONFIG = dict(layers_sizes=[256, 256], drop_rate=0.5, activation="linear")
RATE_SHAPE = (8, 80)


def _spec(config, x, scope, seed, training):
    kw = {} if scope is None else {"scope": scope}
    return LegacySpec(BLOCK, config, {"inputs": x}, seed=seed, training=training, **kw)


def legacy_specs():
    specs = []
    for i, (_, config, shape, scope) in enumerate(CASES):
        x = randn(shape, seed=40 + i)
        specs.append(_spec(config, x, scope, i, False))
        specs.append(_spec(config, x, scope, i, True))
    specs.append(_spec(RATE_CONFIG, randn(RATE_SHAPE, seed=49), None, 29, False))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.Prenet(**config)


def _torch(config, input_size):
    import torch_layers

    return torch_layers.Prenet(input_size, **config)


def _masks(result, n):
    masks = [result.outputs.get(f"mask/{j}") for j in range(n)]
    return None if all(m is None for m in masks) else masks


def _t(masks):
    return None if masks is None else [torch_tensor(m) for m in masks]


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape, _) in enumerate(CASES):
        infer, train = legacy[2 * i], legacy[2 * i + 1]
        x = infer.spec.inputs["inputs"]
        n = len(config["layers_sizes"])
        for result, mode in ((infer, ""), (train, " train")):
            masks = _masks(result, n)
            kb = keras_from_checkpoint(_keras(config), result)
            tb = torch_from_checkpoint(_torch(config, shape[-1]), result)
            tb.train() if mode else tb.eval()
            ref = result.outputs["outputs"]
            out.append(compare(BLOCK, f"TF1->Keras{mode}", f"{label}: outputs (injected masks)",
                               kb(x, training=bool(mode), dropout_masks=masks), ref, FLOAT32_TOL))
            with torch.no_grad():
                out.append(compare(BLOCK, f"TF1->torch{mode}", f"{label}: outputs (injected masks)",
                                   to_numpy(tb(torch_tensor(x), _t(masks))), ref, FLOAT32_TOL))

        # Keras <-> torch through tf1_weights, fresh random initialisation, the same random masks
        kr = _keras(config)
        xr = randn(shape, seed=240 + i)
        rm = [(np.random.default_rng(340 + i + j).random(shape[:-1] + (size,))
               >= config["drop_rate"]).astype(np.float32)
              for j, size in enumerate(config["layers_sizes"])]
        yk = kr(xr, training=False, dropout_masks=rm)
        tr = keras_to_torch(kr, _torch(config, shape[-1])).eval()
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs (same masks)",
                               to_numpy(tr(torch_tensor(xr), _t(rm))), yk, FLOAT32_TOL))

    # dropout is on at inference: TF1 (legacy inference graph), Keras (training=False), torch (eval())
    rate = RATE_CONFIG["drop_rate"]
    y_tf1 = legacy[-1].outputs["outputs"]
    out.append(stat_row(BLOCK, "TF1 inference dropout rate", "fraction dropped", float(np.mean(y_tf1 == 0)),
                        rate, 0.03))
    x = randn((16, 80), seed=8)
    kb = _keras({**RATE_CONFIG, "seed": 3})
    yk = np.asarray(kb(x, training=False))
    tb = keras_to_torch(kb, _torch(RATE_CONFIG, 80)).eval()
    with torch.no_grad():
        yt = to_numpy(tb(torch_tensor(x), None, torch.Generator().manual_seed(3)))
    out.append(stat_row(BLOCK, "Keras inference dropout rate", "fraction dropped", float(np.mean(yk == 0)), rate, 0.03))
    out.append(stat_row(BLOCK, "torch eval dropout rate", "fraction dropped", float(np.mean(yt == 0)), rate, 0.03))
    return out
