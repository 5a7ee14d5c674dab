"""The one guarded way this library reads TF1 checkpoints: validate first (:mod:`.tf1_checkpoint_file`), then let
``tf.train.load_checkpoint`` read (TensorFlow is imported inside the methods, never at module level).

Policies every reading path shares (``tf_layers.checkpoint``, ``Tacotron2.from_tf1_checkpoint`` in both frameworks,
``speechblocks inspect|migrate|synthesize``):

* **corrupted, truncated, hostile files**: a :class:`~.tf1_checkpoint_file.CheckpointError` (a ``ValueError``), one
  line naming the file, the tensor when there is one, and the problem -- before TensorFlow touches the bytes;
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
    """A validated TF1 checkpoint and TensorFlow's reader of it.

    Args:
        path: checkpoint prefix, its ``.index`` / ``.data-*`` file, or a directory (its ``checkpoint`` state file).

    Raises:
        CheckpointNotFoundError (a ``FileNotFoundError`` and a ``ValueError``): no checkpoint there.
        CheckpointError: an index or data shard that is truncated, corrupted or not a checkpoint's.
    """

    def __init__(self, path):
        self.files: CheckpointFiles = open_checkpoint_files(path)
        self._tf_reader = None
        self._warned: set[str] = set()

    @property
    def prefix(self) -> str:
        return self.files.prefix

    def _error(self, problem: str) -> CheckpointError:
        return self.files.error(problem)

    @property
    def tf_reader(self):
        """``tf.train.load_checkpoint(prefix)``, created once, after the validation."""
        if self._tf_reader is None:
            import tensorflow as tf

            try:
                reader = tf.train.load_checkpoint(self.prefix)
                shapes = reader.get_variable_to_shape_map()
            except Exception as e:  # an OpError the validation did not foresee: still one line
                raise self._error(f"TensorFlow cannot read it ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''})") from None
            ours = {n: e.shape for n, e in self.files.entries.items() if not e.sliced and not n.startswith("\x00")}
            theirs = {n: tuple(int(d) for d in s) for n, s in shapes.items()}
            if {n: s for n, s in ours.items() if n in theirs} != theirs:
                raise self._error("its index lists other tensors than TensorFlow reads from it (a bug of the "
                                  "validation: please report it)")
            self._tf_reader = reader
        return self._tf_reader

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """``{variable name: shape}`` as TensorFlow lists them."""
        return {k: tuple(int(d) for d in v) for k, v in self.tf_reader.get_variable_to_shape_map().items()}

    def dtypes(self) -> dict[str, np.dtype]:
        """``{variable name: numpy dtype}`` (``object`` for strings and other non-numpy dtypes)."""
        return {k: np.dtype(v.as_numpy_dtype) if v.is_numpy_compatible else np.dtype(object)
                for k, v in self.tf_reader.get_variable_to_dtype_map().items()}

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
        self.check(mapping.values(), allow_nonfinite)
        reader = self.tf_reader
        out, cast, overflow = {}, [], []
        for key, name in mapping.items():
            try:
                value = np.asarray(reader.get_tensor(name))
            except Exception as e:
                raise self._error(f"TensorFlow cannot read variable {name!r} ({type(e).__name__})") from None
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

