import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import EncoderRNN, ZoneoutLSTMCell
from tf_layers.tacotron2_litert import convert_builtins, custom_ops


def _inputs(b, t):
    g = np.random.default_rng(b * 10 + t)
    x = g.standard_normal((b, t, 5)).astype(np.float32)
    lengths = np.maximum(1, t - np.arange(b) % max(t, 1)).astype(np.int32)
    return [x, lengths]


def test_layer_contract():
    run_keras_layer_test(
        EncoderRNN, dict(size=4, zoneout=0.2), _inputs, expected_output_shape=lambda b, t: (b, t, 8),
        changes_in_training=True,
        bad_inputs=[([np.zeros((2, 5), np.float32), np.array([1, 1], np.int32)], "inputs"),
                    ([np.zeros((2, 3, 4), np.float32), np.array([1, 1], np.int32)], "(batch, time, 5)"),
                    ([np.zeros((2, 3, 5), np.float32), np.array([1.0, 1.0], np.float32)], "input_lengths"),
                    ([np.zeros((2, 3, 5), np.float32), np.array([1, 1, 1], np.int32)], "input_lengths"),
                    ([np.zeros((2, 3, 5), np.float32), np.array([[1, 1]], np.int32)], "input_lengths")],
    )


def _encoder(size=3, zoneout=0.1, n_in=4, seed=0):
    enc = EncoderRNN(size=size, zoneout=zoneout)
    enc.build((None, None, n_in))
    g = np.random.default_rng(seed)
    enc.load_tf1_weights({k: g.standard_normal(v.shape).astype(np.float32) * 0.5 for k, v in enc.tf1_weights().items()})
    return enc


def _step(cell, xs, c, h):
    outs = []
    for t in range(xs.shape[1]):
        o, (c, h) = cell(xs[:, t], [c, h])
        outs.append(np.asarray(o))
    return np.stack(outs, 1)


def test_directions_and_lengths_match_stepping_the_cells():
    enc = _encoder()
    x = np.random.default_rng(1).standard_normal((3, 6, 4)).astype(np.float32)
    lengths = np.array([6, 1, 4], np.int32)
    y = np.asarray(enc(x, lengths))
    for b, n in enumerate(lengths):
        xb = x[b:b + 1, :n]
        z = np.zeros((1, 3), np.float32)
        fw = _step(enc.fw_cell, xb, z, z)[0]
        bw = _step(enc.bw_cell, xb[:, ::-1], z, z)[0][::-1]  # reversed within its own length
        np.testing.assert_allclose(y[b, :n, :3], fw, atol=1e-6)
        np.testing.assert_allclose(y[b, :n, 3:], bw, atol=1e-6)
        np.testing.assert_array_equal(y[b, n:], 0.0)  # zeros past the length


def test_padding_beyond_lengths_never_changes_valid_outputs():
    enc = _encoder(seed=2)
    g = np.random.default_rng(3)
    x = g.standard_normal((3, 5, 4)).astype(np.float32)
    lengths = np.array([5, 2, 3], np.int32)
    y = np.asarray(enc(x, lengths))
    padded = np.concatenate([x, g.standard_normal((3, 4, 4)).astype(np.float32) * 100], 1)
    for b, n in enumerate(lengths):
        padded[b, n:] = g.standard_normal(padded[b, n:].shape) * 100
    yp = np.asarray(enc(padded, lengths))
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(yp[b, :n], y[b, :n], atol=1e-6)
        np.testing.assert_array_equal(yp[b, n:], 0.0)


