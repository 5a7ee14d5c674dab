"""Parity of ``GaussianEmbedding`` (TalkNet, seed 002): Keras <-> torch, and both against a float64 numpy
statement of the upstream maths. There is no TF1 graph for this block, so ``legacy_specs()`` is empty.
"""
from __future__ import annotations

import math

import numpy as np

from ..report import compare
from ._common import FLOAT32_TOL, to_numpy, torch_tensor

BLOCK = "GaussianEmbedding"
NUM_LABELS, PAD, BLANK = 20, 0, 1

# (label, constructor keywords, batch, tokens, duration range, seed)
CASES = [
    ("blank-free", dict(blank_free=True, merge_blanks=False), 3, 12, (0, 7), 0),
    ("blank-free merge_blanks", dict(blank_free=True, merge_blanks=True), 3, 12, (0, 7), 1),
    ("standard", dict(blank_free=False, merge_blanks=False), 3, 12, (0, 7), 2),
    ("standard merge_blanks", dict(blank_free=False, merge_blanks=True), 3, 12, (0, 7), 3),
    ("blank-free long tokens sigma_c=3", dict(blank_free=True, merge_blanks=False, sigma_c=3.0), 2, 8, (0, 40), 4),
    ("standard B1 one token", dict(blank_free=False, merge_blanks=False), 1, 0, (1, 5), 5),
]
D_EMB = 16


def legacy_specs():
    return []


def _inputs(batch, tokens, dur_range, seed):
    """Blank-interleaved ids / durations ``(batch, 2*tokens+1)``; every row after the first is right-padded."""
    rng = np.random.default_rng(seed)
    text = rng.integers(2, NUM_LABELS, (batch, 2 * tokens + 1))
    text[:, ::2] = BLANK
    durs = rng.integers(dur_range[0], dur_range[1], (batch, 2 * tokens + 1))
    for i in range(1, batch):
        keep = 2 * max(0, tokens - 3 * i) + 1
        text[i, keep:] = PAD
        durs[i, keep:] = 0
    return text.astype(np.int64), durs.astype(np.int64)


def numpy_reference(weight, text, durs, pad, sigma_c=2.0, merge_blanks=False, blank_free=True):
    """The upstream maths in float64 with plain loops: an implementation independent of both frameworks."""
    weight = np.asarray(weight, np.float64)
    if blank_free:
        text = np.concatenate([text[:, :1], text[:, 1::2]], axis=1)
        durs = np.concatenate([durs[:, :1], durs[:, 1::2] + durs[:, 2::2]], axis=1)
    batch = text.shape[0]
    text = np.concatenate([text, np.full((batch, 2), pad)], axis=1)
    durs = np.concatenate([durs, np.zeros((batch, 2), durs.dtype)], axis=1)
    rows = [np.repeat(text[b], durs[b]) for b in range(batch)]
    frames = max(len(r) for r in rows)
    cols = list(range(1, text.shape[1], 2)) if merge_blanks else list(range(text.shape[1]))
    out = np.zeros((batch, frames, weight.shape[1]))
    for b in range(batch):
        start = np.concatenate([[0], np.cumsum(durs[b])[:-1]])
        for t in range(frames):
            if t >= len(rows[b]) or rows[b][t] == pad:
                out[b, t] = weight[text[b, cols[-1]]]
                continue
            dens = []
            for j in cols:
                if text[b, j] == pad:
                    dens.append(0.0)
                    continue
                c, s = durs[b, j] / 2.0 + start[j], durs[b, j] / sigma_c + 1e-6
                dens.append(math.exp(-((t + 0.5 - c) ** 2) / (2 * s * s)) / (s * math.sqrt(2 * math.pi)))
            dens = np.array(dens) / (sum(dens) + 1e-6)
            out[b, t] = dens @ weight[text[b, cols]]
    return out


def rows(legacy):
    import tensorflow as tf
    import torch

    import tf_layers
    import torch_layers

    out = []
    for label, config, batch, tokens, dur_range, seed in CASES:
        text, durs = _inputs(batch, tokens, dur_range, seed)
        torch.manual_seed(seed)
        tm = torch_layers.GaussianEmbedding(NUM_LABELS, D_EMB, PAD, **config).eval()
        km = tf_layers.GaussianEmbedding(NUM_LABELS, D_EMB, PAD, **config)
        km.load_torch_state_dict(tm.state_dict())
        tt, td = torch_tensor(text), torch_tensor(durs)

        with torch.no_grad():
            yt = to_numpy(tm(tt, td))
        yk = km(text.astype(np.int32), durs.astype(np.int32)).numpy()
        ref = numpy_reference(to_numpy(tm.embed.weight), text, durs, PAD, **config)
        shape = f"B={batch} T={yt.shape[1]}"
        out.append(compare(BLOCK, "Keras<->torch", f"{label} ({shape}): outputs", yk, yt, FLOAT32_TOL))
        out.append(compare(BLOCK, "numpy f64->torch", f"{label}: outputs", yt, ref, FLOAT32_TOL))
        out.append(compare(BLOCK, "numpy f64->Keras", f"{label}: outputs", yk, ref, FLOAT32_TOL))

        # gradients of a fixed probe w.r.t. embed.weight (torch: recomputing autograd path)
        probe = np.random.default_rng(100 + seed).standard_normal(yt.shape).astype(np.float32)
        gt = torch.autograd.grad((tm(tt, td) * torch_tensor(probe)).sum(), tm.embed.weight)[0]
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(km(text.astype(np.int32), durs.astype(np.int32)) * probe)
        gk = tape.gradient(loss, km.embed)
        gk = tf.convert_to_tensor(gk).numpy()
        # a sum over every frame: compared relative to its scale (max(1, max |grad|))
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: d/d embed.weight", gk, to_numpy(gt), FLOAT32_TOL,
                           relative=True))
    return out
