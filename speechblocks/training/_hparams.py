"""Reading the training hparams by their original names (a preset name, a mapping or an hparams object)."""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..tacotron2_hparams import TACOTRON2_PRESETS, Tacotron2HParams

_MISSING = object()


def lookup(hparams, name: str, default=_MISSING):
    """The value of one original hparam; ``ValueError`` naming it when it is missing and has no default."""
    if isinstance(hparams, str):
        if hparams not in TACOTRON2_PRESETS:
            raise ValueError(f"training: `hparams` must be one of {sorted(TACOTRON2_PRESETS)}, a mapping or an "
                             f"hparams object; got {hparams!r}.")
        hparams = TACOTRON2_PRESETS[hparams]
    if isinstance(hparams, Tacotron2HParams):
        hparams = hparams.to_dict()
    if isinstance(hparams, Mapping):
        value = hparams.get(name, _MISSING)
    else:
        value = getattr(hparams, name, _MISSING)
    if value is _MISSING:
        if default is not _MISSING:
            return default
        raise ValueError(f"training: hparam `{name}` is missing (see tacotron2_hparams('rtvc') for its meaning).")
    return value


def get_int(hparams, name: str, minimum: int = 1, default=_MISSING) -> int:
    value = lookup(hparams, name, default)
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value.__index__()) < minimum:
        raise ValueError(f"training: hparam `{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value.__index__())


def get_float(hparams, name: str, low: float = -math.inf, low_open: bool = False, default=_MISSING) -> float:
    value = lookup(hparams, name, default)
    ok = not isinstance(value, (bool, str)) and hasattr(value, "__float__")
    number = float(value) if ok else math.nan
    if not (math.isfinite(number) and (number > low if low_open else number >= low)):
        bracket = "(" if low_open else "["
        raise ValueError(f"training: hparam `{name}` must be a finite number in {bracket}{low}, inf); got {value!r}.")
    return number


def get_bool(hparams, name: str, default=_MISSING) -> bool:
    value = lookup(hparams, name, default)
    if type(value).__name__ == "bool_":
        value = bool(value)
    if not isinstance(value, bool):
        raise ValueError(f"training: hparam `{name}` must be True or False; got {value!r}.")
    return value
