import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import ZoneoutLSTMCell


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _numpy_lstm(kernel, bias, x, c, h):
    """TF1 LSTMCell maths, written out in numpy (gates i, j, f, o; forget bias 1.0)."""
    i, j, f, o = np.split(np.concatenate([x, h], -1) @ kernel + bias, 4, -1)
    c_new = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    return c_new, _sigmoid(o) * np.tanh(c_new)


def _inputs(b, t):
    return [np.random.default_rng(b * 10 + t).standard_normal((b, 5)).astype(np.float32)]


def test_layer_contract():
    run_keras_layer_test(
        ZoneoutLSTMCell, dict(num_units=6, zoneout_factor_cell=0.3, zoneout_factor_output=0.2), _inputs,
        expected_output_shape=lambda b, t: [(b, 6), (b, 6), (b, 6)],
        changes_in_training=True,
        bad_inputs=[([np.zeros((2, 3, 5), np.float32)], "inputs"),
                    ([np.zeros((2, 4), np.float32)], "(batch, 5)"),
                    ([np.zeros((2, 5), np.int32)], "floating"),
                    ([np.zeros((2, 5), np.float32), [np.zeros((2, 6), np.float32)]], "states"),
                    ([np.zeros((2, 5), np.float32), [np.zeros((2, 6), np.float32), np.zeros((2, 3), np.float32)]],
                     "states")],
    )


@pytest.mark.parametrize("kwargs", [dict(zoneout_factor_cell=-0.1), dict(zoneout_factor_output=1.5),
                                    dict(zoneout_factor_cell="x")])
def test_zoneout_factor_outside_unit_interval(kwargs):
    with pytest.raises(ValueError, match="zoneout_factor"):
        ZoneoutLSTMCell(4, **kwargs)


def _cell_and_state(zc, zh, seed=0):
    g = np.random.default_rng(seed)
    cell = ZoneoutLSTMCell(4, zc, zh)
    kernel = g.standard_normal((7, 16)).astype(np.float32) * 0.5
    bias = g.standard_normal(16).astype(np.float32) * 0.1
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    x = g.standard_normal((3, 3)).astype(np.float32)
    c = g.standard_normal((3, 4)).astype(np.float32)
    h = g.standard_normal((3, 4)).astype(np.float32)
    return cell, kernel, bias, x, c, h


def test_inference_zoneout_interpolates_and_output_is_raw():
    cell, kernel, bias, x, c, h = _cell_and_state(0.3, 0.2)
    c_new, h_new = _numpy_lstm(kernel, bias, x, c, h)
    out, (c1, h1) = cell(x, [c, h], training=False)
    np.testing.assert_allclose(out, h_new, atol=1e-6)  # raw output, before zoneout
    np.testing.assert_allclose(c1, 0.7 * c_new + 0.3 * c, atol=1e-6)
    np.testing.assert_allclose(h1, 0.8 * h_new + 0.2 * h, atol=1e-6)


def test_training_with_injected_masks_keeps_tf1_keep_prob_semantics():
    cell, kernel, bias, x, c, h = _cell_and_state(0.3, 0.2, seed=1)
    c_new, h_new = _numpy_lstm(kernel, bias, x, c, h)
    g = np.random.default_rng(5)
    mc = (g.random((3, 4)) > 0.5).astype(np.float32)
    mh = (g.random((3, 4)) > 0.5).astype(np.float32)
    out, (c1, h1) = cell(x, [c, h], training=True, zoneout_masks=(mc, mh))
    np.testing.assert_allclose(out, h_new, atol=1e-6)
    np.testing.assert_allclose(c1, np.where(mc == 1, c_new, c), atol=1e-6)  # keep-mask 1 takes the new value
    np.testing.assert_allclose(h1, np.where(mh == 1, h_new, h), atol=1e-6)
    with pytest.raises(ValueError, match="zoneout_masks"):
        cell(x, [c, h], training=True, zoneout_masks=(mc,))


def test_random_zoneout_rate_is_z_not_one_minus_z():
    cell = ZoneoutLSTMCell(128, 0.1, 0.4, seed=3)
    g = np.random.default_rng(0)
    x = g.standard_normal((64, 3)).astype(np.float32)
    c, h = g.standard_normal((2, 64, 128)).astype(np.float32)
    _, (c1, h1) = cell(x, [c, h], training=True)
    assert abs(np.mean(np.asarray(c1) == c) - 0.1) < 0.02
    assert abs(np.mean(np.asarray(h1) == h) - 0.4) < 0.02


def test_inside_keras_rnn_equals_stepping_and_saves():
    cell = ZoneoutLSTMCell(4, 0.1, 0.1)
    x = np.random.default_rng(2).standard_normal((2, 5, 3)).astype(np.float32)
    inp = keras.Input((None, 3))
    model = keras.Model(inp, keras.layers.RNN(cell, return_sequences=True)(inp))
    y = np.asarray(model(x))
    states, outs = None, []
    for t in range(5):
        o, states = cell(x[:, t], states)
        outs.append(np.asarray(o))
    np.testing.assert_allclose(y, np.stack(outs, 1), atol=1e-6)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rnn.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(np.asarray(loaded(x)), y, atol=1e-6)
    assert cell.state_size == [4, 4] and cell.output_size == 4


def test_tf1_exchange_and_scope():
    cell = ZoneoutLSTMCell(4, tf1_scope="decoder_LSTM_1")
    assert cell.tf1_scope == "decoder_LSTM_1"
    w = {"kernel": np.ones((7, 16), np.float32), "bias": np.zeros(16, np.float32)}
    cell.load_tf1_weights(w)
    assert cell.built and cell.input_size == 3
    with pytest.raises(ValueError, match="kernel"):
        cell.load_tf1_weights({"kernel": np.ones((8, 16), np.float32), "bias": np.zeros(16, np.float32)})
    np.testing.assert_array_equal(cell.tf1_weights()["kernel"], w["kernel"])


def test_tf_function_unknown_batch():
    cell = ZoneoutLSTMCell(4)
    cell.build((None, 3))
    fn = tf.function(lambda x, c, h: cell(x, [c, h]),
                     input_signature=[tf.TensorSpec([None, 3]), tf.TensorSpec([None, 4]), tf.TensorSpec([None, 4])])
    out, (c, h) = fn(np.ones((5, 3), np.float32), np.zeros((5, 4), np.float32), np.zeros((5, 4), np.float32))
    assert out.shape == (5, 4)


def test_float64_policy_is_float64_throughout():
    # zoneout factors and the forget bias must not pass through float32 (0.3 is not a float32 number)
    cell = ZoneoutLSTMCell(4, 0.3, 0.1, dtype="float64")
    g = np.random.default_rng(7)
    kernel, bias = g.standard_normal((7, 16)) * 0.5, g.standard_normal(16) * 0.1
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    x, c, h = g.standard_normal((3, 3)), g.standard_normal((3, 4)), g.standard_normal((3, 4))
    c_new, h_new = _numpy_lstm(kernel, bias, x, c, h)
    out, (c1, h1) = cell(x, [c, h])
    assert np.asarray(out).dtype == np.float64
    np.testing.assert_allclose(c1, 0.7 * c_new + 0.3 * c, atol=1e-13, rtol=0)
    np.testing.assert_allclose(h1, 0.9 * h_new + 0.1 * h, atol=1e-13, rtol=0)
