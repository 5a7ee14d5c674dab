"""``speechblocks train --framework torch`` (torch_layers.Tacotron2Trainer + speechblocks.training.run) on a tiny
corpus written in the test: the loss falls on a repeated batch, resuming is exact (4 steps == 2 + resume + 2,
losses, weights and Adam slots bit for bit), the schedule and the clipping are applied (the update equals TF1's
ApplyAdam, written out in numpy, on the gradients clipped to global norm 1 at learning_rate(step)), checkpoints are
migrated files, ``--from`` continues the global step, SIGTERM/NaN/bad inputs give their line and exit status."""
from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch

from speechblocks import cli, resolve_hparams
from speechblocks.training import learning_rate, prepare_batch
from speechblocks.training.checkpoint_files import read_state
from speechblocks.training.run import TrainOptions, train
from tests.helpers.tiny_training import TINY, set_args, tiny_corpus, tiny_full_hparams
from torch_layers import Tacotron2
from torch_layers.tacotron2_trainer import Tacotron2Trainer


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one thread is ~20x faster than two contending ones."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return str(root), tiny_corpus(root)


def _batch(corpus, lines=(0, 1)):
    hp = tiny_full_hparams()
    return prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in lines], hp)


def _options(data_dir, run, steps, **kw):
    return TrainOptions(data_dir, str(run), "rtvc", dict(TINY, **kw.pop("overrides", {})), steps=steps,
                        progress=False, **kw)


def test_loss_falls_on_a_repeated_batch(data):
    _, corpus = data
    trainer = Tacotron2Trainer.new(resolve_hparams(tiny_full_hparams()), seed=0)
    batch = _batch(corpus)
    losses = [trainer.train_step(batch, 1e-2, seed=i).losses["loss"] for i in range(20)]
    assert np.mean(losses[-5:]) < 0.8 * losses[0], losses


def test_a_training_step_leaves_nothing_alive(data):
    """Each step's autograd graph is freed when the step ends. It was not: the decoder's weight-gradient taps held
    the steps' LSTM inputs with their graph, a cycle through autograd's C++ nodes that no garbage collection frees
    (~9 MB a step at the train demo's sizes: 24 GB after 2400 steps)."""
    import gc

    _, corpus = data
    trainer = Tacotron2Trainer.new(resolve_hparams(tiny_full_hparams()), seed=0)
    batch = _batch(corpus)

    def live_tensors():
        gc.collect()
        return sum(issubclass(type(o), torch.Tensor) for o in gc.get_objects())  # (type(): a dead weakproxy raises)

    trainer.train_step(batch, 1e-3, seed=0)
    before = live_tensors()
    for i in range(1, 6):
        trainer.train_step(batch, 1e-3, seed=i)
    assert live_tensors() == before


def test_update_is_tf1_adam_on_clipped_gradients_at_the_scheduled_rate(data):
    _, corpus = data
    hp = tiny_full_hparams(tacotron_start_decay=0, tacotron_decay_steps=1, tacotron_decay_rate=0.5)
    trainer = Tacotron2Trainer.new(resolve_hparams(hp), seed=0)
    batch = _batch(corpus, (2, 3))
    b1, b2, eps = hp["tacotron_adam_beta1"], hp["tacotron_adam_beta2"], hp["tacotron_adam_epsilon"]
    params = [v.tensor for v in trainer._bindings.values()]
    m = [np.zeros(p.shape, np.float64) for p in params]
    v = [np.zeros(p.shape, np.float64) for p in params]
    for step in range(3):
        _, grads, norm = trainer.compute_gradients(batch, seed=step)
        clipped = np.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
        assert float(norm) > 1.0 and clipped == pytest.approx(1.0, abs=1e-5)  # the raw norm is clipped to 1
        before = [p.detach().double().numpy().copy() for p in params]
        lr = learning_rate(step, hp)
        result = trainer.train_step(batch, lr, seed=step)
        assert trainer.optimizer.param_groups[0]["lr"] == lr == 1e-3 * 0.5 ** step
        assert result.grad_norm == pytest.approx(float(norm), rel=1e-6)
        t = step + 1
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for i, (p, g) in enumerate(zip(params, grads)):
            g = g.double().numpy()
            m[i] = m[i] + (g - m[i]) * (1 - b1)
            v[i] = v[i] + (g * g - v[i]) * (1 - b2)
            expected = before[i] - lr_t * m[i] / (np.sqrt(v[i]) + eps)
            np.testing.assert_allclose(p.detach().double().numpy(), expected, rtol=0, atol=1e-6)


def _final(run):
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    model = Tacotron2.from_migrated(os.path.join(run, "checkpoints", latest["model"]))
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return latest, model, meta, slots