def test_no_lengths_means_full_length():
    enc = _encoder(seed=4)
    x = np.random.default_rng(5).standard_normal((2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(enc(x, None), enc(x, np.array([4, 4], np.int32)), atol=0)


def test_injected_masks():
    enc = _encoder(seed=6)
    x = np.random.default_rng(7).standard_normal((2, 5, 4)).astype(np.float32)
    lengths = np.array([5, 3], np.int32)
    ones, zeros = np.ones((2, 5, 3), np.float32), np.zeros((2, 5, 3), np.float32)
    # keep-masks of ones: every step takes the new state, i.e. zoneout 0
    no_zoneout = EncoderRNN(size=3, zoneout=0.0)
    no_zoneout.load_tf1_weights(enc.tf1_weights())
    y1 = enc(x, lengths, training=True, zoneout_masks=((ones, ones), (ones, ones)))
    np.testing.assert_allclose(y1, no_zoneout(x, lengths), atol=1e-6)
    # keep-masks of zeros: the state stays zero, so each output is the LSTM of (x_t, 0, 0)
    y0 = np.asarray(enc(x, lengths, training=True, zoneout_masks=((zeros, zeros), (zeros, zeros))))
    for cell, sl in ((enc.fw_cell, slice(0, 3)), (enc.bw_cell, slice(3, 6))):
        z = np.zeros((10, 3), np.float32)
        o, _ = cell(x.reshape(10, 4), [z, z])
        expect = np.asarray(o).reshape(2, 5, 3) * (np.arange(5)[None, :, None] < lengths[:, None, None])
        np.testing.assert_allclose(y0[..., sl], expect, atol=1e-6)
    # the backward masks are indexed by input position: zoning out only position 0 of sequence 1 (length 3)
    bw_c = ones.copy()
    bw_c[1, 0] = 0.0  # last backward step of sequence 1: its state is not an output, so nothing changes
    y2 = enc(x, lengths, training=True, zoneout_masks=((ones, ones), (bw_c, ones)))
    np.testing.assert_allclose(y2, y1, atol=1e-6)
    bw_c = ones.copy()
    bw_c[1, 2] = 0.0  # first backward step of sequence 1: changes backward outputs at positions 0, 1 only
    y3 = np.asarray(enc(x, lengths, training=True, zoneout_masks=((ones, ones), (bw_c, ones))))
    diff = np.abs(y3 - np.asarray(y1)).max(-1)
    assert diff[1, 2] == 0 and diff[1, 0] > 0 and diff[1, 1] > 0 and diff[0].max() == 0
    with pytest.raises(ValueError, match="zoneout_masks"):
        enc(x, lengths, training=True, zoneout_masks=(ones, ones))
    with pytest.raises(ValueError, match="zoneout_masks"):
        enc(x, lengths, training=True, zoneout_masks=((ones, ones), (ones, ones[:, :4])))


def test_tf1_names_and_scope():
    enc = EncoderRNN(size=3, tf1_scope="my_enc")
    enc.build((None, None, 4))
    assert enc.tf1_scope == "my_enc"
    assert sorted(enc.tf1_weights()) == ["bidirectional_rnn/bw/encoder_bw_LSTM/bias",
                                         "bidirectional_rnn/bw/encoder_bw_LSTM/kernel",
                                         "bidirectional_rnn/fw/encoder_fw_LSTM/bias",
                                         "bidirectional_rnn/fw/encoder_fw_LSTM/kernel"]
    assert enc.tf1_weights()["bidirectional_rnn/fw/encoder_fw_LSTM/kernel"].shape == (7, 12)
    fresh = EncoderRNN(size=3)
    fresh.load_tf1_weights(enc.tf1_weights())  # builds from the weight shapes
    assert fresh.input_size == 4
    assert isinstance(fresh.fw_cell, ZoneoutLSTMCell)


def test_zoneout_out_of_range():
    with pytest.raises(ValueError, match="zoneout"):
        EncoderRNN(size=3, zoneout=1.2)


def test_mixed_float16_long_sequence_has_no_nan():
    enc = EncoderRNN(size=8, dtype="mixed_float16")
    y = enc(np.random.default_rng(0).standard_normal((2, 40, 6)).astype(np.float32), np.array([40, 7], np.int32),
            training=True)
    assert y.dtype == tf.float16 and np.all(np.isfinite(np.asarray(y, np.float32)))


def test_masked_formulation_matches_the_cells_and_the_shrinking_loop():
    """``masked=True`` (what XLA and the LiteRT export run) against stepping the cells (independent reference) and the
    default loop, for lengths in and out of order, with and without injected zoneout masks."""
    enc = _encoder(seed=8)
    g = np.random.default_rng(9)
    x = g.standard_normal((4, 6, 4)).astype(np.float32)
    lengths = np.array([3, 6, 1, 5], np.int32)
    y = np.asarray(enc(x, lengths, masked=True))
    for b, n in enumerate(lengths):
        z = np.zeros((1, 3), np.float32)
        np.testing.assert_allclose(y[b, :n, :3], _step(enc.fw_cell, x[b:b + 1, :n], z, z)[0], atol=1e-6)
        np.testing.assert_allclose(y[b, :n, 3:], _step(enc.bw_cell, x[b:b + 1, n - 1::-1], z, z)[0][::-1], atol=1e-6)
        np.testing.assert_array_equal(y[b, n:], 0.0)
    np.testing.assert_allclose(y, enc(x, lengths), atol=1e-6, rtol=0)
    np.testing.assert_allclose(enc(x, None, masked=True), enc(x, None), atol=1e-6, rtol=0)
    masks = tuple(tuple((g.uniform(size=(4, 6, 3)) > 0.3).astype(np.float32) for _ in range(2)) for _ in range(2))
    np.testing.assert_allclose(enc(x, lengths, training=True, zoneout_masks=masks, masked=True),
                               enc(x, lengths, training=True, zoneout_masks=masks), atol=1e-6, rtol=0)


def test_masked_formulation_converts_to_litert_builtins():
    """A model calling the layer with ``masked=True`` converts with TFLite builtins only (no flex op) and runs in the
    ``ai_edge_litert`` interpreter with the outputs of the default loop, at two sizes (one interpreter, resized)."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    enc = _encoder(seed=10)
    fn = tf.function(lambda x, n: enc(x, n, masked=True),
                     input_signature=[tf.TensorSpec([None, None, 4], tf.float32, name="x"),
                                      tf.TensorSpec([None], tf.int32, name="n")])
    blob = convert_builtins(fn, enc)  # raises on a custom (flex) op
    assert not custom_ops(blob) and b"Flex" not in blob
    runner = litert.Interpreter(model_content=blob).get_signature_runner()
    g = np.random.default_rng(11)
    for x, n in ((g.standard_normal((3, 7, 4)), [7, 2, 5]), (g.standard_normal((1, 4, 4)), [4])):
        x, n = x.astype(np.float32), np.array(n, np.int32)
        got = list(runner(x=x, n=n).values())[0]
        np.testing.assert_allclose(got, enc(x, n), atol=1e-6, rtol=0)
