"""Torch ``BahdanauAttention`` against a float64 numpy statement of TF contrib's content-only Bahdanau attention
(the contrib semantics), TorchScript, the input checks, TF1 names and the TF1 legacy graph."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from torch_layers import BahdanauAttention

B, T, E, U, Q = 2, 6, 4, 5, 3



def same(a, b):
    """Exactly equal tensors, or dicts of them (``torch.testing.assert_close`` imports torch.distributed: ~13 s)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    else:
        assert a.shape == b.shape and torch.equal(a, b)

def softmax(x):
    """Row softmax (float64); ``-inf`` entries give 0."""
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_bahdanau(w, memory, query, lengths=None):
    """``keys = memory @ memory_layer``; ``score = sum v * tanh(keys + query @ query_layer)``; softmax (scores past
    ``lengths`` at -inf); ``context = alignments @ memory``. Returns ``(context, alignments)``."""
    memory, query = memory.astype(np.float64), query.astype(np.float64)
    keys = memory @ w["memory_layer/kernel"]
    pq = query @ w["query_layer/kernel"]
    score = np.tanh(keys + pq[:, None]) @ w["attention_v"]
    if lengths is not None:
        score = np.where(np.arange(memory.shape[1])[None] < lengths[:, None], score, -np.inf)
    align = softmax(score)
    return np.einsum("bj,bje->be", align, memory), align


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(B, T, E, generator=g)
    query = torch.randn(B, Q, generator=g)
    previous = torch.softmax(torch.randn(B, T, generator=g), -1)
    return memory, query, previous


@pytest.mark.parametrize("mask_memory", [False, True])
def test_matches_numpy(mask_memory):
    torch.manual_seed(0)
    att = BahdanauAttention(U, memory_size=E, query_size=Q, mask_memory=mask_memory)
    memory, query, previous = _inputs()
    lengths = torch.tensor([6, 3])
    keys = att.process_memory(memory)
    context, align = att(query, keys, memory, previous, lengths)
    ref_c, ref_a = np_bahdanau(att.tf1_weights(), memory.numpy(), query.numpy(),
                               lengths.numpy() if mask_memory else None)
    np.testing.assert_allclose(context.detach().numpy(), ref_c, atol=1e-6)
    np.testing.assert_allclose(align.detach().numpy(), ref_a, atol=1e-6)
    assert (align[1, 3:] == 0).all() == mask_memory  # no mask by default: padded positions are attended
    # the previous alignments do not enter content-only attention
    again = att(query, keys, memory, torch.zeros(B, T), lengths)
    same(again[1], align)


def test_torchscript_and_names():
    att = BahdanauAttention(U, memory_size=E, mask_memory=True, tf1_scope="x/bahdanau_attention").eval()
    scripted = torch.jit.script(att)
    memory, _, previous = _inputs(1)
    query = torch.randn(B, U)
    keys = scripted.process_memory(memory)
    lengths = torch.tensor([2, 6])
    for a, b in zip(att(query, keys, memory, previous, lengths), scripted(query, keys, memory, previous, lengths)):
        same(a, b)
    shapes = {k: v.shape for k, v in att.tf1_weights().items()}
    assert shapes == {"memory_layer/kernel": (E, U), "query_layer/kernel": (U, U), "attention_v": (U,)}
    other = BahdanauAttention(U, memory_size=E)
    other.load_tf1_weights(att.tf1_weights())
    same(other.state_dict(), att.state_dict())
    fresh = BahdanauAttention(U, memory_size=E)
    fresh.load_state_dict(att.state_dict())
    same(fresh(query, keys, memory, previous)[0], att(query, keys, memory, previous)[0])


def test_value_errors_name_argument_and_shape():
    att = BahdanauAttention(U, memory_size=E, query_size=Q, mask_memory=True)
    memory, query, previous = _inputs()
    keys = att.process_memory(memory)
    with pytest.raises(ValueError, match=r"`memory`.*\(batch, T_in, 4\)"):
        att.process_memory(torch.zeros(B, T, E + 1))
    with pytest.raises(ValueError, match=r"`query`.*\(batch, 3\)"):
        att(torch.zeros(B, Q + 1), keys, memory, previous)
    with pytest.raises(ValueError, match=r"`keys`.*\(batch, T_in, 5\)"):
        att(query, keys[..., :2], memory, previous)
    with pytest.raises(ValueError, match=r"`previous_alignments`.*\(batch, T_in=6\)"):
        att(query, keys, memory, previous[:, :3])
    with pytest.raises(ValueError, match=r"must agree on batch"):
        att(query[:1], keys, memory, previous)
    with pytest.raises(ValueError, match=r"`memory_lengths`.*\[1, 6\]"):
        att(query, keys, memory, previous, torch.tensor([7, 1]))
    with pytest.raises(ValueError, match="`units`"):
        BahdanauAttention(0, memory_size=E)


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None
                    or importlib.util.find_spec("parity_tests.legacy.builders_tacotron1") is None,
                    reason="the TF1 legacy reference needs tf_keras and its Tacotron-1 builders")
def test_matches_tf1_legacy_graph():
    """Three steps of the legacy graph's ``BahdanauAttention`` (with and without the memory mask)."""
    from parity_tests.reference import LegacySpec, run_legacy
    from speechblocks.tf1_checkpoint import read_tf1_weights

    rng = np.random.default_rng(3)
    inputs = {"memory": rng.standard_normal((B, T, E)).astype(np.float32),
              "memory_lengths": np.array([6, 3], np.int32),
              "queries": rng.standard_normal((B, 3, Q)).astype(np.float32)}
    specs = [LegacySpec("BahdanauAttention", {"units": U, "mask_memory": m}, inputs, scope="model/inference")
             for m in (False, True)]
    for spec, res in zip(specs, run_legacy(specs)):
        raw = read_tf1_weights(res.checkpoint, "model/inference")
        weights = {k.replace("decoder/bahdanau_attention/", ""): v for k, v in raw.items()}
        att = BahdanauAttention(U, memory_size=E, query_size=Q, mask_memory=spec.config["mask_memory"])
        att.load_tf1_weights(weights)
        memory = torch.as_tensor(inputs["memory"])
        keys = att.process_memory(memory)
        previous = torch.zeros(B, T)
        lengths = torch.as_tensor(inputs["memory_lengths"]).long()
        for t in range(3):
            context, previous = att(torch.as_tensor(inputs["queries"][:, t]), keys, memory, previous, lengths)
            np.testing.assert_allclose(context.detach().numpy(), res.outputs["contexts"][:, t], atol=1e-5)
            np.testing.assert_allclose(previous.detach().numpy(), res.outputs["alignments"][:, :, t], atol=1e-5)