def test_resume_is_exact_and_checkpoints_are_migrated_files(data, tmp_path):
    data_dir, _ = data
    whole = train(Tacotron2Trainer, _options(data_dir, tmp_path / "a", 4))
    first = train(Tacotron2Trainer, _options(data_dir, tmp_path / "b", 2))
    second = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "b"), steps=2, progress=False))
    assert whole.global_step == second.global_step == 4
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + second.losses]
    (la, ma, meta_a, slots_a), (lb, mb, meta_b, slots_b) = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert la["step"] == lb["step"] == 4 and meta_a["adam_updates"] == meta_b["adam_updates"] == 4
    assert meta_a["sampler"] == meta_b["sampler"]
    for (k, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), k
    assert sorted(slots_a) == sorted(slots_b) and all(np.array_equal(slots_a[k], slots_b[k]) for k in slots_a)
    assert isinstance(ma, Tacotron2) and ma.hparams == resolve_hparams(tiny_full_hparams())


def test_from_a_checkpoint_continues_the_step_and_schedule(data, tmp_path):
    data_dir, _ = data
    train(Tacotron2Trainer, _options(data_dir, tmp_path / "a", 3))
    source = os.path.join(tmp_path, "a", "checkpoints", "tacotron2-00000003.pt")
    rates = []
    result = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "ft"), None, {}, source=source, steps=2,
                                                  progress=False),
                   on_step=lambda s, r: rates.append((s, r.learning_rate)))
    assert result.global_step == 5 and [s for s, _ in rates] == [4, 5]
    hp = tiny_full_hparams()
    assert [r for _, r in rates] == [learning_rate(3, hp), learning_rate(4, hp)]


def test_eval_plots_wav_and_events(data, tmp_path):
    data_dir, _ = data
    result = train(Tacotron2Trainer, _options(data_dir, tmp_path / "r", 2, overrides=dict(tacotron_eval_interval=2)))
    assert set(result.eval_losses) >= {"loss", "before_loss", "after_loss", "stop_token_loss"}
    assert sorted(os.listdir(tmp_path / "r" / "plots")) == ["step-2-align.png", "step-2-mel.png"]
    assert os.listdir(tmp_path / "r" / "wavs") == ["step-2-eval.wav"]
    (events,) = os.listdir(tmp_path / "r" / "events")
    assert events.startswith("events.out.tfevents.")


def _cli(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_sigterm_finishes_the_step_writes_a_checkpoint_and_exits_143(data, tmp_path, capsys, monkeypatch):
    data_dir, _ = data
    original = Tacotron2Trainer.train_step
    calls = []

    def step_then_signal(self, *args):
        calls.append(1)
        result = original(self, *args)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(Tacotron2Trainer, "train_step", step_then_signal)
    rc, _, err = _cli(["train", data_dir, str(tmp_path / "r"), "--steps", "10", "--quiet"] + set_args(), capsys)
    assert rc == 143 and len(calls) == 2
    with open(tmp_path / "r" / "checkpoints" / "latest.json") as f:
        assert json.load(f)["step"] == 2
    assert "signal 15 at step 2" in err


def test_nan_loss_stops_naming_the_step_and_utterances(data, tmp_path, capsys, monkeypatch):
    data_dir, _ = data
    import torch_layers.tacotron2_trainer as module

    real = module.tacotron2_loss
    monkeypatch.setattr(module, "tacotron2_loss", lambda *a, **k: {key: value * float("nan")
                                                                    for key, value in real(*a, **k).items()})
    rc, _, err = _cli(["train", data_dir, str(tmp_path / "r"), "--steps", "3", "--quiet"] + set_args(), capsys)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1
    assert "the loss is nan at step 1 on the batch of utterances [" in lines[0]
    with open(tmp_path / "r" / "checkpoints" / "latest.json") as f:
        assert json.load(f)["step"] == 0  # the update was not applied, the step-0 checkpoint stays


def test_bad_inputs_one_line_exit_2(data, tmp_path, capsys):
    data_dir, _ = data
    cases = [
        (["train", str(tmp_path), str(tmp_path / "r")], "holds no train.txt"),
        (["train", data_dir, str(tmp_path / "r"), "--from", str(tmp_path / "missing.pt")], "does not exist"),
        (["train", data_dir, str(tmp_path / "r"), "--steps", "0"], "--steps must be >= 1"),
    ]
    for argv, text in cases:
        rc, _, err = _cli(argv, capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and text in err, (argv, err)
    train(Tacotron2Trainer, _options(data_dir, tmp_path / "run", 1))
    rc, _, err = _cli(["train", data_dir, str(tmp_path / "run"), "--steps", "1"]
                      + set_args(embedding_dim=16), capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "holds another model or recipe: hparam embedding_dim is 8 there, 16 here" in err
    rc, _, err = _cli(["train", data_dir, str(tmp_path / "run"), "--steps", "1", "--framework", "keras"], capsys)
    assert rc == 2 and "was trained with --framework torch" in err
