import os
import pickle

import numpy as np
import pytest
import torch

from bench._seed_references_ge2e_tac import ge2e_eer_reference, ge2e_loss_loop, ge2e_similarity_matrix_loop
from tests.helpers.torch_module_test import run_torch_module_test
from torch_layers import SpeakerEncoder
from torch_layers.speaker_encoder import partial_windows

SMALL = dict(mel_n_channels=6, model_hidden_size=8, model_num_layers=2, model_embedding_size=5)


def _inputs(b, t, dtype):
    g = torch.Generator().manual_seed(b * 100 + t)
    return [torch.randn(b, t, 6, generator=g, dtype=dtype)]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_encoder(state, x):
    """Independent float64 numpy forward: stacked LSTM (torch gate order i, f, g, o), linear, ReLU, L2 norm."""
    state = {k: v.detach().double().numpy() for k, v in state.items()}
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
            i, f, g, o = _sigmoid(z[:, :n]), _sigmoid(z[:, n:2 * n]), np.tanh(z[:, 2 * n:3 * n]), _sigmoid(z[:, 3 * n:])
            c = f * c + i * g
            h = o * np.tanh(c)
            outs.append(h)
        seq = np.stack(outs, 1)
        k += 1
    e = np.maximum(h @ state["linear.weight"].T + state["linear.bias"], 0.0)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-5)


def _randomised(**kw):
    torch.manual_seed(1)
    m = SpeakerEncoder(**kw).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.startswith("lstm.bias"):
                p.normal_(0.0, 0.5)  # the two torch biases must both count
    return m


def test_module_contract():
    run_torch_module_test(
        SpeakerEncoder, (), SMALL, make_inputs=_inputs, expected_output_shape=lambda b, t: (b, 5),
        bad_inputs=[([torch.zeros(2, 7)], "utterances"), ([torch.zeros(2, 7, 3)], "(batch, frames, 6)"),
                    ([torch.zeros(2, 7, 6, dtype=torch.int64)], "floating"),
                    ([torch.zeros(2, 0, 6)], "utterances")],
    )



def test_export_with_hidden_init_takes_other_batch_and_frames():
    """The exported scan LSTM (dynamic batch and frames) starts from ``hidden_init`` like ``nn.LSTM`` (eager)."""
    from torch.export import Dim

    m = _randomised(**SMALL)
    g = torch.Generator().manual_seed(4)

    def args(b, t):
        return (torch.randn(b, t, 6, generator=g),
                (torch.randn(2, b, 8, generator=g), torch.randn(2, b, 8, generator=g)))

    batch, frames = Dim("batch"), Dim("frames")
    with torch.no_grad():
        ep = torch.export.export(m, args(2, 7), dynamic_shapes=({0: batch, 1: frames}, ({1: batch}, {1: batch})))
        for b, t in ((3, 4), (1, 11)):
            a = args(b, t)
            want = m(*a)
            torch.testing.assert_close(ep.module()(*a), want, atol=1e-5, rtol=0)
            assert (want - m(a[0])).abs().max() > 1e-3  # the initial state matters

def test_state_dict_keys_are_upstream():
    keys = set(SpeakerEncoder().state_dict())
    expect = {f"lstm.{w}_l{k}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh") for k in range(3)}
    expect |= {"linear.weight", "linear.bias", "similarity_weight", "similarity_bias"}
    assert keys == expect
    m = SpeakerEncoder()
    assert m.lstm.weight_ih_l0.shape == (1024, 40) and m.linear.weight.shape == (256, 256)
    assert m.similarity_weight.item() == 10.0 and m.similarity_bias.item() == -5.0


def test_forward_matches_numpy_lstm_reference():
    m = _randomised(**SMALL)
    x = np.random.default_rng(3).standard_normal((3, 9, 6)).astype(np.float32)
    with torch.no_grad():
        got = m(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, numpy_encoder(m.state_dict(), x), atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)


def _embeds(s, u, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(s, u, d, generator=g) + 2.0 * torch.randn(s, 1, d, generator=g)
    return torch.nn.functional.normalize(e, dim=2)


def test_similarity_matrix_hand_derived():
    # 2 speakers x 2 utterances in 2-D: exclusive centroid of an utterance = the other utterance
    e = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0], [0.6, 0.8]]])
    m = SpeakerEncoder(mel_n_channels=2)
    sim = m.similarity_matrix(e).detach().numpy()
    c0 = np.array([0.5, 0.5]) / (np.sqrt(0.5) + 1e-5)
    c1 = np.array([-0.2, 0.4]) / (np.sqrt(0.2) + 1e-5)
    n = 1.0 + 1e-5
    expect = np.array([
        [[0.0 / n, np.dot([1, 0], c1)], [0.0 / n, np.dot([0, 1], c1)]],
        [[np.dot([-1, 0], c0), 0.6 / n * -1], [np.dot([0.6, 0.8], c0), -0.6 / n]],
    ])
    np.testing.assert_allclose(sim, 10.0 * expect - 5.0, atol=1e-5)
    loss, eer = m.loss(e, compute_eer=False)
    logits = (10.0 * expect - 5.0).reshape(4, 2)
    lse = np.log(np.exp(logits).sum(1))
    np.testing.assert_allclose(loss.item(), np.mean(lse - logits[[0, 1, 2, 3], [0, 0, 1, 1]]), atol=1e-5)
    assert eer is None


