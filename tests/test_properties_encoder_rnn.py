"""Property tests of ``EncoderRNN`` (Keras, torch, twins): padding past ``input_lengths`` changes no valid
output (the original's ``bidirectional_dynamic_rnn(sequence_length=...)`` is invariant), batch permutation,
rows one by one, float64, mixed precision, twin agreement (see ``tests/helpers/properties.py``)."""
import numpy as np

import tf_layers
import torch_layers
from tests.helpers.properties import SequenceBlock, property_tests


class EncoderRNNProperties(SequenceBlock):
    name = "EncoderRNN"
    keras_cls, torch_cls = tf_layers.EncoderRNN, torch_layers.EncoderRNN
    kwargs = dict(size=3, zoneout=0.1)
    input_size = 4
    # found by ``mixed``: under CPU autocast the scan's ``lerp`` mixed a bfloat16 state with a float32 update
    # (RuntimeError, any input); fixed in ``torch_layers/encoder_rnn.py``
    examples = {"mixed": [dict(case={"inputs": np.full((1, 1, 4), 0.5, np.float32),
                                     "input_lengths": np.array([1], np.int32)}, seed=0)]}


globals().update(property_tests(EncoderRNNProperties()))
