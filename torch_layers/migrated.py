"""``torch_layers.load_migrated``: the blocks of a file of ``speechblocks migrate --to torch``.

Reads the ``.pt`` file the migration writes (CRC-32 of every zip member checked, then
``torch.load(weights_only=True)`` only: plain dicts, strings, ints and tensors, see
:mod:`torch_layers._migrated_model`) and rebuilds ``{block_path: module}`` (of a whole-model file: the blocks of the
rebuilt ``Tacotron2``; ``Tacotron2.from_migrated`` gives the model itself). All or nothing: every block's config and
state dict are checked against a module built on the ``meta`` device (no memory, whatever sizes a damaged file
claims) before the real one is built; any problem is one :class:`MigratedFileError` line naming the file. Never
imports tensorflow.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from speechblocks.migration.migrated_file import (
    FORMAT_VERSION,
    TORCH_FORMAT,
    MigratedFileError,
    check_block_counts,
    file_error,
)
from speechblocks.state_dict import StateDictError
from speechblocks.tacotron2_schema import MODEL_BLOCK_ATTRIBUTES, model_block

from ._migrated_model import block_table, model_from_payload, read_payload, state_dict_entry
from ._state_dict import check_module_state_dict
from .cbhg import CBHG
from .decoder_rnn import DecoderRNN
from .encoder_convolutions import EncoderConvolutions
from .encoder_rnn import EncoderRNN
from .frame_projection import FrameProjection
from .postnet import Postnet
from .prenet import Prenet
from .stop_projection import StopProjection
from .tacotron2 import Tacotron2

__all__ = ["load_migrated", "MIGRATED_BLOCK_CLASSES", "MigratedFileError", "TORCH_FORMAT", "FORMAT_VERSION"]

#: the torch class of every class name a migrated file's block table may hold
#: (``speechblocks.migration.schema.BLOCK_CLASSES``)
MIGRATED_BLOCK_CLASSES = {cls.__name__: cls for cls in (CBHG, DecoderRNN, EncoderConvolutions, EncoderRNN,
                                                         FrameProjection, Postnet, Prenet, StopProjection)}


def _build_block(block_path: str, entry: dict, state: dict, path: str, strict: bool) -> nn.Module:
    """The block of ``entry`` with ``state`` loaded; checked on the meta device first (all or nothing)."""
    check_block_counts(block_path, entry, len(state), path)
    cls = MIGRATED_BLOCK_CLASSES[entry["class_name"]]
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
    payload = read_payload(path, map_location)
    table = block_table(payload, path)
    if payload.get("model") is not None:
        model = model_from_payload(payload, path, None, None, Tacotron2).to(map_location)
        return {p: model_block(model, p) for p in MODEL_BLOCK_ATTRIBUTES if _maybe_block(model, p) is not None}
    state_dicts = state_dict_entry(payload.get("state_dicts"), path, "its state_dicts entry")
    stray = sorted(set(state_dicts) - set(table))
    if stray:
        raise MigratedFileError(f"{path!r}: state dicts of blocks its table does not list: {stray}")
    blocks: dict[str, nn.Module] = {}
    for block_path, entry in table.items():
        if block_path not in state_dicts:
            raise MigratedFileError(f"{path!r}: block {block_path!r} has no state dict")
        state = state_dict_entry(state_dicts[block_path], path, f"the state dict of block {block_path!r}")
        blocks[block_path] = _build_block(block_path, entry, state, path, strict).to(map_location).eval()
    return blocks


def _maybe_block(model, block_path: str):
    try:
        return model_block(model, block_path)
    except AttributeError:
        return None
