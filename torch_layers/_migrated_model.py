"""Reading a migrated torch file (``speechblocks migrate --to torch``) and rebuilding its whole model.

The model class comes from the caller (``Tacotron2.from_migrated`` passes its own class,
:func:`torch_layers.migrated.load_migrated` the library's ``Tacotron2``): this module imports no model, so the model
module imports it without a circle. The payload is read with ``torch.load(weights_only=True)`` only, after the
CRC-32 of every zip member is checked; every problem is one :class:`MigratedFileError` line naming the file.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

import torch

from speechblocks.migration.migrated_file import (
    TORCH_FORMAT,
    MigratedFileError,
    check_version,
    file_error,
    file_kind,
    model_hparams,
    read_block_table,
    read_keras_file,
)
from speechblocks.state_dict import StateDictError

from ._state_dict import check_module_state_dict, safe_torch_load

__all__ = ["block_table", "state_dict_entry", "read_payload", "model_from_payload", "load_migrated_model"]


def block_table(payload: dict, path: str) -> dict:
    """The payload's block table, validated (``speechblocks.migration.migrated_file.read_block_table``)."""
    blocks = payload.get("blocks")
    if not isinstance(blocks, str):
        raise MigratedFileError(f"{path!r}: the block table is missing or not valid JSON")
    return read_block_table(blocks, path)


def state_dict_entry(value, path: str, what: str) -> dict:
    """``value`` as a state dict (a mapping of names to tensors), else one error line naming ``what``."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise MigratedFileError(f"{path!r}: {what} is missing or not a mapping of names to tensors")
    return dict(value)


def read_payload(path: str, map_location) -> dict:
    """The payload of a migrated torch file; a Keras file, an unsafe pickle, another format or a newer format
    version refused."""
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


def model_from_payload(payload: dict, path: str, hparams, overrides, cls, model_kwargs: dict | None = None):
    """The whole model of a migrated torch file's payload, a ``cls`` (``Tacotron2`` or a subclass) in ``eval()``;
    its state dict checked against the stored hparams on the meta device first, then against ``hparams`` /
    ``overrides``."""
    state = state_dict_entry(payload.get("model_state_dict"), path, "the whole model's state dict")
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
                        map_location: str | torch.device = "cpu", *, cls, model_kwargs: dict | None = None):
    """``torch_layers.Tacotron2.from_migrated``: the whole model of a migrated ``.pt`` or ``.weights.h5`` file.

    Args:
        path: a file ``speechblocks migrate`` wrote from a checkpoint holding the whole Tacotron-2.
        hparams: replaces the stored hparams (a preset name, mapping or ``Tacotron2HParams``; sizes must agree).
        overrides: hparams by original name applied last (e.g. ``{"tacotron_dropout_rate": 0.0}``).
        map_location: where the tensors go.
        cls: the class to build (``Tacotron2`` or a subclass: the caller's).
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
        model = cls(hp, **(model_kwargs or {}))
        try:
            model.load_tf1_weights(mf.weights, strict=True)
        except ValueError as e:
            raise file_error(path, e) from None
        return model.to(map_location).eval()
    payload = read_payload(path, map_location)
    block_table(payload, path)
    if payload.get("model") is None:
        raise MigratedFileError(f"{path!r} holds Tacotron-2 blocks, not a whole model (the checkpoint it was migrated "
                                "from had only some blocks): read its blocks with torch_layers.load_migrated")
    return model_from_payload(payload, path, hparams, overrides, cls, model_kwargs).to(map_location)
