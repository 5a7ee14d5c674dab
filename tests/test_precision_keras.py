"""Keras mixed precision on the CPU at tiny sizes (issue #38): ``speechblocks train --framework keras --precision
bf16`` (``Tacotron2Trainer.configured(precision="bf16")``: the model built under Keras' ``mixed_bfloat16`` policy)
learns, keeps float32 variables, Adam slots, checkpoints and losses, and resumes exactly; ``synthesize --framework
keras --precision bf16`` is close to float32 and writes float32.

The loss test runs the traced step (the command's path, ~5 s of CPU to trace); the resume test runs the same step
eagerly, as tests/test_train_keras.py does (three trainers, three traces otherwise). The traced resume was measured
once to be exact too (docs/gpu.md)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from speechblocks import resolve_hparams, synthesis
from speechblocks.cli import main
from speechblocks.training import prepare_batch
from speechblocks.training.checkpoint_files import read_state, write_keras_model_file
from speechblocks.training.run import TrainOptions, train
from tests.helpers.tiny_training import TINY, tiny_corpus, tiny_full_hparams

tf = pytest.importorskip("tensorflow")

STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"

import keras  # noqa: E402

from tf_layers import Tacotron2  # noqa: E402
from tf_layers.tacotron2_trainer import Tacotron2Trainer  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return str(root), tiny_corpus(root)


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(Tacotron2Trainer, "run_eagerly", True)


def _batch(corpus):
    return prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in (0, 1)],
                         tiny_full_hparams())


def test_keras_bf16_learns_in_bfloat16_with_float32_state(data):
    """20 traced steps on one batch: the loss falls; the layers compute in bfloat16 (the model's outputs are
    bfloat16; the first loss, 22.984, is not float32's, 23.007), the variables, Adam's slots, the gradients and the
    losses are float32; the global policy is float32 again once the model is built."""
    _, corpus = data
    cls = Tacotron2Trainer.configured(precision="bf16")
    assert cls.precision == "bf16" and Tacotron2Trainer.precision == "fp32"
    trainer = cls.new(resolve_hparams(tiny_full_hparams()), seed=0)
    assert keras.config.dtype_policy().name == "float32"
    assert trainer.model.dtype_policy.name == "mixed_bfloat16"
    batch = _batch(corpus)
    results = [trainer.train_step(batch, 1e-2, seed=i) for i in range(20)]
    losses = [r.losses["loss"] for r in results]
    assert all(r.applied and np.isfinite(r.losses["loss"]) for r in results)
    assert np.mean(losses[-5:]) < 0.8 * losses[0], losses  # measured: 22.98 -> 16.78
    assert {v.dtype for v in trainer.model.variables if "seed_generator" not in v.path} == {"float32"}
    _, slots = trainer.optimizer_state()
    assert slots and all(v.dtype == np.float32 for v in slots.values())

    trainer.run_eagerly = True  # the step's tensors, eagerly
    masks, noise = trainer._noise(batch, 0)
    b = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
    out = trainer.model(b["inputs"], b["input_lengths"], b["speaker_embeddings"], b["mel_targets"], training=True,
                        noise_masks=noise)
    assert {out[k].dtype for k in ("mel_outputs", "alignments", "stop_token_prediction")} == {tf.bfloat16}
    step_losses, grads = trainer._pass(b, noise)
    assert {v.dtype for v in step_losses.values()} == {tf.float32} and {g.dtype for g in grads} == {tf.float32}


def _final(run):
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    path = os.path.join(run, "checkpoints", latest["model"])
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return path, Tacotron2.from_migrated(path).tf1_weights(), meta, slots


def _h5_dtypes(path) -> set:
    import h5py

    found = set()
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.add(str(obj.dtype)) if isinstance(obj, h5py.Dataset)
                     and obj.dtype.kind == "f" else None)
    return found


def test_keras_bf16_resume_is_exact_and_checkpoints_stay_float32(data, tmp_path, eager):
    """4 steps in one run and 2 + resume + 2: the same losses, weights and Adam slots bit for bit (tolerance 0). It
    is exact because nothing of bf16 outlives a step: the float32 master weights are in the ``.weights.h5``, the
    slots in ``.state.npz``, every bfloat16 cast is made again from them, the seed generators are set from the
    step's seed, and bf16 has no loss scale to carry."""
    data_dir, _ = data
    cls = Tacotron2Trainer.configured(precision="bf16")

    def options(run, steps):
        return TrainOptions(data_dir, str(run), "rtvc", dict(TINY), steps=steps, progress=False, precision="bf16")

    whole = train(cls, options(tmp_path / "a", 4))
    first = train(cls, options(tmp_path / "b", 2))
    with open(tmp_path / "b" / "run.json") as f:
        assert json.load(f)["precision"] == "bf16"
    second = train(cls, TrainOptions(data_dir, str(tmp_path / "b"), steps=2, progress=False))
    assert whole.global_step == second.global_step == 4
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + second.losses]
    (pa, wa, meta_a, slots_a), (pb, wb, meta_b, slots_b) = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert sorted(wa) == sorted(wb) and all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert sorted(slots_a) == sorted(slots_b) and all(np.array_equal(slots_a[k], slots_b[k]) for k in slots_a)
    assert _h5_dtypes(pa) == _h5_dtypes(pb) == {"float32"}
    assert slots_a and all(v.dtype == np.float32 for v in slots_a.values())
    assert meta_a["precision"] == meta_b["precision"] == {"precision": "bf16"}
    assert meta_a["adam_updates"] == meta_b["adam_updates"] == 4


