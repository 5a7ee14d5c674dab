"""The native batched decoder step (``speechblocks/native/decoder_batch.c``) through Keras (``tf_layers/_native.py``):
an eager ``Tacotron2Decoder`` call at batch > 1 (the original stop rule), the per-entry stop of
``Tacotron2.synthesize_batch`` and ``Tacotron2.synthesize`` of a batch.

Each test runs the same call through the native step and through the graph loop (``SPEECHBLOCKS_NATIVE=0``) with the
pre-net's seed generator at the same state (the same dropout draws, whose shape follows the entries still running),
and through a float64 twin of the graph loop as the reference.
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

LENGTHS = [9, 4, 7, 1, 9]


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls that ran in the native step."""
    return count_native_calls(monkeypatch)


def _decoders(stop_bias: float = -1.0, seed: int = 0, batch: int = 5, **overrides):
    """A float32 decoder with weights scaled up (stops that vary between the entries), its float64 twin and a batch
    of memory."""
    return sensitive_decoders(stop_bias, seed, batch, [seed, 2], **overrides)


def _decode(monkeypatch, decoder, state, env, memory, lengths, stop_each, max_iters=40, masks=None):
    """The free-running loop of one call: stop_each passed explicitly to the graph loop (as the Keras model's
    synthesize_batch passes it) and to the native adapter."""
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
    decoder.prenet.seed_generator.state.assign(state)
    if env == "1":
        out = _native.free_running(decoder, memory, lengths, max_iters, masks, stop_each=stop_each)
        assert out is not None
    else:
        out = decoder._decode(tf.cast(memory, decoder.compute_dtype), lengths, None, tf.constant(max_iters), masks,
                              None, stop_each=stop_each)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return [np.asarray(x, np.float64) for x in out]


def _stop_steps(stop: np.ndarray, stop_at_any: bool) -> list:
    fired = np.rint(stop) == 1.0
    rule = fired.any(-1) if stop_at_any else fired.all(-1)
    return [int(np.argmax(row)) + 1 if row.any() else None for row in rule]


def _assert_as_accurate(native, graph, reference, rel=2e-6):
    """As close to the float64 loop as the float32 graph loop is (4x its error + rel of the scale)."""
    assert native.shape == graph.shape == reference.shape
    scale = max(1.0, float(np.abs(reference).max()))
    err_native, err_graph = float(np.abs(native - reference).max()), float(np.abs(graph - reference).max())
    assert err_native <= 4 * err_graph + rel * scale, (err_native, err_graph)


VARIANTS = [
    dict(), dict(outputs_per_step=3), dict(smoothing=True), dict(cumulative_weights=False),
    dict(zoneout=0.0, drop_rate=0.0), dict(attention_kernel=4), dict(decoder_layers=3, prenet_layers=(9,)),
    dict(stop_at_any=False, outputs_per_step=2), dict(mask_encoder=False),
]


# every variant with the per-entry stop (synthesize_batch); the whole-batch stop (the eager call, stop_each=False)
# with the variants that change the stop itself -- the rest of the step is the same code either way
@pytest.mark.parametrize("variant,stop_each", [(v, True) for v in VARIANTS] + [
    (v, False) for v in VARIANTS if not v or "stop_at_any" in v or "outputs_per_step" in v])
def test_batched_native_equals_the_graph_loop(monkeypatch, variant, stop_each):
    dec, d64, memory = _decoders(**variant)
    lengths = tf.constant(LENGTHS)
    state = dec.prenet.seed_generator.state.numpy()
    native = _decode(monkeypatch, dec, state, "1", memory, lengths, stop_each)
    graph = _decode(monkeypatch, dec, state, "0", memory, lengths, stop_each)
    reference = _decode(monkeypatch, d64, state, "0", tf.cast(memory, tf.float64), lengths, stop_each)
    stop_at_any = dec.stop_at_any
    assert _stop_steps(native[1], stop_at_any) == _stop_steps(graph[1], stop_at_any)
    for a, b, ref in zip(native, graph, reference):
        _assert_as_accurate(a, b, ref)
    if stop_each:  # after its stop an entry is out of the loop: zeros, as the graph loop scatters
        for k, s in enumerate(_stop_steps(native[1], stop_at_any)):
            if s is not None:
                assert not native[0][k, s:].any() and not native[2][k, :, s:].any()


def test_entries_stop_at_their_own_steps_and_the_draws_follow_the_running_batch(monkeypatch):
    """Seeds where the entries stop at several different steps, the pre-net dropout on: the draws of a step are the
    graph loop's for the entries still running (their shape shrinks as entries leave)."""
    distinct = 0
    for seed in range(6):
        if distinct >= 3 and seed >= 2:  # enough: entries left at 3 different steps (seeds 0-1 do, measured)
            break
        dec, _, memory = _decoders(stop_bias=-1.0, seed=seed, batch=6, max_iters=50)
        lengths = tf.constant([9, 3, 6, 9, 2, 8])
        state = dec.prenet.seed_generator.state.numpy()
        native = _decode(monkeypatch, dec, state, "1", memory, lengths, True, 50)
        graph = _decode(monkeypatch, dec, state, "0", memory, lengths, True, 50)
        steps = _stop_steps(graph[1], dec.stop_at_any)
        assert _stop_steps(native[1], dec.stop_at_any) == steps
        distinct = max(distinct, len(set(steps)))
        for a, b in zip(native, graph):
            np.testing.assert_allclose(a, b, atol=2e-5 * max(1.0, float(np.abs(b).max())))
    assert distinct >= 3  # the test exercised entries leaving at different steps


