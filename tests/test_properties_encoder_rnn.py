"""Property tests of ``EncoderRNN`` (Keras, torch, twins): padding past ``input_lengths`` changes no valid
output (the original's ``bidirectional_dynamic_rnn(sequence_length=...)`` is invariant), batch permutation,
rows one by one, float64, mixed precision, twin agreement (see ``tests/helpers/properties.py``)."""
import numpy as np
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import TF1Block, property_tests
from tests.helpers.strategies import batch_lengths, normal, value_seeds


class EncoderRNNProperties(TF1Block):
    name = "EncoderRNN"
    keras_cls, torch_cls = tf_layers.EncoderRNN, torch_layers.EncoderRNN
    kwargs = dict(size=3, zoneout=0.1)
    input_size = 4
    arguments = ("inputs", "input_lengths")
    padded = {"inputs": "input_lengths"}
    outputs = {"outputs": "input_lengths"}
    # found by ``mixed``: under CPU autocast the scan's ``lerp`` mixed a bfloat16 state with a float32 update
    # (RuntimeError, any input); fixed in ``torch_layers/encoder_rnn.py``
    examples = {"mixed": [dict(case={"inputs": np.full((1, 1, 4), 0.5, np.float32),
                                     "input_lengths": np.array([1], np.int32)}, seed=0)]}

    def cases(self):
        @st.composite
        def case(draw):
            time, lengths = draw(batch_lengths(max_batch=4, max_time=7))
            x = normal(np.random.default_rng(draw(value_seeds)), (len(lengths), time, self.input_size))
            return {"inputs": x, "input_lengths": lengths}
        return case()


globals().update(property_tests(EncoderRNNProperties()))
