"""``torch_layers.load_migrated`` and ``Tacotron2.from_migrated``: the torch side of ``speechblocks migrate``.

Reads the ``.pt`` file the migration writes (CRC-32 of every zip member checked, then
``torch.load(weights_only=True)`` only: plain dicts, strings, ints and tensors) and rebuilds ``{block_path: module}``
or the whole model; the whole model of a Keras ``.weights.h5`` file is read too (h5py: its tensors are in the TF1
layout ``load_tf1_weights`` takes). All or nothing: every block's config and state dict are checked against a
module built on the ``meta`` device (no memory, whatever sizes a damaged file claims) before the real one is
built; any problem is one :class:`MigratedFileError` line naming the file. Never imports tensorflow.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

import torch
from torch import nn

from speechblocks.migration.migrated_file import (
    FORMAT_VERSION,
    TORCH_FORMAT,
    MigratedFileError,
    check_block_counts,
    check_version,
    file_error,
    file_kind,
    model_hparams,
    read_block_table,
    read_keras_file,
)
from speechblocks.state_dict import StateDictError
from speechblocks.tacotron2_schema import MODEL_BLOCK_ATTRIBUTES, model_block

from ._state_dict import check_module_state_dict, safe_torch_load

__all__ = ["load_migrated", "load_migrated_model", "MigratedFileError", "TORCH_FORMAT", "FORMAT_VERSION"]


def _table(payload: dict, path: str) -> dict:
    blocks = payload.get("blocks")
    if not isinstance(blocks, str):
        raise MigratedFileError(f"{path!r}: the block table is missing or not valid JSON")
    return read_block_table(blocks, path)


def _state_dict(value, path: str, what: str) -> dict:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise MigratedFileError(f"{path!r}: {what} is missing or not a mapping of names to tensors")
    return dict(value)


def _build_block(package, block_path: str, entry: dict, state: dict, path: str, strict: bool) -> nn.Module:
    """The block of ``entry`` with ``state`` loaded; checked on the meta device first (all or nothing)."""
    check_block_counts(block_path, entry, len(state), path)
    cls = getattr(package, entry["class_name"])
    try:
        probe = cls(entry["input_size"], **entry["config"], device="meta")
    except Exception as e:  # noqa: BLE001 -- a config the class refuses, whatever the error
        raise MigratedFileError(f"{path!r}: block {block_path!r}: its config does not build a {entry['class_name']} "
                                f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    try:
        check_module_state_dict(probe, state, strict, f"block {block_path!r}")
    except StateDictError as e:
        raise file_error(path, [f"block {block_path!r} does not fit its stored config: {e.problems[0]}"]
                         + e.problems[1:]) from None
    module = cls(entry["input_size"], **entry["config"])
    module.load_state_dict(state, strict=strict)
    return module


def load_migrated(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                  strict: bool = True) -> dict[str, nn.Module]:
    """Loads a file written by ``speechblocks migrate CKPT --to torch OUT``.

    All or nothing: the file's checksums, block table, every config and state dict are checked before a module is
    returned; any problem raises one :class:`MigratedFileError` line naming the file.

    Args:
        path: the migrated ``.pt`` file.
        map_location: where the tensors go (``torch.load``'s ``map_location``).
        strict: passed to ``load_state_dict`` (``False`` tolerates missing and unknown keys of a block).

    Returns:
        ``{block_path: module}`` -- every module built from its stored config, its state dict loaded,
        in ``eval()`` mode, keyed by the block paths relative to ``Tacotron_model/inference/``
        (``"encoder_convolutions"``, ``"decoder/decoder_LSTM"``, ``"CBHG_postnet"``, ...). For a whole-model
        file the modules are the blocks of the rebuilt ``Tacotron2`` (``decoder/Location_Sensitive_Attention``
        included).

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError (a ``ValueError``): not a migrated torch file (e.g. the Keras ``.weights.h5``), a pickle
            of other objects than tensors and plain data (nothing of it runs), a newer format version, damage, a
            config contradicting the tensors, missing, unknown, mis-shaped or non-floating tensors.

    Example:
        >>> blocks = load_migrated("tacotron.pt")  # doctest: +SKIP
        >>> mel = blocks["postnet_convolutions"](torch.zeros(1, 10, 80))  # doctest: +SKIP
    """
    path = os.fspath(path)
    payload = _read_payload(path, map_location)
    table = _table(payload, path)
    if payload.get("model") is not None:
        model = _model_from_payload(payload, path, None, None).to(map_location)
        return {p: model_block(model, p) for p in MODEL_BLOCK_ATTRIBUTES if _maybe_block(model, p) is not None}
    state_dicts = _state_dict(payload.get("state_dicts"), path, "its state_dicts entry")
    stray = sorted(set(state_dicts) - set(table))
    if stray:
        raise MigratedFileError(f"{path!r}: state dicts of blocks its table does not list: {stray}")
    package = importlib.import_module("torch_layers")
    blocks: dict[str, nn.Module] = {}
    for block_path, entry in table.items():
        if block_path not in state_dicts:
            raise MigratedFileError(f"{path!r}: block {block_path!r} has no state dict")
        state = _state_dict(state_dicts[block_path], path, f"the state dict of block {block_path!r}")
        blocks[block_path] = _build_block(package, block_path, entry, state, path, strict).to(map_location).eval()
    return blocks


def _read_payload(path: str, map_location) -> dict:
    if file_kind(path) == "keras":
        raise MigratedFileError(f"{path!r} is a Keras file (written by `speechblocks migrate --to keras`): read its "
                                "blocks with tf_layers.checkpoint.load_migrated (its whole model also with "
                                "torch_layers.Tacotron2.from_migrated)")
    try:
        payload = safe_torch_load(path, map_location, "migrated torch file")
    except ValueError as e:
        raise MigratedFileError(str(e)) from None
    if not isinstance(payload, dict) or payload.get("speechblocks_format") != TORCH_FORMAT:
        raise MigratedFileError(f"{path!r} is not a migrated torch file (no speechblocks_format {TORCH_FORMAT!r})")
    check_version(payload.get("format_version"), path)
    return payload


def _maybe_block(model, block_path: str):
    try:
        return model_block(model, block_path)
    except AttributeError:
        return None


def _model_from_payload(payload: dict, path: str, hparams, overrides, cls=None, model_kwargs: dict | None = None):
    if cls is None:
        cls = importlib.import_module("torch_layers").Tacotron2
    state = _state_dict(payload.get("model_state_dict"), path, "the whole model's state dict")
    model_json = payload.get("model")
    if not isinstance(model_json, str):
        raise MigratedFileError(f"{path!r}: its `model` entry is damaged (not a JSON string)")
    # the stored hparams describe the state dict: checked against a module on the meta device first
    stored = model_hparams(model_json, None, path, n_tensors=len(state))
    try:
        check_module_state_dict(cls(stored, device="meta"), state, True, "Tacotron2")
    except StateDictError as e:
        raise file_error(path, [f"its state dict does not fit its stored hparams: {e.problems[0]}"]
                         + e.problems[1:]) from None
    hp = stored if hparams is None and not overrides else model_hparams(model_json, None, path, hparams, overrides)
    model = cls(hp, **(model_kwargs or {}))
    try:
        check_module_state_dict(model, state, True, "Tacotron2")
    except StateDictError as e:
        raise file_error(path, [f"its state dict does not fit the hparams: {e.problems[0]}"] + e.problems[1:]) from None
    model.load_state_dict(state, strict=True)
    return model.eval()


def load_migrated_model(path: str | os.PathLike, hparams=None, overrides: dict | None = None,
                        map_location: str | torch.device = "cpu", cls=None, model_kwargs: dict | None = None):
    """``torch_layers.Tacotron2.from_migrated``: the whole model of a migrated ``.pt`` or ``.weights.h5`` file.

    Args:
        path: a file ``speechblocks migrate`` wrote from a checkpoint holding the whole Tacotron-2.
        hparams: replaces the stored hparams (a preset name, mapping or ``Tacotron2HParams``; sizes must agree).
        overrides: hparams by original name applied last (e.g. ``{"tacotron_dropout_rate": 0.0}``).
        map_location: where the tensors go.
        cls: the class to build (a subclass of ``Tacotron2``).
        model_kwargs: constructor keywords (``sync_batch_norm``).

    Returns:
        the model in ``eval()`` mode.

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError (a ``ValueError``): not a migrated file, a file of blocks only, an unsafe pickle, damage,
            or hparams contradicting the tensors (one line naming the file; no model is returned).
    """
    path = os.fspath(path)
    if file_kind(path) == "keras":
        mf = read_keras_file(path, read_block_table)
        hp = model_hparams(mf.model, {k: tuple(v.shape) for k, v in mf.weights.items()}, path, hparams, overrides)
        model = (cls or importlib.import_module("torch_layers").Tacotron2)(hp, **(model_kwargs or {}))
        try:
            model.load_tf1_weights(mf.weights, strict=True)
        except ValueError as e:
            raise file_error(path, e) from None
        return model.to(map_location).eval()
    payload = _read_payload(path, map_location)
    _table(payload, path)
    if payload.get("model") is None:
        raise MigratedFileError(f"{path!r} holds Tacotron-2 blocks, not a whole model (the checkpoint it was migrated "
                                "from had only some blocks): read its blocks with torch_layers.load_migrated")
    return _model_from_payload(payload, path, hparams, overrides, cls, model_kwargs).to(map_location)
