"""Reading TF1 checkpoints in numpy (no framework): whole checkpoints, a scope's model variables, one block's.

``tf_layers.checkpoint`` re-exports these functions (its historical home); ``torch_layers.Tacotron2``'s
``from_tf1_checkpoint``, the migration and the command line read through them, so a torch-only install needs no
TensorFlow to use a TF1 checkpoint.
"""
from __future__ import annotations

import os

import numpy as np

from .migration.inventory import is_optimizer_variable
from .tf1_checkpoint_reader import TF1CheckpointReader

__all__ = ["read_tf1_checkpoint", "read_tf1_weights", "load_tf1_checkpoint"]


def _norm_prefix(prefix: str) -> str:
    prefix = (prefix or "").strip("/")
    return prefix + "/" if prefix else ""


def _reader(path) -> TF1CheckpointReader:
    """The validated checkpoint (:mod:`speechblocks.tf1_checkpoint_file`), read in numpy after its index, shard
    sizes and (per tensor read) data checksums passed."""
    return TF1CheckpointReader(path)


def read_tf1_checkpoint(path: str, prefix: str = "", *, allow_nonfinite: bool = False) -> dict[str, np.ndarray]:
    """Reads a TF1 checkpoint into ``{name relative to prefix: array}``.

    The checkpoint is validated before it is read (in numpy, no TensorFlow): the index's table structure and
    checksums, the data shards' sizes, and the CRC-32C of every tensor read (:mod:`speechblocks.tf1_checkpoint_reader`).

    Args:
        path: checkpoint prefix (``model.ckpt-1000``), its ``.index`` file, or a directory with a ``checkpoint``
            state file.
        prefix: keep only variables under this scope; a trailing ``/`` is optional.
        allow_nonfinite: return variables holding NaN/inf with a ``NonFiniteWeightsWarning`` instead of raising.

    Returns:
        the model variables; optimizer slots (``…/Adam``, ``…/Adam_1``), ``global_step`` and
        ``beta*_power`` are left out. float16, bfloat16 and float64 variables are cast to float32 (with a
        ``CheckpointDtypeWarning``); other dtypes are returned as stored.

    Raises:
        CheckpointNotFoundError (a ``FileNotFoundError``): no checkpoint at ``path``.
        CheckpointError (a ``ValueError``): a truncated, corrupted or hostile checkpoint; one line naming the
            file, the tensor when there is one, and the problem.
        NonFiniteWeightsError (a ``CheckpointError``): NaN/inf values, unless ``allow_nonfinite``.
    """
    reader = _reader(path)
    pre = _norm_prefix(prefix)
    names = {name[len(pre):]: name for name in sorted(reader.shapes())
             if not is_optimizer_variable(name) and name.startswith(pre)}
    return reader.read(names, allow_nonfinite=allow_nonfinite)


def load_tf1_checkpoint(block, path: str, scope: str, strict: bool = True, use_ema: bool = False, *,
                        allow_nonfinite: bool = False):
    """Loads a block's weights from a TF1 checkpoint.

    Args:
        block: a Keras layer or torch module with ``load_tf1_weights``.
        path: TF1 checkpoint prefix or directory.
        scope: the block's full scope in the checkpoint (e.g. ``"Tacotron_model/inference/encoder_LSTM"``);
            a trailing ``/`` is optional.
        strict: as in ``load_tf1_weights``.
        use_ema: take ``<var>/ExponentialMovingAverage`` shadows instead of the raw weights where they exist
            (shadows are never passed to the block as variables of their own).
        allow_nonfinite: load NaN/inf values with a warning instead of raising.

    Returns:
        the block's load report.

    Raises:
        CheckpointError, NonFiniteWeightsError: as :func:`read_tf1_checkpoint`.
        ValueError: no variable under ``scope``; the block's own strict check.
    """
    weights = read_tf1_weights(path, scope, use_ema=use_ema, allow_nonfinite=allow_nonfinite)
    if not weights:
        raise ValueError(f"checkpoint {os.fspath(path)!r} holds no variable under scope {scope.rstrip('/')!r}")
    return block.load_tf1_weights(weights, strict=strict)


def read_tf1_weights(path: str, scope: str, use_ema: bool = False, require_ema: bool = False, *,
                     allow_nonfinite: bool = False) -> dict[str, np.ndarray]:
    """The model variables under ``scope`` (names relative to it), EMA shadows never listed as variables of their own.

    Only these variables are read (and checksum-verified); they must be floating point (float16/bfloat16/float64
    cast to float32 with a ``CheckpointDtypeWarning``).

    Args:
        path: TF1 checkpoint prefix or directory.
        scope: e.g. ``"Tacotron_model/inference"``; a trailing ``/`` is optional.
        use_ema: take ``<var>/ExponentialMovingAverage`` shadows instead of the raw weights where they exist (also
            shadows an optimizer wrote under a doubled scope, ``Tacotron_model/Tacotron_model/inference/...``).
        require_ema: with ``use_ema``, raise ``ValueError`` when no shadow of these variables exists.
        allow_nonfinite: return NaN/inf values with a ``NonFiniteWeightsWarning`` instead of raising.

    Raises:
        CheckpointError, NonFiniteWeightsError: as :func:`read_tf1_checkpoint`; also a non-floating variable.
    """
    suffix = "/ExponentialMovingAverage"
    pre = _norm_prefix(scope)
    reader = _reader(path)
    names = [n for n in sorted(reader.shapes()) if not is_optimizer_variable(n)]
    wanted = {n[len(pre):]: n for n in names if n.startswith(pre) and not n.endswith(suffix)}
    if use_ema:
        shadows = {}
        for n in names:
            if n.endswith(suffix) and pre in n:
                base = n[: -len(suffix)]
                shadows[base[base.rindex(pre) + len(pre):]] = n
        shadows = {k: v for k, v in shadows.items() if k in wanted}
        if require_ema and not shadows:
            raise ValueError(f"use_ema=True but checkpoint {os.fspath(path)!r} holds no "
                             "'<variable>/ExponentialMovingAverage' shadow of the variables under "
                             f"{scope.rstrip('/')!r}.")
        wanted.update(shadows)
    return reader.read(wanted, allow_nonfinite=allow_nonfinite, float_only=True)
