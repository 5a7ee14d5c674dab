"""Non-finite inputs, Keras: every block's documented policy (class docstring), batch isolation of a NaN,
lengths that keep padding NaN out (as TF1's ``dynamic_rnn``), and the masked losses' selection (value and
gradients against a float64 numpy reference on the zeroed padding; extreme finite logits hand-derived).

The exact NaN/inf positions against the TF1 graph are proven by ``parity_tests/cases/nonfinite_inputs.py``.
"""
import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from tests.helpers import nonfinite as nf

G = np.random.default_rng(7)


def _x(*shape):
    return G.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", nf.TF1_BLOCKS + nf.ATTENTION_BLOCKS + nf.TORCH_NATIVE + nf.LOSSES)
def test_class_docstring_states_the_nonfinite_policy(name):
    assert nf.states_policy(getattr(tf_layers, name))


def _cell_run(cell, n_states):
    def run(x):
        states, outs = [np.zeros((x.shape[0], cell.units if hasattr(cell, "units") else cell.num_units), np.float32)
                        for _ in range(n_states)], []
        for t in range(x.shape[1]):
            o, states = cell(x[:, t], states)
            outs.append(np.asarray(o))
        return [np.stack(outs, 1)] + [np.asarray(s) for s in states]
    return run


def _attention_run(att):
    def run(memory):
        lengths = np.array([5, 5, 4], np.int32)
        values, keys = att.process_memory(memory, lengths)
        state, out = tf.zeros(memory.shape[:2]), []
        for s in range(3):
            context, a, state = att.step(tf.constant(np.full((3, 4), 0.1 * s, np.float32)), state, values, keys,
                                         lengths)
            out += [np.asarray(context), np.asarray(a)]
        return out
    return run


def _attention():
    att = tf_layers.LocationSensitiveAttention(4, 2, 3)
    att.build_from_sizes(4, 3)
    return att


def _blocks():
    """name -> (block factory, input shape, run(block) -> x -> list of outputs)."""
    plain = lambda b: lambda x: [np.asarray(b(x, training=False))]  # noqa: E731
    return {
        "Conv1DBlock": (lambda: tf_layers.Conv1DBlock(3, 4, "relu", 0.5), (3, 6, 3), plain),
        "EncoderConvolutions": (lambda: tf_layers.EncoderConvolutions(3, 4, 2), (3, 6, 3), plain),
        "Postnet": (lambda: tf_layers.Postnet(3, 4, 5), (3, 6, 3), plain),
        "Prenet": (lambda: tf_layers.Prenet((4, 3), seed=1), (3, 6, 3),
                   lambda b: lambda x: [np.asarray(b(x, training=False,
                                                     dropout_masks=[np.ones((3, 6, 4), np.float32),
                                                                    np.ones((3, 6, 3), np.float32)]))]),
        "FrameProjection": (lambda: tf_layers.FrameProjection(3), (3, 6, 3), plain),
        "StopProjection": (lambda: tf_layers.StopProjection(2), (3, 6, 3), plain),
        "HighwayNet": (lambda: tf_layers.HighwayNet(3), (3, 6, 3), plain),
        "EncoderRNN": (lambda: tf_layers.EncoderRNN(3), (3, 6, 3),
                       lambda b: lambda x: [np.asarray(b(x, np.array([6, 6, 5], np.int32), training=False))]),
        "CBHG": (lambda: tf_layers.CBHG(2, 4, 2, [4, 3], 3, 1, 4, 3), (3, 6, 3),
                 lambda b: lambda x: [np.asarray(b(x, np.array([6, 6, 5], np.int32), training=False))]),
        "DecoderRNN": (lambda: tf_layers.DecoderRNN(2, 3), (3, 6, 3),
                       lambda b: lambda x: [np.asarray(b(x, training=False)[0])]),
        "ZoneoutLSTMCell": (lambda: tf_layers.ZoneoutLSTMCell(3, 0.1, 0.1), (3, 6, 3), lambda b: _cell_run(b, 2)),
        "TF1GRUCell": (lambda: tf_layers.TF1GRUCell(3), (3, 6, 3), lambda b: _cell_run(b, 1)),
        "LocationSensitiveAttention": (_attention, (3, 5, 3), _attention_run),
        "SpeakerEncoder": (lambda: tf_layers.SpeakerEncoder(3, 4, 1, 3), (3, 6, 3),
                           lambda b: lambda x: [np.asarray(b(x))]),
        "TAC": (lambda: tf_layers.TAC(3, hidden_dim=4), (3, 4, 2, 3, 2),
                lambda b: lambda x: [np.asarray(b(np.moveaxis(x, 1, 3), np.array([2, 2, 1], np.int32)))]),
        "GumbelVectorQuantizer": (lambda: tf_layers.GumbelVectorQuantizer(3, 4, groups=1, vq_dim=2), (3, 6, 3),
                                  lambda b: lambda x: [np.asarray(b(x, training=False)[0])]),
    }


@pytest.mark.parametrize("name", sorted(_blocks()))
def test_a_nan_stays_in_its_example(name):
    """A NaN (and +-inf) in examples 0 and 1 leave example 2 exactly as in a clean batch; example 0 is NaN."""
    make, shape, run = _blocks()[name]
    block = make()
    x = _x(*shape)
    clean = run(block)(x)
    nf.assert_isolated(clean, run(block)(nf.poisoned(x)), expect_nan=name != "GumbelVectorQuantizer")


