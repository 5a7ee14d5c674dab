import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import LocationSensitiveAttention


def _inputs(b, t, q=5, d=6, seed=0):
    g = np.random.default_rng(seed + 10 * b + t)
    lengths = np.maximum(1, t - np.arange(b)).astype(np.int32)
    state = g.random((b, t)).astype(np.float32)
    return [g.standard_normal((b, q)).astype(np.float32), state, g.standard_normal((b, t, d)).astype(np.float32),
            lengths]


def _layer(**kw):
    att = LocationSensitiveAttention(**{**dict(units=4, filters=3, kernel_size=5), **kw})
    att.build_from_sizes(5, 6)
    g = np.random.default_rng(7)
    att.load_tf1_weights({k: (0.5 * g.standard_normal(v.shape)).astype(np.float32)
                          for k, v in att.tf1_weights().items()})
    return att


def numpy_attention(w, query, state, memory, lengths, mask_encoder=True, smoothing=False, cumulate=True):
    """The spec's formulas written out in numpy (float64), independent of the layer."""
    query, state, memory = (np.asarray(a, np.float64) for a in (query, state, memory))
    b, t, _ = memory.shape
    valid = np.arange(t)[None, :] < np.asarray(lengths)[:, None]
    values = memory * valid[..., None] if mask_encoder else memory
    keys = values @ w["memory_layer/kernel"]
    kernel = w["location_features_convolution/kernel"][:, 0, :]  # (k, filters)
    k = kernel.shape[0]
    pad_before = (k - 1) // 2
    padded = np.pad(state, ((0, 0), (pad_before, k - 1 - pad_before)))
    f = np.stack([padded[:, i:i + k] @ kernel for i in range(t)], 1) + w["location_features_convolution/bias"]
    energy = np.sum(w["attention_variable_projection"] * np.tanh(
        keys + (query @ w["query_layer/kernel"])[:, None] + f @ w["location_features_layer/kernel"]
        + w["attention_bias"]), -1)
    if mask_encoder:
        energy = np.where(valid, energy, -np.inf)
    if smoothing:
        s = 1 / (1 + np.exp(-energy))
        a = s / s.sum(-1, keepdims=True)
    else:
        e = np.exp(energy - energy.max(-1, keepdims=True))
        a = e / e.sum(-1, keepdims=True)
    return np.einsum("bt,btd->bd", a, values), a, (a + state if cumulate else a)


@pytest.mark.parametrize("options", [dict(), dict(mask_encoder=False), dict(smoothing=True),
                                     dict(cumulate_weights=False), dict(kernel_size=4)])
def test_matches_numpy_formulas(options):
    att = _layer(**options)
    q, s, m, lens = _inputs(3, 9)
    want = numpy_attention(att.tf1_weights(), q, s, m, lens, options.get("mask_encoder", True),
                           options.get("smoothing", False), options.get("cumulate_weights", True))
    got = att(q, s, m, lens)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w_, atol=2e-6)
    # alignments are a distribution over the valid frames only
    a = np.asarray(got[1])
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-6)
    if options.get("mask_encoder", True):
        assert np.all(a[np.arange(9)[None, :] >= lens[:, None]] == 0)


def test_process_memory_then_step_equals_call():
    att = _layer()
    q, s, m, lens = _inputs(2, 6)
    values, keys = att.process_memory(m, lens)
    for a, b in zip(att.step(q, s, values, keys, lens), att(q, s, m, lens)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-7)


def test_layer_contract():
    spec = [tf.TensorSpec([None, 5]), tf.TensorSpec([None, None]), tf.TensorSpec([None, None, 6]),
            tf.TensorSpec([None], tf.int32)]
    run_keras_layer_test(
        LocationSensitiveAttention, dict(units=4, filters=3, kernel_size=5), _inputs,
        expected_output_shape=lambda b, t: [(b, 6), (b, t), (b, t)], input_specs=spec,
        bad_inputs=[([np.zeros((2, 4), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 3, 6), np.float32)],
                     "query"),
                    ([np.zeros((2, 5), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 3, 7), np.float32)],
                     "memory"),
                    ([np.zeros((2, 5), np.float32), np.zeros((2, 4), np.float32), np.zeros((2, 3, 6), np.float32)],
                     "state"),
                    ([np.zeros((2, 5), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 3, 6), np.float32),
                      np.zeros((2,), np.float32)], "memory_lengths")],
    )


def test_tf1_names_and_bad_config():
    att = _layer()
    assert sorted(att.tf1_weights()) == sorted([
        "memory_layer/kernel", "query_layer/kernel", "location_features_convolution/kernel",
        "location_features_convolution/bias", "location_features_layer/kernel", "attention_variable_projection",
        "attention_bias"])
    fresh = LocationSensitiveAttention(units=4, filters=3, kernel_size=5)
    fresh.load_tf1_weights(att.tf1_weights())  # an unbuilt layer builds from the weight shapes
    assert (fresh.query_size, fresh.memory_size) == (5, 6)
    with pytest.raises(ValueError, match="units"):
        LocationSensitiveAttention(units=0)
    with pytest.raises(ValueError, match="smoothing"):
        LocationSensitiveAttention(smoothing="yes")
