"""``speechblocks gta`` (torch): every utterance's GTA mel equals the model's own teacher-forced inference output
(``eval()``, pre-net dropout 0) on a batch built by hand from the corpus arrays (ids written out from the symbol
table, not through the text front-end): alone with ``--batch-size 1``, and on the hand-padded batch of the same
consecutive lines with ``--batch-size 5``; ``--max-iters`` caps the frames; ``map.txt`` / ``synthesized.txt`` in the
originals' formats; bad input exits 2."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from speechblocks import cli, resolve_hparams
from tests.helpers.tiny_training import tiny_corpus, tiny_full_hparams
from torch_layers.tacotron2_trainer import Tacotron2Trainer


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("gta")
    corpus = tiny_corpus(root / "data", n=7)
    trainer = Tacotron2Trainer.new(resolve_hparams(tiny_full_hparams()), seed=3)
    model_path = str(root / "model.pt")
    trainer.save_model(model_path)
    model = trainer.model
    model.load_state_dict(torch.load(model_path, weights_only=True)["model_state_dict"])
    return str(root / "data"), model_path, corpus, trainer


def _reference(model, corpus, lines, max_iters=None):
    """The model's teacher-forced inference pass on a batch padded by hand (inputs 0, targets -4 to a multiple of
    r = 2), dropout 0."""
    ids = [corpus["ids"][i] for i in lines]
    mels = [corpus["mels"][i] for i in lines]
    t_in = max(len(x) for x in ids)
    t_out = max(len(m) for m in mels)
    t_out += t_out % 2
    inputs = torch.zeros(len(lines), t_in, dtype=torch.long)
    targets = torch.full((len(lines), t_out, 8), -4.0)
    for b, (x, m) in enumerate(zip(ids, mels)):
        inputs[b, :len(x)] = torch.from_numpy(x)
        targets[b, :len(m)] = torch.from_numpy(m)
    embeds = torch.from_numpy(np.stack([corpus["embeds"][i] for i in lines]))
    hp = resolve_hparams(tiny_full_hparams(tacotron_dropout_rate=0.0))
    reference = type(model)(hp)
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        out = reference.eval()(inputs, torch.tensor([len(x) for x in ids]), embeds, targets, max_iters)
    return [out["mel_outputs"][b, :len(m)].numpy() for b, m in enumerate(mels)]


@pytest.mark.parametrize("batch_size", [1, 5])
def test_gta_equals_the_teacher_forced_output(setup, tmp_path, capsys, batch_size):
    data, model_path, corpus, trainer = setup
    out = tmp_path / "out"
    rc = cli.main(["gta", data, model_path, str(out), "--batch-size", str(batch_size), "--quiet",
                   "--set", "tacotron_dropout_rate=0"])
    assert rc == 0, capsys.readouterr().err
    groups = [list(range(i, min(i + batch_size, 7))) for i in range(0, 7, batch_size)]
    for lines in groups:
        for i, expected in zip(lines, _reference(trainer.model, corpus, lines)):
            got = np.load(out / "gta" / f"mel-{i}.npy")
            assert got.shape == corpus["mels"][i].shape
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    with open(out / "map.txt") as f:
        rows = [line.rstrip("\n").split("|") for line in f]
    with open(os.path.join(data, "train.txt")) as f, open(out / "synthesized.txt") as g:
        assert f.read() == g.read()
    assert len(rows) == 7
    assert rows[2] == [os.path.join(data, "audio", "audio-2.npy"), os.path.join(data, "mels", "mel-2.npy"),
                       str(out / "gta" / "mel-2.npy"), "<no_g>", rows[2][4]]


def test_max_iters_caps_gta(setup, tmp_path, capsys):
    data, model_path, corpus, trainer = setup
    out = tmp_path / "out"
    assert cli.main(["gta", data, model_path, str(out), "--batch-size", "1", "--max-iters", "2", "--quiet",
                     "--set", "tacotron_dropout_rate=0"]) == 0
    for i in range(7):
        got = np.load(out / "gta" / f"mel-{i}.npy")
        assert got.shape == (min(len(corpus["mels"][i]), 4), 8)
        (expected,) = _reference(trainer.model, corpus, [i], max_iters=2)
        np.testing.assert_allclose(got, expected[:len(got)], rtol=0, atol=1e-5)


def test_bad_input(setup, tmp_path, capsys):
    data, model_path, _, _ = setup
    for argv, text in ((["gta", str(tmp_path), model_path, str(tmp_path / "o")], "holds no train.txt"),
                       (["gta", data, str(tmp_path / "none.pt"), str(tmp_path / "o")], "does not exist"),
                       (["gta", data, model_path, str(tmp_path / "o"), "--max-iters", "0"], "--max-iters")):
        rc = cli.main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1 and text in err, err
