import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.deploy_limits import checked_elsewhere
from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import Conv1DBlock


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


@pytest.mark.parametrize("bn_position", ["before", "after"])
def test_layer_contract(bn_position):
    run_keras_layer_test(
        Conv1DBlock,
        dict(kernel_size=4, channels=5, activation="tanh", drop_rate=0.5, bn_position=bn_position),
        _inputs,
        expected_output_shape=lambda b, t: (b, t, 5),
        changes_in_training=True,
        bad_inputs=[
            ([np.zeros((2, 7), np.float32)], "inputs"),
            ([np.zeros((2, 7, 3), np.float32)], "(batch, time, 6)"),
            ([np.zeros((2, 7, 6), np.int32)], "floating"),
        ],
        **({} if bn_position == "before"
           else checked_elsewhere("the bn_position=before case", ("export", "xla", "litert"))),
    )


def test_same_padding_even_kernel_hand_derived():
    # identity-like kernel at tap j of k=4 picks x[t + j - 1] (TF pads 1 before, 2 after)
    block = Conv1DBlock(4, 1, activation=None, drop_rate=0.0)
    block.build((None, None, 1))
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 5, 1)
    for j, expect in enumerate([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5], [2, 3, 4, 5, 0], [3, 4, 5, 0, 0]]):
        k = np.zeros((4, 1, 1), np.float32)
        k[j] = 1.0
        block.load_tf1_weights({"conv1d/kernel": k, "conv1d/bias": np.zeros(1), "batch_normalization/gamma": np.ones(1),
                                "batch_normalization/beta": np.zeros(1), "batch_normalization/moving_mean": np.zeros(1),
                                "batch_normalization/moving_variance": np.full(1, 1.0 - 1e-3)})
        np.testing.assert_allclose(np.asarray(block(x))[0, :, 0], expect, atol=1e-6)


def test_load_before_build_builds_from_shapes_and_is_all_or_nothing():
    src = Conv1DBlock(3, 4)
    src(np.zeros((1, 2, 7), np.float32))
    w = src.tf1_weights()
    dst = Conv1DBlock(3, 4)
    dst.load_tf1_weights(w)
    assert dst.built
    np.testing.assert_array_equal(dst.tf1_weights()["conv1d/kernel"], w["conv1d/kernel"])

    bad = dict(w)
    bad["conv1d/bias"] = np.zeros(5)
    bad["extra"] = np.zeros(1)
    del bad["batch_normalization/beta"]
    before = dst.tf1_weights()
    with pytest.raises(ValueError) as err:
        dst.load_tf1_weights({**bad, "conv1d/kernel": w["conv1d/kernel"] + 1})
    msg = str(err.value)
    assert "conv1d/bias" in msg and "extra" in msg and "batch_normalization/beta" in msg
    for k, v in dst.tf1_weights().items():
        np.testing.assert_array_equal(v, before[k])  # nothing assigned
    report = dst.load_tf1_weights({k: v for k, v in w.items() if k != "batch_normalization/beta"}, strict=False)
    assert report.missing == ("batch_normalization/beta",)


def test_training_uses_batch_statistics_and_updates_moving_averages():
    block = Conv1DBlock(1, 3, activation=None)
    x = np.random.default_rng(0).standard_normal((4, 10, 2)).astype(np.float32) * 3 + 1
    y = np.asarray(block(x, training=True))
    np.testing.assert_allclose(y.mean(axis=(0, 1)), 0.0, atol=1e-4)  # gamma 1, beta 0 after BN
    mm = block.tf1_weights()["batch_normalization/moving_mean"]
    conv = tf.nn.conv1d(x, block.conv.kernel, 1, "SAME") + block.conv.bias
    np.testing.assert_allclose(mm, 0.01 * np.asarray(conv).mean(axis=(0, 1)), atol=1e-5)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="bn_position"):
        Conv1DBlock(3, 4, bn_position="middle")
    with pytest.raises(ValueError, match="drop_rate"):
        Conv1DBlock(3, 4, drop_rate=1.0)
