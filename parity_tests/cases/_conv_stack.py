"""Parity rows shared by the conv stacks (``EncoderConvolutions``, ``Postnet``): TF1 -> Keras / torch in
inference and training (injected dropout masks), Keras <-> torch, float64, dropout-rate statistics."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

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


@dataclasses.dataclass
class ConvStack:
    """What differs between the conv-stack case modules.

    Args:
        block: block name of the rows.
        keras: ``config -> Keras layer``.
        torch: ``(config, in_channels) -> torch module``.
        cases: ``(label, config, input shape)``.
        rayhane: index of the default-size case (compared relative to its scale; float64 row).
        rate_config, rate_shape: the training case whose TF1 masks give TF1's dropout rate.
        rate_label: output name of that row.
        stat_config: config of the Keras/torch dropout-rate rows (its last layer linear).
        input_seed, rate_input_seed, rate_spec_seed, stat_seed: seeds of the inputs and variables.
    """

    block: str
    keras: Callable
    torch: Callable
    cases: list
    rayhane: int
    rate_config: dict
    rate_shape: tuple
    rate_label: str
    stat_config: dict
    input_seed: int
    rate_input_seed: int
    rate_spec_seed: int
    stat_seed: int


def conv_stack_specs(stack: ConvStack) -> list:
    """Inference and training specs of every case, then the dropout-rate spec."""
    specs = []
    for i, (_, config, shape) in enumerate(stack.cases):
        x = randn(shape, seed=stack.input_seed + i)
        specs.append(LegacySpec(stack.block, config, {"inputs": x}, seed=i))
        specs.append(LegacySpec(stack.block, config, {"inputs": x}, seed=i, training=True))
    specs.append(LegacySpec(stack.block, stack.rate_config,
                            {"inputs": randn(stack.rate_shape, seed=stack.rate_input_seed)},
                            seed=stack.rate_spec_seed, training=True))
    return specs


def _masks(result, n):
    masks = [result.outputs.get(f"mask/{j}") for j in range(n)]
    return None if all(m is None for m in masks) else masks


def conv_stack_rows(stack: ConvStack, legacy) -> list:
    """All rows of a conv stack from its legacy results (in the order of ``conv_stack_specs``)."""
    import keras
    import torch

    BLOCK, CASES, RAYHANE = stack.block, stack.cases, stack.rayhane
    _keras, _torch = stack.keras, stack.torch

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        infer, train = legacy[2 * i], legacy[2 * i + 1]
        x = infer.spec.inputs["inputs"]
        n = config["num_layers"]
        rel = i == RAYHANE
        kb = keras_from_checkpoint(_keras(config), infer)
        tb = torch_from_checkpoint(_torch(config, shape[-1]), infer).eval()
        ref = infer.outputs["outputs"]
        out.append(compare(BLOCK, "TF1->Keras", f"{label}: outputs", kb(x, training=False), ref, FLOAT32_TOL,
                           relative=rel))
        with torch.no_grad():
            out.append(compare(BLOCK, "TF1->torch", f"{label}: outputs", to_numpy(tb(torch_tensor(x))), ref,
                               FLOAT32_TOL, relative=rel))

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

        # Keras <-> torch through tf1_weights, a fresh random initialisation (seeded: the same draw every run; an
        # unseeded draw put the 6-layer relu bn-after training row at 1.26e-5 once in a few runs), inference and
        # training
        keras.utils.set_random_seed(400 + i)
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
    out.append(stat_row(BLOCK, "TF1 dropout rate", stack.rate_label,
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

    cfg = stack.stat_config
    x = randn((8, 64, 4), seed=stack.stat_seed)
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
