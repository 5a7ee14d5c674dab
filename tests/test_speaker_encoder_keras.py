import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import SpeakerEncoder

SMALL = dict(mel_n_channels=6, model_hidden_size=8, model_num_layers=2, model_embedding_size=5)


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_encoder(state, x):
    """Independent float64 numpy forward from a torch-layout state dict (gate order i, f, g, o)."""
    state = {k: np.asarray(v, np.float64) for k, v in state.items()}
    seq = x.astype(np.float64)
    k = 0
    while f"lstm.weight_ih_l{k}" in state:
        w_ih, w_hh = state[f"lstm.weight_ih_l{k}"], state[f"lstm.weight_hh_l{k}"]
        b = state[f"lstm.bias_ih_l{k}"] + state[f"lstm.bias_hh_l{k}"]
        n = w_hh.shape[1]
        h = np.zeros((seq.shape[0], n))
        c = np.zeros((seq.shape[0], n))
        outs = []
        for t in range(seq.shape[1]):
            z = seq[:, t] @ w_ih.T + h @ w_hh.T + b
            c = _sigmoid(z[:, n:2 * n]) * c + _sigmoid(z[:, :n]) * np.tanh(z[:, 2 * n:3 * n])
            h = _sigmoid(z[:, 3 * n:]) * np.tanh(c)
            outs.append(h)
        seq = np.stack(outs, 1)
        k += 1
    e = np.maximum(h @ state["linear.weight"].T + state["linear.bias"], 0.0)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-5)


def _random_state(seed=0, mel=6, hid=8, layers=2, emb=5):
    rng = np.random.default_rng(seed)
    st = {}
    for k in range(layers):
        n_in = mel if k == 0 else hid
        st[f"lstm.weight_ih_l{k}"] = rng.normal(0, 0.4, (4 * hid, n_in)).astype(np.float32)
        st[f"lstm.weight_hh_l{k}"] = rng.normal(0, 0.4, (4 * hid, hid)).astype(np.float32)
        st[f"lstm.bias_ih_l{k}"] = rng.normal(0, 0.5, (4 * hid,)).astype(np.float32)
        st[f"lstm.bias_hh_l{k}"] = rng.normal(0, 0.5, (4 * hid,)).astype(np.float32)
    st["linear.weight"] = rng.normal(0, 0.4, (emb, hid)).astype(np.float32)
    st["linear.bias"] = rng.normal(0, 0.1, (emb,)).astype(np.float32)
    st["similarity_weight"] = np.array([8.0], np.float32)
    st["similarity_bias"] = np.array([-3.0], np.float32)
    return st


def test_layer_contract():
    run_keras_layer_test(
        SpeakerEncoder, SMALL, _inputs, expected_output_shape=lambda b, t: (b, 5),
        bad_inputs=[([np.zeros((2, 7), np.float32)], "utterances"),
                    ([np.zeros((2, 7, 3), np.float32)], "(batch, frames, 6)"),
                    ([np.zeros((2, 7, 6), np.int32)], "floating")],
    )


def test_forward_matches_numpy_reference_from_torch_state():
    st = _random_state()
    layer = SpeakerEncoder(**SMALL)
    report = layer.load_torch_state_dict(st)  # unbuilt: builds itself
    assert layer.built and not report.missing and not report.unexpected
    x = np.random.default_rng(1).standard_normal((3, 9, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(layer(x)), numpy_encoder(st, x), atol=1e-5, rtol=0)
    out = layer.torch_state_dict()
    assert set(out) == set(st)
    for k in range(2):  # the two torch biases are stored as their sum
        np.testing.assert_allclose(out[f"lstm.bias_ih_l{k}"], st[f"lstm.bias_ih_l{k}"] + st[f"lstm.bias_hh_l{k}"],
                                   atol=1e-6)
        np.testing.assert_array_equal(out[f"lstm.bias_hh_l{k}"], 0.0)
    np.testing.assert_allclose(numpy_encoder(out, x), numpy_encoder(st, x), atol=1e-6)


def test_similarity_matrix_and_loss_hand_derived():
    layer = SpeakerEncoder(mel_n_channels=2)
    e = np.array([[[1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0], [0.6, 0.8]]], np.float32)
    c0 = np.array([0.5, 0.5]) / (np.sqrt(0.5) + 1e-5)
    c1 = np.array([-0.2, 0.4]) / (np.sqrt(0.2) + 1e-5)
    n = 1.0 + 1e-5
    cos = np.array([[[0.0, np.dot([1, 0], c1)], [0.0, np.dot([0, 1], c1)]],
                    [[np.dot([-1, 0], c0), -0.6 / n], [np.dot([0.6, 0.8], c0), -0.6 / n]]])
    np.testing.assert_allclose(np.asarray(layer.similarity_matrix(e)), 10 * cos - 5, atol=1e-5)
    logits = (10 * cos - 5).reshape(4, 2)
    want = np.mean(np.log(np.exp(logits).sum(1)) - logits[[0, 1, 2, 3], [0, 0, 1, 1]])
    loss, eer = layer.loss(e)
    assert eer is None
    np.testing.assert_allclose(float(loss), want, atol=1e-5)
    sep = np.repeat(np.eye(3, dtype=np.float32), 2, 0).reshape(3, 2, 3)
    assert layer.loss(sep, compute_eer=True)[1] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="embeds"):
        layer.similarity_matrix(np.zeros((3, 1, 2), np.float32))
    # usable in a graph with unknown speakers/utterances
    fn = tf.function(lambda x: layer.loss(x)[0], input_signature=[tf.TensorSpec([None, None, 2])])
    np.testing.assert_allclose(float(fn(e)), want, atol=1e-5)


def test_load_torch_state_dict_is_all_or_nothing():
    st = _random_state()
    layer = SpeakerEncoder(**SMALL)
    layer.load_torch_state_dict(st)
    before = layer.torch_state_dict()
    bad = dict(st)
    bad["linear.weight"] = np.zeros((8, 5), np.float32)  # transposed
    del bad["lstm.bias_hh_l1"]
    bad["extra.weight"] = np.zeros(1, np.float32)
    bad["lstm.weight_ih_l0"] = st["lstm.weight_ih_l0"] + 1.0  # valid, must not be assigned either
    with pytest.raises(ValueError) as err:
        layer.load_torch_state_dict(bad)
    msg = str(err.value)
    assert "linear.weight" in msg and "[5, 8]" in msg and "lstm.bias_hh_l1" in msg and "extra.weight" in msg
    for k, v in layer.torch_state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    partial = {k: v for k, v in st.items() if k != "similarity_bias"}
    partial["unknown"] = np.zeros(1, np.float32)
    report = layer.load_torch_state_dict(partial, strict=False)
    assert report.missing == ("similarity_bias",) and report.unexpected == ("unknown",)
