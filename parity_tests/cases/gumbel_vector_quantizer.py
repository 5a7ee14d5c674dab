"""Parity of ``GumbelVectorQuantizer``: Keras <-> torch with the same weights and injected Gumbel noise.

A PyTorch module of NeMo / fairseq: no TF1 graph, so no legacy spec. Inference (argmax), training (hard
Gumbel-softmax with the same noise, after ``set_num_updates``), shared and per-group codebooks, channels
first; outputs: quantized vectors, perplexity loss, ids, codebook samples. Statistical rows: with fresh
noise, each framework picks entry ``v`` with frequency ``softmax(logits)_v`` (the Gumbel-max property).
"""
from __future__ import annotations

import numpy as np

from ..report import compare, stat_row
from ._common import FLOAT32_TOL, randn, to_numpy, torch_tensor

BLOCK = "GumbelVectorQuantizer"

# (label, config, input shape (batch, time, dim) -- transposed when time_first is False)
CASES = [
    ("G=2 shared", dict(dim=10, num_vars=7, groups=2, vq_dim=8), (3, 9, 10)),
    ("G=2 per-group books", dict(dim=10, num_vars=7, groups=2, vq_dim=8, combine_groups=False), (2, 6, 10)),
    ("G=1 channels first", dict(dim=6, num_vars=5, groups=1, vq_dim=4, time_first=False), (2, 5, 6)),
    ("G=3 B1 T1", dict(dim=4, num_vars=3, groups=3, vq_dim=6), (1, 1, 4)),
]


def legacy_specs():
    return []


def rows(legacy):
    import torch

    import tf_layers
    import torch_layers

    out = []
    for i, (label, config, shape) in enumerate(CASES):
        torch.manual_seed(i)
        tq = torch_layers.GumbelVectorQuantizer(**config)
        kq = tf_layers.GumbelVectorQuantizer(**config)
        kq.load_torch_state_dict(tq.state_dict())
        x = randn(shape, seed=30 + i)
        if not config.get("time_first", True):
            x = np.ascontiguousarray(x.transpose(0, 2, 1))
        b, t = shape[0], shape[1]
        noise = -np.log(np.random.default_rng(i).exponential(size=(b, t, config["groups"], config["num_vars"])))
        noise = noise.astype(np.float32)
        for training in (False, True):
            mode = " train" if training else ""
            tq.train(training)
            if training:
                tq.set_num_updates(50_000 * (i + 1))
                kq.set_num_updates(50_000 * (i + 1))
            with torch.no_grad():
                yt, pt, temp_t, it = tq(torch_tensor(x), return_ids=True,
                                        gumbel_noise=torch_tensor(noise) if training else None)
            yk, pk, temp_k, ik = kq(x, training=training, return_ids=True, gumbel_noise=noise if training else None)
            comp = "Keras<->torch" + mode
            out.append(compare(BLOCK, comp, f"{label}: quantized", yk, to_numpy(yt), FLOAT32_TOL))
            out.append(compare(BLOCK, comp, f"{label}: prob_ppl_loss", pk, to_numpy(pt), FLOAT32_TOL))
            out.append(compare(BLOCK, comp, f"{label}: ids", ik, to_numpy(it), 0.5))
            out.append(compare(BLOCK, comp, f"{label}: curr_temp", temp_k, temp_t, FLOAT32_TOL))
        n = max(1, min(4, tq.codebook_size() - 1))
        idx = np.random.default_rng(i).integers(0, tq.codebook_size(), size=(3, n))
        with torch.no_grad():
            zt = tq.sample_from_codebook(3, n, indices=torch_tensor(idx))
        out.append(compare(BLOCK, "Keras<->torch", f"{label}: sample_from_codebook (same indices)",
                           kq.sample_from_codebook(3, n, indices=idx), to_numpy(zt), FLOAT32_TOL))

    # Gumbel-max frequencies: P(entry v) = softmax(bias)_v with zero weights, both frameworks
    p = np.array([0.05, 0.15, 0.3, 0.5])
    cfg = dict(dim=1, num_vars=4, groups=1, vq_dim=2)
    tq = torch_layers.GumbelVectorQuantizer(**cfg).train()
    with torch.no_grad():
        tq.weight_proj.weight.zero_()
        tq.weight_proj.bias.copy_(torch_tensor(np.log(p).astype(np.float32)))
    kq = tf_layers.GumbelVectorQuantizer(**cfg, seed=5)
    kq.load_torch_state_dict(tq.state_dict())
    x = np.zeros((1, 20000, 1), np.float32)
    vars_ = to_numpy(tq.vars)[0]
    with torch.no_grad():
        yt = to_numpy(tq(torch_tensor(x), generator=torch.Generator().manual_seed(5))[0])[0]
    yk = np.asarray(kq(x, training=True)[0])[0]
    for name, y in (("torch", yt), ("Keras", yk)):
        chosen = np.argmax(np.all(y[:, None, :] == vars_[None], axis=-1), axis=-1)
        freq = np.bincount(chosen, minlength=4) / len(chosen)
        for v in range(4):
            out.append(stat_row(BLOCK, f"{name} Gumbel-max rate", f"P(entry {v})", float(freq[v]), float(p[v]), 0.015))
    return out