@pytest.mark.parametrize("name", ["EncoderRNN", "CBHG"])
def test_nonfinite_padding_stays_out_of_the_lengths(name):
    """TF1's ``bidirectional_dynamic_rnn(sequence_length=...)`` selects past the length: NaN/inf in padding frames
    beyond every conv window change nothing (outputs past a length are 0)."""
    block = tf_layers.EncoderRNN(3) if name == "EncoderRNN" else tf_layers.CBHG(2, 4, 2, [4, 3], 3, 1, 4, 3)
    x = _x(2, 10, 3)
    lengths = np.array([10, 3], np.int32)
    dirty = x.copy()
    dirty[1, 8:] = [[np.nan, np.inf, -np.inf]] * 2
    clean = np.asarray(block(x, lengths, training=False))
    got = np.asarray(block(dirty, lengths, training=False))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, clean, rtol=1e-6, atol=1e-7)
    assert not got[1, 3:].any()


_FUNCTIONS = {"MaskedMSE": tf_layers.masked_mse, "MaskedSigmoidCrossEntropy": tf_layers.masked_sigmoid_cross_entropy,
              "MaskedLinearLoss": tf_layers.masked_linear_loss}


def _value_and_grads(loss, targets, outputs, lengths, **kw):
    t, o = tf.constant(targets), tf.constant(outputs)
    with tf.GradientTape() as tape:
        tape.watch([t, o])
        value = _FUNCTIONS[loss](t, o, lengths, outputs_per_step=2, **kw)
    gt, go = tape.gradient(value, [t, o])
    return float(value), np.asarray(gt), np.asarray(go)


def _class_value(loss, targets, outputs, lengths, **kw):
    return getattr(tf_layers, loss)(outputs_per_step=2, **kw)((targets, lengths), outputs)


@pytest.mark.parametrize("loss", nf.LOSSES)
def test_masked_loss_ignores_nonfinite_padding(loss):
    nf.check_selection(loss, _value_and_grads, _class_value)


@pytest.mark.parametrize("count,divisor", [("mask", 4), ("nonzero_loss", 2)])
def test_cross_entropy_extreme_logits_hand_derived(count, divisor):
    """Logits +-1e4: per element 0, 1e4, pos_weight * 1e4, 0; d/dx = 0, 1, -pos_weight, 0 (over the count)."""
    z, x = tf.constant(nf.EXTREME_TARGETS), tf.constant(nf.EXTREME_LOGITS)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = tf_layers.masked_sigmoid_cross_entropy(z, x, [4], outputs_per_step=1, pos_weight=2.0, count=count)
    assert float(value) == pytest.approx(nf.EXTREME_PER_ELEMENT.sum() / divisor, rel=1e-6)
    np.testing.assert_allclose(np.asarray(tape.gradient(value, x)), [[0.0, 1.0 / divisor, -2.0 / divisor, 0.0]],
                               atol=1e-7)


def test_large_finite_values_and_all_masked_batches():
    t = np.zeros((1, 2, 3), np.float32)
    o = np.full((1, 2, 3), 1e18, np.float32)  # squared error 1e36 < float32 max: finite
    assert float(tf_layers.masked_mse(t, o, [2], outputs_per_step=2)) == pytest.approx(1e36, rel=1e-6)
    assert float(tf_layers.masked_linear_loss(t, o, [2], outputs_per_step=2, sample_rate=8000)) == pytest.approx(
        0.5e18 + 0.5e18 * 1 / 3, rel=1e-6)  # n = int(2000 / 4000 * 3) = 1 of 3 bins
    # all-masked (lengths 0) with NaN everywhere: 0.0, not NaN, and zero gradients
    nan = tf.constant(np.full((2, 2, 3), np.nan, np.float32))
    for fn, kw, a in ((tf_layers.masked_mse, {}, nan), (tf_layers.masked_linear_loss, {"sample_rate": 8000}, nan),
                      (tf_layers.masked_sigmoid_cross_entropy, {}, nan[:, :, 0])):
        with tf.GradientTape() as tape:
            tape.watch(a)
            value = fn(a, a, [0, 0], outputs_per_step=2, mask=tf.zeros(a.shape[:2]), **kw)
        assert float(value) == 0.0
        assert not np.asarray(tape.gradient(value, a)).any()


def test_tacotron2_loss_masked_terms_ignore_nonfinite_padding():
    """``tacotron2_loss`` with ``mask_decoder``: NaN/inf in the padding of targets and outputs give the loss of the
    zeroed padding, with finite gradients w.r.t. the outputs (0 on the padding)."""
    model = tf_layers.Tacotron2("rtvc", n_symbols=8, **nf.LOSS_MODEL)
    model(np.array([[1, 2, 3], [4, 5, 0]], np.int32), np.array([3, 2], np.int32),
          speaker_embeddings=np.zeros((2, 2), np.float32), mel_targets=np.zeros((2, 4, 3), np.float32))  # builds
    clean, dirty, pads = nf.loss_batch()
    values = {}
    for name, batch in (("clean", clean), ("dirty", dirty)):
        outs = {k: tf.constant(batch[k]) for k in ("decoder_outputs", "mel_outputs", "stop_token_prediction")}
        with tf.GradientTape() as tape:
            tape.watch(list(outs.values()))
            losses = tf_layers.tacotron2_loss(model, outs, batch["mel_targets"], batch["stop_token_targets"],
                                              batch["lengths"])
        grads = tape.gradient(losses["loss"], list(outs.values()))
        values[name] = {k: float(v) for k, v in losses.items()}
        for g, k in zip(grads, outs):
            assert np.isfinite(g).all() and not np.asarray(g)[pads[k]].any()
    assert all(np.isfinite(v) for v in values["dirty"].values())
    assert values["dirty"] == pytest.approx(values["clean"], rel=1e-6)
