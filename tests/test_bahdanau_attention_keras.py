"""Keras ``BahdanauAttention`` (TF contrib content-only attention, keithito/tacotron).

Against a float64 numpy re-statement of the maths (written here from the spec) and against the TF1 legacy graph
(``parity_tests/legacy/builders_tacotron1.py`` ``"BahdanauAttention"``: the mechanism run for several steps in a
``while_loop``; the weights come from its checkpoint).
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tf_layers import BahdanauAttention

B, T, E, U, Q = 2, 6, 5, 4, 3


def np_bahdanau(query, memory, w, lengths=None):
    """float64 content-only score ``sum_k v tanh(keys + q W_q)``, softmax, context; -inf past ``lengths``."""
    keys = memory @ w["memory_layer/kernel"]
    score = np.tanh(keys + (query @ w["query_layer/kernel"])[:, None]) @ w["attention_v"]
    if lengths is not None:
        score = np.where(np.arange(memory.shape[1])[None] < lengths[:, None], score, -np.inf)
    e = np.exp(score - score.max(-1, keepdims=True))
    align = e / e.sum(-1, keepdims=True)
    return np.einsum("bj,bje->be", align, memory), align


def _layer(mask_memory=False, seed=0):
    att = BahdanauAttention(U, mask_memory=mask_memory, memory_size=E, query_size=Q)
    g = np.random.default_rng(seed)
    att.load_tf1_weights({k: g.standard_normal(v.shape).astype(np.float32) for k, v in att.tf1_weights().items()})
    return att


def _run(att, query, memory, lengths=None):
    keys = att.process_memory(memory)
    context, align = att(tf.constant(query), keys, tf.constant(memory), tf.zeros((B, T)), lengths)
    return context.numpy(), align.numpy()


def test_matches_numpy_reference_without_mask_by_default():
    att = _layer()
    g = np.random.default_rng(1)
    query, memory = g.standard_normal((B, Q)).astype(np.float32), g.standard_normal((B, T, E)).astype(np.float32)
    lengths = np.array([6, 3])
    w = {k: v.astype(np.float64) for k, v in att.tf1_weights().items()}
    ref_c, ref_a = np_bahdanau(query.astype(np.float64), memory.astype(np.float64), w)
    context, align = _run(att, query, memory, lengths)  # lengths ignored: the original attends the padding
    np.testing.assert_allclose(align, ref_a, atol=1e-6)
    np.testing.assert_allclose(context, ref_c, atol=1e-5)
    assert align[1, 3:].min() > 0


def test_mask_memory_opt_in():
    att = _layer(mask_memory=True)
    g = np.random.default_rng(2)
    query, memory = g.standard_normal((B, Q)).astype(np.float32), g.standard_normal((B, T, E)).astype(np.float32)
    lengths = np.array([6, 3])
    w = {k: v.astype(np.float64) for k, v in att.tf1_weights().items()}
    ref_c, ref_a = np_bahdanau(query.astype(np.float64), memory.astype(np.float64), w, lengths)
    context, align = _run(att, query, memory, lengths)
    np.testing.assert_allclose(align, ref_a, atol=1e-6)
    np.testing.assert_allclose(context, ref_c, atol=1e-5)
    assert np.all(align[1, 3:] == 0)


def test_names_config_and_lazy_build():
    att = BahdanauAttention(U)
    memory = tf.random.normal((B, T, E))
    keys = att.process_memory(memory)  # builds for the memory and a query of `units` features
    assert (att.memory_size, att.query_size) == (E, U)
    att(tf.zeros((B, U)), keys, memory, tf.zeros((B, T)))
    assert {k: v.shape for k, v in att.tf1_weights().items()} == {
        "memory_layer/kernel": (E, U), "query_layer/kernel": (U, U), "attention_v": (U,)}
    clone = BahdanauAttention.from_config(_layer(mask_memory=True).get_config())
    assert (clone.units, clone.mask_memory, clone.memory_size, clone.query_size, clone.tf1_scope) == (
        U, True, E, Q, "bahdanau_attention")
    fresh = BahdanauAttention(U)
    fresh.load_tf1_weights(_layer().tf1_weights())
    assert (fresh.memory_size, fresh.query_size) == (E, Q)


def test_bad_input_names_argument_and_shape():
    att = _layer()
    memory = tf.zeros((B, T, E))
    keys = att.process_memory(memory)
    with pytest.raises(ValueError, match=r"`query`.*\(batch, 3\)"):
        att(tf.zeros((B, 4)), keys, memory, tf.zeros((B, T)))
    with pytest.raises(ValueError, match=r"`values`.*\(batch, max_time, 5\)"):
        att(tf.zeros((B, Q)), keys, tf.zeros((B, T, 2)), tf.zeros((B, T)))
    with pytest.raises(ValueError, match=r"`memory`.*\(batch, max_time, 5\)"):
        att.process_memory(tf.zeros((B, T)))
    with pytest.raises(ValueError, match=r"`previous_alignments`.*\(batch, max_time\)"):
        att(tf.zeros((B, Q)), keys, memory, tf.zeros((B, T, 1)))
    with pytest.raises(ValueError, match="`units`"):
        BahdanauAttention(0)


def test_matches_tf1_legacy_graph():
    """Three steps of the TF1 mechanism (weights from its checkpoint), without and with ``mask_memory``."""
    from parity_tests.reference import LegacySpec, run_legacy
    from tf_layers.checkpoint import read_tf1_checkpoint

    g = np.random.default_rng(3)
    steps = 3
    memory = g.standard_normal((B, T, E)).astype(np.float32)
    queries = g.standard_normal((B, steps, Q)).astype(np.float32)
    lengths = np.array([6, 4], np.int32)
    specs = [LegacySpec("BahdanauAttention", {"units": U, "mask_memory": m},
                        {"memory": memory, "memory_lengths": lengths, "queries": queries}, scope="att", seed=5)
             for m in (False, True)]
    for mask_memory, result in zip((False, True), run_legacy(specs)):
        stored = read_tf1_checkpoint(result.checkpoint, "att/")
        att = BahdanauAttention(U, mask_memory=mask_memory)
        att.load_tf1_weights({k.removeprefix("decoder/bahdanau_attention/"): v for k, v in stored.items()})
        keys = att.process_memory(memory)
        previous = tf.zeros((B, T))
        for t in range(steps):
            context, previous = att(tf.constant(queries[:, t]), keys, tf.constant(memory), previous, lengths)
            np.testing.assert_allclose(previous.numpy(), result.outputs["alignments"][:, :, t], atol=1e-6)
            np.testing.assert_allclose(context.numpy(), result.outputs["contexts"][:, t], atol=1e-5)
        assert (np.abs(result.outputs["alignments"][1, 4:]).max() == 0) == mask_memory


def _deploy_inputs(b, t, q=5, units=4, e=6, seed=0):
    g = np.random.default_rng(seed + 10 * b + t)
    prev = g.random((b, t)).astype(np.float32)
    return [g.standard_normal((b, q)).astype(np.float32), g.standard_normal((b, t, units)).astype(np.float32),
            g.standard_normal((b, t, e)).astype(np.float32), prev / prev.sum(-1, keepdims=True)]


def test_shared_layer_checks_and_deployment():
    """The shared layer checks (config, saving, tf.function with unknown batch and time, mixed precision) and the
    deployment checks (SavedModel in a fresh process, XLA, LiteRT)."""
    from tests.helpers.keras_layer_test import run_keras_layer_test

    run_keras_layer_test(
        BahdanauAttention, dict(units=4, memory_size=6, query_size=5), _deploy_inputs,
        expected_output_shape=lambda b, t: [(b, 6), (b, t)],
        input_specs=[tf.TensorSpec((None, 5)), tf.TensorSpec((None, None, 4)), tf.TensorSpec((None, None, 6)),
                     tf.TensorSpec((None, None))],
        bad_inputs=[([np.zeros((2, 4), np.float32), np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 6), np.float32),
                      np.zeros((2, 3), np.float32)], "query")])