def test_keras_synthesize_bf16_close_to_fp32_and_float32_out(tmp_path, capsys):
    """The model built under ``mixed_bfloat16``: its mels differ from float32's (bf16 ran) by bfloat16's rounding
    (a relative 2^-8 per rounding), far below their own scale; the attention's argmax agrees on most steps; the
    command writes float32 and equals the library call (:func:`speechblocks.synthesis.precision_error`'s
    figures)."""
    import torch

    from torch_layers.tacotron2_trainer import Tacotron2Trainer as TorchTrainer

    torch.manual_seed(0)
    hp = resolve_hparams(tiny_full_hparams(tacotron_dropout_rate=0.0, mask_encoder=True))
    path = tmp_path / "model.weights.h5"
    weights = TorchTrainer.new(hp, seed=3).model.tf1_weights()
    weights[STOP_BIAS] = weights[STOP_BIAS] - 30.0  # random weights stop at once: run every one of the 12 steps
    write_keras_model_file(path, hp, weights)
    emb = np.array([0.5, -0.5, 0.5, 0.5], np.float32)
    np.save(tmp_path / "spk.npy", emb)
    encoded = synthesis.encode_texts(["abcabc", "abc"], ("english_cleaners",))
    results = {}
    for precision in ("fp32", "bf16"):
        model = synthesis.load_model(str(path), "keras", "keras", None, {"max_iters": 12}, 0, precision=precision)
        results[precision] = synthesis.synthesize(model, "keras", encoded, np.stack([emb, emb]), 12, 0,
                                                  precision=precision)
    assert keras.config.dtype_policy().name == "float32"  # restored after the bf16 build
    e = synthesis.precision_error(results["fp32"], results["bf16"])
    scale = max(float(np.abs(r.mel).max()) for r in results["fp32"])
    assert all(r.mel.dtype == np.float32 and np.all(np.isfinite(r.mel)) for r in results["bf16"])
    # measured: max |d| 5.4e-3, mean 8.0e-4 (the mels span -0.25..0.33), argmax agreement 95.8 % (23 of 24 steps)
    assert 0 < e["mel_max_abs"] < 0.05 * scale and e["mel_mean_abs"] <= e["mel_max_abs"], (e, scale)
    assert e["argmax_agreement"] >= 0.9 and e["stop_steps"] == [[12, 12], [12, 12]], e

    out = tmp_path / "s.npy"
    assert main(["synthesize", str(path), "--framework", "keras", "--text", "abcabc", "--speaker-embedding",
                 str(tmp_path / "spk.npy"), "--out", str(out), "--max-iters", "12", "--device", "cpu",
                 "--precision", "bf16"]) == 0, capsys.readouterr().err
    got = np.load(out)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, results["bf16"][0].mel)
