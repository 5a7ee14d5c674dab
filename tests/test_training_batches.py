"""speechblocks.training: the schedule, the feeder's batches, the split and the data order (numpy only).

References: the learning rates are written out by hand from ``init * rate ** ((step - start) / decay_steps)``
clipped to ``[final, init]`` (the original ``_learning_rate_decay``: ``tf.train.exponential_decay`` without
staircase); the batches are written out by hand from the original feeder's rules (pad ids with 0, mels with
``-max_abs_value`` or 0, stop targets 0 then 1 from the last real frame, time rounded up to r); the split is
scikit-learn's own ``train_test_split`` (what the original called) plus the feeder's round-down.
"""
import math

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from speechblocks import tacotron2_hparams
from speechblocks.training import (
    BatchSampler,
    MetadataEntry,
    batch_groups,
    check_example_files,
    learning_rate,
    load_example,
    make_test_batches,
    prepare_batch,
    read_metadata,
    split_train_test,
)
from tests.helpers.training_corpus import tiny_hparams, write_corpus

# ---------------------------------------------------------------------------------------------- schedule


@pytest.mark.parametrize("preset,expected", [
    # RTVC: init 1e-3, start 50k, decay_steps 50k, rate 0.5, final 1e-5
    ("rtvc", {0: 1e-3, 49_999: 1e-3, 50_000: 1e-3, 75_000: 1e-3 * 0.7071067811865476, 100_000: 5e-4,
              150_000: 2.5e-4, 350_000: 1e-3 / 64, 382_000: 1e-3 * 2 ** -6.64, 382_193: 1e-5, 400_000: 1e-5,
              10**7: 1e-5}),
    # Rayhane: init 1e-3, start 40k, decay_steps 18k, rate 0.5, final 1e-4
    ("rayhane", {0: 1e-3, 39_999: 1e-3, 49_000: 1e-3 * 0.7071067811865476, 58_000: 5e-4, 94_000: 1.25e-4,
                 99_700: 1e-3 * 2 ** (-59_700 / 18_000), 99_800: 1e-4, 200_000: 1e-4}),
])
def test_learning_rate_by_hand(preset, expected):
    """Constant before the start (the negative exponent is clipped to init), a continuous (not staircase)
    decay, then the floor: 1e-3 * 0.5**k reaches 1e-5 at k = log2(100) = 6.6439 (RTVC, step 382,193) and 1e-4
    at k = log2(10) = 3.3219 (Rayhane, step 99,795)."""
    for step, value in expected.items():
        assert learning_rate(step, preset) == pytest.approx(value, rel=1e-12), step
    assert learning_rate(np.int64(58_000), tacotron2_hparams(preset)) == learning_rate(58_000, preset)


def test_learning_rate_without_decay_and_bad_input():
    hp = dict(tacotron2_hparams("rtvc"), tacotron_decay_learning_rate=False, tacotron_initial_learning_rate=3e-4)
    assert {learning_rate(s, hp) for s in (0, 50_000, 10**6)} == {3e-4}
    for step in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="step"):
            learning_rate(step, "rtvc")
    with pytest.raises(ValueError, match="tacotron_decay_steps"):
        learning_rate(1, dict(tacotron2_hparams("rtvc"), tacotron_decay_steps=0))
    with pytest.raises(ValueError, match="tacotron_start_decay"):
        learning_rate(1, {"tacotron_initial_learning_rate": 1e-3, "tacotron_decay_learning_rate": True})


# ----------------------------------------------------------------------------------------------- batches

MEL0 = np.array([[1, 2], [3, 4], [5, 6]], np.float32)  # 3 frames
MEL1 = np.array([[7, 8]], np.float32)  # 1 frame
MEL2 = np.array([[9, 10], [11, 12]], np.float32)  # 2 frames
E0, E1, E2 = np.array([.1, .2, .3], np.float32), np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
EXAMPLES = [(np.array([5, 6, 7]), MEL0, E0), (np.array([8]), MEL1, E1)]


def _hp(preset, **kw):
    return dict(tacotron2_hparams(preset), num_mels=2, **kw)


