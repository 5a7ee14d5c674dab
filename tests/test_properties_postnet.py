"""Property tests of ``Postnet`` (Keras, torch, twins). It takes no lengths and reads padding, as the original
(documented): each ``'same'`` layer reads ``kernel_size // 2`` frames past a sequence's length, so exactly
``num_layers * (kernel_size // 2)`` padded frames reach the valid outputs and frames further past the length
change none (``test_padding_is_read_exactly_...``). TF1 parity with non-zero frames everywhere:
``parity_tests/cases/postnet.py``."""
import tf_layers
import torch_layers
from tests.helpers.properties import SequenceBlock, property_tests


class PostnetProperties(SequenceBlock):
    name = "Postnet"
    keras_cls, torch_cls = tf_layers.Postnet, torch_layers.Postnet
    kwargs = dict(kernel_size=5, channels=4, num_layers=2)
    input_size = 3
    arguments = ("inputs",)
    reach = 2 * (5 // 2)
    max_time = 12


globals().update(property_tests(PostnetProperties()))
