"""Deployment of the Keras side beyond the per-layer checks of ``run_keras_layer_test`` (SavedModel reloaded in a
fresh process, XLA, LiteRT -- every layer gets those by going through the helper): ``Tacotron2.export_serving``
(free-running synthesis, the decoder loop inside the graph) reloaded in a fresh process, XLA in training with fixed
dropout/zoneout masks, and the registry itself (every public layer goes through the helper)."""
import glob
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_layers
from tests.helpers.keras_layer_test import LIMITS, SelectOps, saved_model_reloader
from tests.test_tacotron2_synthesize_keras import CASES, N_SYM, PRESETS, _padded, case_weights
from tf_layers import (
    CBHG,
    Conv1DBlock,
    DecoderRNN,
    EncoderConvolutions,
    Postnet,
    Prenet,
    Tacotron2,
    ZoneoutLSTMCell,
)

SERVING_OUTPUTS = ("alignments", "mel_outputs", "stop_token_prediction")


def _model(preset):
    model = Tacotron2(preset, n_symbols=N_SYM, **PRESETS[preset])  # tacotron_dropout_rate=0: deterministic
    w, seqs, spk, steps = case_weights({k: v.shape for k, v in model.tf1_weights().items()}, preset)
    model.load_tf1_weights(w)
    return model, seqs, spk, steps


def test_tacotron2_export_serving_reloads_in_a_fresh_process():
    model, seqs, spk, steps = _model("rtvc")
    assert model.hparams.tacotron_dropout_rate == 0.0
    r = model.hparams.outputs_per_step
    reloader = saved_model_reloader()
    directory = reloader.new_dir()
    assert model.export_serving(directory) == directory
    ids, lengths = _padded(seqs)
    # the padded batch, then each sentence alone (other batch sizes and lengths: one signature, unknown dims)
    calls = [dict(inputs=ids, input_lengths=lengths, speaker_embeddings=spk)]
    calls += [dict(inputs=ids[k:k + 1, :n], input_lengths=lengths[k:k + 1], speaker_embeddings=spk[k:k + 1])
              for k, n in enumerate(lengths)]
    got = reloader.run(directory, calls)
    for k, (call, out) in enumerate(zip(calls, got)):
        want = model(call["inputs"], call["input_lengths"], call["speaker_embeddings"], training=False)
        assert len(out) == 3  # the endpoint's dict, flattened in key order
        for name, g in zip(SERVING_OUTPUTS, out):
            w = np.asarray(want[name])
            assert g.shape == w.shape, f"call {k}: {name} {g.shape} != {w.shape}"
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=0, err_msg=f"call {k}: {name}")
        if k:  # alone, each sentence stops at its own step: the stop rule runs inside the exported graph
            assert out[1].shape == (1, steps[k - 1] * r, model.hparams.num_mels)
    assert CASES["rtvc"][3] == steps


def test_tacotron2_export_serving_rejects_a_bad_max_iters(tmp_path):
    model = Tacotron2("rayhane", n_symbols=N_SYM, **PRESETS["rayhane"])
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="max_iters"):
            model.export_serving(os.fspath(tmp_path / "m"), max_iters=bad)


# -- XLA in training (the helper checks inference): random dropout/zoneout differs under XLA, so the masks are fixed

def _keep(rng, shape):
    return (rng.random(shape) > 0.4).astype(np.float32)


