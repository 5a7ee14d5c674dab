import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import Prenet


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def _weights(sizes, in_features, seed=0):
    rng = np.random.default_rng(seed)
    w, cin = {}, in_features
    for i, s in enumerate(sizes):
        w[f"dense_{i + 1}/kernel"] = rng.standard_normal((cin, s)).astype(np.float32) / np.sqrt(cin)
        w[f"dense_{i + 1}/bias"] = 0.1 * rng.standard_normal(s).astype(np.float32)
        cin = s
    return w


def test_layer_contract_without_dropout():
    # drop_rate=0 makes the always-on dropout the identity, so every deterministic check applies
    run_keras_layer_test(
        Prenet,
        dict(layers_sizes=(5, 4), drop_rate=0.0),
        _inputs,
        expected_output_shape=lambda b, t: (b, t, 4),
        bad_inputs=[
            ([np.zeros((6,), np.float32)], "inputs"),
            ([np.zeros((2, 7, 3), np.float32)], "6)"),
            ([np.zeros((2, 7, 6), np.int32)], "floating"),
        ],
    )


def test_layer_contract_with_dropout():
    run_keras_layer_test(Prenet, dict(layers_sizes=(8,), drop_rate=0.5), _inputs,
                         expected_output_shape=lambda b, t: (b, t, 8),
                         deterministic_in_inference=False, test_saving=False)


def test_matches_numpy_reference_with_injected_masks_one_decoder_step():
    w = _weights([7, 5], 4)
    block = Prenet(layers_sizes=[7, 5], drop_rate=0.5, tf1_scope="decoder_prenet")
    block.load_tf1_weights(w)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)  # (batch, features): one step
    rng = np.random.default_rng(2)
    masks = [(rng.random((3, 7)) > 0.5).astype(np.float32), (rng.random((3, 5)) > 0.5).astype(np.float32)]
    h = np.maximum(x @ w["dense_1/kernel"] + w["dense_1/bias"], 0) * 2.0 * masks[0]
    want = np.maximum(h @ w["dense_2/kernel"] + w["dense_2/bias"], 0) * 2.0 * masks[1]
    for training in (False, True):  # dropout is on in both modes: the same masks give the same numbers
        np.testing.assert_allclose(np.asarray(block(x, training=training, dropout_masks=masks)), want, atol=1e-5)


def test_dropout_is_on_at_inference_and_seedable():
    x = np.random.default_rng(3).standard_normal((16, 80)).astype(np.float32)
    block = Prenet(layers_sizes=[256, 256], drop_rate=0.5, activation=None, seed=7)
    y1, y2 = np.asarray(block(x, training=False)), np.asarray(block(x, training=False))
    assert not np.array_equal(y1, y2)
    assert abs(np.mean(y1 == 0) - 0.5) < 0.03
    fresh = Prenet(layers_sizes=[256, 256], drop_rate=0.5, activation=None, seed=7)
    fresh.build((None, 80))
    fresh.load_tf1_weights(block.tf1_weights())
    np.testing.assert_array_equal(np.asarray(fresh(x)), y1)  # same seed, same first draw


def test_tf_function_dropout_is_on():
    block = Prenet(layers_sizes=[64], drop_rate=0.5, activation="linear", seed=1)
    fn = tf.function(lambda t: block(t, training=False))
    y = np.asarray(fn(tf.random.normal((8, 5, 3))))
    assert 0.4 < np.mean(y == 0) < 0.6


def test_mask_and_constructor_errors():
    block = Prenet(layers_sizes=[4, 3], drop_rate=0.5)
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(ValueError, match="dropout_masks"):
        block(x, dropout_masks=[np.ones((2, 4), np.float32)])
    with pytest.raises(ValueError, match=r"dropout_masks\[1\].*3"):
        block(x, dropout_masks=[np.ones((2, 4), np.float32), np.ones((2, 4), np.float32)])
    with pytest.raises(ValueError, match="layers_sizes"):
        Prenet(layers_sizes=[])
    with pytest.raises(ValueError, match="drop_rate"):
        Prenet(drop_rate=-0.1)
    hp = dict(prenet_layers=[256, 256], tacotron_dropout_rate=0.5)
    assert Prenet.from_hparams(hp).get_config()["layers_sizes"] == [256, 256]


def test_tf1_names_and_strict_load():
    block = Prenet(layers_sizes=[3], drop_rate=0.5)
    with pytest.raises(ValueError, match="dense_1/kernel"):
        block.load_tf1_weights({"dense_1/bias": np.zeros(3, np.float32)})
    assert not block.built
    block.load_tf1_weights(_weights([3], 2))
    assert block.in_features == 2 and sorted(block.tf1_weights()) == ["dense_1/bias", "dense_1/kernel"]
