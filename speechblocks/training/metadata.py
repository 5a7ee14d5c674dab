"""The original feeder's data order: ``train.txt``, the test split, length-sorted shuffled batch groups, and a
resumable sampler of the training batches. Numpy only."""
from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from ._hparams import get_int, lookup

__all__ = ["BATCHES_PER_GROUP", "BatchSampler", "MetadataEntry", "batch_groups", "make_test_batches",
           "metadata_split", "read_metadata", "split_train_test"]

#: batches read, sorted and shuffled together (the original feeder's ``_batches_per_group``)
BATCHES_PER_GROUP = 64


class MetadataEntry(NamedTuple):
    """One line of ``train.txt``: ``audio|mel|embed|samples|frames|text`` (RTVC) or
    ``audio|mel|linear|samples|frames|text`` (Rayhane).

    Attributes:
        audio_file (str): the audio file's name (``audio/``).
        mel_file (str): the mel target's file name (``mels/``, an ``.npy`` of shape ``(frames, num_mels)``).
        embed_file (str): the third column: the speaker embedding's file name (RTVC, ``embeds/``) or the linear
            target's (Rayhane, ``linear/``).
        samples (int): the audio length in samples.
        frames (int): the mel length in frames (the key the batches are sorted by).
        text (str): the transcript.
        path (str): the ``train.txt`` it was read from.
        line (int): its line number there (1-based).
    """

    audio_file: str
    mel_file: str
    embed_file: str
    samples: int
    frames: int
    text: str
    path: str = ""
    line: int = 0


