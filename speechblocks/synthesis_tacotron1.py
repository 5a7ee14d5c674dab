"""``speechblocks synthesize`` for the Tacotron-1 family (keithito/tacotron, MycroftAI/mimic2): which family a
source holds, the model, text to ids with the family's own front-end, one sentence at a time as the originals'
``Synthesizer`` did, and the wav through Griffin-Lim of the **linear** output with ``find_endpoint`` trimming.

One sentence at a time, not in a padded batch: the originals' attention has no memory mask, so padding a sentence
to a longer one's length changes its numbers (the Tacotron-2 path batches because its attention is masked).
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from .errors import UsageError

__all__ = ["Tacotron1Result", "source_family", "load_tacotron1", "encode_tacotron1_texts", "synthesize_tacotron1"]


@dataclasses.dataclass
class Tacotron1Result:
    """One sentence's output.

    Attributes:
        text: the sentence as given.
        cleaned: what the ids spell (ARPAbet symbols with their ``@``).
        ids: the symbol ids fed to the model (EOS included).
        mel: ``[frames, num_mels]`` mel outputs (the decoder's).
        linear: ``[frames, num_freq]`` linear outputs (the post-CBHG's; the wav is made from these).
        alignment: ``[T_in, steps]`` attention alignments.
        steps: decoder steps run.
        stopped: whether the original stop fired (a decoder step of exact zeros), else ``max_iters`` cut it.
    """

    text: str
    cleaned: str
    ids: list
    mel: np.ndarray
    linear: np.ndarray
    alignment: np.ndarray
    steps: int
    stopped: bool


def _keras_file_family(path: str) -> str:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            model = f.attrs.get("model")
    except Exception:  # noqa: BLE001 -- a damaged file is the loader's to report, with its own message
        return "tacotron2"
    return _entry_family(model)


def _entry_family(model) -> str:
    if isinstance(model, bytes):
        model = model.decode("utf-8", "replace")
    try:
        return "tacotron1" if json.loads(model).get("class_name") == "Tacotron1" else "tacotron2"
    except (TypeError, ValueError, AttributeError):
        return "tacotron2"


def _torch_file_family(path: str) -> str:
    from torch_layers._migrated_model import read_payload

    try:
        payload = read_payload(path, "cpu")
    except ValueError:
        return "tacotron2"  # the loader reports the damage
    return _entry_family(payload.get("model"))


def source_family(source: str, kind: str) -> str:
    """``"tacotron1"`` (keithito/mimic2) or ``"tacotron2"``: of a TF1 checkpoint by its variable names (read in
    numpy), of a migrated file by its ``model`` entry."""
    if kind == "keras":
        return _keras_file_family(os.fspath(source))
    if kind == "torch":
        return _torch_file_family(os.fspath(source))
    from .tacotron1_schema import MODEL_SCOPE
    from .tf1_checkpoint_reader import TF1CheckpointReader

    try:
        names = list(TF1CheckpointReader(source).shapes())
    except (OSError, ValueError):
        return "tacotron2"  # the loader reports it
    return "tacotron1" if any(n.startswith(MODEL_SCOPE + "/") for n in names) else "tacotron2"


def load_tacotron1(source: str, kind: str, framework: str, hparams=None, overrides=None):
    """The ``Tacotron1`` in ``framework`` from a migrated file (``kind`` ``"keras"``/``"torch"``) or a TF1
    checkpoint (``"tf1"``)."""
    overrides = dict(overrides or {})
    if framework == "keras":
        from tf_layers import Tacotron1
    else:
        from torch_layers import Tacotron1
    if kind == "tf1":
        return Tacotron1.from_tf1_checkpoint(source, hparams, **overrides)
    return Tacotron1.from_migrated(source, hparams, **overrides)


def encode_tacotron1_texts(texts: list[str], hp, cleaners=None) -> list[tuple[str, list[int]]]:
    """``[(what the ids spell, ids)]`` with the model's own front-end (keithito's or mimic2's symbols and cleaners,
    ``{HH AH0 L OW1}`` ARPAbet), strictly: characters outside the table and texts that clean to nothing are
    errors."""
    from .text import text_to_sequence
    from .text.tacotron1 import KEITHITO_SYMBOLS

    cleaners = cleaners or tuple(c.strip() for c in hp.cleaners.split(",") if c.strip())
    out = []
    for i, t in enumerate(texts):
        where = f"sentence {i + 1}" if len(texts) > 1 else "the text"
        try:
            ids = text_to_sequence(t, cleaners, strict=True, symbols=hp.variant)
        except ValueError as e:
            raise UsageError(f"{where}: {e}") from None
        if len(ids) < 2:
            raise UsageError(f"{where} cleans to nothing (only the end-of-sequence symbol)")
        out.append(("".join(KEITHITO_SYMBOLS[j] for j in ids[:-1]), list(ids)))
    return out


def synthesize_tacotron1(model, encoded: list[tuple[str, list[int]]], max_iters=None,
                         texts: list[str] | None = None) -> list[Tacotron1Result]:
    """Decodes each sentence alone (batch 1, as the originals' ``Synthesizer``), in eval mode (no dropout)."""
    r = model.hparams.outputs_per_step
    results = []
    for i, (cleaned, ids) in enumerate(encoded):
        out = model.synthesize(np.asarray([ids], np.int32), np.asarray([len(ids)], np.int32), max_iters=max_iters)
        mel = np.asarray(out["mel_outputs"][0], np.float32)
        steps = int(out["alignments"].shape[-1])
        stopped = bool(mel.shape[0] >= r and not np.any(mel[-r:]))
        results.append(Tacotron1Result(texts[i] if texts else cleaned, cleaned, ids, mel,
                                       np.asarray(out["linear_outputs"][0], np.float32),
                                       np.asarray(out["alignments"][0], np.float32), steps, stopped))
    return results
