"""Property tests of ``EncoderConvolutions`` (Keras, torch, twins). It takes no lengths and reads padding, as
the original (documented): each ``'same'`` layer reads ``kernel_size // 2`` frames past a sequence's length, so
exactly ``num_layers * (kernel_size // 2)`` padded frames reach the valid outputs and frames further past the
length change none (``test_padding_is_read_exactly_...``). TF1 parity with non-zero frames everywhere:
``parity_tests/cases/encoder_convolutions.py``."""
import tf_layers
import torch_layers
from tests.helpers.properties import SequenceBlock, property_tests


class EncoderConvolutionsProperties(SequenceBlock):
    name = "EncoderConvolutions"
    keras_cls, torch_cls = tf_layers.EncoderConvolutions, torch_layers.EncoderConvolutions
    kwargs = dict(kernel_size=3, channels=4, num_layers=2)
    input_size = 3
    arguments = ("inputs",)
    reach = 2 * (3 // 2)
    max_time = 9


globals().update(property_tests(EncoderConvolutionsProperties()))
