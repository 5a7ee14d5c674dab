import numpy as np
import pytest

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import StopProjection


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def test_layer_contract():
    run_keras_layer_test(
        StopProjection, dict(shape=2), _inputs, expected_output_shape=lambda b, t: (b, t, 2), changes_in_training=True,
        bad_inputs=[([np.zeros((6,), np.float32)], "inputs"), ([np.zeros((2, 7, 3), np.float32)], "6)"),
                    ([np.zeros((2, 7, 6), np.int32)], "floating")],
    )


def test_logits_in_training_sigmoid_at_inference():
    rng = np.random.default_rng(0)
    name = "projection_stop_token_projection"
    w = {f"{name}/kernel": rng.standard_normal((6, 2)).astype(np.float32),
         f"{name}/bias": rng.standard_normal(2).astype(np.float32)}
    block = StopProjection(shape=2, tf1_scope="stop_token_projection")
    block.load_tf1_weights(w)
    x = 3.0 * rng.standard_normal((4, 6)).astype(np.float32)
    logits = x.astype(np.float64) @ w[f"{name}/kernel"] + w[f"{name}/bias"]
    np.testing.assert_allclose(np.asarray(block(x, training=True)), logits, atol=1e-5)
    np.testing.assert_allclose(np.asarray(block(x, training=False)), 1.0 / (1.0 + np.exp(-logits)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(block(x)), 1.0 / (1.0 + np.exp(-logits)), atol=1e-6)  # default: inference


def test_other_activation_and_errors():
    block = StopProjection(shape=1, activation="tanh", tf1_scope="stop")
    x = np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)
    y = np.asarray(block(x, training=False))
    np.testing.assert_allclose(y, np.tanh(np.asarray(block(x, training=True))), atol=1e-6)
    assert sorted(block.tf1_weights()) == ["projection_stop/bias", "projection_stop/kernel"]
    with pytest.raises(ValueError, match="shape"):
        StopProjection(shape=-1)
