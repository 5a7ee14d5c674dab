import numpy as np
import pytest

from tests.helpers.deploy_limits import checked_elsewhere
from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import EncoderConvolutions

ACT = {"relu": lambda v: np.maximum(v, 0.0), "tanh": np.tanh, "linear": lambda v: v}


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def _tf1_weights(scopes, in_channels, kernel_size, channels, seed=0):
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


def _np_stack(x, w, scopes, acts, bn_position="before"):
    """Independent numpy reference: TF 'same' conv -> inference batch norm -> activation (per layer)."""
    x = x.astype(np.float64)
    for s, act in zip(scopes, acts):
        k = w[f"{s}/conv1d/kernel"].astype(np.float64)
        ks = k.shape[0]
        before = (ks - 1) // 2
        xp = np.pad(x, ((0, 0), (before, ks - 1 - before), (0, 0)))
        y = sum(xp[:, j:j + x.shape[1]] @ k[j] for j in range(ks)) + w[f"{s}/conv1d/bias"]

        def bn(v, s=s):
            return ((v - w[f"{s}/batch_normalization/moving_mean"])
                    / np.sqrt(w[f"{s}/batch_normalization/moving_variance"] + 1e-3)
                    * w[f"{s}/batch_normalization/gamma"] + w[f"{s}/batch_normalization/beta"])

        x = ACT[act](bn(y)) if bn_position == "before" else bn(ACT[act](y))
    return x


@pytest.mark.parametrize("bn_position", ["before", "after"])
def test_layer_contract(bn_position):
    run_keras_layer_test(
        EncoderConvolutions,
        dict(kernel_size=4, channels=5, num_layers=2, drop_rate=0.5, activation="tanh", bn_position=bn_position),
        _inputs,
        expected_output_shape=lambda b, t: (b, t, 5),
        changes_in_training=True,
        test_mixed_precision=bn_position == "before",
        bad_inputs=[
            ([np.zeros((2, 7), np.float32)], "inputs"),
            ([np.zeros((2, 7, 3), np.float32)], "(batch, time, 6)"),
            ([np.zeros((2, 7, 6), np.int32)], "floating"),
        ],
        **({} if bn_position == "before"
           else checked_elsewhere("the bn_position=before case", ("export", "xla", "litert"))),
    )


@pytest.mark.parametrize("kernel_size,bn_position,activation", [(5, "before", "relu"), (4, "after", "tanh")])
def test_matches_numpy_reference_with_rayhane_names(kernel_size, bn_position, activation):
    scopes = [f"conv_layer_{i}_encoder_convolutions" for i in (1, 2, 3)]  # docs/ARCHITECTURE.md, TF1 names names
    w = _tf1_weights(scopes, 6, kernel_size, 7)
    block = EncoderConvolutions(kernel_size=kernel_size, channels=7, num_layers=3, activation=activation,
                                bn_position=bn_position, tf1_scope="encoder_convolutions")
    block.load_tf1_weights(w)  # strict: the names must be exactly TF1's
    x = np.random.default_rng(1).standard_normal((2, 9, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(block(x, training=False)),
                               _np_stack(x, w, scopes, [activation] * 3, bn_position), atol=1e-5)
    assert sorted(block.tf1_weights()) == sorted(w)


def test_injected_masks_drop_exactly_and_rescale():
    scopes = ["conv_layer_1_enc_conv_layers"]
    w = _tf1_weights(scopes, 3, 3, 4)
    block = EncoderConvolutions(kernel_size=3, channels=4, num_layers=1, drop_rate=0.25, activation="linear")
    block.load_tf1_weights(w)
    x = np.random.default_rng(2).standard_normal((2, 5, 3)).astype(np.float32)
    mask = (np.random.default_rng(3).random((2, 5, 4)) > 0.3).astype(np.float32)
    y = np.asarray(block(x, training=False, dropout_masks=[mask]))
    np.testing.assert_allclose(y, _np_stack(x, w, scopes, ["linear"]) * mask / 0.75, atol=1e-5)


def test_dropout_masks_errors_name_the_argument():
    block = EncoderConvolutions(kernel_size=3, channels=4, num_layers=2)
    x = np.zeros((2, 5, 3), np.float32)
    with pytest.raises(ValueError, match="dropout_masks"):
        block(x, training=True, dropout_masks=[np.ones((2, 5, 4), np.float32)])
    with pytest.raises(ValueError, match=r"dropout_masks\[1\].*\(batch, time, 4\)"):
        block(x, training=True, dropout_masks=[np.ones((2, 5, 4), np.float32), np.ones((2, 5, 3), np.float32)])


def test_load_before_build_and_all_or_nothing():
    src = EncoderConvolutions(kernel_size=3, channels=4, num_layers=2, tf1_scope="enc")
    src(np.zeros((1, 2, 5), np.float32))
    w = src.tf1_weights()
    assert "conv_layer_2_enc/batch_normalization/moving_variance" in w
    dst = EncoderConvolutions(kernel_size=3, channels=4, num_layers=2, tf1_scope="enc")
    dst.load_tf1_weights(w)
    assert dst.built and dst.in_channels == 5
    before = dst.tf1_weights()
    bad = {k: v + 1 for k, v in w.items() if k != "conv_layer_1_enc/conv1d/bias"}
    bad["conv_layer_2_enc/conv1d/kernel"] = np.zeros((3, 4, 9), np.float32)
    with pytest.raises(ValueError) as err:
        dst.load_tf1_weights(bad)
    assert "conv_layer_1_enc/conv1d/bias" in str(err.value) and "conv_layer_2_enc/conv1d/kernel" in str(err.value)
    for k, v in dst.tf1_weights().items():
        np.testing.assert_array_equal(v, before[k])


def test_from_hparams_and_constructor_errors():
    hp = dict(enc_conv_kernel_size=5, enc_conv_channels=16, enc_conv_num_layers=3, tacotron_dropout_rate=0.5)
    block = EncoderConvolutions.from_hparams(hp, tf1_scope="encoder_convolutions")
    assert (block.kernel_size, block.channels, block.num_layers, block.drop_rate) == (5, 16, 3, 0.5)
    with pytest.raises(ValueError, match="num_layers"):
        EncoderConvolutions(num_layers=0)
    with pytest.raises(ValueError, match="drop_rate"):
        EncoderConvolutions(drop_rate=1.0)
    with pytest.raises(ValueError, match="bn_position"):
        EncoderConvolutions(bn_position="middle")
    with pytest.raises(ValueError, match="enc_conv_channels"):
        EncoderConvolutions.from_hparams({"enc_conv_kernel_size": 5})
