"""keithito/tacotron's ``DataFeeder`` for fine-tuning a Tacotron-1, framework-free (numpy): the metadata of a
preprocessed folder, the order of the examples, the padded batches and the pre-nets' dropout masks.

The folder is keithito's LJSpeech layout (``speechblocks preprocess --hparams keithito|mimic2``): ``train.txt``
lines ``spec_file|mel_file|n_frames|text`` with the linear ``(frames, num_freq)`` and mel ``(frames, num_mels)``
float32 ``.npy`` files beside it.

The order, as the feeder's (with a seeded ``numpy`` generator instead of Python's unseeded ``random``): examples are
taken from the metadata in file order, the list reshuffled each time it wraps around; ``32 * batch_size`` of them
form a group, sorted by their frame count (stable), cut into batches, and the batches of the group shuffled; each
batch's examples are shuffled too. The plan is a pure function of ``(seed, batch number)``, so a resumed run
continues the same sequence (:func:`batch_plan`).

The batch (``_prepare_batch``): ids padded with 0 to the longest input; mel and linear targets padded with 0 to
``round_up(longest + 1, r)`` frames (the feeder adds one frame before rounding up); no stop tokens. Text -> ids with
the model's own front-end (``text_to_sequence(text, cleaners, symbols=hp.variant)``: keithito's or mimic2's
cleaners). The feeder's optional ARPAbet substitution (``use_cmudict``, off in both presets) is not done.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import InputError
from .batches import round_up

__all__ = ["BATCHES_PER_GROUP", "Tacotron1Example", "batch_plan", "dropout_masks", "load_batch", "read_metadata"]

#: the feeder's ``_batches_per_group``
BATCHES_PER_GROUP = 32


@dataclasses.dataclass(frozen=True)
class Tacotron1Example:
    """One ``train.txt`` line: the two spectrogram files (absolute), the frame count, the text and its ids."""

    line: int
    spec: str
    mel: str
    frames: int
    text: str
    ids: tuple


def _parse_line(data_dir: str, number: int, line: str, hp, cleaners) -> Tacotron1Example:
    from ..text import text_to_sequence

    where = f"{os.path.join(data_dir, 'train.txt')} line {number}"
    fields = line.rstrip("\r\n").split("|")
    if len(fields) < 4:
        raise InputError(f"{where}: expected spec_file|mel_file|n_frames|text, got {len(fields)} field(s)")
    spec, mel, frames, text = fields[0], fields[1], fields[2], "|".join(fields[3:])
    try:
        n = int(frames)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(f"{where}: n_frames {frames!r} is not a positive integer")
    r, cap = hp.outputs_per_step, hp.max_iters * hp.outputs_per_step
    if round_up(n + 1, r) > cap:
        raise InputError(f"{where}: {n} frames need {round_up(n + 1, r) // r} decoder steps, more than max_iters "
                         f"{hp.max_iters} (the original's graph fails on such a batch): raise it with --set "
                         f"max_iters=N or drop the utterance")
    try:
        ids = text_to_sequence(text, cleaners, symbols=hp.variant)
    except ValueError as e:
        raise InputError(f"{where}: {e}") from None
    return Tacotron1Example(number, os.path.join(data_dir, spec), os.path.join(data_dir, mel), n, text,
                            tuple(int(i) for i in ids))


def read_metadata(data_dir: str, hp) -> list[Tacotron1Example]:
    """The examples of ``data_dir/train.txt`` (empty lines skipped), ids with the model's front-end.

    Raises:
        InputError: an unreadable file, a malformed line, an utterance longer than ``max_iters * r`` frames, no
            example at all (one line naming the file and line).
    """
    path = os.path.join(data_dir, "train.txt")
    cleaners = tuple(c.strip() for c in hp.cleaners.split(",") if c.strip())
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not readable ({e})") from None
    out = [_parse_line(data_dir, i + 1, line, hp, cleaners) for i, line in enumerate(lines) if line.strip()]
    if not out:
        raise InputError(f"{path} holds no example")
    return out


def _example_stream(n: int, rng: np.random.Generator) -> Iterator[int]:
    """Metadata indices as ``_get_next_example`` takes them: file order first, reshuffled at every wrap."""
    order = np.arange(n)
    while True:
        yield from order.tolist()
        rng.shuffle(order)


def batch_plan(frames: Sequence[int], batch_size: int, seed: int, start: int = 0) -> Iterator[list[int]]:
    """The metadata indices of batch ``start``, ``start + 1``, ... (each list in the batch's own shuffled order).

    Args:
        frames: the frame count of each example (the sort key of a group).
        batch_size: examples a batch.
        seed: the seed of the whole sequence.
        start: the number of batches to skip (a resumed run's batches done).
    """
    rng = np.random.default_rng(seed)
    stream = _example_stream(len(frames), rng)
    done = 0
    while True:
        group = [next(stream) for _ in range(batch_size * BATCHES_PER_GROUP)]
        group.sort(key=lambda i: frames[i])  # stable, as list.sort
        batches = [group[i:i + batch_size] for i in range(0, len(group), batch_size)]
        for k in rng.permutation(len(batches)).tolist():
            batch = [batches[k][j] for j in rng.permutation(len(batches[k])).tolist()]
            if done >= start:
                yield batch
            done += 1


def _load(path: str, width: int, frames: int, what: str) -> np.ndarray:
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"{what} {path!r} is not readable ({e})") from None
    if a.ndim != 2 or a.shape != (frames, width):
        raise InputError(f"{what} {path!r} has shape {list(a.shape)}; train.txt gives {frames} frames of {width}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what} {path!r} holds NaN or inf")
    return a.astype(np.float32, copy=False)


def _pad_targets(targets: list[np.ndarray], r: int) -> np.ndarray:
    length = round_up(max(len(t) for t in targets) + 1, r)
    return np.stack([np.pad(t, [(0, length - len(t)), (0, 0)]) for t in targets])


def load_batch(examples: Sequence[Tacotron1Example], hp) -> dict[str, np.ndarray]:
    """The feeder's ``_prepare_batch`` of ``examples`` (in the order given): ``inputs`` int32 ``(B, T_in)`` padded
    with 0, ``input_lengths`` int32 ``(B,)``, ``mel_targets`` ``(B, T_out, num_mels)`` and ``linear_targets``
    ``(B, T_out, num_freq)`` float32 padded with 0, ``T_out = round_up(longest + 1, r)``."""
    longest = max(len(e.ids) for e in examples)
    inputs = np.zeros((len(examples), longest), np.int32)
    for row, e in enumerate(examples):
        inputs[row, :len(e.ids)] = e.ids
    mels = [_load(e.mel, hp.num_mels, e.frames, "mel spectrogram") for e in examples]
    linears = [_load(e.spec, hp.num_freq, e.frames, "linear spectrogram") for e in examples]
    r = hp.outputs_per_step
    return {"inputs": inputs, "input_lengths": np.array([len(e.ids) for e in examples], np.int32),
            "mel_targets": _pad_targets(mels, r), "linear_targets": _pad_targets(linears, r)}


def dropout_masks(batch: dict, hp, seed: int, step: int) -> dict[str, list[np.ndarray]]:
    """The pre-nets' keep-masks of one training step (``noise_masks`` of ``Tacotron1``: 0/1 float32, keep
    probability 0.5): ``encoder_prenet`` ``(B, T_in, d_i)``, ``decoder_prenet`` ``(B, steps, d_i)`` per layer.

    Drawn here from ``(seed, step)`` rather than by each framework, so both frameworks train on the same draws and a
    resumed run continues them; the original drew them with TF's random ops (not reproducible outside TF).
    """
    rng = np.random.default_rng([int(seed), int(step)])
    b, t_in = batch["inputs"].shape
    steps = min(batch["mel_targets"].shape[1] // hp.outputs_per_step, hp.max_iters)
    draw = lambda *shape: (rng.random(shape) >= 0.5).astype(np.float32)  # noqa: E731
    return {"encoder_prenet": [draw(b, t_in, d) for d in hp.prenet_depths],
            "decoder_prenet": [draw(b, steps, d) for d in hp.prenet_depths]}
