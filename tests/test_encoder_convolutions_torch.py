import numpy as np
import pytest
import torch

from tests.helpers.deploy_limits import checked_elsewhere
from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import EncoderConvolutions

ACT = {"relu": lambda v: np.maximum(v, 0.0), "tanh": np.tanh, "linear": lambda v: v}


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def tf1_weights(scopes, in_channels, kernel_size, channels, seed=0):
    """Random TF1-layout weights under hand-written TF1 names."""
    rng = np.random.default_rng(seed)
    w, cin = {}, in_channels
    for s in scopes:
        w[f"{s}/conv1d/kernel"] = (rng.standard_normal((kernel_size, cin, channels)).astype(np.float32)
                                   / np.sqrt(cin * kernel_size))
        w[f"{s}/conv1d/bias"] = 0.1 * rng.standard_normal(channels).astype(np.float32)
        w[f"{s}/batch_normalization/gamma"] = (1 + 0.1 * rng.standard_normal(channels)).astype(np.float32)
        w[f"{s}/batch_normalization/beta"] = 0.1 * rng.standard_normal(channels).astype(np.float32)
        w[f"{s}/batch_normalization/moving_mean"] = 0.1 * rng.standard_normal(channels).astype(np.float32)
        w[f"{s}/batch_normalization/moving_variance"] = rng.uniform(0.5, 1.5, channels).astype(np.float32)
        cin = channels
    return w


def np_stack(x, w, scopes, acts, bn_position="before", batch_stats=False):
    """Independent numpy reference: TF 'same' conv -> batch norm (moving or batch statistics) -> activation."""
    x = np.asarray(x, np.float64)
    for s, act in zip(scopes, acts):
        k = w[f"{s}/conv1d/kernel"].astype(np.float64)
        ks = k.shape[0]
        before = (ks - 1) // 2
        xp = np.pad(x, ((0, 0), (before, ks - 1 - before), (0, 0)))
        y = sum(xp[:, j:j + x.shape[1]] @ k[j] for j in range(ks)) + w[f"{s}/conv1d/bias"]

        def bn(v, s=s):
            mean, var = ((v.mean(axis=(0, 1)), v.var(axis=(0, 1))) if batch_stats else
                         (w[f"{s}/batch_normalization/moving_mean"], w[f"{s}/batch_normalization/moving_variance"]))
            return ((v - mean) / np.sqrt(var + 1e-3) * w[f"{s}/batch_normalization/gamma"]
                    + w[f"{s}/batch_normalization/beta"])

        x = ACT[act](bn(y)) if bn_position == "before" else bn(ACT[act](y))
    return x


@pytest.mark.parametrize("bn_position", ["before", "after"])
def test_module_contract(bn_position):
    run_torch_module_test(
        EncoderConvolutions, (6,), dict(kernel_size=4, channels=5, num_layers=2, drop_rate=0.5, activation="tanh",
                                        bn_position=bn_position),
        make_inputs=_inputs, expected_output_shape=lambda b, t: (b, t, 5), changes_in_training=True,
        bad_inputs=[([torch.zeros(2, 7)], "inputs"), ([torch.zeros(2, 7, 3)], "(batch, time, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating")],
        **({} if bn_position == "before" else checked_elsewhere("the bn_position=before case", ("export", "compile"))),
    )


@pytest.mark.parametrize("kernel_size,bn_position,activation", [(5, "before", "relu"), (4, "after", "tanh")])
def test_matches_numpy_reference_with_rayhane_names(kernel_size, bn_position, activation):
    scopes = [f"conv_layer_{i}_encoder_convolutions" for i in (1, 2, 3)]
    w = tf1_weights(scopes, 6, kernel_size, 7)
    m = EncoderConvolutions(6, kernel_size=kernel_size, channels=7, num_layers=3, activation=activation,
                            bn_position=bn_position, tf1_scope="encoder_convolutions").eval()
    m.load_tf1_weights(w)
    x = torch.randn(2, 9, 6)
    with torch.no_grad():
        y = m(x).numpy()
    np.testing.assert_allclose(y, np_stack(x.numpy(), w, scopes, [activation] * 3, bn_position), atol=1e-5)
    assert sorted(m.tf1_weights()) == sorted(w)


def test_training_with_injected_masks_uses_batch_statistics():
    scopes = ["conv_layer_1_enc_conv_layers", "conv_layer_2_enc_conv_layers"]
    w = tf1_weights(scopes, 3, 3, 4, seed=1)
    m = EncoderConvolutions(3, kernel_size=3, channels=4, num_layers=2, drop_rate=0.5).train()
    m.load_tf1_weights(w)
    x = torch.randn(3, 6, 3)
    masks = [(torch.rand(3, 6, 4) > 0.5).float() for _ in range(2)]
    with torch.no_grad():
        y = m(x, masks).numpy()
    h = np_stack(x.numpy(), w, scopes[:1], ["relu"], batch_stats=True) * 2.0 * masks[0].numpy()
    want = np_stack(h, w, scopes[1:], ["relu"], batch_stats=True) * 2.0 * masks[1].numpy()
    np.testing.assert_allclose(y, want, atol=1e-5)


def test_mask_errors_and_hparams():
    m = EncoderConvolutions(3, kernel_size=3, channels=4, num_layers=2).train()
    x = torch.zeros(2, 5, 3)
    with pytest.raises(ValueError, match="dropout_masks"):
        m(x, [torch.ones(2, 5, 4)])
    with pytest.raises(ValueError, match=r"dropout_masks\[1\].*\(2, 5, 4\)"):
        m(x, [torch.ones(2, 5, 4), torch.ones(2, 5, 3)])
    hp = dict(embedding_dim=12, enc_conv_kernel_size=5, enc_conv_channels=16, enc_conv_num_layers=3,
              tacotron_dropout_rate=0.5)
    e = EncoderConvolutions.from_hparams(hp)
    assert (e.in_channels, e.kernel_size, e.channels, e.num_layers) == (12, 5, 16, 3)
    with pytest.raises(ValueError, match="activation"):
        EncoderConvolutions(3, activation="prelu")
    with pytest.raises(ValueError, match="num_layers"):
        EncoderConvolutions(3, num_layers=0)


def test_load_is_all_or_nothing():
    m = EncoderConvolutions(3, kernel_size=3, channels=4, num_layers=2, tf1_scope="enc")
    w = m.tf1_weights()
    before = {k: v.copy() for k, v in w.items()}
    bad = {k: v + 1 for k, v in w.items() if k != "conv_layer_2_enc/batch_normalization/beta"}
    with pytest.raises(ValueError, match="conv_layer_2_enc/batch_normalization/beta"):
        m.load_tf1_weights(bad)
    for k, v in m.tf1_weights().items():
        np.testing.assert_array_equal(v, before[k])
