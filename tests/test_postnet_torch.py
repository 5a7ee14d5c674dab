import numpy as np
import pytest
import torch

from tests.helpers.torch_module_test import run_torch_module_test
from tests.test_encoder_convolutions_torch import np_stack, tf1_weights
from torch_layers import Postnet


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def test_module_contract():
    run_torch_module_test(
        Postnet, (6,), dict(kernel_size=3, channels=5, num_layers=3, drop_rate=0.5),
        make_inputs=_inputs, expected_output_shape=lambda b, t: (b, t, 5), changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 7, 6, 1)], "inputs"), ([torch.zeros(2, 7, 80)], "(batch, time, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int32)], "floating")],
    )


@pytest.mark.parametrize("num_layers,indices", [(5, [1, 2, 3, 4, 5]), (3, [1, 2, 5]), (1, [5])])
def test_seed_names_last_layer_conv_layer_5_and_is_linear(num_layers, indices):
    scopes = [f"conv_layer_{i}_postnet_convolutions" for i in indices]
    w = tf1_weights(scopes, 6, 5, 7, seed=num_layers)
    m = Postnet(6, kernel_size=5, channels=7, num_layers=num_layers).eval()
    m.load_tf1_weights(w)
    assert sorted(m.tf1_weights()) == sorted(w)
    x = torch.randn(2, 8, 6)
    with torch.no_grad():
        y = m(x).numpy()
    np.testing.assert_allclose(y, np_stack(x.numpy(), w, scopes, ["tanh"] * (num_layers - 1) + ["linear"]), atol=1e-5)


def test_more_than_five_layers_needs_explicit_last_scope():
    with pytest.raises(ValueError, match="last_layer_scope_index"):
        Postnet(80, num_layers=6)
    with pytest.raises(ValueError, match="last_layer_scope_index"):
        Postnet(80, num_layers=4, last_layer_scope_index=3)
    m = Postnet(2, kernel_size=3, channels=4, num_layers=7, last_layer_scope_index=9, tf1_scope="post")
    names = sorted({k.split("/")[0] for k in m.tf1_weights()})
    assert names == sorted([f"conv_layer_{i}_post" for i in range(1, 7)] + ["conv_layer_9_post"])


def test_training_masks_reach_the_last_layer():
    scopes = ["conv_layer_1_postnet_convolutions", "conv_layer_5_postnet_convolutions"]
    w = tf1_weights(scopes, 3, 4, 4, seed=3)
    m = Postnet(3, kernel_size=4, channels=4, num_layers=2, drop_rate=0.5).train()
    m.load_tf1_weights(w)
    x = torch.randn(2, 5, 3)
    masks = [(torch.rand(2, 5, 4) > 0.5).float() for _ in range(2)]
    with torch.no_grad():
        y = m(x, masks).numpy()
    h = np_stack(x.numpy(), w, scopes[:1], ["tanh"], batch_stats=True) * 2.0 * masks[0].numpy()
    want = np_stack(h, w, scopes[1:], ["linear"], batch_stats=True) * 2.0 * masks[1].numpy()
    np.testing.assert_allclose(y, want, atol=1e-5)


def test_from_hparams():
    hp = type("HP", (), dict(num_mels=80, postnet_kernel_size=5, postnet_channels=32, postnet_num_layers=5,
                             tacotron_dropout_rate=0.5))
    m = Postnet.from_hparams(hp)
    assert (m.in_channels, m.kernel_size, m.channels, m.num_layers) == (80, 5, 32, 5)
