"""Parity of ``LocationSensitiveAttention`` over several decoder steps: TF1 -> Keras / torch, Keras <-> torch.

The TF1 reference runs the mechanism in a ``while_loop`` from the zero state on given queries (its memory layer at
the model scope, the rest in ``decoder/Location_Sensitive_Attention``, as the real graph); Keras and torch load the
same checkpoint and step through the same queries. RTVC sizes (memory 768 = 512 encoder + 256 speaker, query
1024), Rayhane sizes (memory 512), and a small case with the options flipped (no masking, smoothing, no
cumulation, an even kernel).
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import FLOAT32_TOL, randn, to_numpy, torch_tensor

BLOCK = "LocationSensitiveAttention"
MODEL_SCOPE = "Tacotron_model/inference"
ATTENTION_SCOPE = "Tacotron_model/inference/decoder/Location_Sensitive_Attention"

# (label, config, batch, memory time, memory size, query size, steps, lengths)
CASES = [
    ("RTVC 768-d memory, 1024-d query, 12 steps", dict(units=128, filters=32, kernel_size=31), 2, 40, 768, 1024, 12,
     [40, 23]),
    ("Rayhane 512-d memory, 10 steps", dict(units=128, filters=32, kernel_size=31), 3, 33, 512, 1024, 10, [33, 1, 20]),
    ("no mask, smoothing, no cumulation, k=4", dict(units=8, filters=3, kernel_size=4, mask_encoder=False,
                                                    smoothing=True, cumulate_weights=False), 2, 9, 6, 5, 6, [9, 4]),
]


def legacy_specs():
    specs = []
    for i, (_, config, b, t, d, q, steps, lengths) in enumerate(CASES):
        inputs = {"memory": randn((b, t, d), seed=900 + i), "memory_lengths": np.array(lengths, np.int32),
                  "queries": randn((b, steps, q), seed=910 + i, scale=0.5)}
        specs.append(LegacySpec(BLOCK, config, inputs, seed=20 + i))
    return specs


def _weights(result):
    from tf_layers.checkpoint import read_tf1_checkpoint

    w = read_tf1_checkpoint(result.checkpoint, prefix=ATTENTION_SCOPE)
    w["memory_layer/kernel"] = read_tf1_checkpoint(result.checkpoint, prefix=MODEL_SCOPE)["memory_layer/kernel"]
    return w


def _run_keras(att, memory, lengths, queries):
    import tensorflow as tf

    values, keys = att.process_memory(memory, lengths)
    state = tf.zeros(memory.shape[:2])
    contexts, aligns, states = [], [], []
    for s in range(queries.shape[1]):
        context, a, state = att.step(tf.constant(queries[:, s]), state, values, keys, lengths)
        contexts.append(context), aligns.append(a), states.append(state)
    return np.stack(aligns, -1), np.stack(contexts, 1), np.stack(states, 1)


def _run_torch(att, memory, lengths, queries):
    import torch

    with torch.no_grad():
        m, n = torch_tensor(memory), torch_tensor(lengths).long()
        values, keys = att.process_memory(m, n)
        state = torch.zeros(memory.shape[:2])
        contexts, aligns, states = [], [], []
        for s in range(queries.shape[1]):
            context, a, state = att.step(torch_tensor(queries[:, s]), state, values, keys, n)
            contexts.append(to_numpy(context)), aligns.append(to_numpy(a)), states.append(to_numpy(state))
    return np.stack(aligns, -1), np.stack(contexts, 1), np.stack(states, 1)


def rows(legacy):
    import tf_layers
    import torch_layers

    out = []
    names = ("alignments", "contexts", "states")
    for (label, config, _, _, d, q, _, _), res in zip(CASES, legacy):
        ins = res.spec.inputs
        w = _weights(res)
        ka = tf_layers.LocationSensitiveAttention(**config)
        ka.load_tf1_weights(w)
        ta = torch_layers.LocationSensitiveAttention(q, d, **config).eval()
        ta.load_tf1_weights(w)
        ref = [res.outputs[n] for n in names]
        got_k = _run_keras(ka, ins["memory"], ins["memory_lengths"], ins["queries"])
        got_t = _run_torch(ta, ins["memory"], ins["memory_lengths"], ins["queries"])
        for n, gk, gt, r in zip(names, got_k, got_t, ref):
            out.append(compare(BLOCK, "TF1->Keras", f"{label}: {n}", gk, r, FLOAT32_TOL))
            out.append(compare(BLOCK, "TF1->torch", f"{label}: {n}", gt, r, FLOAT32_TOL))
            out.append(compare(BLOCK, "Keras<->torch", f"{label}: {n}", gt, gk, FLOAT32_TOL))
    return out
