"""Property tests of ``TAC`` (Keras, torch, twins): the mic slots past ``valid_mics`` are padding -- the mean
runs over the valid mics and the norm is per mic, so arbitrary values in (and more) padded slots change no valid
mic's output; an example alone, cut to its valid mics, gives the batch's valid outputs."""
import numpy as np
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import TorchStateBlock, property_tests
from tests.helpers.strategies import batch_lengths, normal, value_seeds


class TACProperties(TorchStateBlock):
    name = "TAC"
    keras_cls, torch_cls = tf_layers.TAC, torch_layers.TAC
    kwargs = dict(input_dim=3, hidden_dim=4)
    arguments = ("x", "valid_mics")
    padded = {"x": "valid_mics"}  # axis 1: the mics
    outputs = {"outputs": "valid_mics"}

    def cases(self):
        @st.composite
        def case(draw):
            mics, valid = draw(batch_lengths(max_batch=3, max_time=4))
            chunk, n_chunks = draw(st.integers(1, 3)), draw(st.integers(1, 3))
            x = normal(np.random.default_rng(draw(value_seeds)), (len(valid), mics, 3, chunk, n_chunks))
            return {"x": x, "valid_mics": valid}
        return case()


globals().update(property_tests(TACProperties()))
