"""The Tacotron-1 family (keithito/tacotron, MycroftAI/mimic2) through ``speechblocks migrate``: the hparams of a
checkpoint's model, the whole-model migration, and the ``model`` entry both frameworks' ``Tacotron1.from_migrated``
read back.

A Tacotron-1 checkpoint always migrates as the whole model (its blocks are not the library's Tacotron-2 blocks).
The files have the formats of :mod:`.migrate`, with an empty block table and the ``model`` entry
``{"class_name": "Tacotron1", "hparams": {...}, "layout": "..."}``:

* Keras (``.weights.h5``): one dataset per TF1 name relative to ``model/inference/`` (``embedding``,
  ``encoder_cbhg/...``, ``memory_layer/kernel``, ``decoder/...``, ``post_cbhg/...``, ``dense/...``), TF1 layout.
* torch (``.pt``): ``"model"`` and ``"model_state_dict"`` (``Tacotron1.state_dict()``).

No framework is imported here: the model classes come from the caller (the migration driver imports the target
framework by name, as for Tacotron-2).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

import numpy as np

from ..tacotron1_hparams import Tacotron1HParams
from ..tacotron1_model import fit_tacotron1_hparams, resolve_tacotron1_model
from ..tacotron1_schema import MODEL_SCOPE
from .migrated_file import MigratedFileError, file_error, read_keras_file

__all__ = ["TACOTRON1_CLASS", "tacotron1_model_entry", "tacotron1_checkpoint_hparams", "tacotron1_file_config",
           "tacotron1_from_keras_file", "tacotron1_checkpoint_variables"]

TACOTRON1_CLASS = "Tacotron1"


def tacotron1_model_entry(hp: Tacotron1HParams, layout: str) -> str:
    """The ``model`` JSON of a migrated Tacotron-1 file."""
    return json.dumps({"class_name": TACOTRON1_CLASS, "hparams": hp.to_dict(), "layout": layout}, sort_keys=True)


def tacotron1_checkpoint_hparams(found, hparams=None, overrides: Mapping | None = None,
                                 source: str = "the checkpoint") -> Tacotron1HParams:
    """The hparams of the Tacotron-1 model a checkpoint holds (``found``: its
    ``speechblocks.tacotron1_schema.Tacotron1Found``), as both frameworks' ``from_tf1_checkpoint`` resolve them
    (:func:`speechblocks.tacotron1_model.fit_tacotron1_hparams`: ``None`` the checkpoint's own, a preset name its
    non-size values on the shapes' sizes, a mapping as given; ``overrides`` last; the result must fit the shapes).

    Raises:
        ModelFamilyError: a Tacotron-2 preset. ``Tacotron1ShapesError``: hparams whose sizes contradict the shapes.
        ``ValueError``: a bad hparam.
    """
    return fit_tacotron1_hparams(found.shapes, hparams, overrides, source, found.layout)[0]


def tacotron1_checkpoint_variables(inv) -> dict[str, str]:
    """``{TF1 name relative to model/inference: checkpoint name}`` of an inventory's Tacotron-1 model (the TF < 1.2
    ``weights``/``biases`` spellings mapped, the EMA shadow when ``inv.use_ema`` and one exists)."""
    found = inv.tacotron1
    out = {}
    for rel in found.shapes:
        name = f"{MODEL_SCOPE}/{found.renamed.get(rel, rel)}"
        out[rel] = inv.ema_shadows.get(name, name) if inv.use_ema else name
    return out


def tacotron1_file_config(model_json, path: str, shapes: Mapping | None = None, hparams=None,
                          overrides: Mapping | None = None) -> tuple[Tacotron1HParams, str]:
    """``(hparams, layout)`` of a migrated Tacotron-1 file: the stored ones (``hparams`` replaces the stored
    hparams when given), then ``overrides``; checked against the stored tensors' TF1 shapes when ``shapes`` is given.

    Raises:
        MigratedFileError: no ``model`` entry, a damaged one, one of another class, hparams contradicting the
            tensors.
    """
    try:
        entry = json.loads(model_json)
        if entry.get("class_name") != TACOTRON1_CLASS or not isinstance(entry.get("hparams"), dict):
            raise ValueError
        stored, layout = resolve_tacotron1_model(entry["hparams"], entry.get("layout"))
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        raise MigratedFileError(f"{path!r}: its `model` entry is not a Tacotron-1 model (expected JSON with class_name "
                                f"'Tacotron1', valid hparams and a layout)") from None
    try:
        if shapes is not None:
            hp, layout = fit_tacotron1_hparams(shapes, stored if hparams is None else hparams, overrides,
                                               f"migrated file {path!r}", layout)
        else:
            hp, layout = resolve_tacotron1_model(stored if hparams is None else hparams, layout,
                                                 **dict(overrides or {}))
    except ValueError as e:
        raise file_error(path, e) from None
    return hp, layout


def tacotron1_from_keras_file(path, cls, hparams=None, overrides: Mapping | None = None, **model_kwargs):
    """The ``Tacotron1`` of a migrated ``.weights.h5`` file, built as ``cls(hp, layout, **model_kwargs)`` (either
    framework's class: both load the file's TF1-layout tensors with ``load_tf1_weights(strict=True)``).

    Raises:
        FileNotFoundError: no such file. ``MigratedFileError``: as ``read_keras_file``, a file without a Tacotron-1
            model, hparams contradicting the tensors.
    """
    path = os.fspath(path)
    mf = read_keras_file(path, table_reader=lambda blocks_json, where: {})  # a Tacotron-1 file has no block table
    if mf.model is None:
        raise MigratedFileError(f"{path!r} holds Tacotron-2 blocks, not a Tacotron-1 model")
    hp, layout = tacotron1_file_config(mf.model, path, {k: tuple(v.shape) for k, v in mf.weights.items()}, hparams,
                                       overrides)
    model = cls(hp, layout, **model_kwargs)
    try:
        model.load_tf1_weights(mf.weights, strict=True)
    except ValueError as e:
        raise file_error(path, e) from None
    return model


def describe(hp: Tacotron1HParams, layout: str, shapes: Mapping) -> str:
    """``Tacotron1 (keithito/tacotron, layout keithito-20180906, r=5, ... params)`` for the migration report."""
    origin = "MycroftAI/mimic2" if hp.variant == "mimic2" else "keithito/tacotron"
    n_params = sum(int(np.prod(s)) for s in shapes.values())
    return (f"Tacotron1 ({origin}, layout {layout}, {hp.attention} attention, r={hp.outputs_per_step}, "
            f"n_symbols={hp.n_symbols}, {n_params:,d} params, {len(shapes)} variables)")


def elapsed(t0: float) -> float:
    return time.perf_counter() - t0
