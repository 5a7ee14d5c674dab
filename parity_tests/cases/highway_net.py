"""Parity of ``HighwayNet``: TF1 legacy reference -> Keras / torch, Keras <-> torch."""
from __future__ import annotations

from ..reference import LegacySpec
from ..report import compare
from ._common import (
    FLOAT32_TOL,
    keras_from_checkpoint,
    keras_to_torch,
    randn,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "HighwayNet"

# (label, config, input shape): batch 1 / time 1, Rayhane's 128 units under a CBHG-style scope
CASES = [
    ("units16 B2 T7", dict(units=16), (2, 7, 16)),
    ("units8 B1 T1", dict(units=8), (1, 1, 8)),
    ("units128 scope CBHG_postnet_highwaynet_1", dict(units=128, tf1_scope="CBHG_postnet_highwaynet_1"), (3, 50, 128)),
]


def legacy_specs():
    return [LegacySpec(BLOCK, config, {"inputs": randn(shape, seed=20 + i)}, seed=30 + i)
            for i, (_, config, shape) in enumerate(CASES)]


def _keras(config):
    import tf_layers

    return tf_layers.HighwayNet(**config)


def _torch(config):
    import torch_layers

    return torch_layers.HighwayNet(**config)


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        res = legacy[i]
        x = res.spec.inputs["inputs"]
        ref = res.outputs["outputs"]
        kb = keras_from_checkpoint(_keras(config), res)
        tb = torch_from_checkpoint(_torch(config), res).eval()
        out.append(compare(BLOCK, "TF1->Keras", f"{label}: outputs", kb(x), ref, FLOAT32_TOL))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch", f"{label}: outputs", to_numpy(tb(torch_tensor(x))), ref,
                               FLOAT32_TOL))

        # Keras <-> torch through tf1_weights, Keras' own initialisation
        kr = _keras(config)
        xr = randn(shape, seed=200 + i)
        yk = kr(xr)
        tr = keras_to_torch(kr, _torch(config)).eval()
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs", to_numpy(tr(torch_tensor(xr))), yk,
                               FLOAT32_TOL))
    return out
