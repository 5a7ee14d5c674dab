"""The native Tacotron-1 decoder loop (``speechblocks/native/tacotron1_step.c``) through Keras
(``tf_layers/_native.py``): an eager ``Tacotron1Decoder`` inference call's whole free-running loop in one C call.

Every comparison runs the same call twice, through the native loop and through the decoder's own ``tf.while_loop``
(``SPEECHBLOCKS_NATIVE=0``), for the three layouts at batch 1 and 2, at small sizes and at sizes past a vector's width:
frames and alignments within float32 rounding, the same number of steps, the exact-zero stop (every row at step 1;
one row while the other runs on), ``mask_memory``; the model's ``synthesize`` and eager call alike; and which loop the
plan names (and runs) for each kind of call.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from speechblocks import tacotron1_hparams
from tests.helpers.call_counter import count_calls
from tf_layers import Tacotron1, Tacotron1Decoder, _native
from tf_layers.decoding_plan import plan_decoding

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the native loop cannot be built (the Keras loop runs)")

SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, prenet_depths=[6, 4], encoder_depth=6, attention_depth=5,
             decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=5)
WIDE = dict(SMALL, prenet_depths=[40, 24], encoder_depth=18, attention_depth=37, decoder_depth=45, max_iters=12)
LAYOUTS = ("keithito-20180906", "keithito-20170720", "mimic2")
T_IN = 7
TOL = 1e-5


@pytest.fixture
def counted(monkeypatch):
    """Counts the native loops run (each test asserts the path it compares really ran)."""
    return count_calls(monkeypatch, _native, "tacotron1_free_running")


def _hparams(layout: str, sizes: dict) -> dict:
    if layout == "mimic2":
        return dict(tacotron1_hparams("mimic2"), **sizes, embedding_dim=5)
    return dict(tacotron1_hparams("keithito"), **sizes, embed_depth=5)


def _weights(block, seed: int = 0, zero_biases: bool = False) -> dict:
    """The block's Glorot-uniform kernels x1.5 and biases ~ 0.1 N(0, 1) (0 with ``zero_biases``): attention that
    moves, dynamics tame enough for float32 rounding to stay at float32 rounding over the steps."""
    g = np.random.default_rng(seed)
    out = {}
    for k, v in block.tf1_weights().items():
        if k.endswith("bias"):
            out[k] = np.zeros(v.shape, np.float32) if zero_biases else (0.1 * g.standard_normal(v.shape)).astype(
                np.float32)
        elif "moving_variance" in k:
            out[k] = g.uniform(0.5, 1.5, v.shape).astype(np.float32)
        else:
            out[k] = (1.5 * v).astype(np.float32)
    return out


def _decoder(layout: str, sizes: dict = SMALL, seed: int = 0, zero_biases: bool = False, mask_memory: bool = False,
             **hparams) -> Tacotron1Decoder:
    dec = Tacotron1Decoder(_hparams(layout, dict(sizes, **hparams)), layout, mask_memory=mask_memory)
    dec.load_tf1_weights(_weights(dec, seed, zero_biases))
    return dec


def _memory(batch: int, e: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, T_IN, e)).astype(np.float32)


def _both(monkeypatch, call):
    """``call()`` through the native loop, then through the decoder's ``tf.while_loop`` (``SPEECHBLOCKS_NATIVE=0``)."""
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE", raising=False)
    native = call()
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    graph = call()
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    return native, graph


def _close(a, b, tol: float = TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert float(np.nan_to_num(np.abs(a - b)).max()) <= tol * max(1.0, float(np.nan_to_num(np.abs(b)).max()))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch", [1, 2])
def test_native_loop_equals_the_keras_loop(monkeypatch, counted, layout, batch):
    for sizes in (SMALL, WIDE):
        dec = _decoder(layout, sizes)
        memory = _memory(batch, dec.hparams.memory_size)
        (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda d=dec, m=memory: d(m))
        assert frames.shape == ref_frames.shape == (batch, sizes["max_iters"], 12)
        assert align.shape == ref_align.shape == (batch, T_IN, sizes["max_iters"])
        _close(frames, ref_frames)
        _close(align, ref_align)
        assert np.all(np.any(ref_frames.numpy() != 0, axis=2))  # no exact-zero step: every step ran
    assert len(counted) == 2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_zero_frames_stop_after_one_step(monkeypatch, counted, layout):
    dec = _decoder(layout, max_iters=50)
    w = dec.tf1_weights()
    dec.load_tf1_weights(dict(w, **{k: np.zeros_like(v) for k, v in w.items()
                                    if k.startswith("decoder/output_projection_wrapper")}))
    memory = _memory(2, dec.hparams.memory_size)
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory, max_iters=50))
    assert frames.shape == ref_frames.shape == (2, 1, 12) and align.shape == (2, T_IN, 1)
    assert not frames.numpy().any()
    _close(align, ref_align)
    assert len(counted) == 1


