import numpy as np
import pytest

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import HighwayNet


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def _numpy_highway(x, w):
    """Hand-written TF1 highway: relu(H) * sigmoid(T) + x * (1 - sigmoid(T))."""
    h = np.maximum(x @ w["H/kernel"] + w["H/bias"], 0.0)
    t = 1.0 / (1.0 + np.exp(-(x @ w["T/kernel"] + w["T/bias"])))
    return h * t + x * (1.0 - t)


def test_layer_contract():
    run_keras_layer_test(
        HighwayNet, dict(units=6), _inputs, expected_output_shape=lambda b, t: (b, t, 6),
        bad_inputs=[
            ([np.zeros((2, 6), np.float32)], "inputs"),
            ([np.zeros((2, 7, 5), np.float32)], "(batch, time, 6)"),
            ([np.zeros((2, 7, 6), np.int32)], "floating"),
        ],
    )


def test_matches_hand_derived_formula_with_random_tf1_weights():
    rng = np.random.default_rng(1)
    w = {"H/kernel": rng.standard_normal((5, 5)), "H/bias": rng.standard_normal(5),
         "T/kernel": rng.standard_normal((5, 5)), "T/bias": rng.standard_normal(5)}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    layer = HighwayNet(5, tf1_scope="CBHG_highwaynet_2")
    layer.load_tf1_weights(w)  # builds from the weight shapes
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(layer(x)), _numpy_highway(x, w), atol=1e-5)
    assert sorted(layer.tf1_weights()) == ["H/bias", "H/kernel", "T/bias", "T/kernel"]
    assert layer.tf1_scope == "CBHG_highwaynet_2"


def test_tf1_initialisation_gate_bias_minus_one():
    layer = HighwayNet(4)
    layer(np.zeros((1, 2, 4), np.float32))
    w = layer.tf1_weights()
    np.testing.assert_array_equal(w["T/bias"], np.full(4, -1.0, np.float32))
    np.testing.assert_array_equal(w["H/bias"], np.zeros(4, np.float32))
    # zero input: H = relu(0) = 0, y = 0 regardless of the gate
    np.testing.assert_array_equal(np.asarray(layer(np.zeros((1, 2, 4), np.float32))), 0.0)


def test_input_size_must_equal_units():
    with pytest.raises(ValueError, match="units"):
        HighwayNet(4)(np.zeros((1, 2, 3), np.float32))
    with pytest.raises(ValueError, match="units"):
        HighwayNet(0)


def test_load_is_all_or_nothing():
    layer = HighwayNet(3)
    layer(np.zeros((1, 1, 3), np.float32))
    before = layer.tf1_weights()
    bad = {k: v + 1 for k, v in before.items()}
    bad["T/kernel"] = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="T/kernel"):
        layer.load_tf1_weights(bad)
    for k, v in layer.tf1_weights().items():
        np.testing.assert_array_equal(v, before[k])
