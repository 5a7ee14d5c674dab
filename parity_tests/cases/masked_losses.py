"""Parity of the masked losses: TF1 ``tf.compat.v1`` loss graph -> Keras / torch, Keras <-> torch.

Values within 1e-6 relative; gradients w.r.t. ``outputs`` and ``targets`` within 1e-5 (TF1 ``tf.gradients``,
Keras ``GradientTape``, torch autograd). Cases: lengths not a multiple of r, a length equal to the padded
length, a batch whose longest length is 1, r = 1 and r = 3, the seed's ``mask=`` override with weights,
and stop-token logits whose loss is exactly 0 or subnormal (the non-zero count quirk). Our losses mask by
selection (the padding is replaced by 0 before any arithmetic); these rows prove that for finite inputs the
values and both gradients are TF1's ``loss * mask`` ones.

Non-finite padding (the documented difference): NaN/+inf/-inf written into the padding (``t >= length``, or
the zero entries of an explicit mask) of both ``targets`` and ``outputs``. TF1's ``weights=mask`` form gives
NaN there (``0 * NaN``), asserted by a row; ours equals the TF1 loss of the same inputs with the padding
zeroed, values and gradients, and the gradient of every padding entry is exactly 0 (finite: the NaN/inf
positions of the gradients must match the zeroed reference exactly).
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


# cases whose padding gets NaN/inf (a lengths mask with padding, and the explicit weighted mask)
NONFINITE_CASES = [0, 4]


def _padding(inputs) -> np.ndarray:
    """Boolean padding of ``targets``' shape: mask entries 0 (explicit) or ``t >= length``."""
    targets = inputs["targets"]
    if "mask" in inputs:
        pad = np.broadcast_to(inputs["mask"], targets.shape) == 0
    else:
        pad = np.arange(targets.shape[1])[None] >= inputs["lengths"][:, None]
        pad = np.broadcast_to(pad.reshape(pad.shape + (1,) * (targets.ndim - 2)), targets.shape)
    return np.array(pad)


def _with_nonfinite_padding(inputs):
    """(raw inputs with NaN/+inf/-inf in the padding of targets and outputs, the same with the padding 0)."""
    pad = _padding(inputs)
    assert pad.any(), "a non-finite case needs padding"
    cycle = np.array([np.nan, np.inf, -np.inf], np.float32)
    raw, zeroed = dict(inputs), dict(inputs)
    for name, shift in (("targets", 0), ("outputs", 1)):
        filler = cycle[(np.arange(pad.sum()) + shift) % 3]
        a = inputs[name].copy()
        a[pad] = filler
        raw[name] = a
        z = inputs[name].copy()
        z[pad] = 0.0
        zeroed[name] = z
    return raw, zeroed


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
    """Every (loss, case) on its inputs, then per (loss, non-finite case) the raw and the zeroed inputs."""
    specs = []
    for loss in LOSSES:
        for i in range(len(CASES)):
            _, config, inputs = _inputs(loss, i)
            specs.append(LegacySpec(loss, config, inputs, scope="", seed=i))
    for loss in LOSSES:
        for i in NONFINITE_CASES:
            _, config, inputs = _inputs(loss, i)
            specs.extend(LegacySpec(loss, config, ins, scope="", seed=i) for ins in _with_nonfinite_padding(inputs))
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
    targets = tf.constant(inputs["targets"].astype(dtype))
    with tf.GradientTape() as tape:
        tape.watch([outputs, targets])
        value = fn(targets, outputs, inputs["lengths"], mask=inputs.get("mask"), **_keras_kwargs(loss, config))
    grads = tape.gradient(value, [outputs, targets])
    return np.asarray(value), np.asarray(grads[0]), np.asarray(grads[1])


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
    targets = cast(inputs["targets"]).requires_grad_(True)
    mask = inputs.get("mask")
    value = module(targets, outputs, torch_tensor(inputs["lengths"]), None if mask is None else cast(mask))
    grad_outputs, grad_targets = torch.autograd.grad(value, [outputs, targets])
    return to_numpy(value), to_numpy(grad_outputs), to_numpy(grad_targets)


def _rel(block, comparison, output, a, b, tol=VALUE_REL_TOL) -> Row:
    """Relative difference |a - b| / |b| as a row."""
    scale = max(float(np.max(np.abs(np.asarray(b, np.float64)))), 1e-30)
    return compare(block, comparison, output + " (rel)", np.asarray(a, np.float64) / scale,
                   np.asarray(b, np.float64) / scale, tol)


def _value_rows(loss, comparison, label, got, ref_loss, ref_grads, tol=FLOAT32_TOL):
    """Rows of one (value, d/d outputs, d/d targets) triple against a reference."""
    value, grad_outputs, grad_targets = got
    return [_rel(loss, comparison, f"{label}: loss", value, ref_loss),
            compare(loss, comparison, f"{label}: d loss / d outputs", grad_outputs, ref_grads[0], tol),
            compare(loss, comparison, f"{label}: d loss / d targets", grad_targets, ref_grads[1], tol)]


def _legacy_triple(result):
    ref = result.outputs
    return ref["loss"], (ref["grad/outputs"], ref["grad/targets"])


def rows(legacy):
    import torch

    out = []
    k = 0
    for loss in LOSSES:
        for i in range(len(CASES)):
            label, config, inputs = _inputs(loss, i)
            ref_loss, ref_grads = _legacy_triple(legacy[k])
            k += 1
            keras = _keras_value_and_grad(loss, config, inputs)
            torch_ = _torch_value_and_grad(loss, config, inputs)
            out += _value_rows(loss, "TF1->Keras", label, keras, ref_loss, ref_grads)
            out.append(_rel(loss, "TF1->Keras Loss class", f"{label}: loss", _keras_class_value(loss, config, inputs),
                            ref_loss))
            out += _value_rows(loss, "TF1->torch", label, torch_, ref_loss, ref_grads)
            out += _value_rows(loss, "Keras<->torch", label, torch_, keras[0], keras[1:])
            # float64 mode: maths differences show up here, float32 noise does not
            keras64 = _keras_value_and_grad(loss, config, inputs, "float64")
            torch64 = _torch_value_and_grad(loss, config, inputs, torch.float64)
            out += _value_rows(loss, "Keras<->torch float64", label, torch64, keras64[0], keras64[1:], FLOAT64_TOL)
    for loss in LOSSES:
        for i in NONFINITE_CASES:
            label, config, inputs = _inputs(loss, i)
            raw, _ = _with_nonfinite_padding(inputs)
            raw_ref, zeroed_ref = legacy[k], legacy[k + 1]
            k += 2
            label = f"{label}, NaN/inf padding"
            # the documented difference: TF1's `loss * mask` is NaN on these inputs
            tf1_raw = float(raw_ref.outputs["loss"])
            out.append(Row(loss, "TF1 raw inputs (documented difference)", f"{label}: TF1 loss is NaN",
                           0.0 if np.isnan(tf1_raw) else float("inf"), 0.0, note=f"TF1 gives {tf1_raw}"))
            ref_loss, ref_grads = _legacy_triple(zeroed_ref)
            out += _value_rows(loss, "TF1 zeroed padding->Keras", label, _keras_value_and_grad(loss, config, raw),
                               ref_loss, ref_grads)
            out.append(_rel(loss, "TF1 zeroed padding->Keras Loss class", f"{label}: loss",
                            _keras_class_value(loss, config, raw), ref_loss))
            out += _value_rows(loss, "TF1 zeroed padding->torch", label, _torch_value_and_grad(loss, config, raw),
                               ref_loss, ref_grads)
    return out
