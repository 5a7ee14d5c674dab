"""Parity of ``EncoderRNN``: TF1 ``bidirectional_dynamic_rnn(sequence_length=...)`` -> Keras / torch, Keras <-> torch.

Rayhane's default size (512 input channels, 256 units per direction) over T = 200 with mixed lengths
including 1, plus a small case under a custom ``tf1_scope``. Training mode compares with the same injected
zoneout keep-masks in all three.
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import (
    FLOAT32_TOL,
    LONG_RECURRENCE_TOL,
    keras_from_checkpoint,
    keras_to_torch,
    randn,
    rng,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "EncoderRNN"
FLOAT64_TOL = 1e-9

# (label, config, n_in, batch, time, lengths, tol)
CASES = [
    ("512->2x256 T200", dict(size=256, zoneout=0.1), 512, 3, 200, [200, 1, 137], LONG_RECURRENCE_TOL),
    ("scope enc_x 12->2x8 T9", dict(size=8, zoneout=0.3, tf1_scope="enc_x"), 12, 4, 9, [9, 1, 5, 3], FLOAT32_TOL),
]
MASK_NAMES = [f"zoneout_{d}_{s}" for d in ("fw", "bw") for s in ("c", "h")]


def _masks(config, batch, time, seed):
    g = rng(seed)
    return {n: (g.random((batch, time, config["size"])) >= config["zoneout"]).astype(np.float32) for n in MASK_NAMES}


def legacy_specs():
    specs = []
    for i, (_, config, n_in, batch, time, lengths, _) in enumerate(CASES):
        ins = {"inputs": randn((batch, time, n_in), seed=20 + i), "input_lengths": np.array(lengths, np.int32)}
        specs.append(LegacySpec(BLOCK, config, ins, seed=i))
        specs.append(LegacySpec(BLOCK, config, {**ins, **_masks(config, batch, time, 30 + i)}, seed=i, training=True))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.EncoderRNN(**config)


def _torch(config, n_in):
    import torch_layers

    return torch_layers.EncoderRNN(n_in, **config)


def _nested(ins, convert=lambda a: a):
    m = [convert(ins[n]) for n in MASK_NAMES]
    return ((m[0], m[1]), (m[2], m[3]))


def rows(legacy):
    import torch

    out = []
    for i, (label, config, n_in, batch, time, lengths, tol) in enumerate(CASES):
        for res, mode in ((legacy[2 * i], ""), (legacy[2 * i + 1], " train")):
            ins = res.spec.inputs
            x, lens = ins["inputs"], ins["input_lengths"]
            ref = res.outputs["outputs"]
            kb = keras_from_checkpoint(_keras(config), res)
            tb = torch_from_checkpoint(_torch(config, n_in), res).eval()
            masks_k = _nested(ins) if mode else None
            masks_t = _nested(ins, torch_tensor) if mode else None
            tag = f"{label}{' (injected masks)' if mode else ''}: outputs"
            out.append(compare(BLOCK, "TF1->Keras" + mode, tag, kb(x, lens, training=bool(mode), zoneout_masks=masks_k),
                               ref, tol))
            with torch.no_grad():
                yt = tb(torch_tensor(x), torch_tensor(lens), zoneout_masks=masks_t)
            out.append(compare(BLOCK, "TF1->torch" + mode, tag, to_numpy(yt), ref, tol))

        # Keras <-> torch with fresh weights and other inputs
        kr = _keras(config)
        x = randn((batch, time, n_in), seed=300 + i)
        lens = np.array(lengths[::-1], np.int32)
        yk = kr(x, lens, training=False)
        tr = keras_to_torch(kr, _torch(config, n_in)).eval()
        masks = _masks(config, batch, time, 400 + i)
        ykt = kr(x, lens, training=True, zoneout_masks=_nested(masks))
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs",
                               to_numpy(tr(torch_tensor(x), torch_tensor(lens))), yk, tol))
            ytt = tr(torch_tensor(x), torch_tensor(lens), zoneout_masks=_nested(masks, torch_tensor))
            out.append(compare(BLOCK, "Keras<->torch train", f"{label} (injected masks): outputs", to_numpy(ytt), ykt,
                               tol))

    # float64 mode: maths bugs separated from float32 noise
    label, config, n_in, batch, time, lengths, _ = CASES[1]
    k64 = _keras({**config, "dtype": "float64"})
    x = randn((batch, time, n_in), seed=600).astype(np.float64)
    lens = np.array(lengths, np.int32)
    y64 = k64(x, lens, training=False)
    t64 = keras_to_torch(k64, _torch(config, n_in).double()).eval()
    with torch.no_grad():
        out.append(compare(BLOCK, "Keras<->torch float64", f"{label}: outputs",
                           to_numpy(t64(torch_tensor(x), torch_tensor(lens))), y64, FLOAT64_TOL))
    return out