def test_injected_prenet_masks_at_batch(monkeypatch):
    dec, _, memory = _decoders(batch=3)
    rng = np.random.default_rng(3)
    masks = [tf.constant((rng.random((3, 40, n)) > 0.5).astype(np.float32)) for n in (12, 10)]
    lengths = tf.constant([9, 5, 2])
    state = dec.prenet.seed_generator.state.numpy()
    for stop_each in (True, False):
        native = _decode(monkeypatch, dec, state, "1", memory[:3], lengths, stop_each, masks=masks)
        graph = _decode(monkeypatch, dec, state, "0", memory[:3], lengths, stop_each, masks=masks)
        for a, b in zip(native, graph):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, atol=2e-5 * max(1.0, float(np.abs(b).max())))


def test_the_eager_decoder_call_at_batch_runs_the_batched_step(monkeypatch, counted):
    dec, d64, memory = _decoders()
    counted.clear()
    state = dec.prenet.seed_generator.state.numpy()
    outs = {}
    for env in ("1", "0"):
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        dec.prenet.seed_generator.state.assign(state)
        outs[env] = [np.asarray(x) for x in dec(memory, tf.constant(LENGTHS))]
    assert len(counted) == 1
    for a, b in zip(outs["1"], outs["0"]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=2e-5 * max(1.0, float(np.abs(b).max())))


def test_synthesize_batch_and_synthesize_of_a_batch(monkeypatch, counted):
    tf.keras.utils.set_random_seed(0)
    hp = dict(encoder_lstm_units=16, decoder_lstm_units=32, prenet_layers=[16, 16], attention_dim=8,
              postnet_channels=8, enc_conv_channels=16, embedding_dim=16, speaker_embedding_size=4, max_iters=30)
    model = tf_layers.Tacotron2(resolve_hparams("rtvc", **hp))
    rng = np.random.default_rng(0)
    sentences = [rng.integers(1, 60, n) for n in (23, 9, 17, 4)]
    speaker = rng.normal(size=(4, 4)).astype(np.float32)
    model.synthesize_batch(sentences[:2], speaker[:2])
    bias = model.decoder.stop_projection.dense.bias
    bias.assign(np.full(bias.shape, -2.0, np.float32))
    state = model.decoder.prenet.seed_generator.state.numpy()
    results = {}
    for env in ("1", "0"):
        counted.clear()
        monkeypatch.setenv("SPEECHBLOCKS_NATIVE", env)
        model.decoder.prenet.seed_generator.state.assign(state)
        results[env] = (model.synthesize_batch(sentences, speaker),
                        model.synthesize(*_padded(sentences), speaker, max_iters=12))
        assert len(counted) == (2 if env == "1" else 0)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    for native, graph in zip(results["1"][0], results["0"][0]):
        assert native["stopped"] == graph["stopped"]
        for key in ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments"):
            assert native[key].shape == graph[key].shape, key
            np.testing.assert_allclose(native[key], graph[key], atol=2e-5 * max(1.0, float(np.abs(graph[key]).max())))
    for key, value in results["0"][1].items():
        assert results["1"][1][key].shape == value.shape, key
        np.testing.assert_allclose(results["1"][1][key], value, atol=2e-5 * max(1.0, float(np.abs(value).max())))


def _padded(sentences):
    ids = np.zeros((len(sentences), max(map(len, sentences))), np.int32)
    for k, s in enumerate(sentences):
        ids[k, :len(s)] = s
    return ids, np.array([len(s) for s in sentences], np.int32)


def test_panels_pack_the_kernel_and_pad_with_zeros():
    lib = core.library()
    tile = int(lib.sb_tile_columns())
    assert tile in (8, 16, 32, 64)
    rng = np.random.default_rng(0)
    for n, cols in [(5, 3), (7, tile), (3, 2 * tile + 5)]:
        w = rng.normal(size=(n, cols)).astype(np.float32)
        panels = -(-cols // tile)
        for rows, source in ((0, w), (1, np.ascontiguousarray(w.T))):
            out = np.full((panels, n, tile), np.nan, np.float32)
            lib.sb_pack_panels(source.ctypes.data_as(core._F), n, cols, rows, out.ctypes.data_as(core._F))
            padded = np.zeros((n, panels * tile), np.float32)
            padded[:, :cols] = w
            np.testing.assert_array_equal(out, padded.reshape(n, panels, tile).transpose(1, 0, 2))


def test_nan_in_one_entry_stays_in_that_entry(monkeypatch):
    dec, _, memory = _decoders(batch=3, drop_rate=0.0)
    memory = memory.numpy()
    memory[1, 2, 3] = np.nan
    lengths = tf.constant([9, 9, 5])
    state = dec.prenet.seed_generator.state.numpy()
    native = _decode(monkeypatch, dec, state, "1", tf.constant(memory), lengths, True, 6)
    graph = _decode(monkeypatch, dec, state, "0", tf.constant(memory), lengths, True, 6)
    for a, b in zip(native, graph):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        assert np.isnan(a[1]).all() and not np.isnan(a[[0, 2]]).any()
        np.testing.assert_allclose(a[[0, 2]], b[[0, 2]], atol=2e-5 * max(1.0, float(np.abs(b[[0, 2]]).max())))
