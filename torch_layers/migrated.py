"""``torch_layers.load_migrated`` and ``Tacotron2.from_migrated``: the torch side of ``speechblocks migrate``.

Reads the ``.pt`` file the migration writes (``torch.load(weights_only=True)`` only: plain dicts, strings,
ints and tensors) and rebuilds ``{block_path: module}`` or the whole model; the whole model of a Keras
``.weights.h5`` file is read too (h5py: its tensors are in the TF1 layout ``load_tf1_weights`` takes). Never
imports tensorflow.
"""
from __future__ import annotations

import importlib
import json
import os

import torch
from torch import nn

from speechblocks.migration.migrated_file import (
    FORMAT_VERSION,
    TORCH_FORMAT,
    check_version,
    file_kind,
    model_hparams,
    read_keras_file,
)
from speechblocks.tacotron2_schema import MODEL_BLOCK_ATTRIBUTES, model_block

__all__ = ["load_migrated", "load_migrated_model", "TORCH_FORMAT", "FORMAT_VERSION"]

# the classes a migrated file may name; anything else is refused (the file never chooses code to run)
_BLOCK_CLASSES = frozenset({"EncoderConvolutions", "EncoderRNN", "Prenet", "DecoderRNN", "FrameProjection",
                            "StopProjection", "Postnet", "CBHG"})


def _table(payload: dict, path: str) -> dict:
    try:
        table = json.loads(payload["blocks"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path!r}: the block table is missing or not valid JSON") from None
    if not isinstance(table, dict):
        raise ValueError(f"{path!r}: the block table is not a JSON object")
    for block_path, entry in table.items():
        if not isinstance(entry, dict) or entry.get("class_name") not in _BLOCK_CLASSES:
            raise ValueError(f"{path!r}: block {block_path!r} names an unknown class")
        if not isinstance(entry.get("config"), dict) or not isinstance(entry.get("input_size"), int):
            raise ValueError(f"{path!r}: block {block_path!r} lacks its config or input size")
    return table


def load_migrated(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                  strict: bool = True) -> dict[str, nn.Module]:
    """Loads a file written by ``speechblocks migrate CKPT --to torch OUT``.

    Args:
        path: the migrated ``.pt`` file.
        map_location: where the tensors go (``torch.load``'s ``map_location``).
        strict: passed to ``load_state_dict``.

    Returns:
        ``{block_path: module}`` -- every module built from its stored config, its state dict loaded,
        in ``eval()`` mode, keyed by the block paths relative to ``Tacotron_model/inference/``
        (``"encoder_convolutions"``, ``"decoder/decoder_LSTM"``, ``"CBHG_postnet"``, ...). For a whole-model
        file the modules are the blocks of the rebuilt ``Tacotron2`` (``decoder/Location_Sensitive_Attention``
        included).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a migrated torch file (e.g. the Keras ``.weights.h5``), or a damaged one.

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
    state_dicts = payload.get("state_dicts") or {}
    package = importlib.import_module("torch_layers")
    blocks: dict[str, nn.Module] = {}
    for block_path, entry in table.items():
        if block_path not in state_dicts:
            raise ValueError(f"{path!r}: block {block_path!r} has no state dict")
        cls = getattr(package, entry["class_name"])
        module = cls(entry["input_size"], **entry["config"])
        module.load_state_dict(state_dicts[block_path], strict=strict)
        blocks[block_path] = module.to(map_location).eval()
    return blocks


def _read_payload(path: str, map_location) -> dict:
    if file_kind(path) == "keras":
        raise ValueError(f"{path!r} is a Keras file (written by `speechblocks migrate --to keras`): read its blocks "
                         "with tf_layers.checkpoint.load_migrated (its whole model also with "
                         "torch_layers.Tacotron2.from_migrated)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated file, or a pickle that is not plain data
        raise ValueError(f"{path!r} is not a readable migrated torch file ({type(e).__name__}); a Keras "
                         ".weights.h5 file is read by tf_layers.checkpoint.load_migrated") from None
    if not isinstance(payload, dict) or payload.get("speechblocks_format") != TORCH_FORMAT:
        raise ValueError(f"{path!r} is not a migrated torch file (no speechblocks_format {TORCH_FORMAT!r})")
    check_version(payload.get("format_version", -1), path)
    return payload


def _maybe_block(model, block_path: str):
    try:
        return model_block(model, block_path)
    except AttributeError:
        return None


def _model_from_payload(payload: dict, path: str, hparams, overrides, cls=None, model_kwargs: dict | None = None):
    if cls is None:
        cls = importlib.import_module("torch_layers").Tacotron2
    state = payload.get("model_state_dict")
    if not isinstance(state, dict):
        raise ValueError(f"{path!r}: the whole model's state dict is missing")
    hp = model_hparams(payload.get("model"), None, path, hparams, overrides)
    model = cls(hp, **(model_kwargs or {}))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path!r}: its state dict does not fit the stored hparams: {str(e).splitlines()[0]} "
                         "(the file is damaged)") from None
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
        ValueError: not a migrated file, a file of blocks only, damage, or hparams contradicting the tensors.
    """
    path = os.fspath(path)
    if file_kind(path) == "keras":
        from speechblocks.migration.migrate import read_block_table

        mf = read_keras_file(path, read_block_table)
        hp = model_hparams(mf.model, {k: tuple(v.shape) for k, v in mf.weights.items()}, path, hparams, overrides)
        model = (cls or importlib.import_module("torch_layers").Tacotron2)(hp, **(model_kwargs or {}))
        model.load_tf1_weights(mf.weights, strict=True)
        return model.to(map_location).eval()
    payload = _read_payload(path, map_location)
    _table(payload, path)
    if payload.get("model") is None:
        raise ValueError(f"{path!r} holds Tacotron-2 blocks, not a whole model (the checkpoint it was migrated from "
                         "had only some blocks): read its blocks with torch_layers.load_migrated")
    return _model_from_payload(payload, path, hparams, overrides, cls, model_kwargs).to(map_location)
