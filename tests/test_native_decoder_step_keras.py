"""The native decoder step (``speechblocks/native``) through Keras (``tf_layers/_native.py``): an eager
``Tacotron2Decoder`` call and ``Tacotron2.synthesize`` at batch 1.

Each test runs the same call through the native step and through the graph loop (``SPEECHBLOCKS_NATIVE=0``) with
the pre-net's seed generator at the same state, and, where the weights make the attention loop sensitive, through a
float64 twin of the decoder as the reference.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from speechblocks import native as core
from speechblocks import resolve_hparams
from tests.helpers.native_keras import count_native_calls, sensitive_decoders
from tf_layers import _native

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native step cannot be built (the graph loop runs)")



@pytest.fixture
def counted(monkeypatch):
    """Counts the calls that ran in the native step."""
    return count_native_calls(monkeypatch)


def _decoders(stop_bias: float = -3.0, seed: int = 0, **overrides):
    """A float32 decoder with weights scaled up (an attention that moves, stops that vary) and its float64 twin."""
    return sensitive_decoders(stop_bias, seed, 1, [1, 2], **overrides)


def _run(monkeypatch, decoder, state, env, *args, **kwargs):
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
    decoder.prenet.seed_generator.state.assign(state)
    out = decoder(*args, **kwargs)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return [np.asarray(x, np.float64) for x in out]


@pytest.mark.parametrize("variant", [
    dict(), dict(outputs_per_step=3), dict(smoothing=True), dict(cumulative_weights=False),
    dict(zoneout=0.0, drop_rate=0.0), dict(attention_kernel=4), dict(decoder_layers=3, prenet_layers=(9,)),
    dict(stop_at_any=False, outputs_per_step=2),
])
@pytest.mark.parametrize("lengths", [None, [7]])
def test_native_equals_the_graph_loop(monkeypatch, counted, variant, lengths):
    dec, d64, memory = _decoders(**variant)
    counted.clear()  # the build's call
    lengths = None if lengths is None else tf.constant(lengths)
    state = dec.prenet.seed_generator.state.numpy()
    native = _run(monkeypatch, dec, state, "1", memory, lengths)
    graph = _run(monkeypatch, dec, state, "0", memory, lengths)
    reference = _run(monkeypatch, d64, state, "0", tf.cast(memory, tf.float64), lengths)
    assert len(counted) == 1
    # the float32 graph loop on a memory one rounding away, twice: with these weights (x3) a trajectory amplifies
    # float32 rounding, and one graph run's error is one draw of that noise (r=3 here: native 1.1e-4 against the
    # graph's 2.6e-5 while the graph itself lands further away for a memory it cannot tell apart)
    neighbours = [_run(monkeypatch, dec, state, "0", memory * (1 + sign * 2.0 ** -23), lengths) for sign in (1, -1)]
    for i, (a, b, ref) in enumerate(zip(native, graph, reference)):
        assert a.shape == b.shape == ref.shape  # the same stop step
        scale = max(1.0, float(np.abs(ref).max()))
        err_native = float(np.abs(a - ref).max())
        err_graph = max(float(np.abs(g - ref).max()) for g in [b] + [n[i] for n in neighbours if n[i].shape == b.shape])
        # as close to float64 as the float32 graph loop is (the same dropout draws: else the errors would be O(1))
        assert err_native <= 4 * err_graph + 2e-6 * scale, (err_native, err_graph)


def test_the_stop_step_and_injected_masks(monkeypatch, counted):
    steps = set()
    for seed in range(8):
        dec, _, memory = _decoders(stop_bias=-1.0, seed=seed, max_iters=60)
        counted.clear()
        state = dec.prenet.seed_generator.state.numpy()
        a = _run(monkeypatch, dec, state, "1", memory)
        b = _run(monkeypatch, dec, state, "0", memory)
        assert a[0].shape == b[0].shape
        np.testing.assert_allclose(a[1], b[1], atol=2e-5)
        steps.add(a[0].shape[1])
        assert len(counted) == 1
        if len(steps) >= 3 and min(steps) < 60:  # seeds 0-4 (stops at steps 60/60/1/1/16): the next 3 add nothing
            break
    assert len(steps) >= 3 and min(steps) < 60, steps
    counted.clear()
    masks = {"prenet": [(np.random.default_rng(3).random((1, 60, n)) > 0.5).astype(np.float32) for n in (12, 10)]}
    a = _run(monkeypatch, dec, state, "1", memory, max_iters=60, noise_masks=masks)
    b = _run(monkeypatch, dec, state, "0", memory, max_iters=60, noise_masks=masks)
    assert len(counted) == 1
    for x, y in zip(a, b):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, atol=2e-5 * max(1.0, float(np.abs(y).max())))
    short = [tf.constant(m[:, :5]) for m in masks["prenet"]]  # fewer steps than max_iters: the graph loop's rules
    assert _native.free_running(dec, memory, None, 10, short) is None
    assert _native.free_running(dec, memory, None, 5, short) is not None


def test_what_the_native_step_does_not_take_runs_the_graph_loop(counted):
    dec, _, memory = _decoders(stop_bias=-50.0, max_iters=4)
    counted.clear()
    dec(memory, mel_targets=tf.zeros((1, 4, 6)))  # teacher-forced
    masks = [(np.ones((1, 4, 20), np.float32), np.ones((1, 4, 20), np.float32))] * 2
    dec(memory, noise_masks={"decoder_LSTM": masks})  # injected zoneout masks

    @tf.function
    def traced(m):
        return dec(m)

    traced(memory)  # inside a caller's graph
    assert counted == []
    dec(memory)
    assert len(counted) == 1


def test_synthesize_at_batch_one_rtvc_sizes(monkeypatch, counted):
    tf.keras.utils.set_random_seed(0)
    model = tf_layers.Tacotron2(resolve_hparams("rtvc"))
    ids = np.random.default_rng(0).integers(1, 60, (1, 37)).astype(np.int32)
    speaker = np.random.default_rng(1).normal(size=(1, 256)).astype(np.float32)
    model.synthesize(ids, speaker_embeddings=speaker, max_iters=1)
    model.decoder.stop_projection.dense.bias.assign(np.full(model.decoder.stop_projection.dense.bias.shape, -1e3,
                                                            np.float32))
    counted.clear()
    state = model.decoder.prenet.seed_generator.state.numpy()
    outs, after = {}, {}
    for env in ("1", "0"):
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        model.decoder.prenet.seed_generator.state.assign(state)
        outs[env] = model.synthesize(ids, np.array([37]), speaker, max_iters=25)
        after[env] = model.decoder.prenet.seed_generator.state.numpy()
    assert len(counted) == 1
    assert set(outs["1"]) == set(outs["0"])
    for key, value in outs["0"].items():
        assert outs["1"][key].shape == value.shape, key
        np.testing.assert_allclose(outs["1"][key], value, atol=2e-5 * max(1.0, float(np.abs(value).max())))
    np.testing.assert_array_equal(after["1"], after["0"])  # the seed generator advanced as in the graph
    assert not np.array_equal(after["1"], state)


def test_the_dropout_draws_are_the_graph_loops():
    seed = tf.constant([5, 9], tf.int32)
    sizes = (12, 10)
    for rows in (1, 3):
        chunk = _native._uniform_chunk(seed, tf.constant(3, tf.int32), tf.constant(rows), sizes, 2).numpy()
        for c in range(2):
            step_seed = seed + tf.stack([0, (3 + c) * 2 + 1])
            expect = np.concatenate([tf.random.stateless_uniform((rows, n), seed=step_seed + [0, i]).numpy()
                                     for i, n in enumerate(sizes)], 1)
            np.testing.assert_array_equal(chunk[c], expect)
    assert core.library() is not None


def test_synthesize_batch_of_one_sentence(monkeypatch, counted):
    tf.keras.utils.set_random_seed(0)
    hp = dict(encoder_lstm_units=16, decoder_lstm_units=32, prenet_layers=[16, 16], attention_dim=8,
              postnet_channels=8, enc_conv_channels=16, embedding_dim=16, speaker_embedding_size=4, max_iters=30,
              tacotron_dropout_rate=0.0)
    model = tf_layers.Tacotron2(resolve_hparams("rtvc", **hp))
    sentence = np.random.default_rng(0).integers(1, 60, 23)
    speaker = np.random.default_rng(1).normal(size=(4,)).astype(np.float32)
    model.synthesize_batch([sentence], speaker)
    model.decoder.stop_projection.dense.bias.assign(np.full(model.decoder.stop_projection.dense.bias.shape, -3.0,
                                                            np.float32))
    counted.clear()
    (native,) = model.synthesize_batch([sentence], speaker)
    assert len(counted) == 1
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    (graph,) = model.synthesize_batch([sentence], speaker)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    assert set(native) == set(graph) and native["stopped"] == graph["stopped"]
    for key in ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments"):
        assert native[key].shape == graph[key].shape, key
        np.testing.assert_allclose(native[key], graph[key], atol=2e-5 * max(1.0, float(np.abs(graph[key]).max())))
    model.synthesize_batch([sentence, sentence[:9]], speaker)  # two sentences: the batched native step
    assert len(counted) == 2
