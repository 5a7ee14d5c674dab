"""TF1 GRUCell <-> torch TF1GRUCell layout, the torch cell, and the fast bidirectional loop."""
import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers._gru_layout import split_input_recurrent, tf1_to_torch_gru, torch_gru_to_tf1
from torch_layers.tf1_gru_cell import TF1GRUCell, bidirectional_tf1_gru


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def np_tf1_gru(x, w):
    """Hand-written TF1 GRUCell over ``x (time, in)`` from the zero state (float64)."""
    u = w["candidate/bias"].shape[0]
    h = np.zeros(u)
    outs = []
    for xt in x:
        g = _sigmoid(np.concatenate([xt, h]) @ w["gates/kernel"] + w["gates/bias"])
        r, z = g[:u], g[u:]
        c = np.tanh(np.concatenate([xt, r * h]) @ w["candidate/kernel"] + w["candidate/bias"])
        h = z * h + (1.0 - z) * c
        outs.append(h)
    return np.array(outs).reshape(len(x), u)


def random_tf1_gru(n_in, u, seed):
    rng = np.random.default_rng(seed)
    return {"gates/kernel": rng.standard_normal((n_in + u, 2 * u)) * 0.5, "gates/bias": rng.standard_normal(2 * u),
            "candidate/kernel": rng.standard_normal((n_in + u, u)) * 0.5, "candidate/bias": rng.standard_normal(u)}


def test_layout_round_trip_and_meaning():
    w = random_tf1_gru(3, 4, 0)
    sd = tf1_to_torch_gru(w)
    assert sd["gates.weight"].shape == (8, 7) and sd["candidate.weight"].shape == (4, 7)
    # row j of gates.weight = TF1 column j: rows 0..u-1 reset gate, u..2u-1 update gate
    np.testing.assert_array_equal(sd["gates.weight"][5], w["gates/kernel"][:, 5])
    wx, wh = split_input_recurrent(sd["candidate.weight"], 3)
    np.testing.assert_array_equal(wx, w["candidate/kernel"][:3].T)
    np.testing.assert_array_equal(wh, w["candidate/kernel"][3:].T)
    back = torch_gru_to_tf1({k: torch.from_numpy(v) for k, v in sd.items()})
    for k in w:
        np.testing.assert_array_equal(back[k], w[k])
    cell = TF1GRUCell(3, 4)
    cell.load_state_dict({k: torch.from_numpy(v).float() for k, v in sd.items()})
    for k, v in cell.tf1_weights().items():
        np.testing.assert_allclose(v, w[k], atol=1e-7)


def test_cell_step_matches_tf1_maths():
    w = random_tf1_gru(5, 6, 1)
    cell = TF1GRUCell(5, 6)
    cell.load_tf1_weights(w)
    x = np.random.default_rng(2).standard_normal((4, 5))
    h = np.random.default_rng(3).standard_normal((4, 6))
    g = _sigmoid(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"])
    r, z = g[:, :6], g[:, 6:]
    c = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    with torch.no_grad():
        got = cell(torch.tensor(x, dtype=torch.float32), torch.tensor(h, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got, z * h + (1 - z) * c, atol=1e-5)
    # torch's own nn.GRU (reset after the recurrent matmul) is another function: same gates, other output
    gru = torch.nn.GRUCell(5, 6, bias=True)
    with torch.no_grad():
        gk, ck = w["gates/kernel"], w["candidate/kernel"]
        gru.weight_ih.copy_(torch.tensor(np.concatenate([gk[:5].T, ck[:5].T])))
        gru.weight_hh.copy_(torch.tensor(np.concatenate([gk[5:].T, ck[5:].T])))
        gru.bias_ih.copy_(torch.tensor(np.concatenate([w["gates/bias"], w["candidate/bias"]])))
        gru.bias_hh.zero_()
        other = gru(torch.tensor(x, dtype=torch.float32), torch.tensor(h, dtype=torch.float32)).numpy()
    assert np.abs(other - got).max() > 1e-3


def test_bidirectional_loop_lengths_semantics_against_numpy():
    n_in, u, t = 3, 4, 7
    wf, wb = random_tf1_gru(n_in, u, 3), random_tf1_gru(n_in, u, 4)
    fw, bw = TF1GRUCell(n_in, u), TF1GRUCell(n_in, u)
    fw.load_tf1_weights(wf)
    bw.load_tf1_weights(wb)
    x = np.random.default_rng(5).standard_normal((4, t, n_in)).astype(np.float32)
    lengths = np.array([7, 3, 1, 0])
    with torch.no_grad():
        yf, yb = (a.numpy() for a in bidirectional_tf1_gru(torch.from_numpy(x), fw, bw, torch.from_numpy(lengths)))
    for i, n in enumerate(lengths):
        xv = x[i, :n].astype(np.float64)
        np.testing.assert_allclose(yf[i, :n], np_tf1_gru(xv, wf), atol=1e-5)
        np.testing.assert_allclose(yb[i, :n], np_tf1_gru(xv[::-1], wb)[::-1], atol=1e-5)
        np.testing.assert_array_equal(yf[i, n:], 0.0)
        np.testing.assert_array_equal(yb[i, n:], 0.0)
    with torch.no_grad():
        yf, yb = (a.numpy() for a in bidirectional_tf1_gru(torch.from_numpy(x), fw, bw, None))
    np.testing.assert_allclose(yb[1], np_tf1_gru(x[1, ::-1].astype(np.float64), wb)[::-1], atol=1e-5)
    np.testing.assert_allclose(yf[2], np_tf1_gru(x[2].astype(np.float64), wf), atol=1e-5)


def test_cell_module_contract():
    def inputs(b, t, dtype):
        g = torch.Generator().manual_seed(b * 10 + t)
        return [torch.randn(b, 5, generator=g, dtype=dtype), torch.randn(b, 3, generator=g, dtype=dtype)]

    run_torch_module_test(TF1GRUCell, (5, 3), {}, make_inputs=inputs, expected_output_shape=lambda b, t: (b, 3),
                          bad_inputs=[([torch.zeros(2, 4), torch.zeros(2, 3)], "(batch, 5)"),
                                      ([torch.zeros(2, 5), torch.zeros(2, 3, 1)], "state")])


def test_cell_initialisation_is_tf1s():
    cell = TF1GRUCell(2, 4)
    w = cell.tf1_weights()
    assert w["gates/kernel"].shape == (6, 8) and w["candidate/kernel"].shape == (6, 4)
    np.testing.assert_array_equal(w["gates/bias"], 1.0)
    np.testing.assert_array_equal(w["candidate/bias"], 0.0)
    with pytest.raises(ValueError, match="num_units"):
        TF1GRUCell(2, 0)
