import numpy as np
import pytest

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import DecoderRNN


def _seq(b, t):
    return [np.random.default_rng(b * 10 + t).standard_normal((b, t, 5)).astype(np.float32)]


def _step(b, t):
    return [np.random.default_rng(b * 10 + t).standard_normal((b, 5)).astype(np.float32)]


def test_layer_contract_sequence_form():
    run_keras_layer_test(
        DecoderRNN, dict(layers=2, size=4, zoneout=0.2), _seq,
        expected_output_shape=lambda b, t: [(b, t, 4)] + [(b, 4)] * 4,
        changes_in_training=True,
        bad_inputs=[([np.zeros((2, 3, 6), np.float32)], "(batch, time, 5)"),
                    ([np.zeros((2, 3, 5), np.int32)], "floating"),
                    ([np.zeros((5,), np.float32)], "inputs")],
    )


def test_layer_contract_one_step_form():
    z = np.zeros((2, 4), np.float32)
    run_keras_layer_test(
        DecoderRNN, dict(layers=3, size=4, zoneout=0.1), _step,
        expected_output_shape=lambda b, t: [(b, 4)] + [(b, 4)] * 6,
        changes_in_training=True, test_mixed_precision=True,
        bad_inputs=[([np.zeros((2, 6), np.float32)], "(batch, 5)"),
                    ([np.zeros((2, 5), np.float32), ((z, z),)], "states"),
                    ([np.zeros((2, 5), np.float32), ((z, z), (z, z), (z, np.zeros((2, 3), np.float32)))], "states")],
    )


def _decoder(layers=2, size=3, n_in=4, zoneout=0.2, seed=0):
    dec = DecoderRNN(layers=layers, size=size, zoneout=zoneout)
    dec.build((None, n_in))
    g = np.random.default_rng(seed)
    dec.load_tf1_weights({k: g.standard_normal(v.shape).astype(np.float32) * 0.5 for k, v in dec.tf1_weights().items()})
    return dec


def _close(a, b, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol)


def test_sequence_equals_stepping_inference_and_injected_masks():
    dec = _decoder(layers=3)
    g = np.random.default_rng(1)
    x = g.standard_normal((2, 6, 4)).astype(np.float32)
    init = tuple((g.standard_normal((2, 3)).astype(np.float32), g.standard_normal((2, 3)).astype(np.float32))
                 for _ in range(3))
    masks = [tuple((g.random((2, 6, 3)) > 0.3).astype(np.float32) for _ in range(2)) for _ in range(3)]
    for training, m in ((False, None), (True, masks)):
        y, final = dec(x, init, training=training, zoneout_masks=m)
        states, outs = init, []
        for t in range(6):
            mt = None if m is None else [(mc[:, t], mh[:, t]) for mc, mh in m]
            o, states = dec(x[:, t], states, training=training, zoneout_masks=mt)
            outs.append(np.asarray(o))
        _close(y, np.stack(outs, 1))
        for (c, h), (c2, h2) in zip(final, states):
            _close(c, c2)
            _close(h, h2)


def test_layers_feed_raw_outputs_and_states_are_zoned_out():
    dec = _decoder(layers=2, zoneout=0.5)
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    states = dec.get_initial_state(2)
    out, new_states = dec(x, states)
    o1, s1 = dec.cells[0](x, list(states[0]))
    o2, s2 = dec.cells[1](o1, list(states[1]))  # layer 2 gets layer 1's raw output
    _close(out, o2)
    _close(new_states[0][0], s1[0])
    _close(new_states[1][1], s2[1])
    _close(new_states[1][1], 0.5 * np.asarray(o2))  # h = (1 - z) h' + z * 0


def test_random_zoneout_rate():
    dec = DecoderRNN(layers=2, size=128, zoneout=0.25, seed=1)
    g = np.random.default_rng(3)
    x = g.standard_normal((32, 4)).astype(np.float32)
    states = tuple((g.standard_normal((32, 128)).astype(np.float32), g.standard_normal((32, 128)).astype(np.float32))
                   for _ in range(2))
    _, new = dec(x, states, training=True)
    rate = np.mean([np.mean(np.asarray(n) == s) for pn, ps in zip(new, states) for n, s in zip(pn, ps)])
    assert abs(rate - 0.25) < 0.02


def test_tf1_names_initial_state_and_errors():
    dec = DecoderRNN(layers=2, size=3, tf1_scope="dec")
    dec.build((None, 4))
    assert dec.tf1_scope == "dec"
    w = dec.tf1_weights()
    assert w["multi_rnn_cell/cell_0/decoder_LSTM_1/kernel"].shape == (7, 12)
    assert w["multi_rnn_cell/cell_1/decoder_LSTM_2/kernel"].shape == (6, 12)
    assert len(w) == 4
    init = dec.get_initial_state(5)
    assert len(init) == 2 and all(np.asarray(t).shape == (5, 3) and not np.asarray(t).any() for p in init for t in p)
    with pytest.raises(ValueError, match="zoneout_masks"):
        dec(np.zeros((2, 4), np.float32), None, training=True, zoneout_masks=[(np.ones((2, 3)),) * 2])
    with pytest.raises(ValueError, match="zoneout_masks"):
        dec(np.zeros((2, 5, 4), np.float32), training=True, zoneout_masks=[(np.ones((2, 4, 3)),) * 2] * 2)
    with pytest.raises(ValueError, match="zoneout"):
        DecoderRNN(zoneout=-0.5)
