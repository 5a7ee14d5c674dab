"""Parity of the masked losses: TF1 ``tf.compat.v1`` loss graph -> Keras / torch, Keras <-> torch.

Values within 1e-6 relative; gradients w.r.t. ``outputs`` within 1e-5 (TF1 ``tf.gradients``, Keras
``GradientTape``, torch autograd). Cases: lengths not a multiple of r, a length equal to the padded
length, a batch whose longest length is 1, r = 1 and r = 3, the seed's ``mask=`` override with weights,
and stop-token logits whose loss is exactly 0 or subnormal (the non-zero count quirk).
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import Row, compare
from ._common import FLOAT32_TOL, rng, to_numpy, torch_tensor

BLOCK = "masked_losses"
VALUE_REL_TOL = 1e-6
FLOAT64_TOL = 1e-9

# (label, r, lengths, explicit mask?, stop-token extremes?)
CASES = [
    ("r2 lengths not multiple of r", 2, [5, 3, 2], False, True),
    ("r3 length equal to padded", 3, [9, 4, 7], False, True),
    ("r3 longest length 1", 3, [1, 1, 0], False, False),
    ("r1", 1, [7, 2, 5, 6], False, True),
    ("r2 explicit weighted mask", 2, [6, 5, 3], True, False),
]
# loss -> (channels, per-case config cycle)
LOSSES = {
    "MaskedMSE": (5, [{}]),
    "MaskedSigmoidCrossEntropy": (None, [{"pos_weight": 1.0}, {"pos_weight": 20.0}]),
    "MaskedLinearLoss": (17, [{"sample_rate": 8000}, {"sample_rate": 22050}]),
}


def _inputs(loss: str, case_index: int):
    label, r, lengths, explicit, extremes = CASES[case_index]
    g = rng(1000 + 17 * case_index + len(loss))
    batch, time = len(lengths), -(-max(lengths) // r) * r
    channels = LOSSES[loss][0]
    if channels is None:  # stop token: 0/1 labels, logits
        targets = (g.uniform(size=(batch, time)) < 0.3).astype(np.float32)
        outputs = (3.0 * g.standard_normal((batch, time))).astype(np.float32)
        if extremes:
            targets[0, 0], outputs[0, 0] = 1.0, 120.0  # loss exactly 0
            targets[1, 0], outputs[1, 0] = 0.0, -120.0  # loss exactly 0
            targets[0, 1], outputs[0, 1] = 1.0, 90.0  # loss subnormal in float32: flushed to 0 by TF
            targets[1, 1], outputs[1, 1] = 1.0, -40.0  # confidently wrong
    else:
        targets = g.standard_normal((batch, time, channels)).astype(np.float32)
        outputs = (targets + 0.5 * g.standard_normal((batch, time, channels))).astype(np.float32)
        outputs[0, 0, 0] = targets[0, 0, 0]  # |t - o| = 0: abs gradient at 0
    inputs = {"targets": targets, "outputs": outputs, "lengths": np.asarray(lengths, np.int32)}
    if explicit:
        mask = g.choice(np.array([0.0, 0.5, 1.0], np.float32), size=(batch, time))
        inputs["mask"] = mask if channels is None else mask[:, :, None]
    cfg_cycle = LOSSES[loss][1]
    config = dict(outputs_per_step=r, **cfg_cycle[case_index % len(cfg_cycle)])
    if loss == "MaskedLinearLoss":
        config["num_freq"] = channels
    return label, config, inputs


def legacy_specs():
    specs = []
    for loss in LOSSES:
        for i in range(len(CASES)):
            _, config, inputs = _inputs(loss, i)
            specs.append(LegacySpec(loss, config, inputs, scope="", seed=i))
    return specs


def _keras_kwargs(loss, config):
    kw = {"outputs_per_step": config["outputs_per_step"]}
    if loss == "MaskedSigmoidCrossEntropy":
        kw["pos_weight"] = config["pos_weight"]
    if loss == "MaskedLinearLoss":
        kw.update(sample_rate=config["sample_rate"], num_freq=config["num_freq"])
    return kw


_FUNCTIONS = {"MaskedMSE": "masked_mse", "MaskedSigmoidCrossEntropy": "masked_sigmoid_cross_entropy",
              "MaskedLinearLoss": "masked_linear_loss"}


def _keras_value_and_grad(loss, config, inputs, dtype="float32"):
    import tensorflow as tf

    import tf_layers

    fn = getattr(tf_layers, _FUNCTIONS[loss])
    outputs = tf.constant(inputs["outputs"].astype(dtype))
    with tf.GradientTape() as tape:
        tape.watch(outputs)
        value = fn(inputs["targets"].astype(dtype), outputs, inputs["lengths"], mask=inputs.get("mask"),
                   **_keras_kwargs(loss, config))
    return np.asarray(value), np.asarray(tape.gradient(value, outputs))


def _keras_class_value(loss, config, inputs):
    import tf_layers

    obj = getattr(tf_layers, loss)(**_keras_kwargs(loss, config))
    if "mask" in inputs:
        return np.asarray(obj(inputs["targets"], inputs["outputs"], sample_weight=inputs["mask"]))
    return np.asarray(obj((inputs["targets"], inputs["lengths"]), inputs["outputs"]))


def _torch_value_and_grad(loss, config, inputs, dtype=None):
    import torch

    import torch_layers

    module = getattr(torch_layers, loss)(**_keras_kwargs(loss, config))
    cast = (lambda a: torch_tensor(a)) if dtype is None else (lambda a: torch_tensor(a).to(dtype))
    outputs = cast(inputs["outputs"]).requires_grad_(True)
    mask = inputs.get("mask")
    value = module(cast(inputs["targets"]), outputs, torch_tensor(inputs["lengths"]),
                   None if mask is None else cast(mask))
    (grad,) = torch.autograd.grad(value, outputs)
    return to_numpy(value), to_numpy(grad)


def _rel(block, comparison, output, a, b, tol=VALUE_REL_TOL) -> Row:
    """Relative difference |a - b| / |b| as a row."""
    scale = max(float(np.max(np.abs(np.asarray(b, np.float64)))), 1e-30)
    return compare(block, comparison, output + " (rel)", np.asarray(a, np.float64) / scale,
                   np.asarray(b, np.float64) / scale, tol)


def rows(legacy):
    import torch

    out = []
    k = 0
    for loss in LOSSES:
        for i in range(len(CASES)):
            label, config, inputs = _inputs(loss, i)
            ref = legacy[k].outputs
            k += 1
            kv, kg = _keras_value_and_grad(loss, config, inputs)
            tv, tg = _torch_value_and_grad(loss, config, inputs)
            out.append(_rel(loss, "TF1->Keras", f"{label}: loss", kv, ref["loss"]))
            out.append(compare(loss, "TF1->Keras", f"{label}: d loss / d outputs", kg, ref["grad/outputs"], FLOAT32_TOL))
            out.append(_rel(loss, "TF1->Keras Loss class", f"{label}: loss", _keras_class_value(loss, config, inputs),
                            ref["loss"]))
            out.append(_rel(loss, "TF1->torch", f"{label}: loss", tv, ref["loss"]))
            out.append(compare(loss, "TF1->torch", f"{label}: d loss / d outputs", tg, ref["grad/outputs"], FLOAT32_TOL))
            out.append(_rel(loss, "Keras<->torch", f"{label}: loss", tv, kv))
            out.append(compare(loss, "Keras<->torch", f"{label}: d loss / d outputs", tg, kg, FLOAT32_TOL))
            # float64 mode: maths differences show up here, float32 noise does not
            kv64, kg64 = _keras_value_and_grad(loss, config, inputs, "float64")
            tv64, tg64 = _torch_value_and_grad(loss, config, inputs, torch.float64)
            out.append(_rel(loss, "Keras<->torch float64", f"{label}: loss", tv64, kv64, FLOAT64_TOL))
            out.append(compare(loss, "Keras<->torch float64", f"{label}: d loss / d outputs", tg64, kg64, FLOAT64_TOL))
    return out
