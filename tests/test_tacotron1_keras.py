"""Keras ``Tacotron1`` and ``Tacotron1Decoder`` (keithito/tacotron, both layouts, and mimic2).

Independent references: (a) a float64 numpy re-statement of the decoder maths written here from the spec (one step
of each layout, the teacher-forced loop with injected pre-net masks, the free-running loop with the exact-zero stop:
all rows stopping after one step, and one row stopping while the other runs to ``max_iters``). The TF1 legacy graph
(outputs, losses, every variable's gradient, all three layouts) is ``parity_tests/cases/tacotron1.py``'s, for Keras
and torch at once (one set of legacy graphs). Also: TF1 names of every layout against
``speechblocks.tacotron1_schema``, config round trip, ``tf.function`` with unknown batch and time, input checks,
``from_migrated``, and the two block options the model uses (``Prenet(dropout="training")``,
``CBHG(tf1_naming="keithito")``).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from speechblocks import tacotron1_hparams
from speechblocks.tacotron1_schema import DECODER_CELL, LAYOUTS, attention_cell_scopes, tf1_variable_shapes
from tf_layers import CBHG, Prenet, Tacotron1, Tacotron1Decoder

SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, prenet_depths=[6, 4], encoder_depth=6, attention_depth=5,
             decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=5)
M, R, E = 6, 2, 6


def small_hparams(layout):
    """The original names of a small model of ``layout`` (mimic2's embedding under its own name)."""
    if layout == "mimic2":
        return dict(tacotron1_hparams("mimic2"), **SMALL, embedding_dim=5)
    return dict(tacotron1_hparams("keithito"), **SMALL, embed_depth=5)


def random_weights(block, seed=0):
    """Random TF1 weights of ``block`` (moving variances positive)."""
    g = np.random.default_rng(seed)
    return {k: (g.uniform(0.5, 1.5, v.shape) if "moving_variance" in k else 0.5 * g.standard_normal(v.shape))
            .astype(np.float32) for k, v in block.tf1_weights().items()}


# -- float64 numpy decoder --------------------------------------------------------------------------------------
def np_dense(x, w, prefix):
    return x @ w[f"{prefix}/kernel"] + w[f"{prefix}/bias"]


def np_gru(x, h, w, prefix):
    """TF1 GRUCell: r, u from the gates; candidate over [x, r*h]; h' = u h + (1 - u) c."""
    gates = 1.0 / (1.0 + np.exp(-np_dense(np.concatenate([x, h], -1), w, f"{prefix}/gates")))
    r, u = np.split(gates, 2, axis=-1)
    c = np.tanh(np_dense(np.concatenate([x, r * h], -1), w, f"{prefix}/candidate"))
    return u * h + (1.0 - u) * c


def np_prenet(x, w, prefix, masks):
    for i, mask in enumerate(masks):
        x = np.maximum(np_dense(x, w, f"{prefix}/dense_{i + 1}"), 0.0)
        x = x if mask is None else x / 0.5 * mask
    return x


def np_attention(query, memory, prev, w, prefix):
    """Bahdanau (+ mimic2's location term when its kernels exist), no memory mask."""
    inner = memory @ w["memory_layer/kernel"] + (query @ w[f"{prefix}/query_layer/kernel"])[:, None]
    if f"{prefix}/location_conv/kernel" in w:
        kernel = w[f"{prefix}/location_conv/kernel"][:, 0, :]
        k = kernel.shape[0]
        padded = np.pad(prev, ((0, 0), ((k - 1) // 2, k - 1 - (k - 1) // 2)))
        f = sum(padded[:, j:j + prev.shape[1], None] * kernel[j] for j in range(k))
        inner = inner + f @ w[f"{prefix}/location_layer/kernel"]
    score = np.tanh(inner) @ w[f"{prefix}/attention_v"]
    e = np.exp(score - score.max(-1, keepdims=True))
    align = e / e.sum(-1, keepdims=True)
    return np.einsum("bj,bje->be", align, memory), align


def np_step(x, state, memory, w, layout, masks):
    """One decoder step of the spec (section 5)."""
    scopes = attention_cell_scopes(layout)
    h_att, context, prev, h1, h2 = state
    if layout == "keithito-20180906":
        cell_in = np.concatenate([np_prenet(x, w, scopes["prenet"], masks), context], -1)
    else:
        cell_in = np_prenet(np.concatenate([x, context], -1), w, scopes["prenet"], masks)
    h_att = np_gru(cell_in, h_att, w, scopes["gru"])
    context, align = np_attention(h_att, memory, prev, w, scopes["attention"])
    out0 = np_dense(np.concatenate([h_att, context], -1), w, f"{DECODER_CELL}/cell_0/output_projection_wrapper")
    h1 = np_gru(out0, h1, w, f"{DECODER_CELL}/cell_1/gru_cell")
    out1 = out0 + h1
    h2 = np_gru(out1, h2, w, f"{DECODER_CELL}/cell_2/gru_cell")
    frames = np_dense(out1 + h2, w, "decoder/output_projection_wrapper")
    return frames, align, (h_att, context, align, h1, h2)


def np_decode(memory, w, layout, targets=None, max_iters=5, masks=None):
    """The loops of section 6: ``(frames (B, steps, M*r), alignments (B, T_in, steps))``."""
    b, t_in, _ = memory.shape
    a, d = w["memory_layer/kernel"].shape[1], w[f"{DECODER_CELL}/cell_1/gru_cell/candidate/bias"].shape[0]
    state = (np.zeros((b, a)), np.zeros((b, E)), np.zeros((b, t_in)), np.zeros((b, d)), np.zeros((b, d)))
    steps = max_iters if targets is None else min(targets.shape[1] // R, max_iters)
    x, finished, frames, aligns = np.zeros((b, M)), np.zeros(b, bool), [], []
    for t in range(steps):
        step_masks = [None, None] if masks is None else [m[:, t] for m in masks]
        out, align, state = np_step(x, state, memory, w, layout, step_masks)
        frames.append(out)
        aligns.append(align)
        if targets is None:
            x = out[:, -M:]
            finished |= np.all(out == 0.0, axis=1)
            if finished.all():
                break
        else:
            x = targets[:, (t + 1) * R - 1] if t + 1 < steps else None
    return np.stack(frames, 1), np.stack(aligns, 2)


def _decoder(layout, seed=0):
    dec = Tacotron1Decoder(small_hparams(layout), layout)
    dec.load_tf1_weights(random_weights(dec, seed))
    return dec


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decoder_loops_match_numpy_reference(layout):
    """Teacher forcing (training, injected masks; 7 target frames -> 3 steps) and free running (5 steps)."""
    dec = _decoder(layout)
    w = {k: v.astype(np.float64) for k, v in dec.tf1_weights().items()}
    g = np.random.default_rng(1)
    memory = g.standard_normal((2, 4, E)).astype(np.float32)
    targets = g.standard_normal((2, 7, M)).astype(np.float32)
    masks = [(g.random((2, 3, n)) > 0.5).astype(np.float32) for n in (6, 4)]
    frames, aligns = dec(memory, mel_targets=targets, training=True, prenet_masks=masks)
    ref_f, ref_a = np_decode(memory.astype(np.float64), w, layout, targets.astype(np.float64), masks=masks)
    assert frames.shape == (2, 3, M * R) and aligns.shape == (2, 4, 3)
    np.testing.assert_allclose(frames.numpy(), ref_f, atol=1e-5)
    np.testing.assert_allclose(aligns.numpy(), ref_a, atol=1e-6)
    frames, aligns = dec(memory, max_iters=4)  # free running, inference: no dropout
    ref_f, ref_a = np_decode(memory.astype(np.float64), w, layout, max_iters=4)
    assert frames.shape == (2, 4, M * R)
    np.testing.assert_allclose(frames.numpy(), ref_f, atol=1e-5)
    np.testing.assert_allclose(aligns.numpy(), ref_a, atol=1e-6)
    frames, _ = dec(memory, mel_targets=targets, max_iters=2)  # teacher forcing capped by max_iters
    np.testing.assert_allclose(frames.numpy(), np_decode(memory.astype(np.float64), w, layout,
                                                         targets.astype(np.float64), max_iters=2)[0], atol=1e-5)


def test_free_running_stops_on_exact_zero_frames():
    """All rows: a zero output projection gives an exactly-zero first step -> one step. One row: GRUs that stay at
    zero, a cell_0 projection reading the context only and an all-zero memory row give that row exact zeros from
    step 1 while the other row runs to ``max_iters`` (the finished row is still computed and kept)."""
    dec = _decoder("keithito-20180906")
    w = dec.tf1_weights()
    zero = dict(w, **{k: np.zeros_like(v) for k, v in w.items() if k.startswith("decoder/output_projection_wrapper")})
    dec.load_tf1_weights(zero)
    memory = np.random.default_rng(2).standard_normal((2, 4, E)).astype(np.float32)
    frames, aligns = dec(memory, max_iters=5)
    assert frames.shape == (2, 1, M * R) and aligns.shape == (2, 4, 1) and not frames.numpy().any()

    one = dict(random_weights(dec, 3))
    for k in one:
        if k.startswith(f"{DECODER_CELL}/cell_") and "gru_cell/" in k and not k.endswith("gates/bias"):
            one[k] = np.zeros_like(one[k])  # h1 = h2 = 0 forever
    cell0 = f"{DECODER_CELL}/cell_0/output_projection_wrapper"
    one[f"{cell0}/kernel"][:5] = 0.0  # rows of h_att: out0 = context @ W0[5:]
    one[f"{cell0}/bias"][:] = 0.0
    one["decoder/output_projection_wrapper/bias"][:] = 0.0
    dec.load_tf1_weights(one)
    memory[0] = 0.0
    frames, aligns = dec(memory, max_iters=5)
    ref_f, ref_a = np_decode(memory.astype(np.float64), {k: v.astype(np.float64) for k, v in one.items()},
                             "keithito-20180906", max_iters=5)
    assert frames.shape == (2, 5, M * R) and ref_f.shape == frames.shape
    assert not frames.numpy()[0].any() and np.abs(frames.numpy()[1]).min() > 0
    np.testing.assert_allclose(frames.numpy(), ref_f, atol=1e-5)
    np.testing.assert_allclose(aligns.numpy(), ref_a, atol=1e-6)


# -- the model ----------------------------------------------------------------------------------------------------
def _model(layout, seed=0, **kw):
    model = Tacotron1(small_hparams(layout), layout, **kw)
    model.load_tf1_weights(random_weights(model, seed))
    return model


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tf1_names_are_the_schema(layout):
    model = Tacotron1(small_hparams(layout), layout)
    expected = tf1_variable_shapes(model.hparams, layout)
    assert {k: v.shape for k, v in model.tf1_weights().items()} == expected
    assert model.layout == layout and model.tf1_scope == "model/inference"


def test_default_layouts_and_contradictions():
    assert Tacotron1("keithito", **SMALL, embed_depth=5).layout == "keithito-20180906"
    assert Tacotron1("mimic2", **SMALL, embedding_dim=5).layout == "mimic2"
    with pytest.raises(ValueError, match="layout 'mimic2'"):
        Tacotron1("keithito", "mimic2", **SMALL)
    with pytest.raises(ValueError, match="layout"):
        Tacotron1("keithito", "keithito-2019")


def test_config_round_trip():
    import keras

    model = _model("mimic2", mask_memory=True, seed=4)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    assert isinstance(clone, Tacotron1)
    assert (clone.hparams, clone.layout, clone.mask_memory, clone.seed) == (model.hparams, "mimic2", True, None)
    assert clone.tf1_weights().keys() == model.tf1_weights().keys()
    clone = Tacotron1.from_config(_model("keithito-20170720").get_config())
    assert clone.layout == "keithito-20170720" and clone.hparams.max_iters == 5


def test_tf_function_with_unknown_batch_and_time():
    """Teacher forcing traced once with unknown batch, T_in and T_out, then two shapes; synthesize (free running,
    its own cached function) at two shapes; both equal to the eager call."""
    model = _model("keithito-20180906")
    spec = (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None,), tf.int32),
            tf.TensorSpec((None, None, M), tf.float32))
    fn = tf.function(lambda i, n, m: model(i, n, mel_targets=m), input_signature=spec)
    g = np.random.default_rng(5)
    for b, t_in, t_out in ((2, 5, 7), (3, 4, 4)):
        ids = g.integers(1, 10, (b, t_in)).astype(np.int32)
        lens = np.full(b, t_in, np.int32)
        mel = g.standard_normal((b, t_out, M)).astype(np.float32)
        traced, eager = fn(ids, lens, mel), model(ids, lens, mel_targets=mel)
        assert traced["mel_outputs"].shape == (b, t_out // R * R, M)
        for k in eager:
            np.testing.assert_allclose(traced[k].numpy(), eager[k].numpy(), atol=1e-6)
        synth, eager = model.synthesize(ids, lens, max_iters=3), model(ids, lens, max_iters=3)
        assert synth["linear_outputs"].shape == (b, 6, 9) and synth["alignments"].shape == (b, t_in, 3)
        for k in eager:
            np.testing.assert_allclose(synth[k], eager[k].numpy(), atol=1e-6)


def test_bad_input_names_argument_and_shape():
    model = _model("keithito-20180906")
    ids, lens = np.array([[1, 2, 3]], np.int32), np.array([3], np.int32)
    with pytest.raises(ValueError, match=r"`inputs`.*\(batch, T_in\)"):
        model(np.ones((1, 3), np.float32))
    with pytest.raises(ValueError, match=r"`inputs`.*\(batch, T_in\)"):
        model(np.ones((3,), np.int32))
    with pytest.raises(ValueError, match=r"`inputs`.*n_symbols=10"):
        model(np.array([[1, 10]]))
    with pytest.raises(ValueError, match=r"`input_lengths`.*\[1, T_in=3\]"):
        model(ids, np.array([4]))
    with pytest.raises(ValueError, match=r"`mel_targets`.*\(batch, T_out, 6\)"):
        model(ids, lens, mel_targets=np.zeros((1, 4, 5), np.float32))
    with pytest.raises(ValueError, match=r"`mel_targets`.*at least outputs_per_step = 2"):
        model(ids, lens, mel_targets=np.zeros((1, 1, M), np.float32))
    with pytest.raises(ValueError, match=r"`noise_masks\['decoder_prenet'\]\[1\]`.*\(batch, steps, 4\)"):
        model(ids, lens, mel_targets=np.zeros((1, 4, M), np.float32),
              noise_masks={"decoder_prenet": [np.ones((1, 2, 6)), np.ones((1, 3, 4))]})
    with pytest.raises(ValueError, match="unknown keys"):
        model(ids, lens, noise_masks={"postnet": []})
    with pytest.raises(ValueError, match="`max_iters`"):
        model(ids, lens, max_iters=0)
    out = model(ids, lens, max_iters=2)
    with pytest.raises(ValueError, match=r"`linear_targets`.*\(1, 4, 9\)"):
        model.loss(out, np.zeros((1, 4, M), np.float32), np.zeros((1, 5, 9), np.float32))


def test_loss_is_the_original_add_loss():
    model = _model("mimic2")
    g = np.random.default_rng(6)
    out = model(np.array([[1, 2, 3, 4]]), max_iters=2)
    mel, lin = g.standard_normal((1, 4, M)).astype(np.float32), g.standard_normal((1, 4, 9)).astype(np.float32)
    losses = model.loss(out, mel, lin)
    l1 = np.abs(lin - out["linear_outputs"].numpy())
    n = model.hparams.n_priority_freq  # int(3000 / 11000 * 9) = 2
    assert n == 2
    np.testing.assert_allclose(losses["mel_loss"].numpy(), np.abs(mel - out["mel_outputs"].numpy()).mean(), rtol=1e-6)
    np.testing.assert_allclose(losses["linear_loss"].numpy(), 0.5 * l1.mean() + 0.5 * l1[:, :, :n].mean(), rtol=1e-6)
    np.testing.assert_allclose(losses["loss"].numpy(), losses["mel_loss"].numpy() + losses["linear_loss"].numpy())


def test_block_options_the_model_uses():
    """Prenet(dropout="training"): the plain relu dense chain at inference, dropout in training;
    CBHG(tf1_naming="keithito"): the schema's encoder_cbhg names."""
    prenet = Prenet([6, 4], 0.5, tf1_scope="prenet", dropout="training", seed=1)
    x = np.random.default_rng(7).standard_normal((3, 8, 5)).astype(np.float32)
    y = prenet(x, training=False).numpy()
    w = prenet.tf1_weights()
    plain = np.maximum(np.maximum(x @ w["dense_1/kernel"] + w["dense_1/bias"], 0) @ w["dense_2/kernel"]
                       + w["dense_2/bias"], 0)
    np.testing.assert_allclose(y, plain, atol=1e-6)
    one = Prenet([6], 0.5, dropout="training", seed=2)
    plain = one(x, training=False).numpy()
    dropped = one(x, training=True).numpy()
    assert (dropped == 0).mean() > (plain == 0).mean() + 0.2
    kept = dropped != 0
    np.testing.assert_allclose(dropped[kept], 2.0 * plain[kept], rtol=1e-5)  # 1 / (1 - 0.5)
    hp = Tacotron1(small_hparams("keithito-20180906")).hparams
    cbhg = CBHG(16, 128, 2, [128, 4], 3, 4, 3, 3, tf1_scope="encoder_cbhg", bn_position="after",
                tf1_naming="keithito")
    cbhg.build((None, None, 4))
    schema = {k[len("encoder_cbhg/"):]: v for k, v in tf1_variable_shapes(hp, "keithito-20180906").items()
              if k.startswith("encoder_cbhg/")}
    assert {k: v.shape for k, v in cbhg.tf1_weights().items()} == schema


def test_from_migrated_reads_a_keras_model_file(tmp_path):
    import h5py

    model = _model("keithito-20170720", seed=8)
    path = str(tmp_path / "t1.weights.h5")

    def write(path, class_name="Tacotron1"):
        with h5py.File(path, "w") as f:
            f.attrs["speechblocks_format"] = "speechblocks.migrated.keras"
            f.attrs["format_version"] = 2
            f.attrs["model"] = json.dumps({"class_name": class_name, "hparams": model.hparams.to_dict(),
                                           "layout": model.layout})
            for name, value in model.tf1_weights().items():
                f.create_dataset(name, data=value)

    write(path)
    loaded = Tacotron1.from_migrated(path, max_iters=3)
    assert loaded.layout == "keithito-20170720" and loaded.hparams.max_iters == 3
    for k, v in model.tf1_weights().items():
        np.testing.assert_array_equal(loaded.tf1_weights()[k], v)
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(loaded(ids)["mel_outputs"].numpy(), model(ids, max_iters=3)["mel_outputs"].numpy())
    with pytest.raises(ValueError, match="outputs_per_step|variable"):
        Tacotron1.from_migrated(path, outputs_per_step=3)
    write(path, "Tacotron2")
    with pytest.raises(ValueError, match="not a Tacotron-1 model"):
        Tacotron1.from_migrated(path)


def test_tf1_loss_and_gradients_equal_torch():
    """Keras ``tf1_loss_and_gradients`` against torch's on the same weights and keep-masks (the other framework as
    the reference; torch's is held to the TF1 graph by parity_tests/cases/tacotron1.py): every loss term and the
    gradient of every TF1 variable, within 1e-3 of each variable's largest |gradient| (absolute floor 1e-6: the conv
    biases right before a training-mode batch norm have a zero gradient in exact maths, float32 noise here)."""
    torch = pytest.importorskip("torch")
    import torch_layers

    layout = "keithito-20170720"
    keras_model = _model(layout, seed=3)
    twin = torch_layers.Tacotron1(small_hparams(layout), layout)
    twin.load_tf1_weights(keras_model.tf1_weights())
    g = np.random.default_rng(4)
    ids = g.integers(0, 10, (2, 7)).astype(np.int32)
    lens = np.array([7, 4], np.int32)
    mel = g.uniform(0, 1, (2, 8, M)).astype(np.float32)
    lin = g.uniform(0, 1, (2, 8, 9)).astype(np.float32)
    masks = {"encoder_prenet": [(g.random((2, 7, d)) < 0.5).astype(np.float32) for d in (6, 4)],
             "decoder_prenet": [(g.random((2, 4, d)) < 0.5).astype(np.float32) for d in (6, 4)]}
    losses, grads = keras_model.tf1_loss_and_gradients(ids, lens, mel, lin, masks)
    t = torch.as_tensor
    ref_losses, ref_grads = twin.tf1_loss_and_gradients(
        t(ids).long(), t(lens).long(), t(mel), t(lin), {k: [t(m) for m in v] for k, v in masks.items()})
    for k in ("mel_loss", "linear_loss", "loss"):
        np.testing.assert_allclose(float(losses[k]), float(ref_losses[k]), rtol=1e-5)
    assert sorted(grads) == sorted(ref_grads)
    for name, ref in ref_grads.items():
        ref = np.asarray(ref)
        scale = max(float(np.max(np.abs(ref))), 1e-3)
        assert float(np.max(np.abs(np.asarray(grads[name]) - ref))) <= 1e-3 * scale, name


def test_decoder_shared_layer_checks_and_deployment():
    """The decoder through the shared layer checks (free running to ``max_iters`` on random weights) and the
    deployment checks (SavedModel in a fresh process, XLA, LiteRT)."""
    from tests.helpers.keras_layer_test import run_keras_layer_test

    def inputs(b, t):
        g = np.random.default_rng(10 * b + t)
        return [g.standard_normal((b, t, E)).astype(np.float32), np.maximum(1, t - np.arange(b)).astype(np.int32)]

    run_keras_layer_test(
        Tacotron1Decoder, dict(hparams=dict(small_hparams("keithito-20180906"), max_iters=3)), inputs,
        expected_output_shape=lambda b, t: [(b, 3, M * R), (b, t, 3)],
        bad_inputs=[([np.zeros((2, 3, E + 1), np.float32)], "memory")])
