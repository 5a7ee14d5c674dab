"""The TF1 <-> torch LSTM layout conversions of ``torch_layers._lstm_layout``, tested on their own."""
import numpy as np
import pytest
import torch

from torch_layers import ZoneoutLSTMCell
from torch_layers._lstm_layout import (
    nn_lstm_to_tf1,
    tf1_bias_to_torch,
    tf1_kernel_to_torch,
    tf1_to_nn_lstm,
    torch_bias_to_tf1,
    torch_weight_to_tf1,
)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _tf1(n_in=3, units=4, seed=0):
    g = np.random.default_rng(seed)
    return (g.standard_normal((n_in + units, 4 * units)).astype(np.float32) * 0.5,
            g.standard_normal(4 * units).astype(np.float32) * 0.2)


def test_hand_derived_one_step():
    kernel = np.array([[0.5, -1.0, 0.25, 2.0], [1.0, 0.5, -0.5, -1.0]], np.float32)  # rows x, h; cols i, j, f, o
    bias = np.array([0.1, 0.2, -0.3, 0.0], np.float32)
    x, c, h = 2.0, -0.5, 0.4
    i, j, f, o = 1.5, -1.6, 0.0, 3.6  # kernel^T [x, h] + bias, by hand
    c_new = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    h_new = _sigmoid(o) * np.tanh(c_new)

    w = tf1_kernel_to_torch(kernel)
    np.testing.assert_array_equal(w, [[0.5, 1.0], [0.25, -0.5], [-1.0, 0.5], [2.0, -1.0]])  # rows i, f, g, o
    np.testing.assert_array_equal(tf1_bias_to_torch(bias), bias[[0, 2, 1, 3]])

    cell = ZoneoutLSTMCell(1, 1)
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    with torch.no_grad():
        out, (c1, h1) = cell(torch.tensor([[x]]), (torch.tensor([[c]]), torch.tensor([[h]])))
    np.testing.assert_allclose(out.item(), h_new, atol=1e-6)
    np.testing.assert_allclose(c1.item(), c_new, atol=1e-6)

    lstm = torch.nn.LSTM(1, 1, batch_first=True)
    p = tf1_to_nn_lstm(kernel, bias, 1)
    np.testing.assert_allclose(p["bias_ih"], [0.1, -0.3 + 1.0, 0.2, 0.0], atol=1e-7)
    with torch.no_grad():
        for k, v in p.items():
            getattr(lstm, k + "_l0").copy_(torch.from_numpy(v))
        y, (hn, cn) = lstm(torch.tensor([[[x]]]), (torch.tensor([[[h]]]), torch.tensor([[[c]]])))
    np.testing.assert_allclose(y.item(), h_new, atol=1e-6)
    np.testing.assert_allclose(cn.item(), c_new, atol=1e-6)


def test_round_trips_are_exact():
    kernel, bias = _tf1(5, 3, seed=1)
    np.testing.assert_array_equal(torch_weight_to_tf1(tf1_kernel_to_torch(kernel)), kernel)
    np.testing.assert_array_equal(torch_bias_to_tf1(tf1_bias_to_torch(bias)), bias)
    p = tf1_to_nn_lstm(kernel, bias, 5)
    assert p["weight_ih"].shape == (12, 5) and p["weight_hh"].shape == (12, 3)
    k2, b2 = nn_lstm_to_tf1(p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    np.testing.assert_array_equal(k2, kernel)
    np.testing.assert_allclose(b2, bias, atol=1e-7)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="gate"):
        tf1_kernel_to_torch(np.zeros((4, 7)))
    with pytest.raises(ValueError, match="kernel"):
        tf1_to_nn_lstm(np.zeros((5, 8)), np.zeros(8), input_size=2)


def test_nn_lstm_matches_cell_over_a_sequence():
    n_in, units = 3, 4
    kernel, bias = _tf1(n_in, units, seed=2)
    cell = ZoneoutLSTMCell(n_in, units).eval()
    cell.load_tf1_weights({"kernel": kernel, "bias": bias})
    lstm = torch.nn.LSTM(n_in, units, batch_first=True)
    with torch.no_grad():
        for k, v in tf1_to_nn_lstm(kernel, bias, n_in).items():
            getattr(lstm, k + "_l0").copy_(torch.from_numpy(v))
        x = torch.randn(2, 6, n_in)
        ref, _ = lstm(x)
        state, outs = None, []
        for t in range(6):
            o, state = cell(x[:, t], state)
            outs.append(o)
    torch.testing.assert_close(torch.stack(outs, 1), ref, atol=1e-6, rtol=0)
