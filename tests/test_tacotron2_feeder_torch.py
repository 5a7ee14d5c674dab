"""torch_layers.tacotron2_feeder: Dataset + collate + batch sampler give the batches of
``speechblocks.training.prepare_batch`` over the examples written to disk (kept in memory by the corpus
helper),
in the original's order (``BatchSampler`` / ``make_test_batches`` over the original's split); resumable; bad
files
raise one ValueError naming train.txt and the line."""
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from speechblocks.training import (
    BatchSampler,
    make_test_batches,
    prepare_batch,
    read_metadata,
    split_train_test,
)
from tests.helpers.training_corpus import tiny_hparams, write_corpus
from torch_layers import Tacotron2BatchSampler, Tacotron2Collate, Tacotron2Dataset


def _expected(corpus, entries, batch, linear=False):
    examples = []
    for i in batch:
        k = int(entries[i].mel_file[4:-4])  # mel-<k>.npy
        example = (corpus["ids"][k], corpus["mels"][k], corpus["embeds"][k])
        examples.append(example + ((corpus["linears"][k],) if linear else ()))
    return examples


def _assert_same(batch, expected):
    assert sorted(batch) == sorted(expected)
    for name, value in expected.items():
        assert isinstance(batch[name], torch.Tensor)
        np.testing.assert_array_equal(batch[name].numpy(), value, err_msg=name)
        assert batch[name].numpy().dtype == value.dtype, name


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_loader_batches_equal_prepare_batch(tmp_path, preset):
    hp = tiny_hparams(preset)
    linear = preset == "rayhane"  # Rayhane with predict_linear loads linear/ (its third column)
    corpus = write_corpus(tmp_path, hp, n=14, linear=linear)
    train_entries, test_entries = split_train_test(read_metadata(corpus["path"]), hp)
    assert (len(train_entries), len(test_entries)) == (10, 4)

    train = Tacotron2Dataset.from_metadata_file(corpus["path"], hp, "train")
    sampler = Tacotron2BatchSampler(train, hp, batches_per_group=3)
    loader = DataLoader(train, batch_sampler=sampler, collate_fn=Tacotron2Collate(hp))
    order = BatchSampler(train_entries, hp, batches_per_group=3)
    got = [b for b, _ in zip(loader, range(7))]
    for batch, indices in zip(got, order):
        _assert_same(batch, prepare_batch(_expected(corpus, train_entries, indices, linear), hp))
    assert ("speaker_embeddings" in got[0]) == (preset == "rtvc") and ("linear_targets" in got[0]) == linear

    # resume after 4 consumed batches: a new sampler continues with batches 4, 5, 6
    resumed = Tacotron2BatchSampler(train, hp, batches_per_group=3)
    resumed.load_state_dict(sampler.state_dict(batches=4))
    again = DataLoader(train, batch_sampler=resumed, collate_fn=Tacotron2Collate(hp))
    for batch, expected in zip(again, got[4:7]):
        _assert_same(batch, {k: v.numpy() for k, v in expected.items()})

    test = Tacotron2Dataset.from_metadata_file(corpus["path"], hp, "test")
    batches = make_test_batches(test.metadata, hp)
    loader = DataLoader(test, batch_sampler=batches, collate_fn=Tacotron2Collate(hp))
    got = list(loader)
    assert len(got) == 2
    for batch, indices in zip(got, batches):
        _assert_same(batch, prepare_batch(_expected(corpus, test_entries, indices, linear), hp))


def test_bad_files(tmp_path):
    hp = tiny_hparams("rtvc")
    corpus = write_corpus(tmp_path, hp, n=6)
    np.save(tmp_path / "mels" / "mel-3.npy", np.zeros((2, 7), np.float32))
    with pytest.raises(ValueError, match=r"train.txt, line 4: mel file .*mel-3.npy has shape \(2, 7\)"):
        Tacotron2Dataset.from_metadata_file(corpus["path"], hp, "all")
    np.save(tmp_path / "mels" / "mel-3.npy", np.full_like(corpus["mels"][3], np.inf))
    dataset = Tacotron2Dataset.from_metadata_file(corpus["path"], hp, "all")  # headers fine
    with pytest.raises(ValueError, match=r"train.txt, line 4: mel file .*mel-3.npy holds .*infinite"):
        dataset[3]
    with open(corpus["path"], "a", encoding="utf-8") as f:
        f.write("audio-9.npy|mel-9.npy|embed-9.npy|200|1\n")
    with pytest.raises(ValueError, match=r"train.txt, line 7: expected 6 fields"):
        Tacotron2Dataset.from_metadata_file(corpus["path"], hp, "all")
    with pytest.raises(ValueError, match=r"example 0: ids \[70\] lie outside the symbol table"):
        Tacotron2Collate(hp)([(np.array([70]), corpus["mels"][0], corpus["embeds"][0])])
