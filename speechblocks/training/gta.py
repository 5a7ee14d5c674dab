"""``speechblocks gta``: ground-truth-aligned mel spectrograms for vocoder training (the originals' ``synthesize.py``
GTA mode), framework-free (the teacher-forced pass comes from a trainer backend, see :mod:`.run`).

Every line of ``DATA/train.txt`` in file order, in batches of ``tacotron_synthesis_batch_size`` consecutive lines
(the original's batching; it dropped the last batch -- RTVC's "quick and dirty fix" -- here every utterance is
written), padded by :func:`~speechblocks.training.prepare_batch` as the originals' synthesizer pads (inputs with 0,
targets with ``-max_abs_value`` / 0 up to a multiple of ``r``), run teacher forced in inference mode (``max_iters``
caps the steps, as in the original), each utterance cut to its own frame count (``mel[:target_length]``).

Outputs (``OUT``):

* ``gta/mel-<id>.npy``: ``(frames, num_mels)``, the same file name as the target mel (both originals);
* ``map.txt``: Rayhane's GTA map, one line per utterance: ``DATA/audio/<audio>|DATA/mels/<mel>|OUT/gta/<mel>|<no_g>|
  text`` (what its WaveNet vocoder reads; ``<no_g>``: no global conditioning);
* ``synthesized.txt``: RTVC's, the ``train.txt`` lines of the utterances written (its vocoder preprocessing finds
  the GTA mel by the line's mel file name).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np

from ..errors import UsageError
from ..tacotron2_hparams import TACOTRON2_PRESETS, tacotron2_hparams
from .batches import prepare_batch
from .examples import check_example_files, load_example
from .metadata import read_metadata
from .noise import step_seed

__all__ = ["resolve_model", "run_gta"]


def resolve_model(model: str) -> str:
    """MODEL of ``speechblocks gta``: a migrated file or TF1 checkpoint as given, or a training RUN folder (its last
    checkpoint).

    Raises:
        UsageError: nothing at ``model``.
    """
    latest = os.path.join(model, "checkpoints", "latest.json")
    if os.path.isdir(model) and os.path.isfile(latest):
        with open(latest, encoding="utf-8") as f:
            return os.path.join(model, "checkpoints", json.load(f)["model"])
    if not os.path.exists(model) and not os.path.exists(model + ".index"):
        raise UsageError(f"MODEL {model!r} does not exist")
    return model


def run_gta(backend_cls, data: str, model: str, out: str, hparams=None, overrides: dict | None = None,
            max_iters: int | None = None, batch_size: int | None = None, seed: int = 0,
            progress: Callable[[str], None] | None = None) -> list[str]:
    """Write the GTA mels of every utterance of ``data/train.txt``.

    Args:
        backend_cls: the framework's trainer class (``torch_layers`` / ``tf_layers`` ``Tacotron2Trainer``).
        data (str): the preprocessed folder (``train.txt``, ``mels/``, ``embeds/``).
        model (str): a migrated file or a TF1 checkpoint.
        out (str): the output folder (created).
        hparams: a preset name or mapping replacing the model's stored hparams (sizes must agree); the synthesis
            batch size comes from it (default: the preset of the model's variant).
        overrides (dict, optional): hparams by original name.
        max_iters (int, optional): the decoder step cap. (Default: the hparam ``max_iters``)
        batch_size (int, optional): ``tacotron_synthesis_batch_size``.
        seed (int): the seed of the pre-net dropout (always on, as in the original); batch ``i`` draws from
            ``step_seed(seed, i)``.
        progress (callable, optional): called with a line per batch.

    Returns:
        list[str]: the GTA mel files, in ``train.txt`` order.
    """
    from ..migration.migrated_file import MigratedFileError, file_kind

    overrides = dict(overrides or {})
    kind = None
    if os.path.isfile(model):
        try:
            kind = file_kind(model)
        except MigratedFileError:
            kind = None
    given = None
    if hparams is not None or overrides:
        given = tacotron2_hparams(hparams) if isinstance(hparams, str) else dict(hparams or {})
    loader = backend_cls.from_model_file if kind is not None else backend_cls.from_tf1_checkpoint
    trainer = loader(model, None)
    hp = trainer.hparams
    preset = hparams if isinstance(hparams, str) and hparams in TACOTRON2_PRESETS else \
        ("rtvc" if hp.speaker_embedding_size else "rayhane")
    full = tacotron2_hparams(preset)
    if isinstance(given, dict) and not isinstance(hparams, str):
        full.update(given)
    full.update(hp.to_dict())
    full.update(overrides)
    if batch_size is not None:
        full["tacotron_synthesis_batch_size"] = int(batch_size)
    if overrides or given is not None:
        from ..tacotron2_hparams import resolve_hparams

        new_hp = resolve_hparams(full)
        if new_hp != hp:
            trainer = backend_cls.with_hparams(trainer, new_hp)
    size = int(full["tacotron_synthesis_batch_size"])
    data = os.path.abspath(data)
    metadata = read_metadata(os.path.join(data, "train.txt"))
    check_example_files(metadata, data, full, linear=False)
    gta_dir = os.path.join(out, "gta")
    os.makedirs(gta_dir, exist_ok=True)
    written, map_lines, synth_lines = [], [], []
    n_batches = (len(metadata) + size - 1) // size
    for i in range(n_batches):
        entries = metadata[i * size:(i + 1) * size]
        examples = [load_example(e, data, full, linear=False, n_symbols=trainer.hparams.n_symbols)
                    for e in entries]
        batch = prepare_batch(examples, full, n_symbols=trainer.hparams.n_symbols)
        mels = trainer.teacher_forced(batch, max_iters, step_seed(seed, i))
        for entry, mel, length in zip(entries, mels, batch["targets_lengths"]):
            path = os.path.join(gta_dir, os.path.basename(entry.mel_file))
            np.save(path, np.ascontiguousarray(mel[:int(length)], dtype=np.float32), allow_pickle=False)
            written.append(path)
            map_lines.append("|".join([os.path.join(data, "audio", entry.audio_file),
                                       os.path.join(data, "mels", entry.mel_file), os.path.abspath(path),
                                       "<no_g>", entry.text]))
            synth_lines.append("|".join([entry.audio_file, entry.mel_file, entry.embed_file, str(entry.samples),
                                         str(entry.frames), entry.text]))
        if progress is not None:
            progress(f"batch {i + 1}/{n_batches}: {len(written)}/{len(metadata)} utterances")
    for name, lines in (("map.txt", map_lines), ("synthesized.txt", synth_lines)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return written
