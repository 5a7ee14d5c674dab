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
