"""Parity of keithito's ``BahdanauAttention`` (contrib, ``normalize=False``) over several decoder steps: TF1 ->
Keras / torch, Keras <-> torch.

The TF1 reference builds the mechanism as keithito's graph does (``memory_layer`` at the model scope, the step's
``query_layer`` and ``attention_v`` in ``decoder/bahdanau_attention``) and runs it in a ``while_loop`` from zero
alignments on given queries; Keras and torch load the same checkpoint and step through the same queries.

keithito's model passes no ``memory_sequence_length``: the padding of the shorter row IS attended. The keithito
case shows it: besides the whole alignments, a row compares the alignments at the padded positions alone, its
label giving the weight the TF1 graph puts there (far from zero). The small case opts in to ``mask_memory`` (scores
``-inf`` past the length: zero weight there).
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import compare
from ._common import FLOAT32_TOL, randn, to_numpy, torch_tensor

BLOCK = "BahdanauAttention"
MODEL_SCOPE = "model/inference"
STEP_SCOPE = "decoder/bahdanau_attention"
OUTPUTS = ("alignments", "contexts")

# (label, config, batch, memory time, memory size, query size, steps, lengths)
CASES = [
    ("keithito 256-d memory/query/units, 10 steps, padding attended", dict(units=256), 2, 24, 256, 256, 10, [24, 13]),
    ("mask_memory, 6 steps", dict(units=8, mask_memory=True), 3, 9, 6, 5, 6, [9, 4, 1]),
]


def make_specs(block, cases, seed0):
    """One spec per case (memory, lengths, queries seeded from ``seed0``) under the originals' model scope."""
    specs = []
    for i, (_, config, b, t, d, q, steps, lengths) in enumerate(cases):
        inputs = {"memory": randn((b, t, d), seed=seed0 + i), "memory_lengths": np.array(lengths, np.int32),
                  "queries": randn((b, steps, q), seed=seed0 + 10 + i, scale=0.5)}
        specs.append(LegacySpec(block, config, inputs, scope=MODEL_SCOPE, seed=seed0 // 10 + i))
    return specs


def legacy_specs():
    return make_specs(BLOCK, CASES, 950)


def tf1_weights(result, step_scope):
    """The mechanism's TF1 weights relative to its own scope (``memory_layer/kernel`` read from the model scope)."""
    from tf_layers.checkpoint import read_tf1_checkpoint

    model = read_tf1_checkpoint(result.checkpoint, prefix=MODEL_SCOPE)
    w = {k[len(step_scope) + 1:]: v for k, v in model.items() if k.startswith(step_scope + "/")}
    w["memory_layer/kernel"] = model["memory_layer/kernel"]
    return w


def run_keras(att, memory, lengths, queries):
    """``(alignments [B, T, steps], contexts [B, steps, E])``, each step's previous alignments the last step's."""
    import tensorflow as tf

    values = tf.constant(memory)
    keys = att.process_memory(values)
    prev = tf.zeros(memory.shape[:2])
    aligns, contexts = [], []
    for s in range(queries.shape[1]):
        context, prev = att(tf.constant(queries[:, s]), keys, values, prev, tf.constant(lengths))
        aligns.append(np.asarray(prev)), contexts.append(np.asarray(context))
    return np.stack(aligns, -1), np.stack(contexts, 1)


def run_torch(att, memory, lengths, queries):
    import torch

    with torch.no_grad():
        values, n = torch_tensor(memory), torch_tensor(lengths).long()
        keys = att.process_memory(values)
        prev = torch.zeros(memory.shape[:2])
        aligns, contexts = [], []
        for s in range(queries.shape[1]):
            context, prev = att(torch_tensor(queries[:, s]), keys, values, prev, n)
            aligns.append(to_numpy(prev)), contexts.append(to_numpy(context))
    return np.stack(aligns, -1), np.stack(contexts, 1)


def padding_rows(block, label, lengths, got, ref):
    """Rows on the alignments at padded positions (``t >= length``) alone; the label gives the largest total
    weight the TF1 graph puts there in one step (zero with ``mask_memory``, far from zero without)."""
    pad = np.arange(ref["alignments"].shape[1])[None, :, None] >= np.asarray(lengths)[:, None, None]
    pad = np.broadcast_to(pad, ref["alignments"].shape)
    mass = float(np.max(np.sum(np.where(pad, ref["alignments"], 0.0), axis=1)))
    tag = f"{label}: alignments at padded positions (TF1 puts up to {mass:.3f} of a step's weight there)"
    out = [compare(block, f"TF1->{fw}", tag, got[fw][0][pad], ref["alignments"][pad], FLOAT32_TOL)
           for fw in ("Keras", "torch")]
    out.append(compare(block, "Keras<->torch", tag, got["torch"][0][pad], got["Keras"][0][pad], FLOAT32_TOL))
    return out


def case_rows(block, cases, legacy, step_scope, keras_cls, torch_cls, torch_kwargs):
    out = []
    for (label, config, _, _, d, q, _, lengths), res in zip(cases, legacy, strict=True):
        ins = res.spec.inputs
        w = tf1_weights(res, step_scope)
        ka = keras_cls(**config)
        ka.load_tf1_weights(w)
        ta = torch_cls(config["units"], memory_size=d, query_size=q, **torch_kwargs(config)).eval()
        ta.load_tf1_weights(w)
        args = (ins["memory"], ins["memory_lengths"], ins["queries"])
        got = {"Keras": run_keras(ka, *args), "torch": run_torch(ta, *args)}
        for i, n in enumerate(OUTPUTS):
            ref = res.outputs[n]
            out.append(compare(block, "TF1->Keras", f"{label}: {n}", got["Keras"][i], ref, FLOAT32_TOL))
            out.append(compare(block, "TF1->torch", f"{label}: {n}", got["torch"][i], ref, FLOAT32_TOL))
            out.append(compare(block, "Keras<->torch", f"{label}: {n}", got["torch"][i], got["Keras"][i],
                               FLOAT32_TOL))
        if min(lengths) < ins["memory"].shape[1]:
            out += padding_rows(block, label, lengths, got, res.outputs)
    return out


def rows(legacy):
    import tf_layers
    import torch_layers

    return case_rows(BLOCK, CASES, legacy, STEP_SCOPE, tf_layers.BahdanauAttention, torch_layers.BahdanauAttention,
                     lambda config: {"mask_memory": config.get("mask_memory", False)})
