"""The one guarded way this library reads TF1 checkpoints: validate first (:mod:`.tf1_checkpoint_file`), then
decode the verified bytes in numpy (no TensorFlow: a torch-only install inspects, migrates and synthesizes).

Policies every reading path shares (``tf_layers.checkpoint``, ``Tacotron2.from_tf1_checkpoint`` in both frameworks,
``speechblocks inspect|migrate|synthesize``):

* **corrupted, truncated, hostile files**: a :class:`~.tf1_checkpoint_file.CheckpointError` (a ``ValueError``), one
  line naming the file, the tensor when there is one, and the problem -- before any byte is decoded;
* **NaN / inf values** in the variables read: an **error** by default
  (:class:`~.tf1_checkpoint_file.NonFiniteWeightsError`: a model holding them only produces NaN; they usually mean
  training diverged before the save), a :class:`~.tf1_checkpoint_file.NonFiniteWeightsWarning` with
  ``allow_nonfinite=True`` (``--allow-nonfinite``);
* **float16, bfloat16, float64 variables**: cast to float32 (the models' dtype) with one
  :class:`~.tf1_checkpoint_file.CheckpointDtypeWarning` naming them; float16/bfloat16 cast exactly, float64 rounds
  (relative error <= 2**-24) and a value beyond float32's range is refused as non-finite. Other dtypes (int, bool,
  string) are returned as they are, or refused with ``float_only=True`` (the weights of a model).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from .tf1_checkpoint_file import (
    FLOAT_DTYPES,
    CheckpointDtypeWarning,
    CheckpointError,
    CheckpointFiles,
    NonFiniteWeightsError,
    NonFiniteWeightsWarning,
    decoded_dtype,
    open_checkpoint_files,
)

__all__ = ["TF1CheckpointReader", "ALLOW_NONFINITE_HELP"]

#: the sentence the errors and the command line's --help share
ALLOW_NONFINITE_HELP = ("variables holding NaN or inf are refused (exit 2); with this option they are loaded and "
                        "a warning names them")
_CAST = {2: "float64", 19: "float16", 14: "bfloat16"}



def _listing(names: list[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


class TF1CheckpointReader:
    """A validated TF1 checkpoint, read in numpy.

    Args:
        path: checkpoint prefix, its ``.index`` / ``.data-*`` file, or a directory (its ``checkpoint`` state file).

    Raises:
        CheckpointNotFoundError (a ``FileNotFoundError`` and a ``ValueError``): no checkpoint there.
        CheckpointError: an index or data shard that is truncated, corrupted or not a checkpoint's.
    """

    def __init__(self, path):
        self.files: CheckpointFiles = open_checkpoint_files(path)
        self._warned: set[str] = set()

    @property
    def prefix(self) -> str:
        return self.files.prefix

    def _error(self, problem: str) -> CheckpointError:
        return self.files.error(problem)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """``{variable name: shape}`` of every tensor (the index's, as ``tf.train.load_checkpoint`` lists them)."""
        return {n: tuple(e.shape) for n, e in self.files.entries.items() if not n.startswith("\x00")}

    def dtypes(self) -> dict[str, np.dtype]:
        """``{variable name: numpy dtype}`` (``object`` for strings and other non-numpy dtypes; bfloat16 as
        ``float32``, how :meth:`read` returns it)."""
        return {n: decoded_dtype(e.dtype) for n, e in self.files.entries.items() if not n.startswith("\x00")}

    def check(self, names: Iterable[str], allow_nonfinite: bool = False) -> None:
        """Verifies the checksums of ``names``' bytes and applies the NaN/inf policy (module docstring).

        Raises:
            CheckpointError: a tensor's bytes fail their checksum.
            NonFiniteWeightsError: NaN/inf values, unless ``allow_nonfinite``.
        """
        counts = self.files.verify(list(names))
        bad = sorted(n for n, c in counts.items() if c and n not in self._warned)
        if not bad:
            return
        what = [f"{n!r} ({counts[n]} of {int(np.prod(self.files.entries[n].shape))} values)" for n in bad]
        problem = f"{len(bad)} variable(s) hold NaN or inf: {_listing(what)}"
        if not allow_nonfinite:
            raise NonFiniteWeightsError(f"TF1 checkpoint {self.prefix!r}: {problem}; refused (allow_nonfinite=True, "
                                        "or --allow-nonfinite on the command line, loads them anyway)")
        self._warned.update(bad)
        warnings.warn(f"TF1 checkpoint {self.prefix!r}: {problem}; loaded anyway (allow_nonfinite)",
                      NonFiniteWeightsWarning, stacklevel=3)

    def read(self, names: Mapping[str, str] | Iterable[str], *, allow_nonfinite: bool = False,
             float_only: bool = False) -> dict[str, np.ndarray]:
        """Reads tensors after verifying their bytes.

        Args:
            names: ``{key: checkpoint name}`` (the result is keyed by ``key``) or checkpoint names.
            allow_nonfinite: warn instead of raising on NaN/inf values.
            float_only: refuse variables of a non-floating dtype (the weights of a model).

        Returns:
            ``{key: array}``; float16, bfloat16 and float64 variables cast to float32 (one warning names them).

        Raises:
            CheckpointError: a failed checksum, a non-floating weight (``float_only``), a float64 value beyond
                float32's range, or an error of TensorFlow's reader (one line).
            NonFiniteWeightsError: NaN/inf values, unless ``allow_nonfinite``.
        """
        mapping = dict(names) if isinstance(names, Mapping) else {n: n for n in names}
        entries = self.files.entries
        if float_only:
            bad = sorted(n for n in mapping.values() if n in entries and entries[n].dtype not in FLOAT_DTYPES)
            if bad:
                raise self._error(f"variable {bad[0]!r} has dtype {entries[bad[0]].dtype_name}; model weights must "
                                  f"be floating point ({len(bad)} such variable(s))")
        # each tensor's bytes are read once: read_array checks their CRC and counts NaN/inf; the policy then
        # applies to those counts (check() reads nothing again) before anything is returned
        arrays = {key: self.files.read_array(name) for key, name in mapping.items()}
        self.check(mapping.values(), allow_nonfinite)
        out, cast, overflow = {}, [], []
        for key, name in mapping.items():
            value = arrays.pop(key)
            code = entries[name].dtype
            if code in _CAST:
                wide = value
                with np.errstate(over="ignore"):  # an overflow is reported below, as an error
                    value = value.astype(np.float32)
                cast.append(f"{name!r} ({_CAST[code]})")
                if code == 2 and not np.array_equal(np.isfinite(value), np.isfinite(wide)):
                    overflow.append(name)
            out[key] = value
        if overflow:
            raise self._error(f"variable {overflow[0]!r} (float64) holds values beyond float32's range (+-3.4e38): "
                              "they would become inf")
        if cast:
            warnings.warn(f"TF1 checkpoint {self.prefix!r}: {len(cast)} variable(s) cast to float32: {_listing(cast)}",
                          CheckpointDtypeWarning, stacklevel=2)
        return out