def _count(value: str, name: str, path, line: int, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ValueError(f"{path}, line {line}: field {name} must be an integer >= {minimum}; got {value!r}.")
    return number


def read_metadata(path: str | os.PathLike) -> list[MetadataEntry]:
    """Read a ``train.txt`` as the original feeder does (each line stripped, split on ``|``).

    Blank lines are skipped; every other line must have the six fields.

    Args:
        path (str or PathLike): the ``train.txt`` (UTF-8).

    Returns:
        list[MetadataEntry]: the lines in file order.

    Raises:
        ValueError: naming the file and the line number: a line without exactly six fields (a ``|`` in the text
            adds one), ``samples`` or ``frames`` not a positive integer; or the file holds no line.
        OSError: if the file cannot be read.
    """
    path = os.fspath(path)
    entries: list[MetadataEntry] = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line:
                continue
            fields = line.split("|")
            if len(fields) != 6:
                raise ValueError(f"{path}, line {number}: expected 6 fields 'audio|mel|embed|samples|frames|text' "
                                 f"separated by '|', got {len(fields)}: {line[:80]!r}.")
            samples = _count(fields[3], "4 (samples)", path, number, 0)
            frames = _count(fields[4], "5 (frames)", path, number, 1)
            entries.append(MetadataEntry(fields[0], fields[1], fields[2], samples, frames, fields[5], path, number))
    if not entries:
        raise ValueError(f"{path}: no examples (the file is empty).")
    return entries


def _test_count(num_examples: int, hparams) -> int:
    """The original's ``train_test_split`` test size (sklearn's ``_validate_shuffle_split`` rule)."""
    test_size = lookup(hparams, "tacotron_test_size")
    if test_size is None:
        test_batches = lookup(hparams, "tacotron_test_batches")
        if test_batches is None:
            raise ValueError("training: hparams `tacotron_test_size` and `tacotron_test_batches` are both None; "
                             "set one of them.")
        n_test = get_int(hparams, "tacotron_test_batches", minimum=0) * get_int(hparams, "tacotron_batch_size")
    elif isinstance(test_size, float):
        if not 0.0 < test_size < 1.0:
            raise ValueError("training: hparam `tacotron_test_size` as a fraction must lie in (0, 1); got "
                             f"{test_size}.")
        n_test = math.ceil(test_size * num_examples)
    else:
        n_test = get_int(hparams, "tacotron_test_size", minimum=1)
    if not 0 < n_test < num_examples:
        raise ValueError(f"training: the test split takes {n_test} of {num_examples} examples; it must take at least "
                         f"one and leave at least one for training (hparams `tacotron_test_size`, "
                         f"`tacotron_test_batches`).")
    return n_test


def split_train_test(metadata: Sequence, hparams) -> tuple[list, list]:
    """The original feeder's train/test split.

    As the original: ``sklearn.model_selection.train_test_split(arange(N), test_size, random_state=
    tacotron_data_random_state)`` -- a ``numpy.random.RandomState(tacotron_data_random_state).permutation(N)``
    whose first ``n_test`` entries are the test set (``n_test = ceil(tacotron_test_size * N)`` for a fraction,
    ``tacotron_test_size`` for an integer, ``tacotron_test_batches * tacotron_batch_size`` when the size is
    None) -- then the test set cut down to a multiple of ``tacotron_batch_size``, its remainder appended to the
    training set. Reimplemented with numpy (no scikit-learn needed); equal to it.

    Args:
        metadata (Sequence): the examples (e.g. :func:`read_metadata`'s entries), ``N`` of them.
        hparams: a preset name, mapping or hparams object with ``tacotron_test_size``,
            ``tacotron_test_batches``, ``tacotron_batch_size``, ``tacotron_data_random_state``.

    Returns:
        tuple[list, list]: ``(train, test)``, the entries in the original's order (train: the permutation's
        training part then the test remainder; test: ``len(test)`` a multiple of the batch size, possibly 0).

    Raises:
        ValueError: naming the hparam when the split is impossible (no test example or no training example).
    """
    n = len(metadata)
    n_test = _test_count(n, hparams)
    batch_size = get_int(hparams, "tacotron_batch_size")
    state = lookup(hparams, "tacotron_data_random_state")
    permutation = np.random.RandomState(state).permutation(n)
    test_indices, train_indices = permutation[:n_test], permutation[n_test:]
    kept = n_test - n_test % batch_size
    train_indices = np.concatenate([train_indices, test_indices[kept:]])
    test_indices = test_indices[:kept]
    return [metadata[i] for i in train_indices], [metadata[i] for i in test_indices]


def batch_groups(metadata: Sequence, hparams, rng: np.random.Generator) -> list[list[int]]:
    """Split one group of examples into batches as the original feeder does.

    The examples are sorted by their frame count (a stable sort: ties keep their order), cut into consecutive
    batches of ``tacotron_batch_size`` (the last one shorter if the group is not a multiple), the batches
    shuffled, and the examples inside each batch shuffled (the original shuffles them in ``_prepare_batch``).
    The original applies this to every group of ``tacotron_batch_size * 64`` training examples and once to the
    whole test set. It used numpy's unseeded global generator; here ``rng`` draws the shuffles.

    Args:
        metadata (Sequence): the group's examples, each with a ``frames`` attribute (e.g. :class:`MetadataEntry`).
        hparams: a preset name, mapping or hparams object with ``tacotron_batch_size``.
        rng (numpy.random.Generator): the generator of the two shuffles.

    Returns:
        list[list[int]]: the batches, each a list of indices into ``metadata``.
    """
    batch_size = get_int(hparams, "tacotron_batch_size")
    frames = np.array([entry.frames for entry in metadata], dtype=np.int64)
    order = np.argsort(frames, kind="stable")
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    shuffled = rng.permutation(len(batches))
    return [[int(i) for i in rng.permutation(batches[b])] for b in shuffled]


def make_test_batches(metadata: Sequence, hparams, seed: int | None = None) -> list[list[int]]:
    """The original's test batches: :func:`batch_groups` over the whole test set, drawn once.

    Args:
        metadata (Sequence): the test examples (:func:`split_train_test`'s second list).
        hparams: a preset name, mapping or hparams object with ``tacotron_batch_size`` and, when ``seed`` is
            None, ``tacotron_random_seed``.
        seed (int, optional): the seed of the shuffles. (Default: ``tacotron_random_seed``)

    Returns:
        list[list[int]]: the batches, indices into ``metadata`` (empty when the test set is).
    """
    seed = get_int(hparams, "tacotron_random_seed", minimum=0) if seed is None else int(seed)
    if not metadata:
        return []
    return batch_groups(metadata, hparams, np.random.default_rng([seed, 2]))


def metadata_split(path: str | os.PathLike, hparams, split: str = "train") -> list[MetadataEntry]:
    """The examples of one split of a ``train.txt``: :func:`read_metadata` then :func:`split_train_test`.

    Args:
        path (str or PathLike): the ``train.txt``.
        hparams: a preset name, mapping or hparams object (the split's hparams).
        split (str, optional): ``"train"``, ``"test"`` or ``"all"`` (every line, file order). (Default: ``"train"``)

    Returns:
        list[MetadataEntry]: the split's entries in the original's order.
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"metadata_split: `split` must be 'train', 'test' or 'all'; got {split!r}.")
    metadata = read_metadata(path)
    if split == "all":
        return metadata
    train, test = split_train_test(metadata, hparams)
    return train if split == "train" else test


class BatchSampler:
    """The original feeder's endless stream of training batches, deterministic and resumable.

    The training examples are read in a stream, as the original ``_get_next_example``: the first pass in the
    split's order (:func:`split_train_test`), every later pass (epoch) a fresh permutation. Each group of
    ``batch_size * batches_per_group`` consecutive examples of the stream (a group may span two epochs, as in the
    original) becomes ``batches_per_group`` batches by :func:`batch_groups`. The original drew its permutations
    from numpy's unseeded global generator; here every draw is a function of ``seed`` and of the epoch or group
    index alone, so the stream is the same in every run with the same seed, and a run resumed from
    :meth:`state_dict` sees exactly the batches it had not seen yet.

    Args:
        metadata (Sequence): the training examples (each with a ``frames`` attribute), ``N >= 1``.
        hparams: a preset name, mapping or hparams object with ``tacotron_batch_size`` and, when ``seed`` is
            None, ``tacotron_random_seed``.
        seed (int, optional): the seed of the data order. (Default: ``tacotron_random_seed``)
        batches_per_group (int, optional): batches sorted together. (Default: 64, the original's)

    Example:
        >>> sampler = BatchSampler(train, "rtvc")
        >>> batch = next(iter(sampler))          # indices into ``train``
        >>> state = sampler.state_dict()          # save it with the checkpoint
        >>> sampler.load_state_dict(state)        # ... and continue from there later
    """

    def __init__(self, metadata: Sequence, hparams, seed: int | None = None,
                 batches_per_group: int = BATCHES_PER_GROUP):
        if len(metadata) == 0:
            raise ValueError("BatchSampler: `metadata` holds no training example.")
        self.metadata = metadata
        self.batch_size = get_int(hparams, "tacotron_batch_size")
        if isinstance(batches_per_group, bool) or not isinstance(batches_per_group, int) or batches_per_group < 1:
            raise ValueError(f"BatchSampler: `batches_per_group` must be an integer >= 1; got {batches_per_group!r}.")
        self.batches_per_group = batches_per_group
        self.seed = get_int(hparams, "tacotron_random_seed", minimum=0) if seed is None else int(seed)
        if self.seed < 0:
            raise ValueError(f"BatchSampler: `seed` must be >= 0; got {seed!r}.")
        self.num_examples = len(metadata)
        self.group_size = self.batch_size * batches_per_group
        self._batches = 0  # batches yielded so far
        self._group_index = -1
        self._group: list[list[int]] = []

    # -- the deterministic stream ---------------------------------------------------------------------------
    def epoch_order(self, epoch: int) -> np.ndarray:
        """The order of the training examples in an epoch: the split's for epoch 0, a permutation after."""
        if epoch == 0:
            return np.arange(self.num_examples)
        return np.random.default_rng([self.seed, 0, epoch]).permutation(self.num_examples)

    def group(self, index: int) -> list[list[int]]:
        """The batches of group ``index`` (indices into ``metadata``)."""
        start = index * self.group_size
        indices = []
        while len(indices) < self.group_size:
            epoch, position = divmod(start + len(indices), self.num_examples)
            take = min(self.num_examples - position, self.group_size - len(indices))
            indices.extend(self.epoch_order(epoch)[position:position + take].tolist())
        entries = [self.metadata[i] for i in indices]
        batches = batch_groups(entries, {"tacotron_batch_size": self.batch_size},
                               np.random.default_rng([self.seed, 1, index]))
        return [[indices[i] for i in batch] for batch in batches]

    def batch(self, number: int) -> list[int]:
        """Batch ``number`` of the stream (0-based), as :meth:`__iter__` yields it."""
        group, within = divmod(number, self.batches_per_group)
        if group != self._group_index:
            self._group, self._group_index = self.group(group), group
        return self._group[within]

    def __iter__(self) -> Iterator[list[int]]:
        """Yield batches (lists of indices into ``metadata``) from the current state on, without end."""
        while True:
            batch = self.batch(self._batches)
            self._batches += 1
            yield batch

    # -- resuming ---------------------------------------------------------------------------------------------
    def state_dict(self, batches: int | None = None) -> dict[str, int]:
        """The position in the stream, to save with a checkpoint.

        Args:
            batches (int, optional): the number of batches consumed, when it differs from the number yielded
                (a loader that prefetches has drawn more batches than the training loop used).
                (Default: the batches yielded so far)

        Returns:
            dict[str, int]: ``seed``, ``batches`` (consumed), and where the current group started reading the
            stream as the original's offsets: ``epoch``, ``position`` (index in that epoch's order), ``batch``
            (batches of the group already consumed); plus ``num_examples``, ``batch_size``,
            ``batches_per_group`` to check the data is the same on resume.
        """
        done = self._batches if batches is None else int(batches)
        group, within = divmod(done, self.batches_per_group)
        epoch, position = divmod(group * self.group_size, self.num_examples)
        return {"seed": self.seed, "batches": done, "epoch": epoch, "position": position, "batch": within,
                "num_examples": self.num_examples, "batch_size": self.batch_size,
                "batches_per_group": self.batches_per_group}

    def load_state_dict(self, state: dict) -> None:
        """Continue from a :meth:`state_dict`.

        Raises:
            ValueError: if the state describes other data (example count, batch size, group size) or is not
                consistent.
        """
        for key in ("num_examples", "batch_size", "batches_per_group"):
            if key in state and int(state[key]) != getattr(self, key):
                raise ValueError(f"BatchSampler.load_state_dict: the state was saved with {key}={state[key]}, this "
                                 f"sampler has {getattr(self, key)} (different training data or hparams).")
        batches = int(state["batches"])
        if batches < 0:
            raise ValueError(f"BatchSampler.load_state_dict: `batches` must be >= 0; got {batches}.")
        self.seed = int(state.get("seed", self.seed))
        self._batches = batches
        self._group_index, self._group = -1, []
        check = self.state_dict()
        for key in ("epoch", "position", "batch"):
            if key in state and int(state[key]) != check[key]:
                raise ValueError(f"BatchSampler.load_state_dict: `{key}`={state[key]} contradicts batches={batches} "
                                 f"(expected {check[key]}).")
