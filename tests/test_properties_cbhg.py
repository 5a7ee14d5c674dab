"""Property tests of ``CBHG`` (Keras, torch, twins).

The original reads padding: the conv bank, the max-pool and the two projections are ``'same'`` convolutions over
the whole padded time axis, so the frames right after a length leak into the last valid outputs (the documented
behaviour; the TF1 parity of ``parity_tests/cases/cbhg.py`` feeds random, non-zero frames past the lengths).
What stays invariant, and is tested here: padding more than ``reach`` frames past each length -- the frames
the convolutions read past it, ``K//2 + pool_size//2 + 2 * (projection_kernel_size//2)`` -- changes no valid
output, because the bidirectional GRU stops (forward) and starts (backward) at each length. A row run alone is
therefore the batch's row with the same padded frames (not cut to its length).
"""

import tf_layers
import torch_layers
from tests.helpers.properties import SequenceBlock, property_tests

# 6 != 4: the dimension-fix dense is present. 8 bank channels and 8 proj1 channels: the farthest frame in reach
# must pass a relu of the widest bank convolution and of proj1 (thorough profile, 4 and 5 channels: all dead for
# seed 535 at length 1 -- a test too small, no bug; kept as @example)
CONFIG = dict(K=3, conv_channels=8, pool_size=2, projections=[8, 6], projection_kernel_size=3,
              n_highwaynet_layers=2, highway_units=4, rnn_units=3)


class CBHGProperties(SequenceBlock):
    name = "CBHG"
    keras_cls, torch_cls = tf_layers.CBHG, torch_layers.CBHG
    kwargs = CONFIG
    input_size = CONFIG["projections"][1]
    reach = CONFIG["K"] // 2 + CONFIG["pool_size"] // 2 + 2 * (CONFIG["projection_kernel_size"] // 2)
    max_time = 12
    examples = {"reach": [dict(length=1, seed=535, value_seed=133)]}


globals().update(property_tests(CBHGProperties()))