def test_prepare_batch_rtvc_r2_by_hand():
    """RTVC: r = 2, symmetric mels, max_abs_value 4 -> pad -4; T_out = round_up(3, 2) = 4."""
    out = prepare_batch(EXAMPLES, _hp("rtvc", speaker_embedding_size=3))
    assert sorted(out) == ["input_lengths", "inputs", "mel_targets", "speaker_embeddings", "stop_token_targets",
                           "targets_lengths"]
    np.testing.assert_array_equal(out["inputs"], [[5, 6, 7], [8, 0, 0]])
    np.testing.assert_array_equal(out["input_lengths"], [3, 1])
    np.testing.assert_array_equal(out["mel_targets"], [[[1, 2], [3, 4], [5, 6], [-4, -4]],
                                                       [[7, 8], [-4, -4], [-4, -4], [-4, -4]]])
    # 0 for the first frames - 1 frames, 1 from the last real frame on
    np.testing.assert_array_equal(out["stop_token_targets"], [[0, 0, 1, 1], [1, 1, 1, 1]])
    np.testing.assert_array_equal(out["targets_lengths"], [3, 1])
    np.testing.assert_array_equal(out["speaker_embeddings"], np.stack([E0, E1]))
    assert {k: v.dtype.name for k, v in out.items()} == {
        "inputs": "int32", "input_lengths": "int32", "mel_targets": "float32", "stop_token_targets": "float32",
        "targets_lengths": "int32", "speaker_embeddings": "float32"}


def test_prepare_batch_r1_three_examples_order_kept():
    """r = 1 (Rayhane's), three examples in the given order, no speaker embedding; T_out = 3 exactly."""
    examples = [(np.array([9, 9]), MEL2, None), (np.array([5, 6, 7]), MEL0, None), (np.array([8]), MEL1, None)]
    out = prepare_batch(examples, _hp("rayhane"))
    assert "speaker_embeddings" not in out and "linear_targets" not in out
    np.testing.assert_array_equal(out["inputs"], [[9, 9, 0], [5, 6, 7], [8, 0, 0]])
    np.testing.assert_array_equal(out["mel_targets"], [[[9, 10], [11, 12], [-4, -4]],
                                                       [[1, 2], [3, 4], [5, 6]],
                                                       [[7, 8], [-4, -4], [-4, -4]]])
    np.testing.assert_array_equal(out["stop_token_targets"], [[0, 1, 1], [0, 0, 1], [1, 1, 1]])
    np.testing.assert_array_equal(out["targets_lengths"], [2, 3, 1])
    np.testing.assert_array_equal(out["input_lengths"], [2, 3, 1])


