"""speechblocks Keras 3 layers (TensorFlow backend).

Faithful ports of the TF1 Tacotron-2 blocks and Keras twins of four classic PyTorch speech modules.
``import tf_layers`` never imports torch.
"""
# isort: skip_file
# Eager imports: every Keras layer registers itself for deserialization as soon as the package is
# imported, and `sequence_mask` (function and submodule share the name) is bound last, to the function.

from . import checkpoint  # noqa: F401
from .bahdanau_attention import BahdanauAttention
from .cbhg import CBHG
from .checkpoint import load_migrated
from .contrastive_loss import ContrastiveLoss
from .conv1d_block import Conv1DBlock
from .decoder_rnn import DecoderRNN
from .encoder_convolutions import EncoderConvolutions
from .encoder_rnn import EncoderRNN
from .frame_projection import FrameProjection
from .gaussian_embedding import GaussianEmbedding, repeat_merge
from .griffin_lim import griffin_lim, inv_linear_spectrogram, inv_mel_spectrogram
from .gumbel_vector_quantizer import GumbelVectorQuantizer
from .highway_net import HighwayNet
from .location_sensitive_attention import LocationSensitiveAttention
from .masked_losses import (
    MaskedLinearLoss,
    MaskedMSE,
    MaskedSigmoidCrossEntropy,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
)
from .mimic2_location_attention import Mimic2LocationAttention
from .postnet import Postnet
from .prenet import Prenet
from .sequence_mask import sequence_mask  # last: binds the name to the function, not the submodule
from .speaker_encoder import SpeakerEncoder
from .stop_projection import StopProjection
from .tacotron1 import Tacotron1
from .tacotron1_decoder import Tacotron1Decoder
from .tacotron2 import Tacotron2
from .tacotron2_decoder import (AttentionMemory, DecoderState, DecoderWeights, StepOutputs, StepWeights,
                                Tacotron2Decoder)
from .tacotron2_feeder import tacotron2_dataset
from .tacotron2_loss import guided_attention_loss, tacotron2_loss
from .tac import TAC
from .tf1_exchange import TF1WeightsError
from .tf1_gru_cell import TF1GRUCell
from .torch_exchange import TorchStateDictError
from .zoneout_lstm_cell import ZoneoutLSTMCell
from speechblocks.tacotron2_hparams import tacotron2_hparams

__version__ = "0.1.0"

__all__ = [
    "AttentionMemory",
    "BahdanauAttention",
    "CBHG",
    "ContrastiveLoss",
    "Conv1DBlock",
    "DecoderRNN",
    "DecoderState",
    "DecoderWeights",
    "EncoderConvolutions",
    "EncoderRNN",
    "FrameProjection",
    "GaussianEmbedding",
    "GumbelVectorQuantizer",
    "HighwayNet",
    "LocationSensitiveAttention",
    "MaskedLinearLoss",
    "MaskedMSE",
    "MaskedSigmoidCrossEntropy",
    "Mimic2LocationAttention",
    "Postnet",
    "Prenet",
    "SpeakerEncoder",
    "StepOutputs",
    "StepWeights",
    "StopProjection",
    "TAC",
    "Tacotron1",
    "Tacotron1Decoder",
    "Tacotron2",
    "Tacotron2Decoder",
    "TF1GRUCell",
    "TF1WeightsError",
    "TorchStateDictError",
    "ZoneoutLSTMCell",
    "griffin_lim",
    "inv_linear_spectrogram",
    "inv_mel_spectrogram",
    "load_migrated",
    "masked_linear_loss",
    "masked_mse",
    "masked_sigmoid_cross_entropy",
    "repeat_merge",
    "sequence_mask",
    "tacotron2_dataset",
    "tacotron2_hparams",
    "tacotron2_loss",
    "guided_attention_loss",
]
