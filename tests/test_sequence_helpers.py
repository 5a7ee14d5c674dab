import numpy as np
import pytest
import tensorflow as tf
import torch

from tf_layers._sequence import reverse_within_lengths as reverse_tf
from torch_layers._sequence import reverse_within_lengths as reverse_torch


@pytest.mark.parametrize("shape", [(3, 5), (3, 5, 2), (3, 5, 2, 4)])
def test_reverse_within_lengths_hand_derived_and_scripted(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    lengths = np.array([5, 2, 0])
    expect = x.copy()
    for b, n in enumerate(lengths):
        expect[b, :n] = x[b, :n][::-1]
    np.testing.assert_array_equal(reverse_tf(x, lengths).numpy(), expect)
    np.testing.assert_array_equal(reverse_torch(torch.from_numpy(x), torch.from_numpy(lengths)).numpy(), expect)
    scripted = torch.jit.script(reverse_torch)
    np.testing.assert_array_equal(scripted(torch.from_numpy(x), torch.from_numpy(lengths)).numpy(), expect)
    np.testing.assert_array_equal(reverse_torch(torch.from_numpy(x), None).numpy(), x[:, ::-1])
    np.testing.assert_array_equal(tf.reverse(x, [1]).numpy(), reverse_tf(x, None).numpy())
