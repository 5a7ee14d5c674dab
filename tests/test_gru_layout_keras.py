"""TF1 GRUCell <-> keras GRU(reset_after=False) layout, the Keras TF1GRUCell, and the fast bidirectional loop."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers._gru_layout import keras_gru_to_tf1, tf1_to_keras_gru
from tf_layers.tf1_gru_cell import TF1GRUCell, bidirectional_tf1_gru


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


def test_layout_round_trip_and_gate_order():
    w = random_tf1_gru(3, 4, 0)
    kernel, recurrent, bias = tf1_to_keras_gru(w)
    assert kernel.shape == (3, 12) and recurrent.shape == (4, 12) and bias.shape == (12,)
    # Keras blocks (z, r, h): z is TF1's update gate (second TF1 column block), r the first
    np.testing.assert_array_equal(kernel[:, 0:4], w["gates/kernel"][:3, 4:8])
    np.testing.assert_array_equal(recurrent[:, 4:8], w["gates/kernel"][3:, 0:4])
    np.testing.assert_array_equal(bias[8:], w["candidate/bias"])
    back = keras_gru_to_tf1(kernel, recurrent, bias)
    for k in w:
        np.testing.assert_array_equal(back[k], w[k])
    with pytest.raises(ValueError, match="reset_after"):
        keras_gru_to_tf1(kernel, recurrent, np.zeros((2, 12)))


def test_keras_gru_reset_before_equals_tf1_maths_and_cell():
    n_in, u, t = 5, 6, 9
    w = random_tf1_gru(n_in, u, 1)
    x = np.random.default_rng(2).standard_normal((2, t, n_in)).astype(np.float32)
    ref = np.stack([np_tf1_gru(xb.astype(np.float64), w) for xb in x])

    gru = keras.layers.GRU(u, reset_after=False, return_sequences=True)
    gru.build((None, None, n_in))
    gru.set_weights(tf1_to_keras_gru({k: v.astype(np.float32) for k, v in w.items()}))
    np.testing.assert_allclose(np.asarray(gru(x)), ref, atol=1e-5)

    cell = TF1GRUCell(u)
    cell.load_tf1_weights(w)
    np.testing.assert_allclose(np.asarray(keras.layers.RNN(cell, return_sequences=True)(x)), ref, atol=1e-5)

    # and back: weights read off the keras GRU reproduce the TF1 dict
    back = keras_gru_to_tf1(*gru.get_weights())
    for k in w:
        np.testing.assert_allclose(back[k], w[k], atol=1e-6)


def test_bidirectional_loop_lengths_semantics_against_numpy():
    n_in, u, t = 3, 4, 7
    wf, wb = random_tf1_gru(n_in, u, 3), random_tf1_gru(n_in, u, 4)
    fw, bw = TF1GRUCell(u), TF1GRUCell(u)
    fw.load_tf1_weights(wf)
    bw.load_tf1_weights(wb)
    x = np.random.default_rng(5).standard_normal((4, t, n_in)).astype(np.float32)
    lengths = np.array([7, 3, 1, 0], np.int32)
    yf, yb = (np.asarray(a) for a in bidirectional_tf1_gru(tf.constant(x), fw, bw, tf.constant(lengths)))
    for i, n in enumerate(lengths):
        xv = x[i, :n].astype(np.float64)
        np.testing.assert_allclose(yf[i, :n], np_tf1_gru(xv, wf), atol=1e-5)
        np.testing.assert_allclose(yb[i, :n], np_tf1_gru(xv[::-1], wb)[::-1], atol=1e-5)
        np.testing.assert_array_equal(yf[i, n:], 0.0)
        np.testing.assert_array_equal(yb[i, n:], 0.0)
    # lengths=None: plain reverse over the full time axis
    yf, yb = (np.asarray(a) for a in bidirectional_tf1_gru(tf.constant(x), fw, bw, None))
    np.testing.assert_allclose(yb[1], np_tf1_gru(x[1, ::-1].astype(np.float64), wb)[::-1], atol=1e-5)
    np.testing.assert_allclose(yf[2], np_tf1_gru(x[2].astype(np.float64), wf), atol=1e-5)


def test_cell_layer_contract():
    def inputs(b, t):
        rng = np.random.default_rng(b * 10 + t)
        return [rng.standard_normal((b, 5)).astype(np.float32), rng.standard_normal((b, 3)).astype(np.float32)]

    run_keras_layer_test(TF1GRUCell, dict(units=3, tf1_scope="bidirectional_rnn/fw/x_forward_RNN"), inputs,
                         expected_output_shape=lambda b, t: [(b, 3), (b, 3)])


def test_cell_initialisation_is_tf1s():
    cell = TF1GRUCell(4)
    cell.build((None, 2))
    w = cell.tf1_weights()
    assert w["gates/kernel"].shape == (6, 8) and w["candidate/kernel"].shape == (6, 4)
    np.testing.assert_array_equal(w["gates/bias"], 1.0)
    np.testing.assert_array_equal(w["candidate/bias"], 0.0)
