"""``tacotron2_dataset``: the original Tacotron-2 feeder as a ``tf.data.Dataset``."""
from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from speechblocks.training import (
    BatchSampler,
    check_example_files,
    load_example,
    make_test_batches,
    metadata_split,
    prepare_batch,
    uses_linear_targets,
)
from speechblocks.training._hparams import get_int, lookup

__all__ = ["tacotron2_dataset"]


def _signature(hparams, linear: bool) -> dict[str, tf.TensorSpec]:
    num_mels = get_int(hparams, "num_mels")
    spec = {"inputs": tf.TensorSpec((None, None), tf.int32, name="inputs"),
            "input_lengths": tf.TensorSpec((None,), tf.int32, name="input_lengths"),
            "mel_targets": tf.TensorSpec((None, None, num_mels), tf.float32, name="mel_targets"),
            "stop_token_targets": tf.TensorSpec((None, None), tf.float32, name="stop_token_targets"),
            "targets_lengths": tf.TensorSpec((None,), tf.int32, name="targets_lengths")}
    embed_size = lookup(hparams, "speaker_embedding_size", None)
    if embed_size is not None:
        spec["speaker_embeddings"] = tf.TensorSpec((None, int(embed_size)), tf.float32,
                                                   name="speaker_embeddings")
    if linear:
        num_freq = lookup(hparams, "num_freq", None)
        spec["linear_targets"] = tf.TensorSpec((None, None, num_freq), tf.float32, name="linear_targets")
    return spec


def tacotron2_dataset(metadata_path: str | os.PathLike, hparams, split: str = "train",
                      seed: int | None = None, state: dict | None = None, linear: bool | None = None,
                      n_symbols: int | None = None,
                      prefetch: int | None = tf.data.AUTOTUNE, check_files: bool = True) -> tf.data.Dataset:
    """The original feeder's batches as a ``tf.data.Dataset`` of dicts.

    Reads ``train.txt`` (``audio|mel|embed|samples|frames|text``), takes the original's train or test split
    (:func:`speechblocks.training.split_train_test`) and yields, for each batch of the original order, the
    dict of :func:`speechblocks.training.prepare_batch` over the examples loaded by
    :func:`speechblocks.training.load_example` (mels from ``mels/``, speaker embeddings from ``embeds/``
    next to ``train.txt``). ``"train"`` is endless: the length-sorted, shuffled groups of
    :class:`speechblocks.training.BatchSampler`, from ``state`` on; ``"test"`` is one pass over the test
    batches (:func:`speechblocks.training.make_test_batches`, drawn once as the original's). Every iteration
    of the dataset starts from the same place, so iterating twice gives the same batches.

    Args:
        metadata_path (str or PathLike): the ``train.txt`` of ``speechblocks preprocess``.
        hparams: a preset name, mapping or hparams object with the original names (batch size, split, seed,
            ``outputs_per_step``, ``num_mels``, padding, ``cleaners``, ``speaker_embedding_size`` for RTVC).
        split (str, optional): ``"train"`` or ``"test"``. (Default: ``"train"``)
        seed (int, optional): the seed of the data order. (Default: ``tacotron_random_seed``)
        state (dict, optional): a :meth:`BatchSampler.state_dict` to resume the training stream from; the
            dataset prefetches, so save ``BatchSampler(train, hparams, seed).state_dict(batches=steps_done)``
            rather than a sampler's own count. (Default: the start)
        linear (bool, optional): also yield ``linear_targets`` from ``linear/`` (Rayhane).
            (Default: :func:`speechblocks.training.uses_linear_targets`)
        n_symbols (int, optional): size of the symbol table. (Default: 66)
        prefetch (int, optional): ``Dataset.prefetch`` buffer (``None``: no prefetch).
            (Default: ``tf.data.AUTOTUNE``)
        check_files (bool, optional): check the split's files (existence, ``.npy`` header shapes) when the
            dataset is made, so a bad file raises ``ValueError`` here rather than a ``tf.errors`` error in
            the middle of training. (Default: ``True``)

    Returns:
        tf.data.Dataset: elements ``{"inputs": int32 (B, T_in), "input_lengths": int32 (B,),
        "mel_targets": float32 (B, T_out, num_mels), "stop_token_targets": float32 (B, T_out),
        "targets_lengths": int32 (B,)}`` plus ``"speaker_embeddings"`` float32 (B, E) (RTVC) and
        ``"linear_targets"`` float32 (B, T_out, num_freq) when ``linear``.

    Raises:
        ValueError: naming ``train.txt`` and the line: a bad line, an impossible split, a missing file or one
            of the wrong shape (with ``check_files``). A file that fails while the dataset is iterated
            (non-finite values, changed on disk) surfaces as the ``tf.errors`` error ``tf.data`` raises,
            with the same message.

    Example:
        >>> ds = tacotron2_dataset("out/train.txt", "rtvc")
        >>> batch = next(iter(ds))
        >>> outputs = model(batch["inputs"], batch["input_lengths"], batch["speaker_embeddings"],
        ...                 mel_targets=batch["mel_targets"], training=True)
    """
    if split not in ("train", "test"):
        raise ValueError(f"tacotron2_dataset: `split` must be 'train' or 'test'; got {split!r}.")
    metadata_path = os.fspath(metadata_path)
    data_dir = os.path.dirname(os.path.abspath(metadata_path))
    metadata = metadata_split(metadata_path, hparams, split)
    linear = uses_linear_targets(hparams) if linear is None else bool(linear)
    signature = _signature(hparams, linear)
    if split == "train" and state is not None:
        BatchSampler(metadata, hparams, seed).load_state_dict(state)  # a state of other data fails here
    if check_files:
        check_example_files(metadata, data_dir, hparams, linear=linear)

    def batches():
        if split == "test":
            yield from make_test_batches(metadata, hparams, seed)
            return
        sampler = BatchSampler(metadata, hparams, seed)
        if state is not None:
            sampler.load_state_dict(state)
        yield from sampler

    def generate():
        for batch in batches():
            examples = [load_example(metadata[i], data_dir, hparams, linear=linear, n_symbols=n_symbols)
                        for i in batch]
            arrays = prepare_batch(examples, hparams, n_symbols=n_symbols)
            yield {name: np.asarray(arrays[name]) for name in signature}

    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    if prefetch is not None:
        dataset = dataset.prefetch(prefetch)
    return dataset
