import numpy as np
import pytest
import torch

from tests.helpers.deploy_limits import checked_elsewhere
from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import Conv1DBlock
from torch_layers.tf1_exchange import conv1d_from_tf1, conv1d_to_tf1


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


@pytest.mark.parametrize("bn_position", ["before", "after"])
def test_module_contract(bn_position):
    run_torch_module_test(
        Conv1DBlock, (6, 4, 5), dict(activation="tanh", drop_rate=0.5, bn_position=bn_position),
        make_inputs=_inputs, expected_output_shape=lambda b, t: (b, t, 5), changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 7)], "inputs"), ([torch.zeros(2, 7, 3)], "(batch, time, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
        **({} if bn_position == "before" else checked_elsewhere("the bn_position=before case", ("export", "compile"))),
    )


def test_conv_layout_conversion_round_trip_and_meaning():
    k = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)  # TF1 (k, in, out)
    w = conv1d_from_tf1(k)
    assert w.shape == (4, 3, 5)
    np.testing.assert_array_equal(conv1d_to_tf1(w), k)
    assert w[2, 1, 3] == k[3, 1, 2]


def test_moving_variance_is_biased_tf1_style():
    block = Conv1DBlock(2, 1, 3, activation=None).train()
    x = torch.randn(4, 10, 2)
    with torch.no_grad():
        block(x)
        conv = torch.nn.functional.conv1d(x.transpose(1, 2), block.conv.weight, block.conv.bias).transpose(1, 2)
    expect = 0.99 * 1.0 + 0.01 * conv.var(dim=(0, 1), unbiased=False)
    torch.testing.assert_close(block.batch_norm.running_var, expect)
