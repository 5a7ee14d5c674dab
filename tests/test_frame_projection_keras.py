import numpy as np
import pytest

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import FrameProjection


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def test_layer_contract():
    run_keras_layer_test(
        FrameProjection, dict(shape=5, activation="relu"), _inputs, expected_output_shape=lambda b, t: (b, t, 5),
        bad_inputs=[([np.zeros((6,), np.float32)], "inputs"), ([np.zeros((2, 7, 3), np.float32)], "6)"),
                    ([np.zeros((2, 7, 6), np.int32)], "floating")],
    )


@pytest.mark.parametrize("scope,activation", [(None, None), ("linear_transform_projection", "tanh"),
                                              ("postnet_projection", "relu")])
def test_matches_numpy_reference_with_tf1_names(scope, activation):
    rng = np.random.default_rng(0)
    name = f"projection_{scope or 'Linear_projection'}"
    w = {f"{name}/kernel": rng.standard_normal((6, 4)).astype(np.float32),
         f"{name}/bias": rng.standard_normal(4).astype(np.float32)}
    block = FrameProjection(shape=4, activation=activation, tf1_scope=scope)
    block.load_tf1_weights(w)
    act = {None: lambda v: v, "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}[activation]
    for shape in ((3, 6), (2, 5, 6)):  # one decoder step and a sequence
        x = rng.standard_normal(shape).astype(np.float32)
        want = act(x.astype(np.float64) @ w[f"{name}/kernel"] + w[f"{name}/bias"])
        for training in (False, True):
            np.testing.assert_allclose(np.asarray(block(x, training=training)), want, atol=1e-5)


def test_constructor_and_load_errors():
    with pytest.raises(ValueError, match="shape"):
        FrameProjection(shape=0)
    block = FrameProjection(shape=3)
    with pytest.raises(ValueError, match="projection_Linear_projection/kernel"):
        block.load_tf1_weights({"projection/kernel": np.zeros((2, 3), np.float32)})