def test_prepare_batch_rtvc_r1_and_r3_asymmetric_and_linear():
    # RTVC sizes with r = 1: T_out = 3
    out = prepare_batch(EXAMPLES, _hp("rtvc", speaker_embedding_size=3, outputs_per_step=1))
    np.testing.assert_array_equal(out["stop_token_targets"], [[0, 0, 1], [1, 1, 1]])
    assert out["mel_targets"].shape == (2, 3, 2)
    # asymmetric mels pad with 0; r = 3: T_out = round_up(3, 3) = 3, with a 4-frame example round_up(4, 3) = 6
    mel3 = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = prepare_batch([(np.array([1]), mel3, None), (np.array([2, 3]), MEL1, None)],
                        _hp("rayhane", symmetric_mels=False, outputs_per_step=3))
    np.testing.assert_array_equal(out["mel_targets"][0], [[0, 1], [2, 3], [4, 5], [6, 7], [0, 0], [0, 0]])
    np.testing.assert_array_equal(out["mel_targets"][1], [[7, 8]] + [[0, 0]] * 5)
    np.testing.assert_array_equal(out["stop_token_targets"], [[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    # Rayhane's linear targets: padded like the mels
    lin0, lin1 = np.full((3, 4), 2.0, np.float32), np.full((1, 4), 3.0, np.float32)
    out = prepare_batch([(np.array([1]), MEL0, None, lin0), (np.array([2]), MEL1, None, lin1)],
                        _hp("rayhane", outputs_per_step=2))
    np.testing.assert_array_equal(out["linear_targets"][0], [[2] * 4] * 3 + [[-4] * 4])
    np.testing.assert_array_equal(out["linear_targets"][1], [[3] * 4] + [[-4] * 4] * 3)


@pytest.mark.parametrize("examples,match", [
    ([], "non-empty"),
    ([(np.array([5, 66]), MEL0, None)], r"example 0: ids \[66\] lie outside the symbol table \[0, 66\)"),
    ([(np.array([-1]), MEL0, None)], "outside the symbol table"),
    ([(np.array([1.5]), MEL0, None)], "integer"),
    ([(np.array([], np.int32), MEL0, None)], "non-empty"),
    ([(np.array([1]), np.zeros((3, 5)), None)], r"num_mels=2"),
    ([(np.array([1]), np.zeros((0, 2)), None)], "frames >= 1"),
    ([(np.array([1]), np.array([[np.nan, 0]]), None)], "NaN"),
    ([(np.array([1]), MEL0, E0), (np.array([1]), MEL0, None)], "example 1: has no speaker embedding"),
    ([(np.array([1]), MEL0, np.zeros(4))], "speaker_embedding_size=3"),
    ([(np.array([1]), MEL0, None, np.zeros((2, 4)))], "linear target"),
])
def test_prepare_batch_bad_input(examples, match):
    with pytest.raises(ValueError, match=match):
        prepare_batch(examples, _hp("rtvc", speaker_embedding_size=3))


# ------------------------------------------------------------------------------------- split and order

def _meta(frames):
    return [MetadataEntry(f"a{i}", f"m{i}", f"e{i}", 100 * f, f, "t") for i, f in enumerate(frames)]


@pytest.mark.parametrize("n,overrides", [
    (50, dict(tacotron_batch_size=2)),  # 5 %: ceil(2.5) = 3 test, rounded down to 2, one back to train
    (50, dict(tacotron_batch_size=4, tacotron_test_size=None, tacotron_test_batches=2)),  # 8 test
    (30, dict(tacotron_batch_size=3, tacotron_test_size=7)),  # 7 -> 6 test, 1 back
    (200, dict(tacotron_batch_size=36)),  # RTVC's batch: 10 test examples round down to none
])
def test_split_equals_sklearn_then_round_down(n, overrides):
    hp = dict(tacotron2_hparams("rtvc"), **overrides)
    meta = _meta(range(1, n + 1))
    size = hp["tacotron_test_size"]
    size = size if size is not None else hp["tacotron_test_batches"] * hp["tacotron_batch_size"]
    train_ref, test_ref = train_test_split(np.arange(n), test_size=size, random_state=1234)
    kept = len(test_ref) // hp["tacotron_batch_size"] * hp["tacotron_batch_size"]
    train, test = split_train_test(meta, hp)
    assert [m.audio_file for m in test] == [f"a{i}" for i in test_ref[:kept]]
    assert [m.audio_file for m in train] == [f"a{i}" for i in np.concatenate([train_ref, test_ref[kept:]])]


def test_split_impossible():
    with pytest.raises(ValueError, match="tacotron_test_size"):
        split_train_test(_meta([1, 2]), dict(tacotron2_hparams("rtvc"), tacotron_test_size=2))
    with pytest.raises(ValueError, match="tacotron_test_batches"):
        split_train_test(_meta([1, 2]), dict(tacotron2_hparams("rtvc"), tacotron_test_size=None))


def test_batch_groups_sorted_chunks_shuffled():
    frames = [5, 3, 9, 1, 4, 7, 2, 8, 6, 3, 9, 1]
    meta = _meta(frames)
    hp = {"tacotron_batch_size": 4}
    batches = batch_groups(meta, hp, np.random.default_rng(0))
    # by hand: stable sort of the frames -> indices 3, 11 (1), 6 (2), 1, 9 (3), 4 (4), 0 (5), 8 (6), 5 (7), 7 (8),
    # 2, 10 (9); chunks of 4
    chunks = [{3, 11, 6, 1}, {9, 4, 0, 8}, {5, 7, 2, 10}]
    assert sorted(map(set, batches), key=min) == sorted(chunks, key=min)
    assert sorted(i for b in batches for i in b) == list(range(12))
    orders = {tuple(map(tuple, batch_groups(meta, hp, np.random.default_rng(s)))) for s in range(6)}
    assert len(orders) > 1  # batches and their examples are shuffled
    assert sorted(len(b) for b in batch_groups(meta, {"tacotron_batch_size": 5}, np.random.default_rng(0))) == [2, 5, 5]


def test_sampler_epochs_groups_and_resume():
    """24 examples, batch 3, 4 batches a group (12 examples): epoch 0 reads the split's order (the original's
    first pass is not shuffled), each epoch is 2 groups = 8 batches holding every example exactly once, each
    batch is a chunk of its group sorted by length, and a resumed sampler continues with the same batches."""
    rng = np.random.default_rng(1)
    meta = _meta(rng.integers(1, 50, size=24).tolist())
    hp = dict(tacotron2_hparams("rtvc"), tacotron_batch_size=3)
    sampler = BatchSampler(meta, hp, batches_per_group=4)
    stream = iter(sampler)
    seen = [next(stream) for _ in range(40)]
    assert {i for b in seen[:4] for i in b} == set(range(12))  # group 0: the first 12 of the split's order
    for epoch in range(5):
        flat = sorted(i for b in seen[8 * epoch:8 * epoch + 8] for i in b)
        assert flat == list(range(24)), epoch
    for g in range(10):
        group = seen[4 * g:4 * g + 4]
        members = [i for b in group for i in b]
        order = sorted(members, key=lambda i: meta[i].frames)
        keys = sorted(tuple(sorted(meta[i].frames for i in b)) for b in group)
        assert keys == sorted(tuple(sorted(meta[i].frames for i in order[k:k + 3])) for k in range(0, 12, 3))
    assert seen[8:16] != seen[16:24]  # later epochs are permuted afresh
    # resume: a state saved after 13 batches gives the same next batches, in a new sampler
    again = BatchSampler(meta, hp, batches_per_group=4)
    first = iter(again)
    for _ in range(13):
        next(first)
    state = again.state_dict()
    assert state == {"seed": 5339, "batches": 13, "epoch": 1, "position": 12, "batch": 1, "num_examples": 24,
                     "batch_size": 3, "batches_per_group": 4}
    resumed = BatchSampler(meta, hp, batches_per_group=4)
    resumed.load_state_dict(dict(state))
    assert [b for b, _ in zip(resumed, range(27))] == seen[13:40]
    assert BatchSampler(meta, hp, batches_per_group=4).state_dict(batches=13) == state
    other = BatchSampler(meta, hp, seed=7, batches_per_group=4)
    assert [b for b, _ in zip(other, range(8))] != seen[:8]
    with pytest.raises(ValueError, match="num_examples"):
        BatchSampler(meta[:20], hp, batches_per_group=4).load_state_dict(state)
    with pytest.raises(ValueError, match="position"):
        resumed.load_state_dict(dict(state, position=3))


def test_sampler_group_spans_epochs():
    """10 examples, groups of 6 (as the original reads n * 64 examples across the end of an epoch): the stream
    repeats every example once per 10 reads, so 5 groups = 30 reads hold each example exactly 3 times."""
    meta = _meta([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
    sampler = BatchSampler(meta, {"tacotron_batch_size": 2, "tacotron_random_seed": 0}, batches_per_group=3)
    batches = [b for b, _ in zip(sampler, range(15))]
    counts = np.bincount([i for b in batches for i in b], minlength=10)
    assert counts.tolist() == [3] * 10
    assert sorted(i for b in batches[:3] for i in b) == [0, 1, 2, 3, 4, 5]


def test_test_batches_once_sorted():
    meta = _meta([5, 3, 9, 1, 4, 7, 2, 8])
    batches = make_test_batches(meta, {"tacotron_batch_size": 2, "tacotron_random_seed": 3})
    # by hand: sorted by frames 3 (1), 6 (2), 1 (3), 4 (4), 0 (5), 5 (7), 7 (8), 2 (9); pairs
    assert sorted(map(set, batches), key=min) == sorted([{3, 6}, {1, 4}, {0, 5}, {7, 2}], key=min)
    assert batches == make_test_batches(meta, {"tacotron_batch_size": 2, "tacotron_random_seed": 3})
    assert make_test_batches([], {"tacotron_batch_size": 2, "tacotron_random_seed": 3}) == []


# --------------------------------------------------------------------------------------- files, bad input

def test_read_metadata_and_load_example(tmp_path):
    hp = tiny_hparams("rtvc")
    corpus = write_corpus(tmp_path, hp, n=4)
    meta = read_metadata(corpus["path"])
    assert [m.line for m in meta] == [1, 2, 3, 4] and meta[0].path == corpus["path"]
    assert meta[2].frames == len(corpus["mels"][2])
    ids, mel, embed = load_example(meta[2], tmp_path, hp)
    np.testing.assert_array_equal(ids, corpus["ids"][2])
    np.testing.assert_array_equal(mel, corpus["mels"][2])
    np.testing.assert_array_equal(embed, corpus["embeds"][2])
    check_example_files(meta, tmp_path, hp)


@pytest.mark.parametrize("line,match", [
    ("a|b|c|1|2", r"line 2: expected 6 fields .* got 5"),
    ("a|b|c|1|2|x|y", r"line 2: expected 6 fields .* got 7"),
    ("a|b|c|1|two|text", r"line 2: field 5 \(frames\) must be an integer"),
])
def test_read_metadata_bad_line(tmp_path, line, match):
    path = tmp_path / "train.txt"
    path.write_text(f"a|b|c|1|2|ok\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=match) as info:
        read_metadata(path)
    assert str(path) in str(info.value)
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no examples"):
        read_metadata(tmp_path / "empty.txt")


@pytest.mark.parametrize("damage,match", [
    ("missing mel", r"line 2: mel file .*mel-1.npy does not exist"),
    ("wide mel", r"line 2: mel file .*mel-1.npy has shape \(\d+, 4\), expected \(\d+, 3\)"),
    ("short mel", r"line 2: mel file .*mel-1.npy has shape"),
    ("embed size", r"line 2: speaker embedding file .*embed-1.npy has shape \(5,\), expected \(2,\)"),
    ("not npy", r"line 2: mel file .*mel-1.npy is not a readable .npy"),
])
def test_bad_files_name_the_line(tmp_path, damage, match):
    hp = tiny_hparams("rtvc")
    corpus = write_corpus(tmp_path, hp, n=3)
    mel_path, embed_path = tmp_path / "mels" / "mel-1.npy", tmp_path / "embeds" / "embed-1.npy"
    frames = len(corpus["mels"][1])
    if damage == "missing mel":
        mel_path.unlink()
    elif damage == "wide mel":
        np.save(mel_path, np.zeros((frames, 4), np.float32))
    elif damage == "short mel":
        np.save(mel_path, np.zeros((frames + 1, 3), np.float32))
    elif damage == "embed size":
        np.save(embed_path, np.zeros(5, np.float32))
    else:
        mel_path.write_bytes(b"not an array")
    meta = read_metadata(corpus["path"])
    for call in (lambda: check_example_files(meta, tmp_path, hp), lambda: load_example(meta[1], tmp_path, hp)):
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert str(info.value).startswith(f"{corpus['path']}, line 2:")


def test_nan_mel_and_unencodable_text(tmp_path):
    hp = tiny_hparams("rtvc")
    corpus = write_corpus(tmp_path, hp, n=2)
    np.save(tmp_path / "mels" / "mel-0.npy", np.full_like(corpus["mels"][0], math.nan))
    meta = read_metadata(corpus["path"])
    with pytest.raises(ValueError, match=r"line 1: mel file .* NaN"):
        load_example(meta[0], tmp_path, hp)
    with pytest.raises(ValueError, match=r"line 2: the text '\{HH AH0\}' has no character"):
        load_example(meta[1]._replace(text="{HH AH0}"), tmp_path, hp)


# ---------------------------------------------------------------------------------------------- data-parallel shards


def test_shards_padded_to_the_global_lengths_are_the_global_batch_rows():
    """A rank's rows, batched alone and padded to the global lengths (pad_batch), are the global batch's rows; the
    shards are consecutive, cover the batch and differ by at most one row."""
    from speechblocks.training import pad_batch, shard_rows

    rng = np.random.default_rng(3)
    for preset, linear in (("rtvc", False), ("rayhane", True)):
        hp = tiny_hparams(preset, outputs_per_step=3)
        examples = []
        for _ in range(5):
            frames = int(rng.integers(1, 11))
            ids = rng.integers(1, 66, size=int(rng.integers(1, 9)))
            embed = rng.normal(size=2) if preset == "rtvc" else None
            example = (ids, rng.normal(size=(frames, 3)), embed)
            examples.append(example + ((rng.normal(size=(frames, 5)),) if linear else ()))
        whole = prepare_batch(examples, hp)
        for shards in (1, 2, 3, 5):
            bounds = [shard_rows(5, shards, i) for i in range(shards)]
            assert bounds[0][0] == 0 and bounds[-1][1] == 5
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            assert {hi - lo for lo, hi in bounds} <= {5 // shards, 5 // shards + 1}
            for lo, hi in bounds:
                part = pad_batch(prepare_batch(examples[lo:hi], hp), whole["inputs"].shape[1],
                                 whole["mel_targets"].shape[1], hp)
                assert sorted(part) == sorted(whole)
                for key, value in whole.items():
                    np.testing.assert_array_equal(part[key], value[lo:hi], err_msg=f"{preset} {key} {lo}:{hi}")
    with pytest.raises(ValueError, match="cannot be split over 3"):
        shard_rows(2, 3, 0)
    with pytest.raises(ValueError, match="multiple of outputs_per_step=3"):
        pad_batch(whole, whole["inputs"].shape[1], whole["mel_targets"].shape[1] + 1, hp)


def test_noise_masks_keep_rates_shapes_and_seed():
    """Each element kept with probability 1 - rate (pre-net and convolutions: tacotron_dropout_rate; LSTMs:
    tacotron_zoneout_rate), the shapes of the model's noise_masks, the same masks for the same seed only."""
    from speechblocks.training import draw_noise_masks

    hp = dict(tacotron2_hparams("rtvc"), tacotron_dropout_rate=0.3, tacotron_zoneout_rate=0.1, outputs_per_step=2)
    b, t_in, t_out = 8, 40, 60
    masks = draw_noise_masks(hp, b, t_in, t_out, seed=7)
    assert [m.shape for m in masks["prenet"]] == [(b, 30, 256), (b, 30, 256)]
    assert [m.shape for m in masks["encoder_convolutions"]] == [(b, t_in, 512)] * 3
    assert [m.shape for pair in masks["encoder_LSTM"] for m in pair] == [(b, t_in, 256)] * 4
    assert [m.shape for pair in masks["decoder_LSTM"] for m in pair] == [(b, 30, 1024)] * 4
    assert [m.shape for m in masks["postnet_convolutions"]] == [(b, t_out, 512)] * 5
    for key, rate in (("prenet", 0.3), ("encoder_convolutions", 0.3), ("postnet_convolutions", 0.3),
                      ("encoder_LSTM", 0.1), ("decoder_LSTM", 0.1)):
        parts = [m for pair in masks[key] for m in pair] if key.endswith("LSTM") else masks[key]
        flat = np.concatenate([m.ravel() for m in parts])
        assert set(np.unique(flat)) <= {0.0, 1.0}
        assert abs(flat.mean() - (1 - rate)) < 4 * math.sqrt(rate * (1 - rate) / flat.size), key
    again, other = draw_noise_masks(hp, b, t_in, t_out, seed=7), draw_noise_masks(hp, b, t_in, t_out, seed=8)
    assert np.array_equal(again["postnet_convolutions"][4], masks["postnet_convolutions"][4])
    assert not np.array_equal(other["postnet_convolutions"][4], masks["postnet_convolutions"][4])
    with pytest.raises(ValueError, match="tacotron_zoneout_rate"):
        draw_noise_masks(dict(hp, tacotron_zoneout_rate=1.0), b, t_in, t_out, seed=0)
