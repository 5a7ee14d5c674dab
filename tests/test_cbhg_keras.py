import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import Skip, run_keras_layer_test
from tf_layers import CBHG

# small CBHG: even bank widths, even pool, dense present (16 -> 12)
CONFIG = dict(K=3, conv_channels=4, pool_size=2, projections=[6, 16], projection_kernel_size=3,
              n_highwaynet_layers=2, highway_units=12, rnn_units=5)


def _x(b, t):
    return np.random.default_rng(b * 100 + t).standard_normal((b, t, 16)).astype(np.float32)


def _with_lengths(b, t):
    return [_x(b, t), np.array([t, max(1, t // 2), 1][:b], np.int32)]


def test_layer_contract_with_lengths():
    x = _x(2, 7)
    run_keras_layer_test(
        CBHG, CONFIG, _with_lengths, expected_output_shape=lambda b, t: (b, t, 10), changes_in_training=True,
        bad_inputs=[
            ([x[0], np.array([7, 3])], "inputs"),
            ([x[..., :8], np.array([7, 3])], "(batch, time, 16)"),
            ([x.astype(np.int32), np.array([7, 3])], "floating"),
            ([x, np.array([7.0, 3.0], np.float32)], "input_lengths"),
            ([x, np.array([[7, 3]])], "input_lengths"),
            ([x, np.array([7, 3, 1])], "input_lengths"),
            ([x, np.array([8, 3])], "input_lengths"),
        ],
    )


def test_layer_contract_full_length():
    cfg = {**CONFIG, "projections": [6, 12], "pool_size": 3, "tf1_scope": "CBHG_postnet"}
    same_ops = Skip("the conv bank, pooling, highway and GRU ops are checked under XLA and LiteRT by "
                    "test_layer_contract_with_lengths; this configuration is exported as a SavedModel")
    run_keras_layer_test(CBHG, cfg, lambda b, t: [_x(b, t)[..., :12]], expected_output_shape=lambda b, t: (b, t, 10),
                         test_mixed_precision=False, sizes=((2, 5), (1, 1)), xla=same_ops, litert=same_ops)


def test_tf1_names_follow_the_scope_and_the_dense_rule():
    with_dense = CBHG(**CONFIG, tf1_scope="CBHG_postnet")
    with_dense(_x(1, 3))
    shapes = {k: v.shape for k, v in with_dense.tf1_weights().items()}
    expect = {"conv_bank/conv1d_2/conv1d/kernel": (2, 16, 4),
              "conv_bank/conv1d_3/batch_normalization/moving_variance": (4,),
              "proj1/conv1d/kernel": (3, 12, 6), "proj2/conv1d/kernel": (3, 6, 16), "dense/kernel": (16, 12),
              "dense/bias": (12,), "CBHG_postnet_highwaynet_2/T/kernel": (12, 12),
              "bidirectional_rnn/fw/CBHG_postnet_forward_RNN/gates/kernel": (17, 10),
              "bidirectional_rnn/bw/CBHG_postnet_backward_RNN/candidate/kernel": (17, 5),
              "bidirectional_rnn/bw/CBHG_postnet_backward_RNN/gates/bias": (2 * 5,)}
    for k, s in expect.items():
        assert shapes[k] == s, k
    # 3 bank convs + 2 projections (6 variables each), dense 2, 2 highways x 4, 2 GRUs x 4
    assert len(shapes) == 5 * 6 + 2 + 8 + 8

    no_dense = CBHG(**{**CONFIG, "highway_units": 16})
    no_dense(_x(1, 3))
    names = no_dense.tf1_weights()
    assert not any(k.startswith("dense/") for k in names)
    assert "CBHG_highwaynet_1/H/kernel" in names and "bidirectional_rnn/fw/CBHG_forward_RNN/gates/bias" in names


def test_load_before_build_round_trip_and_all_or_nothing():
    src = CBHG(**CONFIG)
    x, lens = _with_lengths(2, 6)
    y = np.asarray(src(x, lens))
    w = src.tf1_weights()
    dst = CBHG(**CONFIG)
    dst.load_tf1_weights(w)
    np.testing.assert_allclose(np.asarray(dst(x, lens)), y, atol=1e-6)
    before = dst.tf1_weights()
    bad = {k: v + 1 for k, v in w.items()}
    bad.pop("dense/bias")
    bad["proj1/conv1d/bias"] = np.zeros(7, np.float32)
    with pytest.raises(ValueError) as err:
        dst.load_tf1_weights(bad)
    assert "dense/bias" in str(err.value) and "proj1/conv1d/bias" in str(err.value)
    for k, v in dst.tf1_weights().items():
        np.testing.assert_array_equal(v, before[k])


def test_outputs_past_lengths_are_zero_and_max_pool_is_tf_same():
    layer = CBHG(**CONFIG)
    x, _ = _with_lengths(3, 6)
    y = np.asarray(layer(x, np.array([6, 2, 0])))
    np.testing.assert_array_equal(y[1, 2:], 0.0)
    np.testing.assert_array_equal(y[2], 0.0)
    assert np.abs(y[0]).min() > 0
    # the pooling layer inside: stride 1, 'same', padding never wins (pool 2 pads one frame after)
    v = np.array([[[1.0], [-3.0], [2.0], [-5.0]]], np.float32)
    np.testing.assert_array_equal(np.asarray(layer.max_pool(v))[0, :, 0], [1.0, 2.0, 2.0, -5.0])


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="projections"):
        CBHG(**{**CONFIG, "projections": [6, 8, 16]})
    with pytest.raises(ValueError, match="rnn_units"):
        CBHG(**{**CONFIG, "rnn_units": 0})


def test_works_in_tf_function_with_unknown_lengths_and_training():
    layer = CBHG(**CONFIG)
    fn = tf.function(lambda x, n: layer(x, n, training=True),
                     input_signature=[tf.TensorSpec([None, None, 16]), tf.TensorSpec([None], tf.int32)])
    x, lens = _with_lengths(3, 9)
    np.testing.assert_allclose(np.asarray(fn(x, lens)), np.asarray(layer(x, lens, training=True)), atol=1e-5)
