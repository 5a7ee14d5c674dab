"""What both frameworks need to read a file written by ``speechblocks migrate`` (numpy and h5py; no framework).

Two formats (see :mod:`.migrate` for the layouts):

* Keras, ``.weights.h5``: HDF5. Both frameworks read it: the weights are stored in TF1 layout under their TF1
  names, the library's exchange format (``load_tf1_weights``).
* torch, ``.pt``: ``torch.save`` of a plain dict; only torch can read it (``torch.load(weights_only=True)``).

A file of format version 2 written from a checkpoint holding the whole Tacotron-2 carries the attribute / key
``model``: JSON ``{"class_name": "Tacotron2", "hparams": {original names}, "n_symbols": int}``; the rebuilt model
is ``Tacotron2.from_migrated(path)`` in either framework.

Reading is all or nothing and refuses what is not exactly such a file, with one :class:`MigratedFileError` line
naming the file and the problem: damage (a Keras file carries the SHA-256 of its block table, model entry and
tensors in the attribute ``sha256``; a torch file's zip members carry CRC-32 checksums, checked before
``torch.load(weights_only=True)``), a newer format version, a block table naming unknown blocks or classes, a
config that contradicts the tensors, missing, unknown, mis-shaped or non-floating tensors. Files written before the
``sha256`` attribute existed are read without that check.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping

import numpy as np

from ..errors import InputError
from ..state_dict import one_line
from ..tacotron2_hparams import Tacotron2HParams, resolve_hparams
from ..tacotron2_schema import checkpoint_hparams, tf1_variable_shapes
from .schema import BLOCK_CLASSES, kind_for_path

__all__ = ["KERAS_FORMAT", "TORCH_FORMAT", "FORMAT_VERSION", "MigratedFileError", "MigratedKerasFile", "file_kind",
           "read_keras_file", "read_block_table", "model_entry", "model_hparams", "check_version", "tensor_digest",
           "content_digest", "block_tf1_problems", "check_model_counts", "file_error", "model_from_keras_file"]

KERAS_FORMAT = "speechblocks.migrated.keras"
TORCH_FORMAT = "speechblocks.migrated.torch"
#: 1: blocks only; 2: adds the whole model (``model``) -- version 1 files are still read
FORMAT_VERSION = 2

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"

#: config keys that count layers (bounded by the number of stored tensors before anything loops over them)
_CONFIG_COUNTS = ("num_layers", "K", "layers", "n_highwaynet_layers")
_CONFIG_LISTS = ("layers_sizes", "projections")
_MODEL_COUNTS = ("enc_conv_num_layers", "decoder_layers", "postnet_num_layers", "cbhg_kernels",
                 "cbhg_highwaynet_layers")
#: constructor keywords a stored config may not set (the reader sets them)
_RESERVED_CONFIG = frozenset({"device", "dtype", "name"})


class MigratedFileError(InputError):
    """A migrated file cannot be read: one line naming the file and the problem. Nothing was loaded: the reader
    returns no object and no existing model is changed."""


def file_error(path: str, error) -> MigratedFileError:
    """``error`` (an exception, with ``problems`` when it lists several; a list of problems; a text) as one line
    naming ``path``."""
    if isinstance(error, BaseException):
        problems = getattr(error, "problems", None) or [str(error)]
    elif isinstance(error, (list, tuple)):
        problems = [str(p) for p in error]
    else:
        problems = [str(error)]
    text = one_line(problems)
    return MigratedFileError(text if repr(path) in text else f"{path!r}: {text}")


def file_kind(path) -> str:
    """``"keras"`` (HDF5) or ``"torch"`` (a ``torch.save`` zip) by the file's first bytes.

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError: a directory, or neither format.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"migrated file {path!r} does not exist")
    if os.path.isdir(path):
        raise MigratedFileError(f"{path!r} is a directory, not a migrated file (.weights.h5 or .pt)")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(_HDF5_MAGIC):
        return "keras"
    if head.startswith(_ZIP_MAGIC):
        return "torch"
    raise MigratedFileError(f"{path!r} is not a file written by `speechblocks migrate` (neither HDF5 nor a torch "
                            "zip file)")


def check_version(version, path: str) -> int:
    """The file's format version as an int; a newer one than this library's is refused."""
    if isinstance(version, (bool, float)) or not isinstance(version, (int, np.integer)):
        raise MigratedFileError(f"{path!r}: format_version {version!r} is not an integer")
    v = int(version)
    if v > FORMAT_VERSION or v < 1:
        raise MigratedFileError(f"{path!r} has format version {v}; this library reads versions 1 to {FORMAT_VERSION}")
    return v


