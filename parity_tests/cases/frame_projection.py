"""Parity of ``FrameProjection``: TF1 legacy reference -> Keras / torch, Keras <-> torch."""
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

BLOCK = "FrameProjection"
DECODER_SCOPE = "Tacotron_model/inference/decoder"

# (label, config, input shape, scope prefix): Rayhane's decoder projection (one step of LSTM output +
# attention context, r=2) and post-net projection, with their TF1 names; activations; batch 1, time 1
CASES = [
    ("Rayhane linear_transform_projection 1536->160 step",
     dict(shape=160, tf1_scope="linear_transform_projection"), (2, 1536), DECODER_SCOPE),
    ("Rayhane postnet_projection 512->80", dict(shape=80, tf1_scope="postnet_projection"), (2, 6, 512), None),
    ("default scope 12->80", dict(shape=80), (3, 4, 12), None),
    ("relu B1 T1", dict(shape=5, activation="relu"), (1, 1, 7), None),
    ("tanh step", dict(shape=3, activation="tanh"), (4, 6), None),
]


def legacy_specs():
    specs = []
    for i, (_, config, shape, scope) in enumerate(CASES):
        kw = {} if scope is None else {"scope": scope}
        specs.append(LegacySpec(BLOCK, config, {"inputs": randn(shape, seed=60 + i)}, seed=i, **kw))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.FrameProjection(**config)


def _torch(config, input_size):
    import torch_layers

    return torch_layers.FrameProjection(input_size, **config)


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape, _) in enumerate(CASES):
        result = legacy[i]
        x = result.spec.inputs["inputs"]
        ref = result.outputs["outputs"]
        kb = keras_from_checkpoint(_keras(config), result)
        tb = torch_from_checkpoint(_torch(config, shape[-1]), result).eval()
        out.append(compare(BLOCK, "TF1->Keras", f"{label}: outputs", kb(x, training=False), ref, FLOAT32_TOL,
                           relative=True))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch", f"{label}: outputs", to_numpy(tb(torch_tensor(x))), ref,
                               FLOAT32_TOL, relative=True))
            # the TF1 block has no training switch: training mode must give the same numbers
            out.append(compare(BLOCK, "TF1->torch train", f"{label}: outputs", to_numpy(tb.train()(torch_tensor(x))),
                               ref, FLOAT32_TOL, relative=True))
        out.append(compare(BLOCK, "TF1->Keras train", f"{label}: outputs", kb(x, training=True), ref, FLOAT32_TOL,
                           relative=True))

        kr = _keras(config)
        xr = randn(shape, seed=260 + i)
        yk = kr(xr)
        tr = keras_to_torch(kr, _torch(config, shape[-1])).eval()
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: outputs", to_numpy(tr(torch_tensor(xr))), yk,
                               FLOAT32_TOL, relative=True))
    return out
