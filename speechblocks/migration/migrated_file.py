"""What both frameworks need to read a file written by ``speechblocks migrate`` (numpy and h5py; no framework).

Two formats (see :mod:`.migrate` for the layouts):

* Keras, ``.weights.h5``: HDF5. Both frameworks read it: the weights are stored in TF1 layout under their TF1
  names, the library's exchange format (``load_tf1_weights``).
* torch, ``.pt``: ``torch.save`` of a plain dict; only torch can read it (``torch.load(weights_only=True)``).

A file of format version 2 written from a checkpoint holding the whole Tacotron-2 carries the attribute / key
``model``: JSON ``{"class_name": "Tacotron2", "hparams": {original names}, "n_symbols": int}``; the rebuilt model
is ``Tacotron2.from_migrated(path)`` in either framework.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from ..tacotron2_hparams import Tacotron2HParams, resolve_hparams
from ..tacotron2_schema import checkpoint_hparams, tf1_variable_shapes

__all__ = ["KERAS_FORMAT", "TORCH_FORMAT", "FORMAT_VERSION", "MigratedKerasFile", "file_kind", "read_keras_file",
           "model_entry", "model_hparams", "check_version"]

KERAS_FORMAT = "speechblocks.migrated.keras"
TORCH_FORMAT = "speechblocks.migrated.torch"
#: 1: blocks only; 2: adds the whole model (``model``) -- version 1 files are still read
FORMAT_VERSION = 2

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"


def file_kind(path) -> str:
    """``"keras"`` (HDF5) or ``"torch"`` (a ``torch.save`` zip) by the file's first bytes.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a directory, or neither format.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"migrated file {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a directory, not a migrated file (.weights.h5 or .pt)")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(_HDF5_MAGIC):
        return "keras"
    if head.startswith(_ZIP_MAGIC):
        return "torch"
    raise ValueError(f"{path!r} is not a file written by `speechblocks migrate` (neither HDF5 nor a torch zip file)")


def check_version(version, path: str) -> int:
    """The file's format version as an int; a newer one than this library's is refused."""
    try:
        v = int(version)
    except (TypeError, ValueError):
        raise ValueError(f"{path!r}: format_version {version!r} is not an integer") from None
    if v > FORMAT_VERSION or v < 1:
        raise ValueError(f"{path!r} has format version {v}; this library reads versions 1 to {FORMAT_VERSION}")
    return v


def model_entry(hp: Tacotron2HParams) -> str:
    """The ``model`` JSON of a migrated file."""
    return json.dumps({"class_name": "Tacotron2", "hparams": hp.to_dict(), "n_symbols": hp.n_symbols},
                      sort_keys=True)


def model_hparams(model_json, shapes: dict | None, path: str, hparams=None, overrides=None) -> Tacotron2HParams:
    """The hparams of the model a migrated file holds: the stored ones (or ``hparams`` when given), then
    ``overrides``, checked against the stored tensors' TF1 shapes (``shapes``; ``None``: the shapes the stored
    hparams imply, for a torch state dict that the stored hparams describe).

    Raises:
        ValueError: no whole model in the file, a damaged ``model`` entry, or hparams that contradict the tensors.
    """
    if model_json is None:
        raise ValueError(f"{path!r} holds Tacotron-2 blocks, not a whole model (the checkpoint it was migrated from "
                         "had only some blocks): read its blocks with load_migrated")
    try:
        entry = json.loads(model_json)
        stored = entry["hparams"]
        if entry.get("class_name") != "Tacotron2" or not isinstance(stored, dict):
            raise ValueError
        stored = resolve_hparams(stored, int(entry["n_symbols"]))
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"{path!r}: its `model` entry is damaged (expected JSON with class_name 'Tacotron2', "
                         "hparams and n_symbols)") from None
    if shapes is None:
        shapes = tf1_variable_shapes(stored)
    return checkpoint_hparams(shapes, stored if hparams is None else hparams, overrides,
                              source=f"migrated file {path!r}")


@dataclasses.dataclass
class MigratedKerasFile:
    """A migrated Keras file, read.

    Attributes:
        version: format version.
        table: the JSON block table ``{block_path: {"class_name", "config", "input_size", "input_arg", "tf1_keys"}}``.
        model: the ``model`` JSON string, or ``None`` (a file of blocks).
        weights: ``{TF1 name relative to Tacotron_model/inference/: array}`` of every stored tensor.
    """

    version: int
    table: dict
    model: str | None
    weights: dict[str, np.ndarray]

    def block_weights(self, block_path: str) -> dict[str, np.ndarray]:
        pre = block_path + "/"
        return {k[len(pre):]: v for k, v in self.weights.items() if k.startswith(pre)}


def read_keras_file(path, table_reader=None) -> MigratedKerasFile:
    """Reads a migrated ``.weights.h5`` file completely (every tensor into memory).

    Args:
        path: the file.
        table_reader: ``(blocks_json, path) -> table`` validating the block table (``migrate.read_block_table``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a torch file (with the reader to use), not HDF5, not a migrated file, a newer format, damage.
    """
    import h5py

    path = os.fspath(path)
    if file_kind(path) == "torch":
        raise ValueError(f"{path!r} is a torch file (written by `speechblocks migrate --to torch`): read it with "
                         "torch_layers (torch_layers.Tacotron2.from_migrated / torch_layers.load_migrated), or migrate "
                         "the checkpoint again with --to keras")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise ValueError(f"{path!r} is not a readable HDF5 file (truncated or damaged)") from None
    with f:
        if f.attrs.get("speechblocks_format") != KERAS_FORMAT:
            raise ValueError(f"{path!r} is not a migrated Keras file (attribute speechblocks_format is "
                             f"{f.attrs.get('speechblocks_format')!r}, expected {KERAS_FORMAT!r})")
        version = check_version(f.attrs.get("format_version", -1), path)
        table = table_reader(f.attrs.get("blocks"), path) if table_reader else json.loads(f.attrs.get("blocks"))
        model = f.attrs.get("model") if version >= 2 else None
        weights: dict[str, np.ndarray] = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                weights[name] = np.asarray(obj[()])

        try:
            f.visititems(visit)
        except (OSError, RuntimeError, KeyError) as e:
            raise ValueError(f"{path!r}: cannot read its tensors: the file is truncated or damaged "
                             f"({type(e).__name__})") from None
    return MigratedKerasFile(version, table, model if isinstance(model, str) or model is None else str(model), weights)