def model_entry(hp: Tacotron2HParams) -> str:
    """The ``model`` JSON of a migrated file."""
    return json.dumps({"class_name": "Tacotron2", "hparams": hp.to_dict(), "n_symbols": hp.n_symbols},
                      sort_keys=True)


def tensor_digest(name: str, value: np.ndarray) -> str:
    """SHA-256 of one stored tensor: its name, dtype, shape and bytes."""
    a = np.ascontiguousarray(value)
    h = hashlib.sha256(f"{name}\0{a.dtype.str}\0{list(a.shape)}\0".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def content_digest(blocks_json: str, model_json: str | None, tensor_digests: Mapping[str, str]) -> str:
    """SHA-256 of a Keras file's content: the block table, the ``model`` entry and every tensor's digest by name."""
    h = hashlib.sha256(f"{blocks_json}\0{model_json or ''}\0".encode())
    for name in sorted(tensor_digests):
        h.update(f"{name}\0{tensor_digests[name]}\0".encode())
    return h.hexdigest()


def _bounded_count(value, limit: int, what: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{what} is {value!r}, not an integer"
    if not 0 <= value <= limit:
        return f"{what} is {value}, but the file holds {limit} tensor(s) for it"
    return None


def check_model_counts(hparams: Mapping, n_tensors: int, path: str) -> None:
    """Refuses stored hparams whose layer counts exceed the number of stored tensors (a damaged or hostile file),
    before anything loops over them."""
    problems = [_bounded_count(hparams.get(k, 0), n_tensors, f"hparam {k}") for k in _MODEL_COUNTS]
    layers = hparams.get("prenet_layers", [])
    if isinstance(layers, (list, tuple)) and len(layers) > n_tensors:
        problems.append(f"hparam prenet_layers lists {len(layers)} layers for {n_tensors} tensor(s)")
    problems = [p for p in problems if p]
    if problems:
        raise MigratedFileError(f"{path!r}: its `model` entry contradicts its tensors: {one_line(problems)}")


def model_hparams(model_json, shapes: dict | None, path: str, hparams=None, overrides=None,
                  n_tensors: int | None = None) -> Tacotron2HParams:
    """The hparams of the model a migrated file holds: the stored ones (or ``hparams`` when given), then
    ``overrides``, checked against the stored tensors' TF1 shapes (``shapes``; ``None``: the shapes the stored
    hparams imply, for a torch state dict that the stored hparams describe; its layer counts are then bounded by
    ``n_tensors``, the number of stored tensors).

    Raises:
        MigratedFileError: no whole model in the file, a damaged ``model`` entry, or hparams that contradict the
            tensors.
    """
    if model_json is None:
        raise MigratedFileError(f"{path!r} holds Tacotron-2 blocks, not a whole model (the checkpoint it was migrated "
                                "from had only some blocks): read its blocks with load_migrated")
    try:
        entry = json.loads(model_json)
        stored = entry["hparams"]
        if entry.get("class_name") != "Tacotron2" or not isinstance(stored, dict):
            raise ValueError
        if n_tensors is not None:
            check_model_counts(stored, n_tensors, path)
        stored = resolve_hparams(stored, int(entry["n_symbols"]))
    except MigratedFileError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        raise MigratedFileError(f"{path!r}: its `model` entry is damaged (expected JSON with class_name 'Tacotron2', "
                                "valid hparams and n_symbols)") from None
    if shapes is None:
        shapes = tf1_variable_shapes(stored)
    try:
        return checkpoint_hparams(shapes, stored if hparams is None else hparams, overrides,
                                  source=f"migrated file {path!r}")
    except ValueError as e:
        raise file_error(path, [line.strip(" -") for line in str(e).splitlines() if line.strip()]) from None


def read_block_table(blocks_json, path: str) -> dict:
    """Parses and validates the JSON block table of a migrated file.

    Every block path must be one of the library's (docs/ARCHITECTURE.md, TF1 names) with its class, a config (a JSON
    object whose keys are not the reader's own ``device``/``dtype``/``name``), a positive int input size and a list of
    TF1 keys.

    Raises:
        MigratedFileError: one line naming the file and the first bad entry.
    """
    if isinstance(blocks_json, bytes):
        try:
            blocks_json = blocks_json.decode("utf-8")
        except UnicodeDecodeError:
            raise MigratedFileError(f"{path!r}: the block table is not valid JSON") from None
    try:
        table = json.loads(blocks_json)
    except (TypeError, ValueError, RecursionError):
        raise MigratedFileError(f"{path!r}: the block table is missing or not valid JSON") from None
    if not isinstance(table, dict):
        raise MigratedFileError(f"{path!r}: the block table is not a JSON object")
    for block_path, entry in table.items():
        if not isinstance(entry, dict) or entry.get("class_name") not in BLOCK_CLASSES:
            raise MigratedFileError(f"{path!r}: block {block_path!r} names an unknown class "
                                    f"{entry.get('class_name') if isinstance(entry, dict) else entry!r}")
        try:
            kind = kind_for_path(block_path)
        except KeyError:
            raise MigratedFileError(f"{path!r}: unknown block path {block_path!r} in the block table") from None
        if kind.class_name != entry["class_name"]:
            raise MigratedFileError(f"{path!r}: block {block_path!r} names class {entry['class_name']!r}, expected "
                                    f"{kind.class_name!r}")
        config, size = entry.get("config"), entry.get("input_size")
        if not isinstance(config, dict) or isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise MigratedFileError(f"{path!r}: block {block_path!r} lacks its config or input size")
        bad = sorted(k for k in config if not isinstance(k, str) or not k.isidentifier() or k in _RESERVED_CONFIG)
        if bad:
            raise MigratedFileError(f"{path!r}: block {block_path!r}: config keys {bad} are not allowed")
        keys = entry.get("tf1_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise MigratedFileError(f"{path!r}: block {block_path!r}: tf1_keys is not a list of names")
    return table


def check_block_counts(block_path: str, entry: dict, n_tensors: int, path: str) -> None:
    """Refuses a block config whose layer counts exceed the block's number of stored tensors (before anything
    loops over them)."""
    config = entry["config"]
    problems = [_bounded_count(config[k], n_tensors, k) for k in _CONFIG_COUNTS if k in config]
    for k in _CONFIG_LISTS:
        if k in config and (not isinstance(config[k], list) or len(config[k]) > n_tensors):
            problems.append(f"{k} is not a list of at most {n_tensors} sizes")
    problems = [p for p in problems if p]
    if problems:
        raise MigratedFileError(f"{path!r}: block {block_path!r}: its config contradicts its tensors: "
                                f"{one_line(problems)}")


def block_tf1_problems(block_path: str, entry: dict, shapes: Mapping[str, tuple]) -> list[str]:
    """Every disagreement between a block's stored config and its stored TF1 tensors (``{relative name: shape}``):
    missing, unknown and mis-shaped tensors, or a config the block kind cannot read."""
    kind = kind_for_path(block_path)
    try:
        expected = kind.expected(entry["config"], entry["input_size"])
    except Exception as e:  # noqa: BLE001 -- a damaged config of any form is one clear problem
        return [f"its config {entry['config']!r} does not describe a {entry['class_name']} ({type(e).__name__})"]
    problems = [f"tensor {k!r} missing (expected shape {list(s)})" for k, s in expected.items() if k not in shapes]
    problems += [f"unknown tensor {k!r}" for k in sorted(shapes) if k not in expected]
    problems += [f"tensor {k!r} has shape {list(shapes[k])}, its config says {list(s)}"
                 for k, s in expected.items() if k in shapes and tuple(shapes[k]) != tuple(s)]
    if entry["config"].get("tf1_scope", kind.scope) != kind.scope:
        problems.append(f"its tf1_scope {entry['config']['tf1_scope']!r} is not the block's scope {kind.scope!r}")
    if sorted(entry.get("tf1_keys", expected)) != sorted(expected):
        problems.append("its tf1_keys do not match its config")
    return problems


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

    def check_blocks(self, path: str) -> None:
        """A file of blocks: every tensor belongs to a block of the table, and every block's config agrees with its
        tensors (before any layer is built)."""
        owners = sorted(self.table, key=len, reverse=True)
        stray = [k for k in self.weights if not any(k.startswith(b + "/") for b in owners)]
        if stray:
            raise MigratedFileError(f"{path!r}: tensors outside every block of its table: {one_line(sorted(stray))}")
        for block_path, entry in self.table.items():
            shapes = {k: tuple(v.shape) for k, v in self.block_weights(block_path).items()}
            if not shapes:
                raise MigratedFileError(f"{path!r}: block {block_path!r} has no weight group")
            check_block_counts(block_path, entry, len(shapes), path)
            problems = block_tf1_problems(block_path, entry, shapes)
            if problems:
                raise MigratedFileError(f"{path!r}: block {block_path!r} does not fit its stored config: "
                                        f"{one_line(problems)}")


def _text_attribute(attrs, name: str, path: str) -> str | None:
    value = attrs.get(name)
    if value is None:
        return None
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        if isinstance(text, str):
            text.encode("utf-8")  # h5py hands invalid UTF-8 over as surrogate escapes
            return text
    except UnicodeError:
        pass
    raise MigratedFileError(f"{path!r}: its attribute {name!r} is not valid text (the file is damaged)")


def _read_tensors(f, path: str) -> dict[str, np.ndarray]:
    import h5py

    size = os.path.getsize(path)
    weights: dict[str, np.ndarray] = {}
    bad: list[str] = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            try:
                name.encode("utf-8")
            except (AttributeError, UnicodeError):
                bad.append(f"a tensor name is not valid text ({name!r})")
                return
            if obj.is_virtual or obj.external:
                bad.append(f"tensor {name!r} keeps its data outside the file (external or virtual storage)")
            elif obj.dtype.kind != "f":
                bad.append(f"tensor {name!r} has dtype {obj.dtype}, expected floating point")
            elif obj.nbytes > size:
                bad.append(f"tensor {name!r} claims {obj.nbytes} bytes, more than the file holds")
            else:
                weights[name] = np.asarray(obj[()])

    f.visititems(visit)
    if bad:
        raise MigratedFileError(f"{path!r}: {one_line(bad)}")
    return weights


def read_keras_file(path, table_reader=read_block_table) -> MigratedKerasFile:
    """Reads a migrated ``.weights.h5`` file completely (every tensor into memory) and checks its integrity.

    Args:
        path: the file.
        table_reader: ``(blocks_json, path) -> table`` validating the block table.

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError: a torch file (with the reader to use), not HDF5, not a migrated file, a newer format,
            damage (a ``sha256`` that does not match), non-floating or implausible tensors.
    """
    import h5py

    path = os.fspath(path)
    if file_kind(path) == "torch":
        raise MigratedFileError(f"{path!r} is a torch file (written by `speechblocks migrate --to torch`): read it "
                                "with torch_layers (torch_layers.Tacotron2.from_migrated / "
                                "torch_layers.load_migrated), or migrate the checkpoint again with --to keras")
    try:
        f = h5py.File(path, "r")
    except Exception:  # noqa: BLE001 -- h5py raises OSError, KeyError, ValueError, ... on damage
        raise MigratedFileError(f"{path!r} is not a readable HDF5 file (truncated or damaged)") from None
    try:
        with f:
            if _text_attribute(f.attrs, "speechblocks_format", path) != KERAS_FORMAT:
                raise MigratedFileError(f"{path!r} is not a migrated Keras file (attribute speechblocks_format is "
                                        f"{f.attrs.get('speechblocks_format')!r}, expected {KERAS_FORMAT!r})")
            version = check_version(f.attrs.get("format_version"), path)
            blocks_json = _text_attribute(f.attrs, "blocks", path)
            model = _text_attribute(f.attrs, "model", path) if version >= 2 else None
            digest = _text_attribute(f.attrs, "sha256", path)
            weights = _read_tensors(f, path)
    except MigratedFileError:
        raise
    except Exception as e:  # noqa: BLE001 -- h5py/HDF5 errors of a damaged file, whatever their class
        raise MigratedFileError(f"{path!r}: cannot read it: the file is truncated or damaged "
                                f"({type(e).__name__})") from None
    if digest is not None:
        actual = content_digest(blocks_json or "", model, {k: tensor_digest(k, v) for k, v in weights.items()})
        if actual != digest:
            raise MigratedFileError(f"{path!r} is damaged: its content does not match its sha256 attribute")
    table = table_reader(blocks_json, path)
    return MigratedKerasFile(version, table, model, weights)


def model_from_keras_file(path, cls, hparams=None, overrides=None, model_kwargs: Mapping | None = None,
                          migrated: MigratedKerasFile | None = None):
    """The whole model of a migrated ``.weights.h5`` file, built by ``cls(hparams, **model_kwargs)`` -- either
    framework's ``Tacotron2``: both take the file's TF1-layout tensors with ``load_tf1_weights(strict=True)``.

    Args:
        path: the file.
        cls: the model class (``tf_layers.Tacotron2``, ``torch_layers.Tacotron2`` or a subclass); the caller hands
            it in, so this module imports no framework.
        hparams: replaces the stored hparams (sizes must agree with the tensors); ``overrides`` apply last.
        model_kwargs: further constructor keywords (``sync_batch_norm``, ``loss_reduction``).
        migrated: the file already read by :func:`read_keras_file` (it is not read again).

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError: as :func:`read_keras_file`, plus a file of blocks only and hparams contradicting the
            tensors; nothing is returned then.
    """
    path = os.fspath(path)
    mf = migrated if migrated is not None else read_keras_file(path, read_block_table)
    hp = model_hparams(mf.model, {k: tuple(v.shape) for k, v in mf.weights.items()}, path, hparams, overrides)
    model = cls(hp, **dict(model_kwargs or {}))
    try:
        model.load_tf1_weights(mf.weights, strict=True)
    except ValueError as e:
        raise file_error(path, e) from None
    return model
