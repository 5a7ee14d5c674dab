"""speechblocks Keras 3 layers (TensorFlow backend).

Faithful ports of the TF1 Tacotron-2 blocks and Keras twins of four classic PyTorch speech modules.
``import tf_layers`` never imports torch.
"""
import importlib

__version__ = "0.1.0"

# public name -> submodule that defines it (one class a file)
_EXPORTS = {
    "Conv1DBlock": "conv1d_block",
    "HighwayNet": "highway_net",
    "CBHG": "cbhg",
    "ZoneoutLSTMCell": "zoneout_lstm_cell",
    "EncoderConvolutions": "encoder_convolutions",
    "EncoderRNN": "encoder_rnn",
    "Prenet": "prenet",
    "DecoderRNN": "decoder_rnn",
    "FrameProjection": "frame_projection",
    "StopProjection": "stop_projection",
    "Postnet": "postnet",
    "sequence_mask": "sequence_mask",
    "masked_mse": "masked_losses",
    "masked_sigmoid_cross_entropy": "masked_losses",
    "masked_linear_loss": "masked_losses",
    "MaskedMSE": "masked_losses",
    "MaskedSigmoidCrossEntropy": "masked_losses",
    "MaskedLinearLoss": "masked_losses",
    "SpeakerEncoder": "speaker_encoder",
    "TAC": "tac",
    "GaussianEmbedding": "gaussian_embedding",
    "repeat_merge": "gaussian_embedding",
    "ContrastiveLoss": "contrastive_loss",
    "GumbelVectorQuantizer": "gumbel_vector_quantizer",
    "TF1WeightsError": "tf1_exchange",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tf_layers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
