"""Loading one training example from the preprocessed data (``train.txt`` + ``mels/`` + ``embeds/``)."""
from __future__ import annotations

import os

import numpy as np

from ..text import SYMBOLS, text_to_sequence
from ._hparams import get_bool, lookup
from .metadata import MetadataEntry

__all__ = ["check_example_files", "load_example", "uses_linear_targets"]


def uses_linear_targets(hparams) -> bool:
    """Whether the feeder loads linear targets: Rayhane's (a model without speaker embedding) with
    ``predict_linear``; RTVC's feeder never does (its third column is the speaker embedding)."""
    return lookup(hparams, "speaker_embedding_size", None) is None and get_bool(hparams, "predict_linear", False)


def _where(entry: MetadataEntry) -> str:
    return f"{entry.path}, line {entry.line}" if entry.path else "metadata entry"


def _bad_shape(shape: tuple, expected: tuple) -> bool:
    return len(shape) != len(expected) or any(e is not None and s != e for s, e in zip(shape, expected))


def _shape_error(entry: MetadataEntry, what: str, path: str, shape: tuple, expected: tuple) -> ValueError:
    shown = "(" + ", ".join("?" if e is None else str(e) for e in expected) + (",)" if len(expected) == 1 else ")")
    return ValueError(f"{_where(entry)}: {what} file {path} has shape {tuple(shape)}, expected {shown}.")


def _load_array(directory: str, name: str, what: str, entry: MetadataEntry, expected: tuple) -> np.ndarray:
    path = os.path.join(directory, name)
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"{_where(entry)}: {what} file {path} does not exist.") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{_where(entry)}: {what} file {path} is not a readable .npy array ({exc}).") from None
    if _bad_shape(array.shape, expected):
        raise _shape_error(entry, what, path, array.shape, expected)
    if not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        raise ValueError(f"{_where(entry)}: {what} file {path} holds non-numeric, NaN or infinite values.")
    return array


def load_example(entry: MetadataEntry, data_dir: str | os.PathLike, hparams, linear: bool | None = None,
                 n_symbols: int | None = None) -> tuple:
    """One example as the original feeder's ``_get_next_example`` reads it.

    ``ids = text_to_sequence(text, cleaners)`` (the original conversion: characters outside the table are
    dropped, the EOS id ends the sequence), the mel target from ``data_dir/mels/``, the speaker embedding from
    ``data_dir/embeds/`` when the hparams have ``speaker_embedding_size`` (RTVC), and, when ``linear``, the
    linear target from ``data_dir/linear/`` (Rayhane's third column).

    Args:
        entry (MetadataEntry): a line of ``train.txt`` (:func:`~speechblocks.training.read_metadata`).
        data_dir (str or PathLike): the directory of ``train.txt`` (holding ``mels/``, ``embeds/``, ``linear/``).
        hparams: a preset name, mapping or hparams object with ``cleaners``, ``num_mels`` and, for RTVC,
            ``speaker_embedding_size`` (``num_freq`` checks the linear target's width when present).
        linear (bool, optional): load the linear target. (Default: :func:`uses_linear_targets`)
        n_symbols (int, optional): size of the symbol table. (Default: ``len(SYMBOLS)``, 66)

    Returns:
        tuple: ``(ids (T_in,) int32, mel (frames, num_mels) float32, speaker_embedding (E,) float32 or None)``,
        plus ``linear (frames, num_freq) float32`` when ``linear`` -- what
        :func:`~speechblocks.training.prepare_batch` takes.

    Raises:
        ValueError: naming ``train.txt`` and the line: a file missing or unreadable, a mel of the wrong width
            or whose frame count differs from the line's ``frames``, a speaker embedding of the wrong size,
            non-finite values, a text with no encodable character, ids outside the symbol table.
    """
    data_dir = os.fspath(data_dir)
    where = _where(entry)
    cleaners = lookup(hparams, "cleaners", "english_cleaners")
    try:
        ids = np.asarray(text_to_sequence(entry.text, cleaners), dtype=np.int32)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    n_symbols = len(SYMBOLS) if n_symbols is None else int(n_symbols)
    if len(ids) < 2:
        raise ValueError(f"{where}: the text {entry.text!r} has no character of the symbol table.")
    if ((ids < 0) | (ids >= n_symbols)).any():
        raise ValueError(f"{where}: ids outside the symbol table [0, {n_symbols}).")
    mel = _load_array(os.path.join(data_dir, "mels"), entry.mel_file, "mel", entry,
                      (entry.frames, lookup(hparams, "num_mels", None)))
    embed_size = lookup(hparams, "speaker_embedding_size", None)
    embed = None
    if embed_size is not None:
        embed = _load_array(os.path.join(data_dir, "embeds"), entry.embed_file, "speaker embedding", entry,
                            (int(embed_size),)).astype(np.float32)
    example = (ids, mel.astype(np.float32), embed)
    if uses_linear_targets(hparams) if linear is None else linear:
        spec = _load_array(os.path.join(data_dir, "linear"), entry.embed_file, "linear", entry,
                           (entry.frames, lookup(hparams, "num_freq", None)))
        example = example + (spec.astype(np.float32),)
    return example


def _npy_shape(path: str) -> tuple:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, _ = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(f)
    return shape


def check_example_files(metadata, data_dir: str | os.PathLike, hparams, linear: bool | None = None) -> None:
    """Check every example's files before training starts: they exist and their ``.npy`` headers give the
    expected shapes (the mel ``(frames, num_mels)`` with the line's ``frames``, the speaker embedding
    ``(speaker_embedding_size,)``, the linear target ``(frames, num_freq)``). Reads headers only, no data.

    Args:
        metadata (Sequence[MetadataEntry]): the examples.
        data_dir (str or PathLike): the directory of ``train.txt``.
        hparams: as :func:`load_example`.
        linear (bool, optional): check the linear targets too. (Default: :func:`uses_linear_targets`)

    Raises:
        ValueError: for the first bad example, naming ``train.txt``, the line and the file.
    """
    data_dir = os.fspath(data_dir)
    linear = uses_linear_targets(hparams) if linear is None else linear
    num_mels = lookup(hparams, "num_mels", None)
    embed_size = lookup(hparams, "speaker_embedding_size", None)
    num_freq = lookup(hparams, "num_freq", None)
    for entry in metadata:
        wanted = [("mel", "mels", entry.mel_file, (entry.frames, num_mels))]
        if embed_size is not None:
            wanted.append(("speaker embedding", "embeds", entry.embed_file, (int(embed_size),)))
        if linear:
            wanted.append(("linear", "linear", entry.embed_file, (entry.frames, num_freq)))
        for what, folder, name, expected in wanted:
            path = os.path.join(data_dir, folder, name)
            try:
                shape = _npy_shape(path)
            except FileNotFoundError:
                raise ValueError(f"{_where(entry)}: {what} file {path} does not exist.") from None
            except (OSError, ValueError) as exc:
                raise ValueError(f"{_where(entry)}: {what} file {path} is not a readable .npy array "
                                 f"({exc}).") from None
            if _bad_shape(shape, expected):
                raise _shape_error(entry, what, path, shape, expected)
