"""``speechblocks train --precision bf16|fp16`` on the CPU at tiny sizes (issue #38): the loss falls, resume is exact,
checkpoints and Adam's slots stay float32, fp16's loss scale is checkpointed and continued."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from speechblocks import resolve_hparams
from speechblocks.training import prepare_batch
from speechblocks.training.checkpoint_files import read_state
from speechblocks.training.run import TrainOptions, train
from tests.helpers.devices import DEVICES
from tests.helpers.tiny_training import TINY, tiny_corpus, tiny_full_hparams
from torch_layers import tacotron2_trainer
from torch_layers.tacotron2_trainer import LossScale, Tacotron2Trainer


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return str(root), tiny_corpus(root)


def _options(data_dir, run, steps, **kw):
    return TrainOptions(data_dir, str(run), "rtvc", dict(TINY), steps=steps, progress=False, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_the_loss_falls_in_lower_precision(data, device, precision):
    _, corpus = data
    cls = Tacotron2Trainer.configured(device, precision)
    trainer = cls.new(resolve_hparams(tiny_full_hparams()), seed=0)
    batch = prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in (0, 1)],
                          tiny_full_hparams())
    results = [trainer.train_step(batch, 1e-2, seed=i) for i in range(20)]
    losses = [r.losses["loss"] for r in results]
    assert all(np.isfinite(r.losses["loss"]) and (r.applied or r.skipped) for r in results)
    # fp16: the first steps may overflow at the initial scale 2 ** 15 and be skipped (as GradScaler's)
    assert sum(r.skipped for r in results) <= (4 if precision == "fp16" else 0)
    assert np.mean(losses[-5:]) < 0.8 * losses[0], losses
    # master weights float32, and bf16/fp16 really ran: the first loss is not float32's
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    fp32 = Tacotron2Trainer.new(resolve_hparams(tiny_full_hparams()), seed=0).train_step(batch, 1e-2, seed=0)
    assert losses[0] != fp32.losses["loss"] and losses[0] == pytest.approx(fp32.losses["loss"], rel=0.05)


def _final(run):
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    state = torch.load(os.path.join(run, "checkpoints", latest["model"]), weights_only=True)["model_state_dict"]
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return state, meta, slots


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_resume_is_exact_and_checkpoints_stay_float32(data, tmp_path, precision, monkeypatch):
    """4 steps in one run and 2 + 2 with a resume between: the same losses, weights and slots bit for bit. fp16:
    the scale starts at 1 and doubles every step here (growth interval 1; no overflow at such scales), so it is
    2 ** 4 after 4 steps, and a resume that lost it would end at 2 ** 2."""
    if precision == "fp16":
        monkeypatch.setattr(LossScale, "growth_interval", 1)
        monkeypatch.setattr(LossScale.__init__, "__defaults__", (1.0, 0))
    data_dir, _ = data
    cls = Tacotron2Trainer.configured("cpu", precision)
    whole = train(cls, _options(data_dir, tmp_path / "a", 4, precision=precision))
    first = train(cls, _options(data_dir, tmp_path / "b", 2, precision=precision))
    with open(tmp_path / "b" / "run.json") as f:
        assert json.load(f)["precision"] == precision
    second = train(cls, TrainOptions(data_dir, str(tmp_path / "b"), steps=2, progress=False))
    assert whole.global_step == second.global_step == 4
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + second.losses]
    (sa, meta_a, slots_a), (sb, meta_b, slots_b) = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert all(v.dtype == torch.float32 for v in sa.values() if v.is_floating_point())
    assert sorted(slots_a) == sorted(slots_b) and all(np.array_equal(slots_a[k], slots_b[k]) for k in slots_a)
    assert slots_a and all(v.dtype == np.float32 for v in slots_a.values())
    assert meta_a["precision"] == meta_b["precision"]
    if precision == "fp16":  # doubled after each of the 4 steps, continued across the resume
        assert meta_b["precision"] == {"precision": "fp16", "loss_scale": 16.0, "good_steps": 0}
    else:
        assert meta_b["precision"] == {"precision": "bf16"}


def test_fp16_overflow_skips_the_step_and_backs_off(data, monkeypatch):
    """A scale that overflows float16's gradients (here: one past float32's range) skips the update (weights and
    Adam's count unchanged, not a divergence) and halves the scale, as GradScaler."""
    _, corpus = data
    trainer = Tacotron2Trainer.configured("cpu", "fp16").new(resolve_hparams(tiny_full_hparams()), seed=0)
    trainer.loss_scale = LossScale(2.0 ** 130)
    batch = prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in (0, 1)],
                          tiny_full_hparams())
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    result = trainer.train_step(batch, 1e-2, seed=0)
    assert np.isfinite(result.losses["loss"]) and not result.applied and result.skipped
    assert trainer.loss_scale.state() == {"loss_scale": 2.0 ** 129, "good_steps": 0}
    # the weights unchanged (the batch-norm moving statistics did move: the forward pass ran, as with GradScaler)
    assert all(torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    assert trainer.optimizer_state()[0] == 0


def test_loss_scale_rule():
    s = LossScale(8.0)
    for _ in range(LossScale.growth_interval - 1):
        s.update(True)
    assert s.state() == {"loss_scale": 8.0, "good_steps": LossScale.growth_interval - 1}
    s.update(True)
    assert s.state() == {"loss_scale": 16.0, "good_steps": 0}
    s.update(True)
    s.update(False)
    assert s.state() == {"loss_scale": 8.0, "good_steps": 0}
    assert tacotron2_trainer.AUTOCAST_DTYPES == {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
