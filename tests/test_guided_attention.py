"""The optional guided-attention term of ``speechblocks train --guided-attention`` (not in the original recipe):
its weights against the formula written out by hand, the torch and Keras terms against a numpy sum (garbage in
the padding must not count) and against each other, both trainers adding exactly the reported term to the loss,
and the run recording it, keeping it on resume and refusing bad values."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from speechblocks import cli, resolve_hparams
from speechblocks.training import add_guided_attention_weights, guided_attention_weights, prepare_batch
from speechblocks.training.run import TrainOptions, train
from tests.helpers.tiny_training import TINY, set_args, tiny_corpus, tiny_full_hparams
from torch_layers import guided_attention_loss
from torch_layers.tacotron2_trainer import Tacotron2Trainer


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return str(root), tiny_corpus(root)


def test_weights_are_the_formula_and_zero_in_the_padding():
    # example 0: 2 symbols, 3 frames at r = 2 -> 2 steps; example 1: 3 symbols, 6 frames -> 3 steps
    w = guided_attention_weights([2, 3], [3, 6], 2, t_in=4, steps=3, sigma=0.5)
    g = lambda d: 1.0 - math.exp(-d * d / (2 * 0.25))  # noqa: E731
    expected0 = [[0.0, g(0.5), 0.0], [g(0.5), 0.0, 0.0], [0, 0, 0], [0, 0, 0]]
    expected1 = [[0.0, g(1 / 3), g(2 / 3)], [g(1 / 3), 0.0, g(1 / 3)], [g(2 / 3), g(1 / 3), 0.0], [0, 0, 0]]
    np.testing.assert_allclose(w[0], expected0, atol=1e-7)
    np.testing.assert_allclose(w[1], expected1, atol=1e-7)
    assert w.dtype == np.float32


@pytest.mark.parametrize("args, text", [
    (([0, 3], [3, 6], 2, 4, 3), "`input_lengths` must be in [1, t_in=4]"),
    (([2, 3], [3, 7], 2, 4, 3), "`targets_lengths` / r must be in [1, steps=3]"),
    (([2, 3], [3], 2, 4, 3), "must both be (batch,)"),
])
def test_weights_bad_lengths_name_the_argument(args, text):
    with pytest.raises(ValueError, match=None) as info:
        guided_attention_weights(*args)
    assert text in str(info.value)
    with pytest.raises(ValueError, match="`sigma` must be > 0"):
        guided_attention_weights([2], [3], 2, 4, 3, sigma=0.0)


def _case():
    rng = np.random.default_rng(0)
    il, tl = np.array([5, 3, 7]), np.array([9, 4, 12])
    w = guided_attention_weights(il, tl, 3, 7, 4, 0.4)
    a = rng.random((3, 7, 4)).astype(np.float32)
    a_padded = a.copy()
    a_padded[w == 0] = 1e6  # padding (and the exact diagonal, weight 0) must not count
    valid = sum(-(-int(f) // 3) for f in tl)  # decoder steps
    expected = float((a.astype(np.float64) * w).sum() / valid)
    return a_padded, w, il, tl, expected


def test_torch_and_keras_terms_equal_the_numpy_sum():
    tf_layers = pytest.importorskip("tf_layers")
    a, w, il, tl, expected = _case()
    t = guided_attention_loss(torch.tensor(a), torch.tensor(w), torch.tensor(tl), 3)
    k = tf_layers.guided_attention_loss(a, w, tl, 3)
    assert abs(float(t) - expected) <= 1e-6 * expected
    assert abs(float(k) - expected) <= 1e-6 * expected
    with pytest.raises(ValueError, match=r"guided_attention_loss: argument `weights` must have the alignments' shape"):
        guided_attention_loss(torch.tensor(a), torch.tensor(w[:, :5]), torch.tensor(tl), 3)
    with pytest.raises(ValueError, match=r"guided_attention_loss: argument `weights` must have the alignments' shape"):
        tf_layers.guided_attention_loss(a, w[:, :5], tl, 3)


def _batch(corpus):
    hp = tiny_full_hparams()
    return prepare_batch([(corpus["ids"][i], corpus["mels"][i], corpus["embeds"][i]) for i in (0, 1, 2)], hp)


def _term_check(trainer_cls, corpus):
    """The trainer adds exactly the reported term; the term scales with the weight; the gradients change."""
    hp = resolve_hparams(tiny_full_hparams())
    batch = _batch(corpus)
    trainer = trainer_cls.new(hp, seed=0)
    plain, g_plain, _ = trainer.compute_gradients(batch, seed=3)
    one, g_one, _ = trainer.compute_gradients(add_guided_attention_weights(batch, 2, 1.0), seed=3)
    two, _, _ = trainer.compute_gradients(add_guided_attention_weights(batch, 2, 2.0), seed=3)
    assert "guided_attention_loss" not in plain
    term = float(one["guided_attention_loss"])
    assert 0.0 < term < 1.0
    assert float(two["guided_attention_loss"]) == pytest.approx(2 * term, rel=1e-6)
    assert float(one["loss"]) == pytest.approx(float(plain["loss"]) + term, rel=1e-6)
    assert float(one["before_loss"]) == pytest.approx(float(plain["before_loss"]), rel=1e-7)
    assert any(not np.allclose(np.asarray(a), np.asarray(b)) for a, b in zip(g_plain, g_one))
    return term


def test_both_trainers_add_the_same_term(data):
    _, corpus = data
    torch_term = _term_check(Tacotron2Trainer, corpus)
    pytest.importorskip("tensorflow")
    from tf_layers.tacotron2_trainer import Tacotron2Trainer as KerasTrainer

    keras_term = _term_check(KerasTrainer, corpus)
    assert 0 < torch_term and 0 < keras_term  # different initial weights: each checked against its own plain loss


def _options(data_dir, run, steps, **kw):
    return TrainOptions(data_dir, str(run), "rtvc", dict(TINY), steps=steps, progress=False, **kw)


def test_run_records_the_term_keeps_it_on_resume_and_turns_it_off(data, tmp_path):
    data_dir, _ = data
    first = train(Tacotron2Trainer, _options(data_dir, tmp_path / "r", 2, guided_attention=0.5,
                                             guided_attention_sigma=0.3))
    assert all("guided_attention_loss" in x for x in first.losses)
    with open(tmp_path / "r" / "run.json") as f:
        assert json.load(f)["guided_attention"] == {"weight": 0.5, "sigma": 0.3}
    resumed = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "r"), steps=1, progress=False))
    assert "guided_attention_loss" in resumed.losses[0]
    off = train(Tacotron2Trainer, TrainOptions(data_dir, str(tmp_path / "r"), steps=1, progress=False,
                                               guided_attention=0.0))
    assert "guided_attention_loss" not in off.losses[0]
    with open(tmp_path / "r" / "run.json") as f:
        assert json.load(f)["guided_attention"] is None
    # whole == first part + resume: exact, the term included
    whole = train(Tacotron2Trainer, _options(data_dir, tmp_path / "w", 3, guided_attention=0.5,
                                             guided_attention_sigma=0.3))
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + resumed.losses]


def test_bad_values_one_line_exit_2(data, tmp_path, capsys):
    data_dir, _ = data
    cases = [(["--guided-attention", "-1"], "--guided-attention must be a finite weight >= 0"),
             (["--guided-attention", "nan"], "--guided-attention must be a finite weight >= 0"),
             (["--guided-attention", "1", "--guided-attention-sigma", "0"], "--guided-attention-sigma must be > 0"),
             (["--guided-attention-sigma", "0.2"], "--guided-attention-sigma needs --guided-attention WEIGHT")]
    for extra, text in cases:
        rc = cli.main(["train", data_dir, str(tmp_path / "r"), "--steps", "1", "--quiet"] + set_args() + extra)
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1 and text in err, (extra, err)
    assert not (tmp_path / "r").exists()
