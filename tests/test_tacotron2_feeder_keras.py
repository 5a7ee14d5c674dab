"""tf_layers.tacotron2_dataset: the tf.data feeder yields the batches of
``speechblocks.training.prepare_batch``
over the examples written to disk (kept in memory by the corpus helper), in the original's order
(``BatchSampler`` / ``make_test_batches`` over the original's split); resumable; bad files raise one
ValueError
naming train.txt and the line when the dataset is made."""
import numpy as np
import pytest
import tensorflow as tf

from speechblocks.training import (
    BatchSampler,
    make_test_batches,
    prepare_batch,
    read_metadata,
    split_train_test,
)
from tests.helpers.training_corpus import tiny_hparams, write_corpus
from tf_layers import tacotron2_dataset


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
        assert isinstance(batch[name], tf.Tensor)
        np.testing.assert_array_equal(batch[name].numpy(), value, err_msg=name)
        assert batch[name].numpy().dtype == value.dtype, name


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_dataset_batches_equal_prepare_batch(tmp_path, preset):
    hp = tiny_hparams(preset)
    linear = preset == "rayhane"
    corpus = write_corpus(tmp_path, hp, n=14, linear=linear)
    train_entries, test_entries = split_train_test(read_metadata(corpus["path"]), hp)
    # the generator's sampler uses the default 64 batches a group: 128 examples, 12.8 epochs of 10
    order = iter(BatchSampler(train_entries, hp))
    expected = [prepare_batch(_expected(corpus, train_entries, next(order), linear), hp) for _ in range(6)]
    dataset = tacotron2_dataset(corpus["path"], hp)
    assert dataset.element_spec["mel_targets"].shape.as_list() == [None, None, 3]
    got = list(dataset.take(6))
    for batch, want in zip(got, expected):
        _assert_same(batch, want)
    assert ("speaker_embeddings" in got[0]) == (preset == "rtvc") and ("linear_targets" in got[0]) == linear
    # resume from the state after 4 consumed batches
    state = BatchSampler(train_entries, hp).state_dict(batches=4)
    for batch, want in zip(tacotron2_dataset(corpus["path"], hp, state=state).take(2), expected[4:]):
        _assert_same(batch, want)
    # the test split: one pass over the test batches
    test = list(tacotron2_dataset(corpus["path"], hp, split="test", prefetch=None))
    batches = make_test_batches(test_entries, hp)
    assert len(test) == len(batches) == 2
    for batch, indices in zip(test, batches):
        _assert_same(batch, prepare_batch(_expected(corpus, test_entries, indices, linear), hp))


def test_bad_files_and_states(tmp_path):
    hp = tiny_hparams("rtvc")
    corpus = write_corpus(tmp_path, hp, n=8)
    (tmp_path / "embeds" / "embed-5.npy").unlink()
    in_test = any(e.line == 6 for e in split_train_test(read_metadata(corpus["path"]), hp)[1])
    with pytest.raises(ValueError, match=r"train.txt, line 6: speaker embedding file .*embed-5.npy does not "
                                          "exist"):
        tacotron2_dataset(corpus["path"], hp, split="test" if in_test else "train")  # its files checked
    assert tacotron2_dataset(corpus["path"], hp, split="train" if in_test else "test") is not None
    np.save(tmp_path / "embeds" / "embed-5.npy", corpus["embeds"][5])
    with pytest.raises(ValueError, match="num_examples"):
        tacotron2_dataset(corpus["path"], hp, state={"batches": 1, "num_examples": 99})
    with pytest.raises(ValueError, match="split"):
        tacotron2_dataset(corpus["path"], hp, split="all")
