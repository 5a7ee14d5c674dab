"""``speechblocks train --framework keras`` (tf_layers.Tacotron2Trainer + speechblocks.training.run) on a tiny corpus
written in the test: the loss falls on a repeated batch, the update equals TF1's ApplyAdam written out in numpy on
the gradients clipped to global norm 1 at the learning rate given, resuming is exact (4 steps == 2 + resume + 2:
losses, weights and Adam slots bit for bit), checkpoints are migrated ``.weights.h5`` files, and ``--from`` a TF1
checkpoint (written by TensorFlow's SaveV2, with ``global_step``, Adam slots and ``beta*_power``) continues its
global step, its Adam state and the schedule. The first test runs the traced step (the command's path, ~5 s of
CPU per trainer to trace); the others run the same step eagerly (the same numbers; a fraction of the CPU)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from speechblocks import resolve_hparams, tf1_variable_shapes
from speechblocks.training import learning_rate, prepare_batch
from speechblocks.training.checkpoint_files import read_state
from speechblocks.training.run import TrainOptions, train
from tests.helpers.tiny_training import TINY, tiny_corpus, tiny_full_hparams

tf = pytest.importorskip("tensorflow")

from tf_layers import Tacotron2  # noqa: E402
from tf_layers.tacotron2_trainer import Tacotron2Trainer  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return str(root), tiny_corpus(root)


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(Tacotron2Trainer, "run_eagerly", True)


def _options(data_dir, run, steps, **kw):
    return TrainOptions(data_dir, str(run), "rtvc", dict(TINY), steps=steps, progress=False, **kw)


def test_loss_falls_and_update_is_tf1_adam_on_clipped_gradients(data):
    _, corpus = data
    hp = tiny_full_hparams()
    trainer = Tacotron2Trainer.new(resolve_hparams(hp), seed=0)
    batch = prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in (0, 1)], hp)
    with pytest.raises(ValueError, match=r"rows=\(1, 4\): the Keras trainer steps whole global batches"):
        trainer.train_step(batch, 1e-2, seed=0, rows=(1, 4))  # the torch backend's data-parallel form
    losses = [trainer.train_step(batch, 1e-2, seed=i, rows=(0, 2) if i == 0 else None).losses["loss"]
              for i in range(20)]
    assert np.mean(losses[-5:]) < 0.8 * losses[0], losses

    b1, b2, eps = hp["tacotron_adam_beta1"], hp["tacotron_adam_beta2"], hp["tacotron_adam_epsilon"]
    trainer.run_eagerly = True  # the gradients eagerly, the update by the traced step
    _, grads, norm = trainer.compute_gradients(batch, seed=20)
    assert np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads)) <= 1.0 + 1e-5
    before = [np.array(v.numpy(), np.float64) for v in trainer._variables]
    slots = [[np.array(s.numpy(), np.float64) for s in trainer._slots(v)] for v in trainer._variables]
    lr = learning_rate(60_000, "rtvc")
    result = trainer.train_step(batch, lr, seed=20)
    assert float(trainer.optimizer.learning_rate.numpy()) == np.float32(lr)
    assert result.grad_norm == pytest.approx(norm, rel=1e-6)
    t = 21
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    for var, g, x, (m, v) in zip(trainer._variables, grads, before, slots):
        m = m + (g - m) * (1 - b1)
        v = v + (g.astype(np.float64) ** 2 - v) * (1 - b2)
        np.testing.assert_allclose(var.numpy(), x - lr_t * m / (np.sqrt(v) + eps), rtol=0, atol=1e-6)


def _final(run):
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    model = Tacotron2.from_migrated(os.path.join(run, "checkpoints", latest["model"]))
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return latest, model.tf1_weights(), meta, slots


def test_resume_is_exact_and_checkpoints_are_migrated_files(data, tmp_path, eager):
    data_dir, _ = data
    whole = train(Tacotron2Trainer, _options(data_dir, tmp_path / "a", 4))
    first = train(Tacotron2Trainer, _options(data_dir, tmp_path / "b", 2))
    second = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "b"), steps=2, progress=False))
    assert whole.global_step == second.global_step == 4
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + second.losses]
    (la, wa, meta_a, slots_a), (lb, wb, meta_b, slots_b) = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert la["model"] == lb["model"] == "tacotron2-00000004.weights.h5"
    assert meta_a["adam_updates"] == meta_b["adam_updates"] == 4 and meta_a["sampler"] == meta_b["sampler"]
    assert sorted(wa) == sorted(tf1_variable_shapes(resolve_hparams(tiny_full_hparams())))
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert sorted(slots_a) == sorted(slots_b) and all(np.array_equal(slots_a[k], slots_b[k]) for k in slots_a)


def test_from_a_tf1_checkpoint_continues_step_adam_state_and_schedule(data, tmp_path, eager):
    data_dir, _ = data
    hp = resolve_hparams(tiny_full_hparams())
    rng = np.random.default_rng(1)
    variables = {}
    for name, shape in tf1_variable_shapes(hp).items():
        variables[f"Tacotron_model/inference/{name}"] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        if name.endswith("moving_variance"):
            variables[f"Tacotron_model/inference/{name}"] = np.abs(variables[f"Tacotron_model/inference/{name}"]) + .5
        elif "moving_mean" not in name:
            variables[f"Tacotron_model/inference/{name}/Adam"] = rng.standard_normal(shape).astype(np.float32) * 1e-3
            variables[f"Tacotron_model/inference/{name}/Adam_1"] = rng.random(shape).astype(np.float32) * 1e-6
    variables["global_step"] = np.array(100, np.int64)
    variables["Tacotron_model/optimizer/beta1_power"] = np.array(0.9 ** 101, np.float32)
    variables["Tacotron_model/optimizer/beta2_power"] = np.array(0.999 ** 101, np.float32)
    prefix = str(tmp_path / "model.ckpt-100")
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[variables[n] for n in names])
    rates = []
    result = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "ft"), None, dict(TINY), source=prefix,
                                                  steps=1, progress=False),
                   on_step=lambda s, r: rates.append((s, r.learning_rate)))
    assert result.global_step == 101 and rates == [(101, learning_rate(100, tiny_full_hparams()))]
    _, _, meta, slots = _final(tmp_path / "ft")
    assert meta["global_step"] == 101 and meta["adam_updates"] == 101
    name = "memory_layer/kernel"
    m0 = variables[f"Tacotron_model/inference/{name}/Adam"]
    assert not np.array_equal(slots[f"{name}/Adam"], m0)  # updated from the checkpoint's slot, not from zero
    assert np.abs(slots[f"{name}/Adam"] - 0.9 * m0).max() <= 0.1 * 1.0 + 1e-6  # |(1 - beta1) g| <= 0.1 |g| <= 0.1
