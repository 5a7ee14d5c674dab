"""speechblocks PyTorch modules.

Twins of the TF1 Tacotron-2 blocks and clean versions of four classic PyTorch speech modules.
``import torch_layers`` never imports tensorflow.
"""
# isort: skip_file
# Eager imports: every Keras layer registers itself for deserialization as soon as the package is
# imported, and `sequence_mask` (function and submodule share the name) is bound last, to the function.

from . import activations, norms  # noqa: F401
from .bahdanau_attention import BahdanauAttention
from .cbhg import CBHG
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
from .mimic2_location_attention import Mimic2LocationAttention
from .masked_losses import (
    MaskedLinearLoss,
    MaskedMSE,
    MaskedSigmoidCrossEntropy,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
)
from ._state_dict import StateDictError, read_state_dict
from .migrated import MigratedFileError, load_migrated
from .postnet import Postnet
from .prenet import Prenet
from .sequence_mask import sequence_mask  # last: binds the name to the function, not the submodule
from .speaker_encoder import SpeakerEncoder
from .stop_projection import StopProjection
from .tac import TAC
from .tacotron1 import Tacotron1
from .tacotron1_decoder import Tacotron1Decoder
from .tacotron2 import Tacotron2
from .tacotron2_decoder import Tacotron2Decoder
from .tacotron2_feeder import Tacotron2BatchSampler, Tacotron2Collate, Tacotron2Dataset
from .tacotron2_loss import guided_attention_loss, tacotron2_loss
from .tf1_exchange import TF1WeightsError
from .tf1_gru_cell import TF1GRUCell
from .zoneout_lstm_cell import ZoneoutLSTMCell
from speechblocks import tacotron2_hparams

__version__ = "0.1.0"

__all__ = [
    "BahdanauAttention",
    "CBHG",
    "ContrastiveLoss",
    "Conv1DBlock",
    "DecoderRNN",
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
    "MigratedFileError",
    "Mimic2LocationAttention",
    "Postnet",
    "Prenet",
    "SpeakerEncoder",
    "StateDictError",
    "StopProjection",
    "TAC",
    "TF1GRUCell",
    "TF1WeightsError",
    "Tacotron1",
    "Tacotron1Decoder",
    "Tacotron2",
    "Tacotron2BatchSampler",
    "Tacotron2Collate",
    "Tacotron2Dataset",
    "Tacotron2Decoder",
    "ZoneoutLSTMCell",
    "griffin_lim",
    "inv_linear_spectrogram",
    "inv_mel_spectrogram",
    "load_migrated",
    "masked_linear_loss",
    "masked_mse",
    "masked_sigmoid_cross_entropy",
    "read_state_dict",
    "repeat_merge",
    "sequence_mask",
    "tacotron2_hparams",
    "tacotron2_loss",
    "guided_attention_loss",
]
