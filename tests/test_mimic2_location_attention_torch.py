"""Torch ``Mimic2LocationAttention`` against a float64 numpy statement of mimic2's location-sensitive attention
(location features of the previous step's alignments, TF 'same' padding),
TorchScript, the input checks, TF1 names and the TF1 legacy graph."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from tests.test_bahdanau_attention_torch import same, softmax
from torch_layers import BahdanauAttention, Mimic2LocationAttention

B, T, E, U, Q = 2, 6, 4, 5, 3


def conv1d_same(x, kernel):
    """TF ``conv1d(padding='same')`` of ``x`` ``(B, T, 1)`` with ``kernel`` ``[k, 1, filters]``: ``(k - 1) // 2``
    zeros before, the rest after."""
    k = kernel.shape[0]
    before = (k - 1) // 2
    padded = np.pad(x, ((0, 0), (before, k - 1 - before), (0, 0)))
    return np.stack([np.einsum("bki,kif->bf", padded[:, t:t + k], kernel) for t in range(x.shape[1])], 1)


def np_location(w, memory, query, previous, lengths=None):
    """mimic2's step: ``f = conv1d_same(previous[..., None], location_conv)``; ``score = sum v * tanh(keys + pq +
    f @ location_layer)``; softmax; ``context = alignments @ memory``."""
    memory, query, previous = (a.astype(np.float64) for a in (memory, query, previous))
    keys = memory @ w["memory_layer/kernel"]
    pq = query @ w["query_layer/kernel"]
    pl = conv1d_same(previous[..., None], w["location_conv/kernel"]) @ w["location_layer/kernel"]
    score = np.tanh(keys + pq[:, None] + pl) @ w["attention_v"]
    if lengths is not None:
        score = np.where(np.arange(memory.shape[1])[None] < lengths[:, None], score, -np.inf)
    align = softmax(score)
    return np.einsum("bj,bje->be", align, memory), align


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, E, generator=g), torch.randn(B, Q, generator=g),
            torch.softmax(torch.randn(B, T, generator=g), -1))


@pytest.mark.parametrize("kernel_size,mask_memory", [(7, False), (4, True), (1, False)])
def test_matches_numpy(kernel_size, mask_memory):
    torch.manual_seed(kernel_size)
    att = Mimic2LocationAttention(U, memory_size=E, query_size=Q, filters=3, kernel_size=kernel_size,
                                  mask_memory=mask_memory)
    assert isinstance(att, BahdanauAttention)
    memory, query, previous = _inputs()
    lengths = torch.tensor([6, 3])
    context, align = att(query, att.process_memory(memory), memory, previous, lengths)
    ref_c, ref_a = np_location(att.tf1_weights(), memory.numpy(), query.numpy(), previous.numpy(),
                               lengths.numpy() if mask_memory else None)
    np.testing.assert_allclose(context.detach().numpy(), ref_c, atol=1e-6)
    np.testing.assert_allclose(align.detach().numpy(), ref_a, atol=1e-6)


def test_previous_alignments_matter_and_torchscript():
    att = Mimic2LocationAttention(U, memory_size=E, mask_memory=True).eval()
    memory, _, previous = _inputs(2)
    query = torch.randn(B, U)
    keys = att.process_memory(memory)
    a = att(query, keys, memory, previous)[1]
    b = att(query, keys, memory, torch.zeros(B, T))[1]
    assert (a - b).abs().max() > 1e-4  # the location term reads the previous step's alignments
    scripted = torch.jit.script(att)
    lengths = torch.tensor([4, 6])
    for x, y in zip(att(query, keys, memory, previous, lengths), scripted(query, keys, memory, previous, lengths)):
        same(x, y)


def test_tf1_names_and_round_trips():
    att = Mimic2LocationAttention(U, memory_size=E, filters=20, kernel_size=7)
    shapes = {k: v.shape for k, v in att.tf1_weights().items()}
    assert shapes == {"memory_layer/kernel": (E, U), "query_layer/kernel": (U, U), "attention_v": (U,),
                      "location_conv/kernel": (7, 1, 20), "location_layer/kernel": (20, U)}
    other = Mimic2LocationAttention(U, memory_size=E)
    other.load_tf1_weights(att.tf1_weights())
    same(other.state_dict(), att.state_dict())
    fresh = Mimic2LocationAttention(U, memory_size=E)
    fresh.load_state_dict(att.state_dict())
    same(fresh.state_dict(), att.state_dict())


def test_value_errors_name_argument_and_shape():
    att = Mimic2LocationAttention(U, memory_size=E, query_size=Q)
    memory, query, previous = _inputs()
    keys = att.process_memory(memory)
    with pytest.raises(ValueError, match=r"Mimic2LocationAttention: argument `previous_alignments`.*\(batch, T_in=6\)"):
        att(query, keys, memory, previous[:, :5])
    with pytest.raises(ValueError, match=r"`values`.*\(batch, T_in, 4\)"):
        att(query, keys, memory[..., :3], previous)
    with pytest.raises(ValueError, match="`filters`"):
        Mimic2LocationAttention(U, memory_size=E, filters=0)
    with pytest.raises(ValueError, match="`kernel_size`"):
        Mimic2LocationAttention(U, memory_size=E, kernel_size=-1)


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None
                    or importlib.util.find_spec("parity_tests.legacy.builders_tacotron1") is None,
                    reason="the TF1 legacy reference needs tf_keras and its Tacotron-1 builders")
def test_matches_tf1_legacy_graph():
    """Four steps of the legacy graph's mimic2 attention, each step's location term over the last alignments."""
    from parity_tests.reference import LegacySpec, run_legacy
    from speechblocks.tf1_checkpoint import read_tf1_weights

    rng = np.random.default_rng(4)
    inputs = {"memory": rng.standard_normal((B, T, E)).astype(np.float32),
              "memory_lengths": np.array([6, 3], np.int32),
              "queries": rng.standard_normal((B, 4, Q)).astype(np.float32)}
    specs = [LegacySpec("Mimic2LocationAttention", {"units": U, "filters": 3, "kernel_size": k, "mask_memory": m},
                        inputs, scope="model/inference") for k, m in ((7, False), (4, True))]
    for spec, res in zip(specs, run_legacy(specs)):
        raw = read_tf1_weights(res.checkpoint, "model/inference")
        weights = {k.replace("decoder/location_sensitive_attention/", ""): v for k, v in raw.items()}
        att = Mimic2LocationAttention(U, memory_size=E, query_size=Q, filters=3, kernel_size=spec.config["kernel_size"],
                                      mask_memory=spec.config["mask_memory"])
        att.load_tf1_weights(weights)
        memory = torch.as_tensor(inputs["memory"])
        keys = att.process_memory(memory)
        previous = torch.zeros(B, T)
        lengths = torch.as_tensor(inputs["memory_lengths"]).long()
        for t in range(4):
            context, previous = att(torch.as_tensor(inputs["queries"][:, t]), keys, memory, previous, lengths)
            np.testing.assert_allclose(context.detach().numpy(), res.outputs["contexts"][:, t], atol=1e-5)
            np.testing.assert_allclose(previous.detach().numpy(), res.outputs["alignments"][:, :, t], atol=1e-5)
