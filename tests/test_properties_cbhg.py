"""Property tests of ``CBHG`` (Keras, torch, twins).

The original reads padding: the conv bank, the max-pool and the two projections are ``'same'`` convolutions over
the whole padded time axis, so the frames right after a length leak into the last valid outputs (the documented
behaviour, checked against the TF1 reference with non-zero padding in ``test_properties_padding_readers.py``).
What stays invariant, and is tested here: padding more than ``reach`` frames past each length -- the frames
the convolutions read past it, ``K//2 + pool_size//2 + 2 * (projection_kernel_size//2)`` -- changes no valid
output, because the bidirectional GRU stops (forward) and starts (backward) at each length. A row run alone is
therefore the batch's row with the same padded frames (not cut to its length).
"""
import numpy as np
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import TF1Block, property_tests
from tests.helpers.strategies import batch_lengths, normal, value_seeds

CONFIG = dict(K=3, conv_channels=4, pool_size=2, projections=[5, 6], projection_kernel_size=3,
              n_highwaynet_layers=2, highway_units=4, rnn_units=3)  # 6 != 4: the dimension-fix dense is present


class CBHGProperties(TF1Block):
    name = "CBHG"
    keras_cls, torch_cls = tf_layers.CBHG, torch_layers.CBHG
    kwargs = CONFIG
    input_size = CONFIG["projections"][1]
    arguments = ("inputs", "input_lengths")
    padded = {"inputs": "input_lengths"}
    outputs = {"outputs": "input_lengths"}
    reach = CONFIG["K"] // 2 + CONFIG["pool_size"] // 2 + 2 * (CONFIG["projection_kernel_size"] // 2)

    def cases(self):
        @st.composite
        def case(draw):
            time, lengths = draw(batch_lengths(max_batch=4, max_time=12))
            x = normal(np.random.default_rng(draw(value_seeds)), (len(lengths), time, self.input_size))
            return {"inputs": x, "input_lengths": lengths}
        return case()

    def reach_case(self, length, time, seed):
        x = normal(np.random.default_rng(seed), (1, time, self.input_size))
        return {"inputs": x, "input_lengths": np.array([length], np.int32)}

    def row(self, case, i):  # the convolutions read the frames past the length: keep them
        return {k: v[i:i + 1] for k, v in case.items()}


globals().update(property_tests(CBHGProperties()))
