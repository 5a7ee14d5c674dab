import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import TAC

MICS = 3


def _valid(b):
    return ((np.arange(b) % MICS) + 1).astype(np.int32)


def _inputs(b, t):
    x = np.random.default_rng(b * 100 + t).standard_normal((b, MICS, 6, t, 2)).astype(np.float32)
    return [x, _valid(b)]


def _random_state(f=6, h=5, seed=0, prelu=True):
    rng = np.random.default_rng(seed)
    st = {}
    for stage, n_in, n_out in (("input_tf", f, h), ("avg_tf", h, h), ("concat_tf", 2 * h, f)):
        st[f"{stage}.0.weight"] = rng.normal(0, 0.5, (n_out, n_in)).astype(np.float32)
        st[f"{stage}.0.bias"] = rng.normal(0, 0.5, (n_out,)).astype(np.float32)
        if prelu:
            st[f"{stage}.1.weight"] = rng.uniform(0.05, 0.5, (1,)).astype(np.float32)
    st["norm.gamma"] = rng.normal(1, 0.3, (f,)).astype(np.float32)
    st["norm.beta"] = rng.normal(0, 0.3, (f,)).astype(np.float32)
    return st


def numpy_tac(st, x, valid):
    """Independent float64 reference in upstream's order: per-example loop over the valid mics, concat, gLN."""
    st = {k: np.asarray(v, np.float64) for k, v in st.items()}
    b, m, f, k, n = x.shape

    def tf_(p, v):
        z = v @ st[p + ".0.weight"].T + st[p + ".0.bias"]
        return np.where(z >= 0, z, st[p + ".1.weight"][0] * z)

    h = tf_("input_tf", x.astype(np.float64).transpose(0, 3, 4, 1, 2))  # (b, k, n, m, H)
    mean = np.stack([h[i, :, :, : valid[i]].mean(axis=2) for i in range(b)])
    avg = np.broadcast_to(tf_("avg_tf", mean)[:, :, :, None], h.shape)
    y = tf_("concat_tf", np.concatenate([h, avg], -1)).transpose(0, 3, 4, 1, 2)  # (b, m, f, k, n)
    mu = y.mean(axis=(2, 3, 4), keepdims=True)
    var = ((y - mu) ** 2).mean(axis=(2, 3, 4), keepdims=True)
    y = (y - mu) / np.sqrt(var + 1e-8) * st["norm.gamma"][:, None, None] + st["norm.beta"][:, None, None]
    return y + x


def test_layer_contract():
    x = np.zeros((2, MICS, 6, 4, 2), np.float32)
    run_keras_layer_test(
        TAC, dict(input_dim=6, hidden_dim=5), _inputs, expected_output_shape=lambda b, t: (b, MICS, 6, t, 2),
        bad_inputs=[([np.zeros((2, MICS, 6, 4), np.float32)], "x"),
                    ([np.zeros((2, MICS, 5, 4, 2), np.float32)], "(batch, mics, 6, chunk_size, n_chunks)"),
                    ([x, np.array([2, 0], np.int32)], "valid_mics"),
                    ([x, np.array([2, 4], np.int32)], "valid_mics"),
                    ([x, np.array([2.0, 1.0], np.float32)], "valid_mics"),
                    ([x, np.array([2, 1, 1], np.int32)], "valid_mics")],
    )


@pytest.mark.parametrize("valid", [[3, 1, 2], None, [0, 0, 0]])
def test_matches_numpy_upstream_reference(valid):
    st = _random_state()
    layer = TAC(6, 5)
    layer.load_torch_state_dict(st)
    x = np.random.default_rng(4).standard_normal((3, MICS, 6, 4, 2)).astype(np.float32)
    vm = None if valid is None else np.array(valid, np.int32)
    ref_valid = [MICS] * 3 if valid is None or max(valid) == 0 else valid
    np.testing.assert_allclose(np.asarray(layer(x, vm)), numpy_tac(st, x, ref_valid), atol=1e-5, rtol=0)


def test_padded_slots_never_influence_valid_outputs_and_graph_check():
    layer = TAC(6, 5)
    layer.load_torch_state_dict(_random_state(seed=3))
    x = np.random.default_rng(5).standard_normal((2, 4, 6, 3, 2)).astype(np.float32)
    vm = np.array([2, 4], np.int32)
    noisy = x.copy()
    noisy[0, 2:] = np.nan
    y, yn = np.asarray(layer(x, vm)), np.asarray(layer(noisy, vm))
    np.testing.assert_array_equal(yn[0, :2], y[0, :2])
    np.testing.assert_array_equal(yn[1], y[1])
    fn = tf.function(lambda a, v: layer(a, v), input_signature=[tf.TensorSpec([None, None, 6, None, None]),
                                                                 tf.TensorSpec([None], tf.int32)])
    np.testing.assert_allclose(np.asarray(fn(x, vm)), y, atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="valid_mics"):
        fn(x, np.array([2, 5], np.int32))


def test_torch_state_dict_keys_and_all_or_nothing():
    st = _random_state()
    layer = TAC(6, 5)
    layer.load_torch_state_dict(st)
    out = layer.torch_state_dict()
    assert set(out) == set(st)
    for k in st:
        np.testing.assert_array_equal(out[k], st[k])
    bad = dict(st, **{"norm.gamma": np.ones(5, np.float32), "avg_tf.0.bias": st["avg_tf.0.bias"] + 1})
    del bad["input_tf.1.weight"]
    with pytest.raises(ValueError) as err:
        layer.load_torch_state_dict(bad)
    assert "norm.gamma" in str(err.value) and "input_tf.1.weight" in str(err.value)
    np.testing.assert_array_equal(layer.torch_state_dict()["avg_tf.0.bias"], st["avg_tf.0.bias"])
    relu = TAC(6, 5, activation="relu", norm_type="cLN")
    relu.load_torch_state_dict(_random_state(prelu=False))
    assert "input_tf.1.weight" not in relu.torch_state_dict()
    with pytest.raises(ValueError, match="norm_type"):
        TAC(6, norm_type="bN")
