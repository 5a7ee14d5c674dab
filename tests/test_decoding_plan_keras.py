"""``tf_layers.decoding_plan.plan_decoding``: the one place that decides which loop runs a Keras decoder call, and the
calls that take its plan (the decoder's eager call, ``Tacotron2(...)`` eagerly, ``synthesize``)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from speechblocks import native as core
from speechblocks import resolve_hparams
from tests.helpers.native_keras import SMALL, count_native_calls
from tf_layers.decoding_plan import plan_decoding
from tf_layers.tacotron2_decoder import Tacotron2Decoder

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: the native step cannot be built (the graph loop runs)")


def _decoder(dtype="float32"):
    dec = Tacotron2Decoder(**SMALL, dtype=dtype)
    dec.build_from_memory_size(11)
    return dec


@needs_cc
def test_the_plan_of_each_call(monkeypatch):
    dec = _decoder()
    one, three = tf.zeros((1, 9, 11)), tf.zeros((3, 9, 11))
    assert (plan_decoding(dec, one).loop, plan_decoding(dec, one).reason) == ("native-step", "")
    assert plan_decoding(dec, three).loop == "native-batch"
    report = print
    plan = plan_decoding(dec, three, progress=report, stop_each=True)
    assert plan.native and plan.progress is report and plan.stop_each
    assert plan_decoding(dec, one, mel_targets=tf.zeros((1, 4, 6))).loop == "teacher-forced"
    assert plan_decoding(dec, one, mel_targets=tf.zeros((1, 4, 6)), training=True).loop == "teacher-forced"
    assert plan_decoding(dec, one, training=True).loop == "python"  # free running in training: op by op
    assert plan_decoding(dec, one, training=True, tracing=True).loop == "graph"
    masks = {"decoder_LSTM": [(tf.ones((1, 4, 20)),) * 2] * 2}
    assert str(plan_decoding(dec, one, noise_masks=masks)) == "decoder loop: graph (injected zoneout masks)"
    short = {"prenet": [tf.ones((1, 5, 12)), tf.ones((1, 5, 10))]}
    assert plan_decoding(dec, one, noise_masks=short, max_iters=5).native
    assert plan_decoding(dec, one, noise_masks=short, max_iters=6).reason == "pre-net masks shorter than max_iters"
    big = core.batch_loop.MAX_BATCH + 1
    assert plan_decoding(dec, tf.zeros((big, 1, 11))).reason == f"batch {big} > MAX_BATCH={big - 1}"
    assert plan_decoding(_decoder("float64"), tf.zeros((1, 9, 11), tf.float64)).reason == "float64 compute dtype"
    seen = []

    @tf.function
    def traced(m):
        seen.append(plan_decoding(dec, m))
        return m

    traced(one)
    assert (seen[0].loop, seen[0].reason) == ("graph", "inside a tf.function trace")
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    plan = plan_decoding(dec, one)
    assert str(plan) == "decoder loop: graph (the native library is off: SPEECHBLOCKS_NATIVE=0)"
    with pytest.raises(ValueError, match="`progress`"):
        plan_decoding(dec, one, progress=3)


def _model():
    tf.keras.utils.set_random_seed(0)
    hp = dict(encoder_lstm_units=16, decoder_lstm_units=32, prenet_layers=[16, 16], attention_dim=8,
              postnet_channels=8, enc_conv_channels=16, embedding_dim=16, speaker_embedding_size=4, max_iters=30,
              tacotron_dropout_rate=0.0)
    model = tf_layers.Tacotron2(resolve_hparams("rtvc", **hp))
    bias = model.decoder.stop_projection.dense.bias
    bias.assign(np.full(bias.shape, -3.0, np.float32))  # stops that vary with the numbers, not at step 1
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 60, (2, 17)).astype(np.int32)
    return model, ids, np.array([17, 11], np.int32), rng.normal(size=(2, 4)).astype(np.float32)


def _close(a, b, key):
    assert a.shape == b.shape, key
    np.testing.assert_allclose(a, b, atol=2e-5 * max(1.0, float(np.abs(b).max())), err_msg=key)


@needs_cc
def test_the_eager_call_takes_the_plan_of_synthesize(monkeypatch):
    """``model(...)`` eagerly runs what ``synthesize`` runs (the native step between the cached encoder and post-net:
    the same numbers); ``SPEECHBLOCKS_NATIVE=0`` and a ``tf.function`` of the call run the graph loop, within float32
    rounding of it."""
    model, ids, lengths, spk = _model()
    # one trace for both batch sizes (a trace of the whole model costs ~5 s of CPU): unknown batch and time
    traced = tf.function(lambda i, n, s: model(i, n, s, max_iters=20),
                         input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                                          tf.TensorSpec([None, spk.shape[1]], tf.float32)])
    for rows in (slice(0, 1), slice(0, 2)):  # batch 1 (native-step) and 2 (native-batch)
        args = (ids[rows], lengths[rows], spk[rows])
        counted = count_native_calls(monkeypatch)
        called = {k: np.asarray(v) for k, v in model(*args, max_iters=20).items()}
        synthesized = model.synthesize(*args, max_iters=20)
        assert len(counted) == 2
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
        graph = {k: np.asarray(v) for k, v in model(*args, max_iters=20).items()}
        monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
        traced_out = traced(*args)
        assert len(counted) == 2 and set(called) == set(synthesized) == set(graph)
        for key, value in synthesized.items():
            np.testing.assert_array_equal(called[key], value, err_msg=key)  # the same loop, the same inputs
            _close(called[key], graph[key], key)
            _close(np.asarray(traced_out[key]), graph[key], key)


@needs_cc
def test_progress_is_reported_alike_by_the_native_and_graph_loops(monkeypatch):
    model, ids, lengths, spk = _model()
    reports = {}
    for env in ("1", "0"):
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        calls = []
        out = model.synthesize(ids[:1], lengths[:1], spk[:1], max_iters=12,
                               progress=lambda step, p, calls=calls: calls.append((step, p)))
        reports[env] = np.array(calls)
        steps = out["alignments"].shape[-1]
        assert [int(s) for s in reports[env][:, 0]] == list(range(1, steps + 1))
        largest = out["stop_token_prediction"].reshape(steps, -1).max(1)
        np.testing.assert_allclose(reports[env][:, 1], largest, rtol=1e-6)  # the step's largest stop probability
    assert reports["1"].shape == reports["0"].shape
    np.testing.assert_allclose(reports["1"], reports["0"], atol=2e-5)


def test_the_keras_stop_rule_equals_the_numpy_one_at_ties():
    """``tf_layers.tacotron2_stop_rule`` against :mod:`speechblocks.stop_rule` (``np.rint``): probabilities on both
    sides of 0.5 and exactly 0.5 (half to even: it does not stop), both rules, in eager and in a graph."""
    from speechblocks import stop_rule as numpy_rule
    from tf_layers.tacotron2_stop_rule import batch_fired, entries_fired

    rng = np.random.default_rng(3)
    graph_batch = tf.function(batch_fired, reduce_retracing=True)
    for _ in range(40):
        probs = rng.choice(np.array([0.2, 0.5, 0.5000001, 0.7, 1.0], np.float32), size=(3, 2))
        for stop_at_any in (True, False):
            want_entries = numpy_rule.entries_fired(probs, stop_at_any)
            want_batch = numpy_rule.batch_fired(probs, stop_at_any)
            assert np.array_equal(entries_fired(tf.constant(probs), stop_at_any).numpy(), want_entries)
            assert bool(batch_fired(tf.constant(probs), stop_at_any)) == want_batch
            assert bool(graph_batch(tf.constant(probs), stop_at_any)) == want_batch
    assert not bool(batch_fired(tf.constant([[0.5, 0.5]]), True))
    tie = tf.constant([[0.5, 0.51]])
    assert bool(batch_fired(tie, True)) and not bool(batch_fired(tie, False))
