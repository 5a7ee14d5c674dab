"""The original Tacotron-2 feeder for PyTorch: a ``Dataset``, its collate and the resumable batch sampler."""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Dataset, Sampler

from speechblocks.training import (
    BATCHES_PER_GROUP,
    BatchSampler,
    MetadataEntry,
    check_example_files,
    load_example,
    metadata_split,
    prepare_batch,
    uses_linear_targets,
)

__all__ = ["Tacotron2BatchSampler", "Tacotron2Collate", "Tacotron2Dataset"]


class Tacotron2Dataset(Dataset):
    """The examples of a ``train.txt`` (one split), loaded as the original feeder does.

    Item ``i`` is :func:`speechblocks.training.load_example` of ``metadata[i]``: a tuple of numpy arrays
    ``(ids (T_in,) int32, mel (frames, num_mels) float32, speaker_embedding (E,) float32 or None)`` (plus
    ``linear (frames, num_freq)`` when ``linear``). Batch them with :class:`Tacotron2Collate` in the order of
    :class:`Tacotron2BatchSampler` (training) or :func:`speechblocks.training.make_test_batches` (test).

    Args:
        metadata (Sequence[MetadataEntry]): the examples (e.g. :func:`speechblocks.training.metadata_split`).
        data_dir (str or PathLike): the directory holding ``mels/`` and ``embeds/`` (that of ``train.txt``).
        hparams: a preset name, mapping or hparams object with the original names.
        linear (bool, optional): load the linear targets (Rayhane).
            (Default: :func:`speechblocks.training.uses_linear_targets`)
        n_symbols (int, optional): size of the symbol table. (Default: 66)
        check_files (bool, optional): check every example's files (existence, ``.npy`` header shapes) now.
            (Default: ``True``)

    Raises:
        ValueError: with ``check_files``, for a missing file or one of the wrong shape; when an item is read,
            for a file that cannot be loaded -- naming ``train.txt`` and the line.

    Example:
        >>> train = Tacotron2Dataset.from_metadata_file("out/train.txt", "rtvc")
        >>> sampler = Tacotron2BatchSampler(train, "rtvc")
        >>> loader = DataLoader(train, batch_sampler=sampler, collate_fn=Tacotron2Collate("rtvc"))
    """

    def __init__(self, metadata: Sequence[MetadataEntry], data_dir: str | os.PathLike, hparams,
                 linear: bool | None = None, n_symbols: int | None = None, check_files: bool = True):
        self.metadata = list(metadata)
        self.data_dir = os.fspath(data_dir)
        self.hparams = hparams
        self.linear = uses_linear_targets(hparams) if linear is None else bool(linear)
        self.n_symbols = n_symbols
        if check_files:
            check_example_files(self.metadata, self.data_dir, hparams, linear=self.linear)

    @classmethod
    def from_metadata_file(cls, metadata_path: str | os.PathLike, hparams, split: str = "train",
                           **kwargs) -> Tacotron2Dataset:
        """The ``"train"``, ``"test"`` or ``"all"`` examples of a ``train.txt``, in the original's order
        (:func:`speechblocks.training.split_train_test`); ``kwargs`` as the constructor."""
        metadata_path = os.fspath(metadata_path)
        data_dir = os.path.dirname(os.path.abspath(metadata_path))
        return cls(metadata_split(metadata_path, hparams, split), data_dir, hparams, **kwargs)

    def __len__(self) -> int:
        return len(self.metadata)

    def __getitem__(self, index: int) -> tuple:
        return load_example(self.metadata[index], self.data_dir, self.hparams, linear=self.linear,
                            n_symbols=self.n_symbols)


class Tacotron2Collate:
    """Collate function: :func:`speechblocks.training.prepare_batch` of the examples, as torch tensors.

    Args:
        hparams: a preset name, mapping or hparams object (``outputs_per_step``, ``symmetric_mels``,
            ``max_abs_value``).
        n_symbols (int, optional): size of the symbol table. (Default: 66)

    Returns (when called on a list of ``B`` examples):
        dict[str, torch.Tensor]: ``inputs`` int32 ``(B, T_in)``, ``input_lengths`` int32 ``(B,)``,
        ``mel_targets`` float32 ``(B, T_out, num_mels)``, ``stop_token_targets`` float32 ``(B, T_out)``,
        ``targets_lengths`` int32 ``(B,)``, and ``speaker_embeddings`` float32 ``(B, E)`` /
        ``linear_targets`` float32 ``(B, T_out, num_freq)`` when the examples carry them.
    """

    def __init__(self, hparams, n_symbols: int | None = None):
        self.hparams = hparams
        self.n_symbols = n_symbols

    def __call__(self, examples: list[tuple]) -> dict[str, torch.Tensor]:
        arrays = prepare_batch(examples, self.hparams, n_symbols=self.n_symbols)
        return {name: torch.from_numpy(array) for name, array in arrays.items()}


class Tacotron2BatchSampler(Sampler):
    """The original feeder's endless training batches: groups of ``batch_size * 64`` examples of the epoch
    stream, sorted by length, cut into batches, shuffled (:class:`speechblocks.training.BatchSampler`).

    Yields lists of dataset indices; deterministic for a seed and resumable (:meth:`state_dict` /
    :meth:`load_state_dict`). A ``DataLoader`` with workers prefetches batches: save
    ``state_dict(batches=steps_done)`` (the batches the training loop consumed), not the count drawn.

    Args:
        data_source (Tacotron2Dataset or Sequence[MetadataEntry]): the training examples.
        hparams: a preset name, mapping or hparams object (``tacotron_batch_size``, ``tacotron_random_seed``).
        seed (int, optional): the seed of the data order. (Default: ``tacotron_random_seed``)
        batches_per_group (int, optional): batches sorted together. (Default: 64)
    """

    def __init__(self, data_source, hparams, seed: int | None = None,
                 batches_per_group: int = BATCHES_PER_GROUP):
        metadata = data_source.metadata if isinstance(data_source, Tacotron2Dataset) else data_source
        self.sampler = BatchSampler(metadata, hparams, seed=seed, batches_per_group=batches_per_group)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.sampler)

    def state_dict(self, batches: int | None = None) -> dict[str, int]:
        """See :meth:`speechblocks.training.BatchSampler.state_dict`."""
        return self.sampler.state_dict(batches)

    def load_state_dict(self, state: dict) -> None:
        """See :meth:`speechblocks.training.BatchSampler.load_state_dict`."""
        self.sampler.load_state_dict(state)
