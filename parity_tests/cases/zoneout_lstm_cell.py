"""Parity of ``ZoneoutLSTMCell``: TF1 legacy reference -> Keras / torch, Keras <-> torch, zoneout masks and rate.

The TF1 reference steps one zoneout ``LSTMCell`` over a short sequence from a random state; the Keras and
torch cells are stepped the same way (and the Keras cell also inside ``keras.layers.RNN``).
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
    rng,
    to_numpy,
    torch_from_checkpoint,
    torch_tensor,
)

BLOCK = "ZoneoutLSTMCell"
N_IN, UNITS, BATCH, STEPS = 10, 16, 3, 6
CONFIG = dict(num_units=UNITS, zoneout_factor_cell=0.2, zoneout_factor_output=0.1)
SCOPED = dict(num_units=UNITS, zoneout_factor_cell=0.5, zoneout_factor_output=0.0, tf1_scope="my_cell")


def _inputs(seed):
    x = randn((BATCH, STEPS, N_IN), seed=seed)
    c0 = randn((BATCH, UNITS), seed=seed + 1, scale=0.5)
    h0 = randn((BATCH, UNITS), seed=seed + 2, scale=0.5)
    return x, c0, h0


def _masks(config, seed):
    g = rng(seed)
    shape = (BATCH, STEPS, UNITS)
    return ((g.random(shape) >= config["zoneout_factor_cell"]).astype(np.float32),
            (g.random(shape) >= config["zoneout_factor_output"]).astype(np.float32))


def legacy_specs():
    specs = []
    for i, config in enumerate((CONFIG, SCOPED)):
        x, c0, h0 = _inputs(10 * i)
        mc, mh = _masks(config, 50 + i)
        specs.append(LegacySpec(BLOCK, config, {"inputs": x, "c0": c0, "h0": h0}, seed=i))
        specs.append(LegacySpec(BLOCK, config, {"inputs": x, "c0": c0, "h0": h0, "zoneout_c": mc, "zoneout_h": mh},
                                seed=i, training=True))
    return specs


def _keras(config):
    import tf_layers

    return tf_layers.ZoneoutLSTMCell(**config)


def _torch(config):
    import torch_layers

    return torch_layers.ZoneoutLSTMCell(N_IN, **config)


def _step_keras(cell, x, c0, h0, masks=None):
    states, outs = [c0, h0], []
    for t in range(x.shape[1]):
        m = None if masks is None else (masks[0][:, t], masks[1][:, t])
        o, states = cell(x[:, t], states, training=masks is not None, zoneout_masks=m)
        outs.append(np.asarray(o))
    return np.stack(outs, 1), np.asarray(states[0]), np.asarray(states[1])


def _step_torch(cell, x, c0, h0, masks=None):
    import torch

    state, outs = (torch_tensor(c0), torch_tensor(h0)), []
    with torch.no_grad():
        for t in range(x.shape[1]):
            m = None if masks is None else (torch_tensor(masks[0][:, t]), torch_tensor(masks[1][:, t]))
            o, state = cell(torch_tensor(np.ascontiguousarray(x[:, t])), state, zoneout_masks=m)
            outs.append(to_numpy(o))
    return np.stack(outs, 1), to_numpy(state[0]), to_numpy(state[1])


def _rows(label, comparison, got, ref):
    names = ("outputs", "state c", "state h")
    return [compare(BLOCK, comparison, f"{label}: {n}", g, r, FLOAT32_TOL) for n, g, r in zip(names, got, ref)]


def rows(legacy):
    import keras

    out = []
    for i, (label, config) in enumerate((("z 0.2/0.1", CONFIG), ("scope my_cell z 0.5/0", SCOPED))):
        for res, mode in ((legacy[2 * i], ""), (legacy[2 * i + 1], " train")):
            ins = res.spec.inputs
            x, c0, h0 = ins["inputs"], ins["c0"], ins["h0"]
            masks = (ins["zoneout_c"], ins["zoneout_h"]) if mode else None
            ref = (res.outputs["outputs"], res.outputs["state/c"], res.outputs["state/h"])
            kb = keras_from_checkpoint(_keras(config), res)
            tb = torch_from_checkpoint(_torch(config), res).eval()
            tag = f"{label}{' (injected masks)' if mode else ''}"
            out += _rows(tag, "TF1->Keras" + mode, _step_keras(kb, x, c0, h0, masks), ref)
            out += _rows(tag, "TF1->torch" + mode, _step_torch(tb, x, c0, h0, masks), ref)
            if not mode:  # the Keras cell as a stock Keras RNN cell
                rnn = keras.layers.RNN(kb, return_sequences=True, return_state=True)
                y, c, h = rnn(x, initial_state=[c0, h0])
                out += _rows(tag + " keras.layers.RNN", "TF1->Keras", (y, c, h), ref)

        # Keras <-> torch, fresh random weights, inference and injected masks
        kr = _keras(config)
        x, c0, h0 = _inputs(100 + i)
        kr.build((None, N_IN))
        tr = keras_to_torch(kr, _torch(config)).eval()
        out += _rows(label, "Keras<->torch", _step_torch(tr, x, c0, h0), _step_keras(kr, x, c0, h0))
        masks = _masks(config, 200 + i)
        out += _rows(label + " (injected masks)", "Keras<->torch train", _step_torch(tr, x, c0, h0, masks),
                     _step_keras(kr, x, c0, h0, masks))
    # float64 mode: maths bugs separated from float32 noise
    k64 = _keras({**CONFIG, "dtype": "float64"})
    x, c0, h0 = (a.astype(np.float64) for a in _inputs(300))
    k64.build((None, N_IN))
    t64 = keras_to_torch(k64, _torch(CONFIG).double()).eval()
    got, ref = _step_torch(t64, x, c0, h0), _step_keras(k64, x, c0, h0)
    out += [compare(BLOCK, "Keras<->torch float64", f"z 0.2/0.1: {n}", g, r, 1e-9)
            for n, g, r in zip(("outputs", "state c", "state h"), got, ref)]
    out += _rate_rows()
    return out


def _rate_rows():
    """Training zoneout keeps the previous state with probability z (per element, per step)."""
    import torch

    z_c, z_h, units, batch = 0.3, 0.1, 256, 64
    config = dict(num_units=units, zoneout_factor_cell=z_c, zoneout_factor_output=z_h)
    kc = _keras({**config, "seed": 11})
    x = randn((batch, N_IN), seed=3)
    c0, h0 = randn((batch, units), seed=4), randn((batch, units), seed=5)
    _, (c, h) = kc(x, [c0, h0], training=True)
    tc = keras_to_torch(kc, _torch(config)).train()
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(11)
        _, (ct, ht) = tc(torch_tensor(x), (torch_tensor(c0), torch_tensor(h0)))
    tol = 0.02  # ~8 standard errors at n = 16384
    return [
        stat_row(BLOCK, "Keras zoneout rate", "cell: fraction kept at previous", float(np.mean(np.asarray(c) == c0)),
                 z_c, tol),
        stat_row(BLOCK, "Keras zoneout rate", "hidden: fraction kept at previous", float(np.mean(np.asarray(h) == h0)),
                 z_h, tol),
        stat_row(BLOCK, "torch zoneout rate", "cell: fraction kept at previous", float(np.mean(to_numpy(ct) == c0)),
                 z_c, tol),
        stat_row(BLOCK, "torch zoneout rate", "hidden: fraction kept at previous", float(np.mean(to_numpy(ht) == h0)),
                 z_h, tol),
    ]