def test_a_finished_row_is_computed_while_the_other_runs(monkeypatch, counted):
    dec = _decoder("keithito-20180906", zero_biases=True, max_iters=6)
    memory = _memory(2, dec.hparams.memory_size)
    memory[0] = 0.0
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory, max_iters=6))
    assert frames.shape == ref_frames.shape == (2, 6, 12)
    assert not frames.numpy()[0].any() and np.all(np.any(frames.numpy()[1] != 0, axis=1))
    _close(frames, ref_frames)
    _close(align, ref_align)
    assert len(counted) == 1


def test_mask_memory(monkeypatch, counted):
    dec = _decoder("mimic2", mask_memory=True)
    memory, lengths = _memory(2, dec.hparams.memory_size), np.array([7, 3], np.int32)
    (frames, align), (ref_frames, ref_align) = _both(monkeypatch, lambda: dec(memory, lengths))
    _close(frames, ref_frames)
    _close(align, ref_align)
    assert not align.numpy()[1, 3:].any() and (align.numpy()[1, :3] > 0).all()
    assert len(counted) == 1


def test_the_model_synthesizes_and_calls_alike(monkeypatch, counted):
    model = Tacotron1(_hparams("mimic2", SMALL), "mimic2")
    model.load_tf1_weights(_weights(model))
    ids, lengths = np.array([[1, 4, 2, 7, 3, 9, 5], [2, 2, 8, 1, 6, 0, 0]]), np.array([7, 5])
    native, graph = _both(monkeypatch, lambda: model.synthesize(ids, lengths))
    for key in ("mel_outputs", "linear_outputs", "alignments"):
        _close(native[key], graph[key])
    assert len(counted) == 1
    native, graph = _both(monkeypatch, lambda: model(ids, lengths, max_iters=3))
    for key in ("mel_outputs", "linear_outputs", "alignments"):
        _close(native[key], graph[key])
    assert native["alignments"].shape == (2, 7, 3)
    assert len(counted) == 2


def test_the_plan_names_the_loop_that_runs(monkeypatch, counted):
    dec = _decoder("keithito-20170720")
    memory = tf.constant(_memory(1, dec.hparams.memory_size))
    plan = plan_decoding(dec, memory)
    assert plan.loop == "native-tacotron1" and plan.native and str(plan) == "decoder loop: native-tacotron1"
    dec(memory)
    assert len(counted) == 1

    def refused(loop: str, reason: str, call, *args, **kwargs):
        plan = plan_decoding(dec, *args, **kwargs)
        assert plan.loop == loop and reason in plan.reason, str(plan)
        call()
        assert len(counted) == 1  # the decoder's own loop ran

    assert plan_decoding(dec, memory, mel_targets=tf.zeros((1, 6, 6))).loop == "teacher-forced"
    dec(memory, mel_targets=tf.zeros((1, 6, 6)))
    masks = [tf.ones((1, 5, 6)), tf.ones((1, 5, 4))]
    refused("python", "injected pre-net masks", lambda: dec(memory, prenet_masks=masks), memory,
            noise_masks={"decoder_prenet": masks})
    refused("python", "training", lambda: dec(memory, training=True, prenet_masks=masks), memory, training=True)
    big = tf.constant(_memory(9, dec.hparams.memory_size))
    refused("python", "batch", lambda: dec(big, max_iters=2), big)
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    refused("python", "SPEECHBLOCKS_NATIVE=0", lambda: dec(memory), memory)
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE")
    assert plan_decoding(dec, memory, tracing=True).loop == "graph"
    frames, _ = tf.function(lambda m: dec(m, max_iters=3))(memory)  # traced: the graph loop
    assert frames.shape == (1, 3, 12) and len(counted) == 1
    with pytest.raises(ValueError, match="`progress`"):
        plan_decoding(dec, memory, progress=lambda step, p: None)