def test_vectorised_loss_equals_speaker_loop_reference_with_gradients():
    m = SpeakerEncoder()
    with torch.no_grad():
        m.similarity_weight.fill_(7.0)
        m.similarity_bias.fill_(-2.0)
    e = _embeds(6, 4, 16)
    sim_ref = ge2e_similarity_matrix_loop(e, m.similarity_weight, m.similarity_bias)
    torch.testing.assert_close(m.similarity_matrix(e), sim_ref, atol=1e-6, rtol=0)

    x1 = e.clone().requires_grad_(True)
    x2 = e.clone().requires_grad_(True)
    loss, eer = m.loss(x1)
    loss.backward()
    g_w, g_b = m.similarity_weight.grad.clone(), m.similarity_bias.grad.clone()
    m.zero_grad()
    ref = ge2e_loss_loop(x2, m.similarity_weight, m.similarity_bias)
    ref.backward()
    torch.testing.assert_close(loss, ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-6, rtol=0)
    torch.testing.assert_close(g_w, m.similarity_weight.grad, atol=1e-6, rtol=0)
    torch.testing.assert_close(g_b, m.similarity_bias.grad, atol=1e-6, rtol=0)
    assert eer == pytest.approx(ge2e_eer_reference(sim_ref.detach().reshape(24, 6).numpy(), 6, 4), abs=1e-12)


def test_eer_hand_derived():
    m = SpeakerEncoder()
    # perfectly separated speakers: every target score above every non-target -> EER 0
    e = torch.eye(3).repeat_interleave(2, 0).view(3, 2, 3)
    assert m.loss(e)[1] == pytest.approx(0.0, abs=1e-9)


def test_bad_embeds():
    m = SpeakerEncoder()
    with pytest.raises(ValueError, match="embeds"):
        m.similarity_matrix(torch.zeros(3, 1, 4))  # one utterance: no exclusive centroid
    with pytest.raises(ValueError, match="embeds"):
        m.loss(torch.zeros(3, 4))


def test_do_gradient_ops_hand_derived():
    m = SpeakerEncoder(mel_n_channels=2, model_hidden_size=2, model_num_layers=1, model_embedding_size=2)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    m.similarity_weight.grad.fill_(300.0)
    m.similarity_bias.grad.fill_(400.0)
    m.linear.bias.grad.fill_(0.0)
    m.do_gradient_ops()
    # scaled: 3 and 4 -> global norm 5 -> clipped to 3: 1.8 and 2.4
    assert float(m.similarity_weight.grad) == pytest.approx(1.8, rel=1e-5)
    assert float(m.similarity_bias.grad) == pytest.approx(2.4, rel=1e-5)


def test_from_checkpoint_bare_and_model_state_forms(tmp_path):
    src = _randomised(**SMALL)
    x = torch.randn(2, 5, 6)
    with torch.no_grad():
        want = src(x)
    bare = tmp_path / "bare.pt"
    rtvc = tmp_path / "encoder.pt"
    torch.save(src.state_dict(), bare)
    opt = torch.optim.SGD(src.parameters(), lr=0.1)
    torch.save({"step": 7, "model_state": src.state_dict(), "optimizer_state": opt.state_dict()}, rtvc)
    for path in (bare, rtvc):
        m = SpeakerEncoder.from_checkpoint(path).eval()
        assert (m.mel_n_channels, m.model_hidden_size, m.model_num_layers, m.model_embedding_size) == (6, 8, 2, 5)
        with torch.no_grad():
            torch.testing.assert_close(m(x), want, atol=0, rtol=0)
    m64 = SpeakerEncoder.from_checkpoint(rtvc, dtype=torch.float64)
    assert m64.linear.weight.dtype == torch.float64


class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_from_checkpoint_refuses_arbitrary_objects(tmp_path):
    marker = str(tmp_path / "code_ran")
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"model_state": _Payload(marker)}, f, protocol=2)
    with pytest.raises(ValueError, match="refused"):
        SpeakerEncoder.from_checkpoint(path)
    assert not os.path.exists(marker)
    torch.save({"something": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="no encoder state dict"):
        SpeakerEncoder.from_checkpoint(tmp_path / "other.pt")


def test_partial_windows_hand_derived():
    assert partial_windows(200) == [(0, 160), (80, 240)]  # last covers 120/160 = 75 %: kept
    assert partial_windows(199) == [(0, 160)]  # (80, 240) covers 119/160 < 75 %: dropped
    assert partial_windows(100) == [(0, 160)]  # the only window is always kept
    assert partial_windows(160) == [(0, 160)]
    assert partial_windows(320) == [(0, 160), (80, 240), (160, 320)]  # (240, 400) covers 50 %
    assert partial_windows(10, partials_n_frames=4, overlap=0.5, min_coverage=0.5) == [(0, 4), (2, 6), (4, 8), (6, 10),
                                                                                         (8, 12)]
    with pytest.raises(ValueError, match="overlap"):
        partial_windows(10, overlap=1.0)


def test_embed_utterance_averages_partials_and_renormalises():
    m = _randomised(mel_n_channels=3, model_hidden_size=4, model_num_layers=1, model_embedding_size=3)
    mel = torch.randn(200, 3)
    with torch.no_grad():
        embed, partials, windows = m.embed_utterance(mel, return_partials=True)
        padded = torch.cat([mel, torch.zeros(40, 3)])
        p1, p2 = m(padded[None, 0:160]), m(padded[None, 80:240])
    assert windows == [(0, 160), (80, 240)]
    torch.testing.assert_close(partials, torch.cat([p1, p2]), atol=1e-6, rtol=0)
    mean = (p1 + p2)[0] / 2
    torch.testing.assert_close(embed, mean / mean.norm(), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="mel"):
        m.embed_utterance(torch.randn(2, 200, 3))
