"""The TF1 <-> Keras LSTM layout conversions of ``tf_layers._lstm_layout``, tested on their own."""
import keras
import numpy as np
import pytest

from tf_layers import ZoneoutLSTMCell
from tf_layers._lstm_layout import (
    join_tf1_kernel,
    keras_lstm_to_tf1,
    split_tf1_kernel,
    tf1_effective_bias,
    tf1_to_keras_lstm,
)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _tf1(n_in=3, units=4, seed=0):
    g = np.random.default_rng(seed)
    return (g.standard_normal((n_in + units, 4 * units)).astype(np.float32) * 0.5,
            g.standard_normal(4 * units).astype(np.float32) * 0.2)


def test_hand_derived_one_step():
    # one unit, one input: kernel rows (x, h), columns (i, j, f, o); forget bias 1.0 added at run time
    kernel = np.array([[0.5, -1.0, 0.25, 2.0], [1.0, 0.5, -0.5, -1.0]], np.float32)
    bias = np.array([0.1, 0.2, -0.3, 0.0], np.float32)
    x, c, h = 2.0, -0.5, 0.4
    i = 0.5 * 2.0 + 1.0 * 0.4 + 0.1       # 1.5
    j = -1.0 * 2.0 + 0.5 * 0.4 + 0.2      # -1.6
    f = 0.25 * 2.0 - 0.5 * 0.4 - 0.3      # 0.0
    o = 2.0 * 2.0 - 1.0 * 0.4 + 0.0       # 3.6
    c_new = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    h_new = _sigmoid(o) * np.tanh(c_new)

    cell = ZoneoutLSTMCell(1)
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    out, (c1, h1) = cell(np.array([[x]], np.float32), [np.array([[c]], np.float32), np.array([[h]], np.float32)])
    np.testing.assert_allclose(np.asarray(out)[0, 0], h_new, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c1)[0, 0], c_new, atol=1e-6)

    # the same step by stock Keras after the conversion
    k, rk, b = tf1_to_keras_lstm(kernel, bias, input_size=1)
    np.testing.assert_allclose(b, [0.1, -0.3 + 1.0, 0.2, 0.0], atol=1e-7)  # i, f (+forget bias), c, o
    np.testing.assert_array_equal(k[0], [0.5, 0.25, -1.0, 2.0])
    ref = keras.layers.LSTMCell(1)
    ref.build((None, 1))
    ref.set_weights([k, rk, b])
    hk, (hk2, ck) = ref(np.array([[x]], np.float32), [np.array([[h]], np.float32), np.array([[c]], np.float32)])
    np.testing.assert_allclose(np.asarray(hk)[0, 0], h_new, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ck)[0, 0], c_new, atol=1e-6)


def test_split_join_round_trip_and_rows():
    kernel, _ = _tf1(3, 4)
    wx, wh = split_tf1_kernel(kernel, 3)
    assert wx.shape == (3, 16) and wh.shape == (4, 16)
    np.testing.assert_array_equal(wx, kernel[:3])
    np.testing.assert_array_equal(join_tf1_kernel(wx, wh), kernel)
    with pytest.raises(ValueError, match="kernel"):
        split_tf1_kernel(kernel, 2)


def test_effective_bias_adds_forget_bias_to_third_block_only():
    b = np.zeros(8, np.float32)
    np.testing.assert_array_equal(tf1_effective_bias(b), [0, 0, 0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(b, 0)  # input untouched


def test_keras_round_trip():
    kernel, bias = _tf1(5, 3, seed=1)
    k2, b2 = keras_lstm_to_tf1(*tf1_to_keras_lstm(kernel, bias, 5))
    np.testing.assert_allclose(k2, kernel, atol=0, rtol=0)
    np.testing.assert_allclose(b2, bias, atol=1e-7)


def test_stock_keras_lstm_matches_cell_over_a_sequence():
    n_in, units = 3, 4
    kernel, bias = _tf1(n_in, units, seed=2)
    cell = ZoneoutLSTMCell(units)
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    lstm = keras.layers.LSTM(units, return_sequences=True)
    lstm.build((None, None, n_in))
    lstm.set_weights(list(tf1_to_keras_lstm(kernel, bias, n_in)))
    x = np.random.default_rng(3).standard_normal((2, 6, n_in)).astype(np.float32)
    ours = keras.layers.RNN(cell, return_sequences=True)(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(lstm(x)), atol=1e-6)
