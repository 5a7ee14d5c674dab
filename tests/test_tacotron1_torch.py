"""Torch ``Tacotron1`` / ``Tacotron1Decoder`` (keithito/tacotron both layouts, mimic2).

Checked against (a) a float64 numpy statement of the decoder written here from the originals'
semantics (one step, teacher forcing, free running with the exact-zero stop, ``max_iters``), reading the TF1 weights by
their TF1 names. The TF1 legacy graph (outputs, losses, every variable's gradient, all three layouts) is
``parity_tests/cases/tacotron1.py``'s, for Keras and torch at once (one set of legacy graphs). Also: TF1 names
against the schema, state-dict and TF1 round trips, the migrated-file reader, train()/eval(), the loss and the
ValueErrors.
"""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from speechblocks.tacotron1_schema import DECODER_CELL, attention_cell_scopes, tf1_variable_shapes
from tests.test_bahdanau_attention_torch import same
from torch_layers import MigratedFileError, Tacotron1, Tacotron1Decoder, TF1GRUCell
from torch_layers.tf1_gru_cell import gru_step

SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, embed_depth=5, prenet_depths=[6, 4], encoder_depth=6,
             attention_depth=5, decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=5)
CASES = [("keithito", "keithito-20180906"), ("keithito", "keithito-20170720"), ("mimic2", "mimic2")]
B, T_IN, T_OUT, M, E = 2, 7, 8, 6, 6
LEGACY = (importlib.util.find_spec("tf_keras") is not None
          and importlib.util.find_spec("parity_tests.legacy.builders_tacotron1") is not None)


def hparams(preset):
    """The small hparams under the preset's own names (mimic2 calls the embedding width ``embedding_dim``)."""
    hp = dict(SMALL)
    if preset == "mimic2":
        hp["embedding_dim"] = hp.pop("embed_depth")
    return hp


# -- numpy statement of the decoder (float64) -------------------------------------------------------------------
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_gru(w, scope, x, h):
    """TF1 ``GRUCell``: ``[r, u] = sigmoid([x, h] Wg + bg)``, ``c = tanh([x, r h] Wc + bc)``, ``u h + (1 - u) c``."""
    r, u = np.split(sigmoid(np.concatenate([x, h], 1) @ w[f"{scope}/gates/kernel"] + w[f"{scope}/gates/bias"]), 2, 1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ w[f"{scope}/candidate/kernel"] + w[f"{scope}/candidate/bias"])
    return u * h + (1 - u) * c


def np_prenet(w, scope, x, keeps):
    """relu dense layers, each followed by ``x / 0.5 * keep`` where a keep-mask is given."""
    for i, keep in enumerate(keeps):
        x = np.maximum(x @ w[f"{scope}/dense_{i + 1}/kernel"] + w[f"{scope}/dense_{i + 1}/bias"], 0)
        if keep is not None:
            x = x / 0.5 * keep
    return x


