"""What ``Tacotron2.synthesize_batch`` does the same in both frameworks (numpy only): pad id sequences, spread one
speaker embedding over the batch, find where each sentence's own stop rule fired, check the progress callback."""
from __future__ import annotations

import numpy as np

from .stop_rule import stop_steps

__all__ = ["check_progress", "pad_sequences", "speaker_rows", "step_limit", "stop_steps"]


def check_progress(progress, mel_targets) -> None:
    """``progress`` must be callable and reports free-running steps only (not GTA)."""
    if not callable(progress):
        raise ValueError(f"Tacotron2: argument `progress` must be a callable progress(step, stop_probability); "
                         f"got {type(progress).__name__}.")
    if mel_targets is not None:
        raise ValueError("Tacotron2: argument `progress` reports free-running decoder steps; it cannot be combined "
                         "with `mel_targets` (GTA synthesis).")


def pad_sequences(sequences, block: str, dtype=np.int64, to_numpy=np.asarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids (n, max length) padded with the pad id 0, lengths (n,))`` of a list of 1-D id sequences, in ``dtype``;
    ``to_numpy`` converts one sequence (a framework tensor) to numpy."""
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__iter__"):
        raise ValueError(f"{block}: argument `sequences` must be a list of 1-D integer symbol-id sequences; got "
                         f"{type(sequences).__name__}.")
    rows = []
    for i, seq in enumerate(sequences):
        a = to_numpy(seq)
        if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
            raise ValueError(f"{block}: argument `sequences[{i}]` must be a non-empty 1-D sequence of integer symbol "
                             f"ids; got dtype {a.dtype} and shape {a.shape}.")
        rows.append(a)
    if not rows:
        raise ValueError(f"{block}: argument `sequences` must hold at least one sequence.")
    lengths = np.array([len(a) for a in rows], dtype)
    ids = np.zeros((len(rows), int(lengths.max())), dtype)
    for i, a in enumerate(rows):
        ids[i, :len(a)] = a
    return ids, lengths


def speaker_rows(speaker_embeddings, n: int, block: str) -> np.ndarray | None:
    """``(n, e)`` float32 speaker embeddings from ``(n, e)`` or one ``(e,)`` for every sentence (or None)."""
    if speaker_embeddings is None:
        return None
    e = np.asarray(speaker_embeddings, np.float32)
    if e.ndim == 1:
        e = np.broadcast_to(e, (n, e.shape[0]))
    if e.ndim != 2 or e.shape[0] != n:
        raise ValueError(f"{block}: argument `speaker_embeddings` must have shape (len(sequences)={n}, "
                         f"speaker_embedding_size) or (speaker_embedding_size,); got shape {e.shape}.")
    return np.array(e)  # contiguous and writable


def step_limit(max_iters, default: int, block: str) -> int:
    """The decoder's step cap of a batch synthesis: ``max_iters`` or the model's ``default``, an integer >= 1."""
    limit = default if max_iters is None else max_iters
    if isinstance(limit, bool) or int(limit) != limit or int(limit) < 1:
        raise ValueError(f"{block}: argument `max_iters` must be an integer >= 1; got {max_iters!r}.")
    return int(limit)
