"""The files of a training run's checkpoint, framework-free: the model in the migrated-file format of each
framework and a sidecar with the training state.

* Keras ``.weights.h5``: written here (h5py), exactly as ``speechblocks migrate --to keras`` writes a whole model
  (root attributes ``speechblocks_format``, ``format_version``, ``model``, ``blocks``, ``sha256``; one dataset per
  TF1 name in TF1 layout), so ``Tacotron2.from_migrated`` of either framework reads it.
* torch ``.pt``: :func:`torch_model_payload` builds the dict ``speechblocks migrate --to torch`` saves; the torch
  trainer passes it to ``torch.save`` (torch is not imported here).
* sidecar ``.state.npz``: :func:`write_state` / :func:`read_state`: a JSON ``meta`` entry (global step, sampler
  state, seed, ...) and named float arrays (the Adam slots by TF1 name: ``<name>/Adam``, ``<name>/Adam_1``, in
  TF1 layout, as a TF1 checkpoint stores them).

Every file is written to a temporary name in its directory and moved into place (``os.replace``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np

from ..atomic_files import atomic_path
from ..migration.migrated_file import (
    FORMAT_VERSION,
    KERAS_FORMAT,
    TORCH_FORMAT,
    content_digest,
    model_entry,
    tensor_digest,
)
from ..migration.schema import BLOCK_KINDS, ConfigInferenceError
from ..tacotron2_hparams import Tacotron2HParams

__all__ = ["STATE_FORMAT", "model_block_table", "read_state", "torch_model_payload",
           "write_keras_model_file", "write_state"]

STATE_FORMAT = "speechblocks.train.state"
STATE_VERSION = 1


def model_block_table(tf1_shapes: Mapping[str, tuple]) -> dict:
    """The block table of a whole-model migrated file: ``{block_path: {"class_name", "config", "input_size",
    "input_arg", "tf1_keys"}}`` inferred from the model's TF1 variable shapes (names relative to
    ``Tacotron_model/inference/``), as ``speechblocks migrate`` writes it."""
    table = {}
    for kind in BLOCK_KINDS:
        pre = kind.path + "/"
        shapes = {k[len(pre):]: tuple(v) for k, v in tf1_shapes.items() if k.startswith(pre)}
        if not shapes:
            continue
        try:
            config, input_size = kind.infer(shapes)
        except ConfigInferenceError:  # a block the table cannot describe: the model entry still holds it
            continue
        if set(kind.expected(config, input_size)) != set(shapes):
            continue
        table[kind.path] = {"class_name": kind.class_name, "config": config, "input_size": input_size,
                            "input_arg": kind.input_arg, "tf1_keys": sorted(shapes)}
    return table


def write_keras_model_file(path: str | os.PathLike, hparams: Tacotron2HParams,
                           tf1_weights: Mapping[str, np.ndarray], source: str = "") -> None:
    """Write a whole model as ``speechblocks migrate --to keras`` does (``Tacotron2.from_migrated`` reads it).

    Args:
        path (str or PathLike): the ``.weights.h5`` file (replaced atomically).
        hparams (Tacotron2HParams): the model's hparams (stored as the ``model`` entry).
        tf1_weights (Mapping[str, numpy.ndarray]): every variable of the model by TF1 name relative to
            ``Tacotron_model/inference/``, TF1 layout (``model.tf1_weights()``).
        source (str, optional): recorded as the attribute ``source_checkpoint``. (Default: ``""``)
    """
    import h5py

    weights = {k: np.asarray(v) for k, v in tf1_weights.items()}
    blocks = json.dumps(model_block_table({k: v.shape for k, v in weights.items()}), sort_keys=True)
    model_json = model_entry(hparams)
    with atomic_path(path) as tmp:
        digests = {}
        with h5py.File(tmp, "w") as f:
            f.attrs["speechblocks_format"] = KERAS_FORMAT
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["source_checkpoint"] = source
            f.attrs["use_ema"] = False
            f.attrs["model"] = model_json
            for name in sorted(weights):
                f.create_dataset(name, data=weights[name])
                digests[name] = tensor_digest(name, weights[name])
            f.attrs["blocks"] = blocks
            f.attrs["sha256"] = content_digest(blocks, model_json, digests)


def torch_model_payload(hparams: Tacotron2HParams, state_dict: Mapping, tf1_shapes: Mapping[str, tuple],
                        source: str = "") -> dict:
    """The dict ``speechblocks migrate --to torch`` saves for a whole model (pass it to ``torch.save``).

    Args:
        hparams (Tacotron2HParams): the model's hparams.
        state_dict (Mapping): ``model.state_dict()`` (tensors on the CPU).
        tf1_shapes (Mapping[str, tuple]): the model's TF1 variable shapes (for the block table).
        source (str, optional): recorded as ``source_checkpoint``. (Default: ``""``)
    """
    return {"speechblocks_format": TORCH_FORMAT, "format_version": FORMAT_VERSION,
            "blocks": json.dumps(model_block_table(tf1_shapes), sort_keys=True), "state_dicts": {},
            "source_checkpoint": source, "use_ema": False, "model": model_entry(hparams),
            "model_state_dict": dict(state_dict)}


def write_state(path: str | os.PathLike, meta: Mapping, arrays: Mapping[str, np.ndarray]) -> None:
    """Write a training-state sidecar (``.npz``, atomically).

    Args:
        path (str or PathLike): the file.
        meta (Mapping): JSON-serialisable state (global step, sampler state, seed, ...).
        arrays (Mapping[str, numpy.ndarray]): named arrays (the optimizer slots).
    """
    payload = {"meta": np.array(json.dumps({"format": STATE_FORMAT, "version": STATE_VERSION, **meta},
                                           sort_keys=True))}
    payload.update({f"a:{k}": np.asarray(v) for k, v in arrays.items()})
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **payload)


def read_state(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a sidecar of :func:`write_state`: ``(meta, arrays)``.

    Raises:
        ValueError: naming the file when it is not a training-state sidecar or is damaged.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {k[2:]: data[k] for k in data.files if k.startswith("a:")}
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"training state {path!r} is not readable ({type(exc).__name__}: {exc}).") from None
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        raise ValueError(f"training state {path!r} is not a speechblocks training-state file.")
    if int(meta.get("version", 0)) > STATE_VERSION:
        raise ValueError(f"training state {path!r} has version {meta.get('version')}; this library reads "
                         f"version {STATE_VERSION}.")
    return meta, arrays
