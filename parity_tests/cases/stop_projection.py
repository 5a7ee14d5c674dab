"""Parity of ``StopProjection``: TF1 legacy reference -> Keras / torch (sigmoid at inference, logits in
training), Keras <-> torch."""
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

BLOCK = "StopProjection"
DECODER_SCOPE = "Tacotron_model/inference/decoder"

# (label, config, input shape, scope prefix): Rayhane's decoder (one step, r=2) with its TF1 names,
# sequences, another activation, batch 1, time 1
CASES = [
    ("Rayhane stop_token_projection 1536->2 step", dict(shape=2, tf1_scope="stop_token_projection"), (3, 1536),
     DECODER_SCOPE),
    ("default 9->1 sequence", dict(shape=1), (2, 5, 9), None),
    ("tanh B1 T1", dict(shape=3, activation="tanh"), (1, 1, 4), None),
]


def legacy_specs():
    specs = []
    for i, (_, config, shape, scope) in enumerate(CASES):
        kw = {} if scope is None else {"scope": scope}
        x = randn(shape, seed=70 + i, scale=3.0)  # logits of both signs, far from 0
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i, **kw))
        specs.append(LegacySpec(BLOCK, config, {"inputs": x}, seed=i, training=True, **kw))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.StopProjection(**config)


def _torch(config, input_size):
    import torch_layers

    return torch_layers.StopProjection(input_size, **config)


def rows(legacy):
    import torch

    out = []
    for i, (label, config, shape, _) in enumerate(CASES):
        for result, mode in ((legacy[2 * i], ""), (legacy[2 * i + 1], " train")):
            what = ("logits" if mode else "probabilities" if config.get("activation", "sigmoid") == "sigmoid"
                    else "outputs")
            x = result.spec.inputs["inputs"]
            ref = result.outputs["outputs"]
            kb = keras_from_checkpoint(_keras(config), result)
            tb = torch_from_checkpoint(_torch(config, shape[-1]), result)
            tb.train() if mode else tb.eval()
            out.append(compare(BLOCK, f"TF1->Keras{mode}", f"{label}: {what}", kb(x, training=bool(mode)), ref,
                               FLOAT32_TOL, relative=True))
            with torch.no_grad():
                out.append(compare(BLOCK, f"TF1->torch{mode}", f"{label}: {what}", to_numpy(tb(torch_tensor(x))), ref,
                                   FLOAT32_TOL, relative=True))

        kr = _keras(config)
        xr = randn(shape, seed=270 + i)
        yk, yk_t = kr(xr, training=False), kr(xr, training=True)
        tr = keras_to_torch(kr, _torch(config, shape[-1]))
        with torch.no_grad():
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: inference", to_numpy(tr.eval()(torch_tensor(xr))),
                               yk, FLOAT32_TOL, relative=True))
            out.append(compare(BLOCK, "Keras<->torch train", f"{label}: logits", to_numpy(tr.train()(torch_tensor(xr))),
                               yk_t, FLOAT32_TOL, relative=True))
    return out
