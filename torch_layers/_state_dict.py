"""Safe torch files and all-or-nothing state dicts (the shared checks live in :mod:`speechblocks.state_dict`).

* :func:`safe_torch_load`: the one way the library opens a torch file: CRC-32 of every zip member checked, then
  ``torch.load(weights_only=True)``; any failure is one ``ValueError`` line naming the file.
* :func:`read_state_dict`: an upstream checkpoint's state dict (bare, or under ``state_dict`` / ``model_state`` /
  ``model``), optionally the keys under a prefix; for the modules without a file reader of their own.
* :func:`check_module_state_dict` / :class:`CheckedLoadStateDict`: ``load_state_dict`` that checks every key,
  shape and kind of number first and assigns nothing when anything is wrong (torch's own copies every tensor
  that fits before it raises).
"""
from __future__ import annotations

import os
from collections.abc import Mapping

import torch
from torch import nn

from speechblocks.state_dict import StateDictError, state_dict_problems, torch_load_message, verify_torch_zip

__all__ = ["safe_torch_load", "read_state_dict", "check_module_state_dict", "CheckedLoadStateDict",
           "StateDictError"]

#: where upstream checkpoints keep the state dict (Lightning / NeMo / asteroid, RTVC, fairseq)
_CONTAINER_KEYS = ("state_dict", "model_state", "model")


def safe_torch_load(path: str | os.PathLike, map_location="cpu", what: str = "torch file"):
    """``torch.load(path, weights_only=True)`` after checking the zip members' CRC-32.

    Args:
        path: a ``torch.save`` file (zip, or torch's legacy format, which has no checksum).
        map_location: as ``torch.load``.
        what: how messages name the file (e.g. ``"migrated torch file"``).

    Returns:
        the loaded object: tensors, numbers, strings and plain containers only.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a directory, a damaged file, or a pickle of anything else than tensors and plain data (one
            line naming the file; nothing of the pickle ran).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is a directory, not a file")
    verify_torch_zip(path, what)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 -- UnpicklingError, RuntimeError, EOFError, ...: all one clear line
        raise ValueError(torch_load_message(path, e, what)) from None


def _is_state_dict(obj) -> bool:
    return isinstance(obj, Mapping) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())


def read_state_dict(path: str | os.PathLike, prefix: str | None = None, map_location="cpu") -> dict[str, torch.Tensor]:
    """Reads an upstream checkpoint's state dict safely, for ``module.load_state_dict``.

    The file is read with :func:`safe_torch_load` (``weights_only=True``: a pickle that would run code is refused
    before anything of it runs). The state dict is the file itself when it maps names to tensors, else the one
    under ``state_dict`` (Lightning / NeMo ``model_weights.ckpt`` / asteroid), ``model_state`` (RTVC) or
    ``model`` (fairseq).

    Args:
        path: the checkpoint file.
        prefix: keep only the keys under this prefix and strip it (e.g. ``"masker.tac."`` for a TAC inside a
            separation model; a missing trailing ``.`` is added).
        map_location: as ``torch.load``.

    Returns:
        ``{key: tensor}``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a damaged or unsafe file, no state dict in it, or no key under ``prefix``.

    Example:
        >>> tac = TAC(64, 128)  # doctest: +SKIP
        >>> tac.load_state_dict(read_state_dict("separator.pth", prefix="tac"))  # doctest: +SKIP
    """
    path = os.fspath(path)
    data = safe_torch_load(path, map_location, "checkpoint")
    state = data if _is_state_dict(data) else None
    if state is None and isinstance(data, Mapping):
        state = next((data[k] for k in _CONTAINER_KEYS if _is_state_dict(data.get(k))), None)
    if state is None:
        raise ValueError(f"checkpoint {path!r} holds no state dict (expected a mapping of names to tensors, at top "
                         f"level or under {', '.join(repr(k) for k in _CONTAINER_KEYS)})")
    if prefix:
        pre = prefix if prefix.endswith(".") else prefix + "."
        state = {k[len(pre):]: v for k, v in state.items() if k.startswith(pre)}
        if not state:
            raise ValueError(f"checkpoint {path!r} holds no key under the prefix {pre!r}")
    return dict(state)


def _tensor_kind(value) -> tuple[tuple[int, ...] | None, str]:
    if not isinstance(value, torch.Tensor):
        return None, type(value).__name__
    if value.is_floating_point():
        kind = "f"
    elif value.is_complex():
        kind = "c"
    elif value.dtype == torch.bool:
        kind = "b"
    else:
        kind = "i"
    return tuple(int(d) for d in value.shape), kind


def check_module_state_dict(module: nn.Module, state_dict, strict: bool = True, owner: str | None = None):
    """Checks ``state_dict`` against ``module`` (keys, shapes, kinds of number) without assigning anything.

    Returns:
        ``(missing, unexpected)`` keys.

    Raises:
        StateDictError: listing every problem (a ``ValueError`` and a ``RuntimeError``).
    """
    owner = owner or type(module).__name__
    if not isinstance(state_dict, Mapping):
        raise StateDictError(owner, [f"expected a mapping of names to tensors, got {type(state_dict).__name__}"])
    expected = {k: _tensor_kind(v) for k, v in module.state_dict(keep_vars=True).items()}
    given = {str(k): _tensor_kind(v) for k, v in state_dict.items()}
    problems, missing, unexpected = state_dict_problems(expected, given, strict)
    if problems:
        raise StateDictError(owner, problems)
    return missing, unexpected


class CheckedLoadStateDict:
    """Mixin (before ``nn.Module``): ``load_state_dict`` all or nothing.

    Every key, shape and kind of number is checked first; any problem raises one :class:`StateDictError` listing
    them all (a ``ValueError``, and a ``RuntimeError`` as torch's) and the module keeps its weights. Floating point
    of another precision is converted, as torch does.
    """

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        check_module_state_dict(self, state_dict, strict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)
