"""``torch_layers.load_migrated``: the torch side of ``speechblocks migrate --to torch``.

Reads the ``.pt`` file the migration writes (``torch.load(weights_only=True)`` only: plain dicts, strings,
ints and tensors) and rebuilds ``{block_path: module}``. Never imports tensorflow.
"""
from __future__ import annotations

import importlib
import json
import os

import torch
from torch import nn

__all__ = ["load_migrated", "TORCH_FORMAT", "FORMAT_VERSION"]

TORCH_FORMAT = "speechblocks.migrated.torch"
FORMAT_VERSION = 1

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
        (``"encoder_convolutions"``, ``"decoder/decoder_LSTM"``, ``"CBHG_postnet"``, ...).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a migrated torch file (e.g. the Keras ``.weights.h5``), or a damaged one.

    Example:
        >>> blocks = load_migrated("tacotron.pt")  # doctest: +SKIP
        >>> mel = blocks["postnet_convolutions"](torch.zeros(1, 10, 80))  # doctest: +SKIP
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"migrated file {path!r} does not exist")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # not a torch file, or a truncated one
        raise ValueError(f"{path!r} is not a readable migrated torch file ({type(e).__name__}); a Keras "
                         ".weights.h5 file is read by tf_layers.checkpoint.load_migrated") from None
    if not isinstance(payload, dict) or payload.get("speechblocks_format") != TORCH_FORMAT:
        raise ValueError(f"{path!r} is not a migrated torch file (no speechblocks_format {TORCH_FORMAT!r})")
    if int(payload.get("format_version", -1)) > FORMAT_VERSION:
        raise ValueError(f"{path!r} has format version {payload['format_version']}, newer than this library's "
                         f"{FORMAT_VERSION}")
    table = _table(payload, path)
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
