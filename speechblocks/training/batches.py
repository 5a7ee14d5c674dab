"""The original feeder's batch: padding of inputs, mel targets and stop-token targets (``Feeder._prepare_batch``)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..text import SYMBOLS
from ._hparams import get_bool, get_float, get_int, lookup

__all__ = ["pad_batch", "prepare_batch", "round_up", "shard_rows", "target_pad_value"]


def round_up(length: int, multiple: int) -> int:
    """``length`` rounded up to a multiple of ``multiple`` (the feeder's ``_round_up``)."""
    remainder = length % multiple
    return length if remainder == 0 else length + multiple - remainder


def target_pad_value(hparams) -> float:
    """The value mel (and linear) targets are padded with: ``-max_abs_value`` with ``symmetric_mels``, else 0."""
    if get_bool(hparams, "symmetric_mels"):
        return -get_float(hparams, "max_abs_value", low=0.0)
    return 0.0


def _fail(index: int, what: str):
    raise ValueError(f"prepare_batch: example {index}: {what}")


def prepare_batch(examples: Sequence[tuple], hparams, n_symbols: int | None = None) -> dict[str, np.ndarray]:
    """Pad a list of examples into the arrays the original feeder fed the model (the one batching rule of both
    feeder twins).

    As the original ``Feeder._prepare_batch`` (one GPU): inputs are padded with the pad id 0 to the longest
    input; mel targets with ``-max_abs_value`` (``symmetric_mels``) or 0 to the longest target rounded up to a
    multiple of ``outputs_per_step``; the stop-token target of a ``frames``-long example is 0 for its first
    ``frames - 1`` frames and 1 from its last real frame on (the padding included). The original also shuffled
    the examples of the batch here; this function keeps the order given (the shuffle is part of
    :func:`~speechblocks.training.batch_groups`).

    Args:
        examples (Sequence[tuple]): ``B >= 1`` tuples ``(ids, mel, speaker_embedding)`` or ``(ids, mel,
            speaker_embedding, linear)``: ``ids`` the symbol ids ``(T_in_b,)`` (integers in ``[0, n_symbols)``),
            ``mel`` the target ``(frames_b, num_mels)``, ``speaker_embedding`` ``(E,)`` or ``None`` (all or none
            of the batch), ``linear`` Rayhane's linear target ``(frames_b, num_freq)``.
        hparams: a preset name, mapping or hparams object with the original names ``outputs_per_step``,
            ``symmetric_mels``, ``max_abs_value`` (``num_mels`` and ``speaker_embedding_size`` are checked when
            present).
        n_symbols (int, optional): size of the symbol table the ids index. (Default: ``len(SYMBOLS)``, 66)

    Returns:
        dict[str, numpy.ndarray]: ``inputs`` int32 ``(B, T_in)``; ``input_lengths`` int32 ``(B,)``;
        ``mel_targets`` float32 ``(B, T_out, num_mels)``; ``stop_token_targets`` float32 ``(B, T_out)``;
        ``targets_lengths`` int32 ``(B,)`` (the real frame counts); ``speaker_embeddings`` float32 ``(B, E)``
        when the examples carry one; ``linear_targets`` float32 ``(B, T_out, num_freq)`` when they carry one.
        ``T_in`` is the longest input, ``T_out`` the longest target rounded up to a multiple of
        ``outputs_per_step``.

    Raises:
        ValueError: naming the example and what is wrong with it (empty or non-integer ids, ids outside the
            symbol table, a mel that is not 2-D, has no frame, the wrong width or a non-finite value, a speaker
            embedding on some examples only or of the wrong size, a linear target of the wrong length).
    """
    r = get_int(hparams, "outputs_per_step")
    pad = target_pad_value(hparams)
    num_mels = lookup(hparams, "num_mels", None)
    embed_size = lookup(hparams, "speaker_embedding_size", None)
    n_symbols = len(SYMBOLS) if n_symbols is None else int(n_symbols)
    if isinstance(examples, (str, bytes)) or not isinstance(examples, Sequence) or len(examples) == 0:
        raise ValueError("prepare_batch: `examples` must be a non-empty list of (ids, mel, speaker_embedding) "
                         f"tuples; got {type(examples).__name__} of length "
                         f"{len(examples) if hasattr(examples, '__len__') else '?'}.")
    ids_list, mels, embeds, linears = [], [], [], []
    for i, example in enumerate(examples):
        if not isinstance(example, (tuple, list)) or len(example) not in (3, 4):
            _fail(i, "must be a tuple (ids, mel, speaker_embedding) or (ids, mel, speaker_embedding, linear).")
        ids = np.asarray(example[0])
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            _fail(i, f"ids must be a non-empty 1-D integer array; got dtype {ids.dtype}, shape {ids.shape}.")
        bad = ids[(ids < 0) | (ids >= n_symbols)]
        if bad.size:
            _fail(i, f"ids {sorted(set(bad.tolist()))[:5]} lie outside the symbol table [0, {n_symbols}).")
        mel = np.asarray(example[1])
        if mel.ndim != 2 or mel.shape[0] == 0 or (num_mels is not None and mel.shape[1] != num_mels):
            _fail(i, f"mel must have shape (frames >= 1, num_mels={num_mels}); got {mel.shape}.")
        if not np.isfinite(mel).all():
            _fail(i, "mel holds NaN or infinite values.")
        ids_list.append(ids.astype(np.int32))
        mels.append(mel.astype(np.float32))
        embeds.append(None if example[2] is None else np.asarray(example[2], dtype=np.float32))
        linear = example[3] if len(example) == 4 else None
        if linear is not None:
            linear = np.asarray(linear, dtype=np.float32)
            if linear.ndim != 2 or linear.shape[0] != mel.shape[0]:
                _fail(i, f"linear target must have shape ({mel.shape[0]}, num_freq) like its mel; "
                         f"got {linear.shape}.")
        linears.append(linear)

    has_embed = [e is not None for e in embeds]
    if any(has_embed) and not all(has_embed):
        _fail(has_embed.index(False), "has no speaker embedding while other examples of the batch have one.")
    has_linear = [x is not None for x in linears]
    if any(has_linear) and not all(has_linear):
        _fail(has_linear.index(False), "has no linear target while other examples of the batch have one.")

    batch = len(examples)
    input_lengths = np.array([len(x) for x in ids_list], dtype=np.int32)
    inputs = np.zeros((batch, int(input_lengths.max())), dtype=np.int32)
    for b, ids in enumerate(ids_list):
        inputs[b, :len(ids)] = ids
    targets_lengths = np.array([len(m) for m in mels], dtype=np.int32)
    t_out = round_up(int(targets_lengths.max()), r)
    mel_targets = np.full((batch, t_out, mels[0].shape[1]), pad, dtype=np.float32)
    stop_token_targets = np.ones((batch, t_out), dtype=np.float32)
    for b, mel in enumerate(mels):
        if mel.shape[1] != mels[0].shape[1]:
            _fail(b, f"mel has {mel.shape[1]} channels, example 0 has {mels[0].shape[1]}.")
        mel_targets[b, :len(mel)] = mel
        stop_token_targets[b, :len(mel) - 1] = 0.0
    out = {"inputs": inputs, "input_lengths": input_lengths, "mel_targets": mel_targets,
           "stop_token_targets": stop_token_targets, "targets_lengths": targets_lengths}
    if all(has_embed):
        for b, e in enumerate(embeds):
            if e.ndim != 1 or (embed_size is not None and e.shape[0] != embed_size) or e.shape != embeds[0].shape:
                _fail(b, f"speaker embedding must have shape (speaker_embedding_size={embed_size or embeds[0].size},); "
                         f"got {e.shape}.")
        out["speaker_embeddings"] = np.stack(embeds)
    if all(has_linear):
        num_freq = linears[0].shape[1]
        linear_targets = np.full((batch, t_out, num_freq), pad, dtype=np.float32)
        for b, x in enumerate(linears):
            if x.shape[1] != num_freq:
                _fail(b, f"linear target has {x.shape[1]} bins, example 0 has {num_freq}.")
            linear_targets[b, :len(x)] = x
        out["linear_targets"] = linear_targets
    return out


def shard_rows(batch_size: int, shards: int, index: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of shard ``index`` of ``shards`` over a global batch of ``batch_size`` rows: consecutive
    slices in order, ``lo = index * batch_size // shards`` (every shard gets ``batch_size // shards`` or one more
    row). A data-parallel rank (or replica) reads and runs these rows of every global batch.

    Raises:
        ValueError: ``batch_size < shards`` (a shard would be empty) or ``index`` outside ``[0, shards)``.
    """
    batch_size, shards, index = int(batch_size), int(shards), int(index)
    if shards < 1 or not 0 <= index < shards:
        raise ValueError(f"shard_rows: argument `index` must lie in [0, shards={shards}); got {index}.")
    if batch_size < shards:
        raise ValueError(f"shard_rows: the global batch of {batch_size} example(s) cannot be split over {shards} "
                         f"data-parallel shards (tacotron_batch_size must be >= {shards}).")
    return index * batch_size // shards, (index + 1) * batch_size // shards


def pad_batch(batch: dict[str, np.ndarray], t_in: int, t_out: int, hparams) -> dict[str, np.ndarray]:
    """A :func:`prepare_batch` batch padded further to ``T_in = t_in`` and ``T_out = t_out``, as the same rows
    padded with the rest of the global batch would be (inputs with 0, targets with :func:`target_pad_value`,
    stop-token targets with 1): a data-parallel rank's shard padded to the global batch's lengths.

    Raises:
        ValueError: ``t_in``/``t_out`` shorter than the batch's, or ``t_out`` not a multiple of ``outputs_per_step``.
    """
    r = get_int(hparams, "outputs_per_step")
    have_in, have_out = batch["inputs"].shape[1], batch["mel_targets"].shape[1]
    if t_in < have_in or t_out < have_out or t_out % r:
        raise ValueError(f"pad_batch: lengths ({t_in}, {t_out}) must be at least the batch's ({have_in}, {have_out}) "
                         f"and T_out a multiple of outputs_per_step={r}.")
    pad = target_pad_value(hparams)
    out = dict(batch)
    out["inputs"] = np.pad(batch["inputs"], ((0, 0), (0, t_in - have_in)), constant_values=0)
    out["stop_token_targets"] = np.pad(batch["stop_token_targets"], ((0, 0), (0, t_out - have_out)),
                                       constant_values=1.0)
    for key in ("mel_targets", "linear_targets"):
        if key in batch:
            out[key] = np.pad(batch[key], ((0, 0), (0, t_out - have_out), (0, 0)), constant_values=pad)
    return out
