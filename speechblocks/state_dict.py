"""State dicts and the files holding them: the checks both frameworks share (numpy and the standard library only).

* :func:`state_dict_problems` and :class:`StateDictError`: the all-or-nothing check of a state dict against what a
  module (torch ``load_state_dict``) or a Keras twin (``load_torch_state_dict``) expects: every key, its shape and
  its kind of number, every problem listed in one error, nothing assigned.
* :func:`verify_torch_zip`: ``torch.load`` does not check the CRC-32 of the members of a ``torch.save`` zip file
  (a flipped byte in a tensor loads as a different number); this reads every member and checks it.
* :func:`torch_load_message`: the one-line message for a torch file that ``torch.load(weights_only=True)`` refused.
* :func:`one_line`: a list of problems as one line (the file readers' messages).
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping

import numpy as np

from .errors import InputError

__all__ = ["StateDictError", "state_dict_problems", "array_kind", "verify_torch_zip", "torch_load_message",
           "one_line", "ZIP_MAGIC"]

ZIP_MAGIC = b"PK\x03\x04"

_KIND_NAMES = {"f": "floating-point", "i": "integer", "u": "integer", "b": "bool", "c": "complex"}


class StateDictError(InputError, RuntimeError):
    """A state dict does not fit a module or layer; ``problems`` lists every problem (nothing was assigned).

    A ``ValueError`` (the project's rule for bad input) and a ``RuntimeError`` (what torch's ``load_state_dict``
    raises, so code written for torch keeps catching it).
    """

    def __init__(self, owner: str, problems: list[str], what: str = "state dict"):
        self.owner = owner
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{owner}: cannot load the {what} ({len(self.problems)} problem(s)); nothing was "
                         f"assigned:\n{lines}")


def array_kind(value) -> tuple[tuple[int, ...] | None, str]:
    """``(shape, kind)`` of a numpy array (or anything ``np.asarray`` takes without copying objects): ``kind`` is
    numpy's dtype kind (``"f"``, ``"i"``, ``"b"``, ...); ``shape`` is ``None`` for what is no numeric array."""
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 -- anything that is no array is reported, never raised
        return None, type(value).__name__
    if a.dtype.kind not in _KIND_NAMES:
        return None, f"{type(value).__name__} of dtype {a.dtype}"
    return tuple(int(d) for d in a.shape), a.dtype.kind


def _fits(expected_kind: str, kind: str) -> bool:
    if expected_kind == "f":
        return kind == "f"
    if expected_kind in "iub":
        return kind in "iub"
    return kind == expected_kind


def state_dict_problems(expected: Mapping[str, tuple[tuple[int, ...], str]],
                        given: Mapping[str, tuple[tuple[int, ...] | None, str]],
                        strict: bool) -> tuple[list[str], list[str], list[str]]:
    """Every problem of a state dict, before anything is assigned.

    Args:
        expected: ``{key: (shape, kind)}`` the module holds (kind: numpy dtype kind, ``"f"`` for floating point).
        given: ``{key: (shape or None, kind)}`` of the state dict (``None``: not a numeric tensor; kind then
            names what it is).
        strict: missing and unexpected keys are problems (else only reported).

    Returns:
        ``(problems, missing, unexpected)``: shape and kind mismatches are problems even when not ``strict``
        (as in torch's ``load_state_dict``); floating point loads into floating point of any precision.
    """
    missing = [k for k in expected if k not in given]
    unexpected = sorted(k for k in given if k not in expected)
    problems = []
    if strict:
        problems += [f"missing key {k!r} (expected shape {list(expected[k][0])})" for k in missing]
        problems += [f"unexpected key {k!r}" + ("" if given[k][0] is None else f" (shape {list(given[k][0])})")
                     for k in unexpected]
    for k, (shape, kind) in expected.items():
        if k not in given:
            continue
        got_shape, got_kind = given[k]
        if got_shape is None:
            problems.append(f"key {k!r} holds a {got_kind}, not a tensor of shape {list(shape)}")
        elif tuple(got_shape) != tuple(shape):
            problems.append(f"key {k!r} has shape {list(got_shape)}, expected {list(shape)}")
        elif not _fits(kind, got_kind):
            problems.append(f"key {k!r} has a {_KIND_NAMES.get(got_kind, got_kind)} dtype, expected a "
                            f"{_KIND_NAMES.get(kind, kind)} tensor")
    return problems, missing, unexpected


def one_line(problems: Iterable[str], limit: int = 4) -> str:
    """``problems`` joined on one line (``"; "``), the first ``limit`` of them and how many more there are."""
    items = [" ".join(str(p).split()) for p in problems]
    text = "; ".join(items[:limit])
    return text + (f"; ... ({len(items) - limit} more)" if len(items) > limit else "")


def verify_torch_zip(path: str, what: str) -> None:
    """Checks every member of a ``torch.save`` zip file against its CRC-32 (a file in torch's legacy, non-zip
    format has no checksum and passes unchecked).

    Raises:
        ValueError: the zip structure is damaged or a member does not match its checksum; one line naming the file.
    """
    with open(path, "rb") as f:
        if f.read(4) != ZIP_MAGIC:
            return
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
            RuntimeError) as e:
        raise ValueError(f"{what} {path!r} is truncated or damaged: its zip structure is broken "
                         f"({type(e).__name__})") from None
    if bad is not None:
        raise ValueError(f"{what} {path!r} is damaged: member {bad!r} does not match its CRC-32 checksum")


def torch_load_message(path: str, error: BaseException, what: str) -> str:
    """One line for a file ``torch.load(weights_only=True)`` could not read: a pickle of other objects than
    tensors and plain data (possibly code that would run on load) is named as such, anything else as damage."""
    name = type(error).__name__
    if name == "UnpicklingError" or "weights_only" in str(error).split("\n", 1)[0].lower():
        return (f"{what} {os.fspath(path)!r} holds a pickle that is not tensors and plain data (objects, possibly code "
                "that would run on load, or a damaged pickle); refused: torch files are read with "
                "torch.load(weights_only=True) only")
    return f"{what} {os.fspath(path)!r} is not a readable torch file: truncated or damaged ({name})"