def _case(name):
    """``(layer, args, kwargs)`` of a training call with fixed keep-masks (batch 2, time 5)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    if name == "Conv1DBlock":
        return Conv1DBlock(3, 4, "relu", 0.5), [x], dict(dropout_mask=_keep(rng, (2, 5, 4)))
    if name == "EncoderConvolutions":
        return (EncoderConvolutions(3, 4, 2, 0.5), [x],
                dict(dropout_masks=[_keep(rng, (2, 5, 4)) for _ in range(2)]))
    if name == "Postnet":
        return Postnet(3, 4, 3, 0.5), [x], dict(dropout_masks=[_keep(rng, (2, 5, 4)) for _ in range(3)])
    if name == "Prenet":
        return Prenet((5, 4), 0.5), [x], dict(dropout_masks=[_keep(rng, (2, 5, 5)), _keep(rng, (2, 5, 4))])
    if name == "ZoneoutLSTMCell":
        return (ZoneoutLSTMCell(4, 0.3, 0.2), [x[:, 0], [rng.standard_normal((2, 4)).astype(np.float32)] * 2],
                dict(zoneout_masks=(_keep(rng, (2, 4)), _keep(rng, (2, 4)))))
    if name == "DecoderRNN-sequence":
        return DecoderRNN(2, 4, 0.2), [x], dict(zoneout_masks=[(_keep(rng, (2, 5, 4)), _keep(rng, (2, 5, 4)))] * 2)
    if name == "CBHG":  # no dropout: batch statistics in training
        return CBHG(2, 3, 2, [5, 6], 3, 1, 4, 3), [x, np.array([5, 3], np.int32)], {}
    if name == "DecoderRNN-step":
        return DecoderRNN(2, 4, 0.2), [x[:, 0]], dict(zoneout_masks=[(_keep(rng, (2, 4)), _keep(rng, (2, 4)))] * 2)
    raise KeyError(name)


@pytest.mark.parametrize("name", ["Conv1DBlock", "EncoderConvolutions", "Postnet", "Prenet", "ZoneoutLSTMCell",
                                  "DecoderRNN-sequence", "DecoderRNN-step", "CBHG"])
def test_xla_training_with_fixed_masks_equals_the_layer(name):
    layer, args, kwargs = _case(name)
    layer(*args, training=False)
    saved = [np.asarray(v) for v in layer.variables]  # batch-norm statistics move in training: restored
    want = layer(*args, training=True, **kwargs)
    for v, s in zip(layer.variables, saved):
        v.assign(s)
    got = tf.function(lambda *a: layer(*a, training=True, **kwargs), jit_compile=True)(*args)
    want, got = tf.nest.flatten(want), tf.nest.flatten(got)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5, rtol=0)
    inference = tf.nest.flatten(layer(*args, training=False))
    assert max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(want, inference)) > 0


# -- the registry: every public layer goes through run_keras_layer_test ------------------------------------------

def _helper_calls() -> set[str]:
    names = set()
    for path in glob.glob(os.path.join(os.path.dirname(__file__), "test_*_keras.py")):
        with open(path) as f:
            names.update(re.findall(r"run_keras_layer_test\(\s*(\w+)", f.read()))
    return names


def test_every_public_keras_layer_gets_the_deployment_checks():
    public = {n for n in tf_layers.__all__ if isinstance(getattr(tf_layers, n), type)
              and issubclass(getattr(tf_layers, n), keras.layers.Layer)
              and not issubclass(getattr(tf_layers, n), keras.Model)}  # Tacotron2: export_serving above
    missing = sorted(public - _helper_calls())
    assert not missing, f"layers never run through run_keras_layer_test (no export/XLA/LiteRT checks): {missing}"
    unknown = sorted(set(LIMITS) - public - {"TF1GRUCell"})
    assert not unknown, f"LIMITS pins unknown layers: {unknown}"


@pytest.mark.parametrize("name", ["Prenet", "FrameProjection", "StopProjection", "HighwayNet", "Conv1DBlock",
                                  "Postnet", "EncoderConvolutions"])
def test_feed_forward_blocks_are_not_pinned_away_from_litert_builtins(name):
    pins = LIMITS.get(name, {})
    if callable(pins):
        pins = pins({"drop_rate": 0.0}, [np.zeros((1, 1, 1))])
    assert "litert" not in pins and "xla" not in pins and "export" not in pins
    if name == "Prenet":  # the always-on dropout is the one exception, documented
        assert isinstance(LIMITS["Prenet"]({"drop_rate": 0.5}, [np.zeros((1, 1, 1))])["litert"], SelectOps)


def test_reloader_reports_a_failed_load():
    reloader = saved_model_reloader()
    with pytest.raises(AssertionError, match="fresh-process tf.saved_model.load"):
        reloader.run(reloader.new_dir(), [[np.zeros((1, 2), np.float32)]])
