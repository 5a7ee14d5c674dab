"""LiteRT (TFLite) of the Tacotron-2 encoder: EncoderConvolutions -> EncoderRNN, as ``Tacotron2`` chains them.

The single blocks are checked by ``run_keras_layer_test`` (builtins for the feed-forward blocks, compared in the
LiteRT interpreter; ``SELECT_TF_OPS`` pinned where needed). Here the whole encoder: its convolution half converts to
TFLite builtins and runs in LiteRT with the outputs of the Keras layer; the bidirectional LSTM loop needs
``SELECT_TF_OPS`` (TensorList ops with an unknown batch), so the encoder converts only with select ops, and running it
needs the flex delegate, which the ``ai_edge_litert`` interpreter does not link (pinned: if it ever runs, the
outputs must match).
"""
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_layers import EncoderConvolutions, EncoderRNN

litert = pytest.importorskip("ai_edge_litert.interpreter")

SIZES = ((2, 7), (1, 1), (3, 4))


def _inputs(b, t):
    g = np.random.default_rng(10 * b + t)
    return [g.standard_normal((b, t, 6)).astype(np.float32), np.maximum(1, t - np.arange(b)).astype(np.int32)]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A SavedModel of the functional encoder model (unknown batch and time), and the in-process model."""
    x = keras.Input(batch_shape=(None, None, 6), name="in_00")
    lengths = keras.Input(batch_shape=(None,), dtype="int32", name="in_01")
    convolved = EncoderConvolutions(kernel_size=3, channels=8, num_layers=2, drop_rate=0.5)(x)
    model = keras.Model([x, lengths], EncoderRNN(size=4, zoneout=0.1)(convolved, lengths))
    directory = os.fspath(tmp_path_factory.mktemp("encoder"))
    model.export(directory, verbose=False)
    return model, directory, keras.Model(x, convolved)


def _convert(directory, select_ops):
    converter = tf.lite.TFLiteConverter.from_saved_model(directory)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS] + (
        [tf.lite.OpsSet.SELECT_TF_OPS] if select_ops else [])
    return converter.convert()


def test_encoder_convolutions_run_in_litert_with_builtins(encoder):
    _, directory, convolutions = encoder
    directory += "_convolutions"
    convolutions.export(directory, verbose=False)
    runner = litert.Interpreter(model_content=_convert(directory, select_ops=False)).get_signature_runner()
    for b, t in SIZES:
        x = _inputs(b, t)[0]
        got = runner(in_00=x)["output_0"]
        np.testing.assert_allclose(got, np.asarray(convolutions(x, training=False)), atol=1e-5, rtol=0)


def test_encoder_needs_select_tf_ops(encoder):
    model, directory, _ = encoder
    with pytest.raises(Exception, match="Lowering tensor list ops is failed"):
        _convert(directory, select_ops=False)
    blob = _convert(directory, select_ops=True)
    for op in ("TensorListReserve", "TensorListSetItem", "TensorListStack"):
        assert f"Flex{op}".encode() in blob
    interpreter = litert.Interpreter(model_content=blob)
    runner = interpreter.get_signature_runner()
    for b, t in SIZES:
        args = _inputs(b, t)
        try:
            got = runner(in_00=args[0], in_01=args[1])["output_0"]
        except RuntimeError as e:  # the documented limit: no flex delegate in ai_edge_litert
            assert "Flex delegate" in str(e)
            return
        np.testing.assert_allclose(got, np.asarray(model(args, training=False)), atol=1e-5, rtol=0)


# -- the builtin-ops-only Tacotron-2: Tacotron2.export_litert + speechblocks.litert.LiteRTTacotron2 ----------------

SMALL = dict(embedding_dim=8, enc_conv_channels=8, encoder_lstm_units=4, prenet_layers=[8, 6], decoder_layers=2,
             decoder_lstm_units=8, attention_dim=6, attention_filters=3, attention_kernel=5, postnet_channels=8,
             speaker_embedding_size=5, outputs_per_step=2, num_mels=6)
STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"
MAX_ITERS = 12


def _small_tacotron(**overrides):
    from tf_layers import Tacotron2

    model = Tacotron2("rtvc", **SMALL, **overrides)
    g = np.random.default_rng(1)
    weights = {k: (0.4 * g.standard_normal(v.shape)).astype(np.float32) for k, v in model.tf1_weights().items()}
    weights = {k: np.abs(v) if "moving_variance" in k else v for k, v in weights.items()}
    weights[STOP_BIAS] = np.full_like(weights[STOP_BIAS], -0.9)  # 4 symbols stop after 3 steps (p 0.506), 9 run on
    model.load_tf1_weights(weights)
    return model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from speechblocks.litert import LiteRTTacotron2

    model = _small_tacotron(tacotron_dropout_rate=0.0)
    directory = tmp_path_factory.mktemp("tacotron2_litert")
    model.export_litert(directory)
    return model, directory, LiteRTTacotron2(directory)


def test_litert_tacotron2_files_hold_builtin_ops_only(exported):
    from tf_layers.tacotron2_litert import FILES, custom_ops

    _, directory, _ = exported
    assert sorted(os.listdir(directory)) == sorted(FILES)  # no temporary file left behind
    for name in FILES:
        if name.endswith(".tflite"):
            with open(os.path.join(directory, name), "rb") as f:
                blob = f.read()
            assert custom_ops(blob) == [] and b"Flex" not in blob, name


def test_litert_tacotron2_equals_keras_synthesize(exported):
    """The LiteRT host loop (ai_edge_litert interpreter) against ``Tacotron2.synthesize`` (prenet dropout off), batch
    1 at two input lengths: the same number of steps (the stop rule) and the outputs within 1e-5."""
    model, _, lite = exported
    g = np.random.default_rng(2)
    steps = []
    for t_in in (9, 4):
        ids = g.integers(1, 66, (1, t_in)).astype(np.int32)
        spk = g.standard_normal((1, 5)).astype(np.float32)
        want = model.synthesize(ids, np.array([t_in], np.int32), spk, max_iters=MAX_ITERS)
        got = lite.synthesize(ids, np.array([t_in], np.int32), spk, max_iters=MAX_ITERS)
        for key in ("mel_outputs", "decoder_outputs", "alignments", "stop_token_prediction"):
            assert got[key].shape == want[key].shape, key
            np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0, err_msg=key)
        steps.append(want["alignments"].shape[-1])
    assert min(steps) < MAX_ITERS == max(steps), steps  # one stopped by the stop rule, one by max_iters


def test_litert_tacotron2_checks_its_arguments(exported):
    _, _, lite = exported
    ids = np.ones((1, 3), np.int32)
    with pytest.raises(ValueError, match="speaker_embeddings"):
        lite.synthesize(ids, None, None)
    with pytest.raises(ValueError, match="lengths"):
        lite.synthesize(ids, np.array([4]), np.zeros((1, 5), np.float32))
    with pytest.raises(ValueError, match="max_iters"):
        lite.synthesize(ids, None, np.zeros((1, 5), np.float32), max_iters=0)


def test_litert_tacotron2_prenet_dropout_as_step_inputs(exported, tmp_path):
    """With the prenet dropout on (as the original), the keep-masks are inputs of the step model: given masks give
    what ``Tacotron2`` gives with the same ``noise_masks["prenet"]``; drawn ones follow ``seed``."""
    import json
    import shutil

    from speechblocks.litert import LiteRTTacotron2
    from tf_layers import tacotron2_litert

    model = _small_tacotron(tacotron_dropout_rate=0.5)
    # only the step model depends on the prenet dropout (the encoder's and postnet's are off at inference): the
    # fixture's encoder and postnet serve (saves two conversions)
    for name in ("encoder.tflite", "postnet.tflite"):
        shutil.copy(os.path.join(exported[1], name), tmp_path / name)
    (tmp_path / "decoder_step.tflite").write_bytes(
        tacotron2_litert.convert_builtins(tacotron2_litert.decoder_step_function(model), model))
    (tmp_path / "manifest.json").write_text(json.dumps(tacotron2_litert.manifest(model)))
    lite = LiteRTTacotron2(tmp_path)
    g = np.random.default_rng(3)
    ids, lengths = g.integers(1, 66, (1, 7)).astype(np.int32), np.array([7], np.int32)
    spk = g.standard_normal((1, 5)).astype(np.float32)
    masks = [(g.random((1, MAX_ITERS, n)) >= 0.5).astype(np.float32) for n in SMALL["prenet_layers"]]
    want = model(ids, lengths, spk, max_iters=MAX_ITERS, noise_masks={"prenet": masks})
    got = lite.synthesize(ids, lengths, spk, max_iters=MAX_ITERS, prenet_masks=masks)
    for key in ("mel_outputs", "alignments", "stop_token_prediction"):
        assert got[key].shape == tuple(want[key].shape), key
        np.testing.assert_allclose(got[key], np.asarray(want[key]), atol=1e-5, rtol=0, err_msg=key)
    a, b = (lite.synthesize(ids, lengths, spk, max_iters=4, seed=s)["mel_outputs"] for s in (5, 5))
    np.testing.assert_array_equal(a, b)
    assert np.abs(lite.synthesize(ids, lengths, spk, max_iters=4, seed=6)["mel_outputs"] - a).max() > 1e-3
