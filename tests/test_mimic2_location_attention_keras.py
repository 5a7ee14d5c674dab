"""Keras ``Mimic2LocationAttention`` (mimic2's location-sensitive attention over the previous step's alignments).

Against a float64 numpy re-statement of the maths (written here from the spec: TF 'same' convolution of the
previous alignments, no biases) over several steps, and against the TF1 legacy graph
(``parity_tests/legacy/builders_tacotron1.py`` ``"Mimic2LocationAttention"``).
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tf_layers import BahdanauAttention, Mimic2LocationAttention

B, T, E, U, Q, F, K = 2, 7, 5, 4, 3, 3, 4


def np_location_step(query, memory, previous, w, lengths=None):
    """One float64 step: ``f = conv_same(previous)`` (even widths pad (k-1)//2 before), ``score = v . tanh(keys +
    q W_q + f W_l)``, softmax (-inf past ``lengths``), context."""
    kernel = w["location_conv/kernel"][:, 0, :]  # (k, filters)
    k = kernel.shape[0]
    left = (k - 1) // 2
    padded = np.pad(previous, ((0, 0), (left, k - 1 - left)))
    f = sum(padded[:, j:j + previous.shape[1], None] * kernel[j] for j in range(k))
    inner = memory @ w["memory_layer/kernel"] + (query @ w["query_layer/kernel"])[:, None] + f @ w[
        "location_layer/kernel"]
    score = np.tanh(inner) @ w["attention_v"]
    if lengths is not None:
        score = np.where(np.arange(memory.shape[1])[None] < lengths[:, None], score, -np.inf)
    e = np.exp(score - score.max(-1, keepdims=True))
    align = e / e.sum(-1, keepdims=True)
    return np.einsum("bj,bje->be", align, memory), align


def _layer(mask_memory=False, seed=0, kernel_size=K):
    att = Mimic2LocationAttention(U, filters=F, kernel_size=kernel_size, mask_memory=mask_memory, memory_size=E,
                                  query_size=Q)
    g = np.random.default_rng(seed)
    att.load_tf1_weights({k: g.standard_normal(v.shape).astype(np.float32) for k, v in att.tf1_weights().items()})
    return att


@pytest.mark.parametrize("kernel_size,mask_memory", [(K, False), (5, True)])
def test_steps_match_numpy_reference(kernel_size, mask_memory):
    att = _layer(mask_memory, kernel_size=kernel_size)
    g = np.random.default_rng(1)
    memory = g.standard_normal((B, T, E)).astype(np.float32)
    lengths = np.array([7, 4])
    w = {k: v.astype(np.float64) for k, v in att.tf1_weights().items()}
    keys = att.process_memory(memory)
    prev, ref_prev = tf.zeros((B, T)), np.zeros((B, T))
    for _ in range(3):  # each step sees the previous step's alignments (not their running sum)
        query = g.standard_normal((B, Q)).astype(np.float32)
        context, prev = att(tf.constant(query), keys, tf.constant(memory), prev, lengths)
        ref_c, ref_prev = np_location_step(query.astype(np.float64), memory.astype(np.float64), ref_prev, w,
                                           lengths if mask_memory else None)
        np.testing.assert_allclose(prev.numpy(), ref_prev, atol=1e-6)
        np.testing.assert_allclose(context.numpy(), ref_c, atol=1e-5)
    assert (prev.numpy()[1, 4:].max() == 0) == mask_memory


def test_names_config_and_subclass():
    att = _layer()
    assert isinstance(att, BahdanauAttention)
    assert {k: v.shape for k, v in att.tf1_weights().items()} == {
        "memory_layer/kernel": (E, U), "query_layer/kernel": (Q, U), "attention_v": (U,),
        "location_conv/kernel": (K, 1, F), "location_layer/kernel": (F, U)}
    clone = Mimic2LocationAttention.from_config(att.get_config())
    assert (clone.filters, clone.kernel_size, clone.tf1_scope) == (F, K, "location_sensitive_attention")
    assert Mimic2LocationAttention(8).filters == 20 and Mimic2LocationAttention(8).kernel_size == 7


def test_bad_input_names_argument_and_shape():
    att = _layer()
    memory = tf.zeros((B, T, E))
    keys = att.process_memory(memory)
    with pytest.raises(ValueError, match=r"`keys`.*\(batch, max_time, 4\)"):
        att(tf.zeros((B, Q)), tf.zeros((B, T, 2)), memory, tf.zeros((B, T)))
    with pytest.raises(ValueError, match=r"`previous_alignments`.*\(batch, max_time\)"):
        att(tf.zeros((B, Q)), keys, memory, tf.zeros((B,)))
    with pytest.raises(ValueError, match="`filters`"):
        Mimic2LocationAttention(4, filters=0)


def test_matches_tf1_legacy_graph():
    """Four steps of mimic2's mechanism in the TF1 graph (each step's state the previous alignments)."""
    from parity_tests.reference import LegacySpec, run_legacy
    from tf_layers.checkpoint import read_tf1_checkpoint

    g = np.random.default_rng(3)
    steps = 4
    memory = g.standard_normal((B, T, E)).astype(np.float32)
    queries = g.standard_normal((B, steps, Q)).astype(np.float32)
    lengths = np.array([7, 4], np.int32)
    config = {"units": U, "filters": F, "kernel_size": 5}
    specs = [LegacySpec("Mimic2LocationAttention", dict(config, mask_memory=m),
                        {"memory": memory, "memory_lengths": lengths, "queries": queries}, scope="att", seed=6)
             for m in (False, True)]
    for mask_memory, result in zip((False, True), run_legacy(specs)):
        stored = read_tf1_checkpoint(result.checkpoint, "att/")
        att = Mimic2LocationAttention(U, filters=F, kernel_size=5, mask_memory=mask_memory)
        att.load_tf1_weights({k.removeprefix("decoder/location_sensitive_attention/"): v for k, v in stored.items()})
        keys = att.process_memory(memory)
        previous = tf.zeros((B, T))
        for t in range(steps):
            context, previous = att(tf.constant(queries[:, t]), keys, tf.constant(memory), previous, lengths)
            np.testing.assert_allclose(previous.numpy(), result.outputs["alignments"][:, :, t], atol=1e-6)
            np.testing.assert_allclose(context.numpy(), result.outputs["contexts"][:, t], atol=1e-5)


def test_shared_layer_checks_and_deployment():
    """The shared layer checks and the deployment checks (SavedModel in a fresh process, XLA, LiteRT)."""
    from tests.helpers.keras_layer_test import run_keras_layer_test
    from tests.test_bahdanau_attention_keras import _deploy_inputs

    run_keras_layer_test(
        Mimic2LocationAttention, dict(units=4, filters=3, kernel_size=5, memory_size=6, query_size=5), _deploy_inputs,
        expected_output_shape=lambda b, t: [(b, 6), (b, t)],
        input_specs=[tf.TensorSpec((None, 5)), tf.TensorSpec((None, None, 4)), tf.TensorSpec((None, None, 6)),
                     tf.TensorSpec((None, None))],
        bad_inputs=[([np.zeros((2, 4), np.float32), np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 6), np.float32),
                      np.zeros((2, 3), np.float32)], "query")])