def np_attention(w, scope, keys, memory, query, previous, located):
    """Bahdanau score (plus mimic2's location term of the previous alignments), softmax, context."""
    pre = keys + (query @ w[f"{scope}/query_layer/kernel"])[:, None]
    if located:
        kernel = w[f"{scope}/location_conv/kernel"]
        k = kernel.shape[0]
        padded = np.pad(previous, ((0, 0), ((k - 1) // 2, k - 1 - (k - 1) // 2)))
        f = np.stack([padded[:, t:t + k] @ kernel[:, 0] for t in range(previous.shape[1])], 1)
        pre = pre + f @ w[f"{scope}/location_layer/kernel"]
    score = np.tanh(pre) @ w[f"{scope}/attention_v"]
    e = np.exp(score - score.max(1, keepdims=True))
    align = e / e.sum(1, keepdims=True)
    return np.einsum("bj,bje->be", align, memory), align


def np_step(w, layout, memory, keys, x, state, keeps):
    """One decoder step (spec section 5); returns ``(frames, new_state)``."""
    scopes = attention_cell_scopes(layout)
    h_att, context, previous, h1, h2 = state
    if layout == "keithito-20180906":
        cell_in = np.concatenate([np_prenet(w, scopes["prenet"], x, keeps), context], 1)
    else:
        cell_in = np_prenet(w, scopes["prenet"], np.concatenate([x, context], 1), keeps)
    h_att = np_gru(w, scopes["gru"], cell_in, h_att)
    context, align = np_attention(w, scopes["attention"], keys, memory, h_att, previous, layout == "mimic2")
    cell0 = f"{DECODER_CELL}/cell_0/output_projection_wrapper"
    out0 = np.concatenate([h_att, context], 1) @ w[f"{cell0}/kernel"] + w[f"{cell0}/bias"]
    h1 = np_gru(w, f"{DECODER_CELL}/cell_1/gru_cell", out0, h1)
    out1 = out0 + h1
    h2 = np_gru(w, f"{DECODER_CELL}/cell_2/gru_cell", out1, h2)
    frames = (out1 + h2) @ w["decoder/output_projection_wrapper/kernel"] + w["decoder/output_projection_wrapper/bias"]
    return frames, (h_att, context, align, h1, h2)


def np_decode(w, layout, memory, mel_targets=None, max_iters=5, masks=None, r=2):
    """``dynamic_decode`` (spec section 6): teacher forcing or free running with the exact-zero stop.
    Returns ``(frames (B, steps, M*r), alignments (B, T_in, steps))``."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    memory = memory.astype(np.float64)
    batch, max_time = memory.shape[:2]
    keys = memory @ w["memory_layer/kernel"]
    units = w["memory_layer/kernel"].shape[1]
    dec = w[f"{DECODER_CELL}/cell_1/gru_cell/candidate/bias"].shape[0]
    state = (np.zeros((batch, units)), np.zeros((batch, memory.shape[2])), np.zeros((batch, max_time)),
             np.zeros((batch, dec)), np.zeros((batch, dec)))
    steps = max_iters if mel_targets is None else min(mel_targets.shape[1] // r, max_iters)
    x = np.zeros((batch, M))
    finished = np.zeros(batch, bool)
    frames_out, aligns = [], []
    for t in range(steps):
        keeps = [None, None] if masks is None else [m[:, t] for m in masks]
        frames, state = np_step(w, layout, memory, keys, x, state, keeps)
        frames_out.append(frames)
        aligns.append(state[2])
        if mel_targets is not None:
            x = mel_targets[:, (t + 1) * r - 1] if t + 1 < steps else None
        else:
            x = frames[:, -M:]
            finished |= (frames == 0).all(1)
            if finished.all():
                break
    return np.stack(frames_out, 1), np.stack(aligns, 2)


def _decoder(preset, layout, seed=0, **kw):
    torch.manual_seed(seed)
    return Tacotron1Decoder(hparams(preset), layout, **kw)


def _memory(seed=1):
    return torch.randn(B, T_IN, E, generator=torch.Generator().manual_seed(seed))


# -- (a) against the numpy statement -----------------------------------------------------------------------------
@pytest.mark.parametrize("preset,layout", CASES)
def test_decoder_matches_numpy(preset, layout):
    """Teacher forcing in eval(), in train() with injected pre-net masks, and free running (capped at 3)."""
    dec = _decoder(preset, layout)
    w, memory = dec.tf1_weights(), _memory()
    targets = torch.randn(B, T_OUT + 1, M, generator=torch.Generator().manual_seed(2))  # 9 frames: 4 steps
    g = torch.Generator().manual_seed(3)
    masks = [(torch.rand(B, 4, d, generator=g) > 0.5).float() for d in SMALL["prenet_depths"]]
    with torch.no_grad():
        frames, align = dec.eval()(memory, mel_targets=targets)
        ref = np_decode(w, layout, memory.numpy(), targets.numpy())
        np.testing.assert_allclose(frames.numpy(), ref[0], atol=2e-5)
        np.testing.assert_allclose(align.numpy(), ref[1], atol=2e-5)
        assert frames.shape == (B, 4, M * 2) and align.shape == (B, T_IN, 4)
        frames, align = dec.train()(memory, mel_targets=targets, noise_masks={"decoder_prenet": masks})
        ref = np_decode(w, layout, memory.numpy(), targets.numpy(), masks=[m.numpy() for m in masks])
        np.testing.assert_allclose(frames.numpy(), ref[0], atol=2e-5)
        np.testing.assert_allclose(align.numpy(), ref[1], atol=2e-5)
        frames, align = dec.eval()(memory, max_iters=3)
        ref = np_decode(w, layout, memory.numpy(), max_iters=3)
        assert frames.shape == (B, 3, M * 2)
        np.testing.assert_allclose(frames.numpy(), ref[0], atol=2e-5)
        np.testing.assert_allclose(align.numpy(), ref[1], atol=2e-5)


def test_gru_step_is_tf1_gru_cell_maths():
    """The one GRU step the cell and the decoder loop run, against TF1 GRUCell's maths in float64 numpy."""
    torch.manual_seed(0)
    cell = TF1GRUCell(4, 3)
    x, h = torch.randn(2, 4), torch.randn(2, 3)
    gk, gb = cell.gates.weight.detach().double().numpy().T, cell.gates.bias.detach().double().numpy()
    ck, cb = cell.candidate.weight.detach().double().numpy().T, cell.candidate.bias.detach().double().numpy()
    xn, hn = x.double().numpy(), h.double().numpy()
    sig = 1.0 / (1.0 + np.exp(-(np.concatenate([xn, hn], 1) @ gk + gb)))
    r, u = sig[:, :3], sig[:, 3:]
    c = np.tanh(np.concatenate([xn, r * hn], 1) @ ck + cb)
    want = u * hn + (1.0 - u) * c
    fast = gru_step(x, h, cell.gates.weight.t(), cell.gates.bias, cell.candidate.weight.t(), cell.candidate.bias)
    np.testing.assert_allclose(fast.detach().numpy(), want, atol=1e-6)
    np.testing.assert_allclose(cell(x, h).detach().numpy(), want, atol=1e-6)


@pytest.mark.parametrize("preset,layout", CASES[1:])
def test_zero_output_projection_stops_after_one_step(preset, layout):
    dec = _decoder(preset, layout, max_iters=50).eval()
    with torch.no_grad():
        dec.output_projection.weight.zero_()
        dec.output_projection.bias.zero_()
        frames, align = dec(_memory())
    assert frames.shape == (B, 1, M * 2) and align.shape == (B, T_IN, 1)
    assert (frames == 0).all()


def test_one_row_stops_the_other_runs_to_max_iters():
    """Zero biases and a zero memory row: that row's frames are exactly 0 from the first step (finished, and kept
    computed), the other row never is, so the loop runs to max_iters; numpy agrees step by step."""
    dec = _decoder("keithito", "keithito-20180906", max_iters=6).eval()
    with torch.no_grad():
        for name, p in dec.named_parameters():
            if name.endswith("bias"):
                p.zero_()
        memory = _memory()
        memory[0] = 0.0
        frames, align = dec(memory)
    ref = np_decode(dec.tf1_weights(), dec.layout, memory.numpy(), max_iters=6)
    assert frames.shape == (B, 6, M * 2) == ref[0].shape
    assert (frames[0] == 0).all() and (frames[1] != 0).any(1).all()
    np.testing.assert_allclose(frames.numpy(), ref[0], atol=2e-5)
    np.testing.assert_allclose(align.numpy(), ref[1], atol=2e-5)


def test_mask_memory_masks_alignments_past_lengths():
    dec = _decoder("mimic2", "mimic2", mask_memory=True).eval()
    with torch.no_grad():
        _, align = dec(_memory(), torch.tensor([7, 3]), max_iters=2)
        _, free = _decoder("mimic2", "mimic2").eval()(_memory(), torch.tensor([7, 3]), max_iters=2)
    assert (align[1, 3:] == 0).all() and (free[1, 3:] > 0).all()  # the original attends the padding


# -- the model: names, round trips, modes, loss, errors ---------------------------------------------------------------
@pytest.mark.parametrize("preset,layout", CASES)
def test_tf1_names_equal_schema_and_round_trips(preset, layout):
    torch.manual_seed(0)
    model = Tacotron1(hparams(preset), layout)
    weights = model.tf1_weights()
    expected = tf1_variable_shapes(model.hparams, layout)
    assert {k: v.shape for k, v in weights.items()} == expected
    other = Tacotron1(hparams(preset), layout)
    other.load_tf1_weights(weights)
    same(other.state_dict(), model.state_dict())
    fresh = Tacotron1(hparams(preset), layout)
    fresh.load_state_dict(model.state_dict())
    x = torch.randint(0, 10, (B, T_IN))
    with torch.no_grad():
        a, b = model.eval()(x, max_iters=2), fresh.eval()(x, max_iters=2)
    for k in a:
        same(a[k], b[k])


def test_train_eval_modes_synthesize_and_loss():
    torch.manual_seed(0)
    model = Tacotron1(hparams("keithito"))
    x, lengths = torch.randint(0, 10, (B, T_IN)), torch.tensor([7, 4])
    targets = torch.randn(B, T_OUT, M)
    model.eval()
    with torch.no_grad():
        a, b = model(x, lengths, targets), model(x, lengths, targets)
    same(a["mel_outputs"], b["mel_outputs"])  # eval: no dropout
    model.train()
    mean = model.encoder_cbhg.proj1.batch_norm.running_mean.clone() if hasattr(
        model.encoder_cbhg.proj1, "batch_norm") else None
    with torch.no_grad():
        c, d = model(x, lengths, targets), model(x, lengths, targets)
    assert (c["mel_outputs"] - d["mel_outputs"]).abs().max() > 0  # train: random pre-net dropout
    buffers = dict(model.named_buffers())
    assert any("running_mean" in k for k in buffers)
    if mean is not None:
        assert (model.encoder_cbhg.proj1.batch_norm.running_mean != mean).any()  # moving statistics updated
    out = model.synthesize(x.numpy(), lengths.numpy(), max_iters=3)
    assert model.training and isinstance(out["mel_outputs"], np.ndarray)
    assert out["mel_outputs"].shape == (B, 6, M) and out["alignments"].shape == (B, T_IN, 3)
    lin = torch.randn(B, T_OUT, 9)
    losses = model.loss(a, targets, lin)
    mel_ref = np.abs(targets.numpy() - a["mel_outputs"].numpy()).mean()
    l1 = np.abs(lin.numpy() - a["linear_outputs"].numpy())
    band = model.hparams.n_priority_freq
    assert band == int(3000 / 10000 * 9) == 2
    np.testing.assert_allclose(float(losses["mel_loss"]), mel_ref, rtol=1e-6)
    np.testing.assert_allclose(float(losses["linear_loss"]), 0.5 * l1.mean() + 0.5 * l1[:, :, :band].mean(),
                               rtol=1e-6)
    np.testing.assert_allclose(float(losses["loss"]), float(losses["mel_loss"] + losses["linear_loss"]), rtol=1e-6)
    with pytest.raises(ValueError, match=r"`linear_targets`.*\[2, 8, 9\]"):
        model.loss(a, targets, lin[:, :6])


def test_value_errors_name_argument_and_shape():
    model = Tacotron1(hparams("keithito")).eval()
    x = torch.randint(0, 10, (B, T_IN))
    cases = [
        (dict(inputs=x.float()), r"`inputs`.*\(batch, T_in >= 1\)"),
        (dict(inputs=x + 10), r"`inputs`.*\[0, n_symbols=10\)"),
        (dict(inputs=x, input_lengths=torch.tensor([8, 1])), r"`input_lengths`.*\[1, 7\]"),
        (dict(inputs=x, input_lengths=torch.tensor([7])), r"`input_lengths`.*\(2,\)"),
        (dict(inputs=x, mel_targets=torch.randn(B, 1, M)), r"`mel_targets`.*at least outputs_per_step = 2"),
        (dict(inputs=x, mel_targets=torch.randn(B, 4, M + 1)), r"`mel_targets`.*\(batch, T_out, 6\)"),
        (dict(inputs=x, mel_targets=torch.randn(1, 4, M)), r"`mel_targets`.*batch=2"),
        (dict(inputs=x, max_iters=0), r"`max_iters`"),
        (dict(inputs=x, noise_masks={"postnet": []}), r"`noise_masks`.*unknown keys \['postnet'\]"),
        (dict(inputs=x, noise_masks={"encoder_prenet": [torch.ones(B, T_IN, 6), torch.ones(B, T_IN, 3)]}),
         r"`noise_masks\['encoder_prenet'\]\[1\]`.*\(batch, T_in, 4\)"),
        (dict(inputs=x, max_iters=3, noise_masks={"decoder_prenet": [torch.ones(B, 2, 6), None]}),
         r"`noise_masks\['decoder_prenet'\]\[0\]`.*steps >= 3"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            model(**kwargs)
    with pytest.raises(ValueError, match="layout 'mimic2' uses 'location_sensitive' attention"):
        Tacotron1(hparams("keithito"), "mimic2")
    with pytest.raises(ValueError, match=r"`memory`.*\(batch, T_in, 6\)"):
        model.decoder(torch.randn(B, T_IN, 5))


def test_from_migrated(tmp_path):
    torch.manual_seed(0)
    model = Tacotron1(hparams("mimic2")).eval()
    path = tmp_path / "t1.pt"
    torch.save({"speechblocks_format": "speechblocks.migrated.torch", "format_version": 2,
                "model": json.dumps({"class_name": "Tacotron1", "hparams": model.hparams.to_dict(),
                                     "layout": model.layout}),
                "model_state_dict": model.state_dict()}, path)
    loaded = Tacotron1.from_migrated(path, max_iters=2)
    assert not loaded.training and loaded.layout == "mimic2" and loaded.hparams.max_iters == 2
    x = torch.randint(0, 10, (1, 5))
    with torch.no_grad():
        same(loaded(x)["linear_outputs"], model(x, max_iters=2)["linear_outputs"])
    bad = tmp_path / "bad.pt"
    torch.save({"speechblocks_format": "speechblocks.migrated.torch", "format_version": 2,
                "model": json.dumps({"class_name": "Tacotron2", "hparams": {}}), "model_state_dict": {}}, bad)
    with pytest.raises(MigratedFileError, match="not a Tacotron-1 model"):
        Tacotron1.from_migrated(bad)
    with pytest.raises(MigratedFileError, match="do not fit"):
        Tacotron1.from_migrated(path, num_mels=7)
