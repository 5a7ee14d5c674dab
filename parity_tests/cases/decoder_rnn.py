"""Parity of ``DecoderRNN``: the seed's ``MultiRNNCell`` of zoneout LSTMs -> Keras / torch, Keras <-> torch.

Sequence rows: the seed's one-step decoder run from the zero state over a teacher-forced sequence (TF1
``dynamic_rnn`` re-entering the block's scope) against the layers' sequence form. Rayhane/RTVC default size
(2 x 1024, decoder input 768) over 50 steps, and a small 3-layer case under a custom ``tf1_scope``. Step rows:
one call of the seed's API ``(inputs, states) -> (output, new_states)`` from random states. Training rows
inject the same zoneout keep-masks into all three.
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import (
    FLOAT32_TOL,
    keras_from_checkpoint,
    keras_to_torch,
    randn,
    rng,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "DecoderRNN"
FLOAT64_TOL = 1e-9

# (label, config, n_in, batch, time)
CASES = [
    ("768->2x1024 50 steps", dict(layers=2, size=1024, zoneout=0.1), 768, 2, 50),
    ("scope dec_x 6->3x8 7 steps", dict(layers=3, size=8, zoneout=0.3, tf1_scope="dec_x"), 6, 3, 7),
]
STEP = ("one step 512->2x32", dict(layers=2, size=32, zoneout=0.2), 512, 4)


def _mask_inputs(config, shape, seed):
    g = rng(seed)
    return {f"zoneout_{s}_{k}": (g.random(shape) >= config["zoneout"]).astype(np.float32)
            for k in range(config["layers"]) for s in ("c", "h")}


def _pairs(ins, layers, convert=lambda a: a):
    return [(convert(ins[f"zoneout_c_{k}"]), convert(ins[f"zoneout_h_{k}"])) for k in range(layers)]


def _step_inputs(seed):
    _, config, n_in, batch = STEP
    ins = {"inputs": randn((batch, n_in), seed=seed)}
    for k in range(config["layers"]):
        ins[f"c_{k}"] = randn((batch, config["size"]), seed=seed + 1 + 2 * k)
        ins[f"h_{k}"] = randn((batch, config["size"]), seed=seed + 2 + 2 * k, scale=0.5)
    return ins


def legacy_specs():
    specs = []
    for i, (_, config, n_in, batch, time) in enumerate(CASES):
        x = randn((batch, time, n_in), seed=40 + i)
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i, dynamic_shapes=True))
        masks = _mask_inputs(config, (batch, time, config["size"]), 60 + i)
        specs.append(LegacySpec(BLOCK, config, {"inputs": x, **masks}, seed=i, training=True))
    _, config, _, batch = STEP
    ins = _step_inputs(70)
    specs.append(LegacySpec("DecoderRNNStep", config, ins, seed=5))
    specs.append(LegacySpec("DecoderRNNStep", config, {**ins, **_mask_inputs(config, (batch, config["size"]), 80)},
                            seed=5, training=True))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.DecoderRNN(**config)


def _torch(config, n_in):
    import torch_layers

    return torch_layers.DecoderRNN(n_in, **config)


def _flat(out, states):
    return [out] + [s for pair in states for s in pair]


def _names(layers):
    return ["outputs"] + [f"state/{k}/{s}" for k in range(layers) for s in ("c", "h")]


def _compare_all(comparison, label, got, ref, layers, tol):
    return [compare(BLOCK, comparison, f"{label}: {n}", np.asarray(to_numpy(g)), r, tol)
            for n, g, r in zip(_names(layers), got, ref)]


def rows(legacy):
    import torch

    out = []
    for i, (label, config, n_in, batch, time) in enumerate(CASES):
        layers = config["layers"]
        for res, mode in ((legacy[2 * i], ""), (legacy[2 * i + 1], " train")):
            ins = res.spec.inputs
            x = ins["inputs"]
            ref = [res.outputs[n] for n in _names(layers)]
            kb = keras_from_checkpoint(_keras(config), res)
            tb = torch_from_checkpoint(_torch(config, n_in), res).eval()
            tag = f"{label}{' (injected masks)' if mode else ''}"
            mk = _pairs(ins, layers) if mode else None
            mt = _pairs(ins, layers, torch_tensor) if mode else None
            out += _compare_all("TF1->Keras" + mode, tag, _flat(*kb(x, training=bool(mode), zoneout_masks=mk)), ref,
                                layers, FLOAT32_TOL)
            with torch.no_grad():
                out += _compare_all("TF1->torch" + mode, tag, _flat(*tb(torch_tensor(x), zoneout_masks=mt)), ref,
                                    layers, FLOAT32_TOL)

        # Keras <-> torch, fresh weights: sequence form from the zero state
        kr = _keras(config)
        x = randn((batch, time, n_in), seed=500 + i)
        yk = _flat(*kr(x, training=False))
        tr = keras_to_torch(kr, _torch(config, n_in)).eval()
        with torch.no_grad():
            out += _compare_all("Keras<->torch", label, _flat(*tr(torch_tensor(x))), yk, layers, FLOAT32_TOL)

    # float64 mode: maths bugs separated from float32 noise (small case, sequence form)
    label, config, n_in, batch, time = CASES[1]
    k64 = _keras({**config, "dtype": "float64"})
    x = randn((batch, time, n_in), seed=700).astype(np.float64)
    y64 = _flat(*k64(x, training=False))
    t64 = keras_to_torch(k64, _torch(config, n_in).double()).eval()
    with torch.no_grad():
        out += _compare_all("Keras<->torch float64", label, _flat(*t64(torch_tensor(x))), y64, config["layers"],
                            FLOAT64_TOL)

    # the seed's one-step API from random states
    label, config, n_in, batch = STEP
    layers = config["layers"]
    for res, mode in ((legacy[-2], ""), (legacy[-1], " train")):
        ins = res.spec.inputs
        states = [(ins[f"c_{k}"], ins[f"h_{k}"]) for k in range(layers)]
        ref = [res.outputs[n] for n in _names(layers)]
        kb = keras_from_checkpoint(_keras(config), res)
        tb = torch_from_checkpoint(_torch(config, n_in), res).eval()
        tag = f"{label}{' (injected masks)' if mode else ''}"
        mk = _pairs(ins, layers) if mode else None
        mt = _pairs(ins, layers, torch_tensor) if mode else None
        out += _compare_all("TF1->Keras" + mode, tag,
                            _flat(*kb(ins["inputs"], states, training=bool(mode), zoneout_masks=mk)),
                            ref, layers, FLOAT32_TOL)
        with torch.no_grad():
            st = [(torch_tensor(c), torch_tensor(h)) for c, h in states]
            out += _compare_all("TF1->torch" + mode, tag, _flat(*tb(torch_tensor(ins["inputs"]), st, zoneout_masks=mt)),
                                ref, layers, FLOAT32_TOL)
    return out
