import numpy as np
import pytest

from tests.helpers.keras_layer_test import run_keras_layer_test
from tests.test_encoder_convolutions_keras import _np_stack, _tf1_weights
from tf_layers import Postnet


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def test_layer_contract():
    run_keras_layer_test(
        Postnet,
        dict(kernel_size=3, channels=5, num_layers=3, drop_rate=0.5),
        _inputs,
        expected_output_shape=lambda b, t: (b, t, 5),
        changes_in_training=True,
        bad_inputs=[
            ([np.zeros((2, 7, 6, 1), np.float32)], "inputs"),
            ([np.zeros((2, 7, 80), np.float32)], "(batch, time, 6)"),
            ([np.zeros((2, 7, 6), np.int64)], "floating"),
        ],
    )


@pytest.mark.parametrize("num_layers,indices", [(5, [1, 2, 3, 4, 5]), (3, [1, 2, 5]), (1, [5])])
def test_seed_names_last_layer_conv_layer_5_and_is_linear(num_layers, indices):
    # hand-written TF1 names: the seed's last layer is always conv_layer_5_<scope>, with identity activation
    scopes = [f"conv_layer_{i}_postnet_convolutions" for i in indices]
    w = _tf1_weights(scopes, 6, 5, 7, seed=num_layers)
    block = Postnet(kernel_size=5, channels=7, num_layers=num_layers)
    block.load_tf1_weights(w)
    assert sorted(block.tf1_weights()) == sorted(w)
    x = np.random.default_rng(4).standard_normal((2, 8, 6)).astype(np.float32)
    want = _np_stack(x, w, scopes, ["tanh"] * (num_layers - 1) + ["linear"])
    np.testing.assert_allclose(np.asarray(block(x, training=False)), want, atol=1e-5)


def test_last_layer_is_not_tanh_bounded():
    scopes = ["conv_layer_1_postnet_convolutions", "conv_layer_5_postnet_convolutions"]
    w = _tf1_weights(scopes, 3, 3, 4, seed=9)
    w["conv_layer_5_postnet_convolutions/batch_normalization/gamma"] *= 50.0
    block = Postnet(kernel_size=3, channels=4, num_layers=2)
    block.load_tf1_weights(w)
    y = np.asarray(block(np.random.default_rng(5).standard_normal((2, 6, 3)).astype(np.float32)))
    assert np.max(np.abs(y)) > 1.5  # a tanh last layer could never exceed 1


def test_more_than_five_layers_needs_explicit_last_scope():
    with pytest.raises(ValueError, match="last_layer_scope_index"):
        Postnet(num_layers=6)
    with pytest.raises(ValueError, match="last_layer_scope_index"):
        Postnet(num_layers=3, last_layer_scope_index=2)
    block = Postnet(kernel_size=3, channels=4, num_layers=6, last_layer_scope_index=6, tf1_scope="post")
    block(np.zeros((1, 3, 2), np.float32))
    assert sorted({k.split("/")[0] for k in block.tf1_weights()}) == [f"conv_layer_{i}_post" for i in range(1, 7)]
    clone = Postnet.from_config(block.get_config())
    assert clone.last_layer_scope_index == 6


def test_injected_masks_apply_to_every_layer_including_the_last():
    scopes = ["conv_layer_1_postnet_convolutions", "conv_layer_5_postnet_convolutions"]
    w = _tf1_weights(scopes, 3, 3, 4, seed=2)
    block = Postnet(kernel_size=3, channels=4, num_layers=2, drop_rate=0.5)
    block.load_tf1_weights(w)
    x = np.random.default_rng(6).standard_normal((1, 5, 3)).astype(np.float32)
    ones = np.ones((1, 5, 4), np.float32)
    last = (np.random.default_rng(7).random((1, 5, 4)) > 0.5).astype(np.float32)
    y = np.asarray(block(x, training=False, dropout_masks=[ones, last]))
    # layer 1 keeps everything (x2 rescale), layer 2 drops by `last`
    h = _np_stack(x, w, scopes[:1], ["tanh"]) * 2.0
    want = _np_stack(h, w, scopes[1:], ["linear"]) * 2.0 * last
    np.testing.assert_allclose(y, want, atol=1e-5)
    with pytest.raises(ValueError, match="dropout_masks"):
        block(x, dropout_masks=[ones])


def test_from_hparams():
    hp = type("HP", (),
              dict(postnet_kernel_size=5, postnet_channels=32, postnet_num_layers=5, tacotron_dropout_rate=0.5))
    block = Postnet.from_hparams(hp)
    assert (block.kernel_size, block.channels, block.num_layers, block.tf1_scope) == (5, 32, 5, "postnet_convolutions")
