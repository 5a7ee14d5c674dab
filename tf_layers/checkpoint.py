"""Reading TF1 checkpoints under Keras 3 (``tf.train.load_checkpoint``), loading them into blocks, and
migrating whole Tacotron-2 checkpoints (the machinery lives in :mod:`speechblocks.migration`).

* :func:`read_tf1_checkpoint` / :func:`load_tf1_checkpoint`: one block at a time.
* :func:`inspect_checkpoint`: every Tacotron-2 block a checkpoint holds, with its inferred config.
* :func:`migrate_checkpoint`: writes a Keras ``.weights.h5`` or torch ``.pt`` file (``speechblocks migrate``).
* :func:`load_migrated`: ``{block_path: keras layer}`` from a migrated Keras file
  (``torch_layers.load_migrated`` reads the torch file).
"""
from __future__ import annotations

import os

import numpy as np

# the migration machinery (speechblocks.migration, framework-free); importing it imports no framework
from speechblocks.migration import (
    MigrationError,
    NoTacotronBlocksError,
    inspect_checkpoint,
    is_optimizer_variable,
    load_migrated,
    migrate_checkpoint,
)

__all__ = ["read_tf1_checkpoint", "read_tf1_weights", "load_tf1_checkpoint", "is_optimizer_variable", "inspect_checkpoint",
           "migrate_checkpoint", "load_migrated", "MigrationError", "NoTacotronBlocksError"]

def _norm_prefix(prefix: str) -> str:
    prefix = (prefix or "").strip("/")
    return prefix + "/" if prefix else ""


def _reader(path: str):
    import tensorflow as tf

    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"no TF1 checkpoint found in directory {path!r} (no 'checkpoint' index file)")
        path = latest
    if not (os.path.exists(path + ".index") or os.path.exists(path)):
        raise FileNotFoundError(f"TF1 checkpoint {path!r} does not exist (expected {path}.index)")
    try:
        return tf.train.load_checkpoint(path)
    except Exception as e:  # tf raises DataLossError / NotFoundError / OpError
        raise ValueError(f"cannot read TF1 checkpoint {path!r}: it is truncated or corrupted ({type(e).__name__})") from None


def read_tf1_checkpoint(path: str, prefix: str = "") -> dict[str, np.ndarray]:
    """Reads a TF1 checkpoint into ``{name relative to prefix: array}``.

    Args:
        path: checkpoint prefix (``model.ckpt-1000``) or a directory with a ``checkpoint`` file.
        prefix: keep only variables under this scope; a trailing ``/`` is optional.

    Returns:
        the model variables; optimizer slots (``…/Adam``, ``…/Adam_1``), ``global_step`` and
        ``beta*_power`` are left out.
    """
    reader = _reader(path)
    pre = _norm_prefix(prefix)
    out = {}
    for name in sorted(reader.get_variable_to_shape_map()):
        if is_optimizer_variable(name) or not name.startswith(pre):
            continue
        try:
            out[name[len(pre):]] = np.asarray(reader.get_tensor(name))
        except Exception as e:  # a truncated data file fails only when the tensor is read
            raise ValueError(f"cannot read variable {name!r} of TF1 checkpoint {os.fspath(path)!r}: it is truncated "
                             f"or corrupted ({type(e).__name__})") from None
    return out


def load_tf1_checkpoint(block, path: str, scope: str, strict: bool = True, use_ema: bool = False):
    """Loads a block's weights from a TF1 checkpoint.

    Args:
        block: a Keras layer or torch module with ``load_tf1_weights``.
        path: TF1 checkpoint prefix or directory.
        scope: the block's full scope in the checkpoint (e.g. ``"Tacotron_model/inference/encoder_LSTM"``);
            a trailing ``/`` is optional.
        strict: as in ``load_tf1_weights``.
        use_ema: take ``<var>/ExponentialMovingAverage`` shadows instead of the raw weights where they exist
            (shadows are never passed to the block as variables of their own).

    Returns:
        the block's load report.
    """
    weights = read_tf1_weights(path, scope, use_ema=use_ema)
    if not weights:
        raise ValueError(f"checkpoint {os.fspath(path)!r} holds no variable under scope {scope.rstrip('/')!r}")
    return block.load_tf1_weights(weights, strict=strict)


def read_tf1_weights(path: str, scope: str, use_ema: bool = False, require_ema: bool = False) -> dict[str, np.ndarray]:
    """The model variables under ``scope`` (names relative to it), EMA shadows never listed as variables of their own.

    Args:
        path: TF1 checkpoint prefix or directory.
        scope: e.g. ``"Tacotron_model/inference"``; a trailing ``/`` is optional.
        use_ema: take ``<var>/ExponentialMovingAverage`` shadows instead of the raw weights where they exist (also
            shadows an optimizer wrote under a doubled scope, ``Tacotron_model/Tacotron_model/inference/...``).
        require_ema: with ``use_ema``, raise ``ValueError`` when no shadow of these variables exists.
    """
    suffix = "/ExponentialMovingAverage"
    pre = _norm_prefix(scope)
    everything = read_tf1_checkpoint(path)
    weights = {k[len(pre):]: v for k, v in everything.items() if k.startswith(pre) and not k.endswith(suffix)}
    if use_ema:
        shadows = {}
        for k, v in everything.items():
            if k.endswith(suffix) and pre in k:
                base = k[: -len(suffix)]
                shadows[base[base.rindex(pre) + len(pre):]] = v
        shadows = {k: v for k, v in shadows.items() if k in weights}
        if require_ema and not shadows:
            raise ValueError(f"use_ema=True but checkpoint {os.fspath(path)!r} holds no '<variable>/ExponentialMovingAverage' "
                             f"shadow of the variables under {scope.rstrip('/')!r}.")
        weights.update(shadows)
    return weights
