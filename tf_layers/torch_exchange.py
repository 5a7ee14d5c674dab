"""Torch state-dict exchange for the Keras twins of the torch-native modules.

``SpeakerEncoder``, ``TAC``, ``GaussianEmbedding``, ``ContrastiveLoss`` and ``GumbelVectorQuantizer`` expose
``torch_state_dict()`` and an all-or-nothing ``load_torch_state_dict(state_dict, strict=True)`` with the
upstream keys and torch layouts (docs/ARCHITECTURE.md, rules). Two helpers serve them: :class:`TorchStateMixin`
(variables exchanged through layout functions, possibly several torch keys per variable, e.g. an LSTM's two biases)
and :func:`load_torch_entries` (one key per variable, optional transpose). Both raise one
:class:`TorchStateDictError` listing every problem and assign nothing then. Never imports torch: torch
tensors are recognised by their ``detach`` method.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import NamedTuple

import keras
import numpy as np

from speechblocks.state_dict import StateDictError, array_kind, state_dict_problems

__all__ = ["TorchStateDictError", "check_torch_state_dict", "to_numpy", "IncompatibleKeys", "TorchStateEntry",
           "load_torch_entries", "TorchLoadReport", "TorchExchange", "TorchStateMixin"]


class TorchStateDictError(StateDictError):
    """A torch state dict does not fit a layer; ``problems`` lists every problem (nothing was assigned)."""

    def __init__(self, layer: str, problems: list[str]):
        self.layer = layer
        super().__init__(layer, problems, "torch state dict")


def check_torch_state_dict(layer: str, expected: Mapping[str, tuple[int, ...]], arrays: Mapping[str, np.ndarray],
                           strict: bool):
    """``(missing, unexpected)``, or one :class:`TorchStateDictError` listing every problem (keys, shapes, a
    non-floating value for a floating variable)."""
    problems, missing, unexpected = state_dict_problems({k: (tuple(s), "f") for k, s in expected.items()},
                                                        {k: array_kind(v) for k, v in arrays.items()}, strict)
    if problems:
        raise TorchStateDictError(layer, problems)
    return missing, unexpected


class IncompatibleKeys(NamedTuple):
    """What a non-strict ``load_torch_state_dict`` skipped, as torch's ``load_state_dict`` reports it."""

    missing_keys: list
    unexpected_keys: list


class TorchStateEntry:
    """A Keras variable exposed under a torch key; ``transpose`` for Dense kernels (torch ``(out, in)``)."""

    def __init__(self, variable, transpose: bool = False):
        self.variable = variable
        self.transpose = transpose

    def shape(self) -> tuple[int, ...]:
        shape = tuple(int(d) for d in self.variable.shape)
        return shape[::-1] if self.transpose else shape

    def value(self) -> np.ndarray:
        v = np.asarray(self.variable.numpy())
        return np.ascontiguousarray(v.T) if self.transpose else v

    def assign(self, value: np.ndarray) -> None:
        v = value.T if self.transpose else value
        self.variable.assign(np.asarray(v, dtype=np.dtype(self.variable.dtype)))


def load_torch_entries(layer: str, entries: Mapping[str, TorchStateEntry], state_dict: Mapping, strict: bool):
    """All-or-nothing assignment of ``state_dict`` (numpy arrays or torch tensors) to ``entries``.

    Returns :class:`IncompatibleKeys`; raises :class:`TorchStateDictError` listing every problem.
    """
    values = {str(k): to_numpy(v) for k, v in dict(state_dict).items()}
    missing, unexpected = check_torch_state_dict(layer, {k: e.shape() for k, e in entries.items()}, values, strict)
    for k, e in entries.items():
        if k in values:
            e.assign(values[k])
    return IncompatibleKeys(missing, unexpected)


@dataclasses.dataclass(frozen=True)
class TorchLoadReport:
    """What ``load_torch_state_dict`` did: keys ``loaded``, ``missing`` and ``unexpected``."""

    loaded: tuple
    missing: tuple
    unexpected: tuple


@dataclasses.dataclass
class TorchExchange:
    """One Keras variable and the torch keys it is exchanged with.

    Args:
        variable: the Keras variable.
        keys: torch state-dict keys (usually one; an LSTM bias takes ``bias_ih`` and ``bias_hh``).
        shapes: torch shapes of those keys.
        to_torch: Keras value (numpy) -> tuple of torch-layout arrays, one per key.
        from_torch: tuple of torch-layout arrays -> Keras value.
    """

    variable: object
    keys: tuple
    shapes: tuple
    to_torch: Callable = lambda v: (v,)  # noqa: E731
    from_torch: Callable = lambda parts: parts[0]  # noqa: E731


def to_numpy(value):
    """A torch tensor (recognised by ``detach``, without importing torch) or array-like as numpy; what does not
    convert (e.g. a bfloat16 tensor) is returned as is, for the checks to name it."""
    try:
        if hasattr(value, "detach"):
            return value.detach().cpu().numpy()
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError):
        return value


class TorchStateMixin:
    """Torch state-dict exchange for a Keras layer.

    Implement ``_torch_exchanges() -> list[TorchExchange]`` (the layer built) and
    ``_build_from_torch_state(state)`` (build an unbuilt layer from the weight shapes). You get
    ``torch_state_dict()`` and all-or-nothing ``load_torch_state_dict(state_dict, strict=True)``.
    """

    def torch_state_dict(self) -> dict[str, np.ndarray]:
        """The weights as a torch state dict: ``{key: numpy array in torch layout}`` (the variables' dtype)."""
        if not self.built:
            raise ValueError(f"{type(self).__name__}: build the layer (call it once) before torch_state_dict().")
        out = {}
        for ex in self._torch_exchanges():
            parts = ex.to_torch(np.asarray(keras.ops.convert_to_numpy(ex.variable)))
            for key, part in zip(ex.keys, parts):
                out[key] = np.ascontiguousarray(part)
        return out

    def load_torch_state_dict(self, state_dict, strict: bool = True) -> TorchLoadReport:
        """Loads a torch state dict (numpy arrays or torch tensors) into the layer.

        All or nothing: with ``strict``, every expected key must be present with the torch shape and no
        unknown key may appear; any problem raises one :class:`TorchStateDictError` (a ``ValueError``) that
        lists every problem, and nothing is assigned. Without ``strict``, missing and unknown keys are
        reported, wrong shapes still raise. An unbuilt layer builds itself from the weight shapes.

        Args:
            state_dict: ``{key: array}`` with the torch module's keys and layouts.
            strict: require exactly the expected keys.

        Returns:
            a :class:`TorchLoadReport`.
        """
        arrays = {str(k): to_numpy(v) for k, v in dict(state_dict).items()}
        name = type(self).__name__
        if not self.built:
            try:
                self._build_from_torch_state(arrays)
            except (KeyError, IndexError, ValueError, TypeError) as e:
                raise TorchStateDictError(name, [f"cannot build the layer from the state dict: {e}"]) from e
        exchanges = self._torch_exchanges()
        shapes = {k: shape for ex in exchanges for k, shape in zip(ex.keys, ex.shapes)}
        missing, unexpected = check_torch_state_dict(name, shapes, arrays, strict)
        assign, loaded = [], []
        for ex in exchanges:
            if all(k in arrays for k in ex.keys):
                assign.append((ex.variable, ex.from_torch(tuple(arrays[k].astype(np.float64) for k in ex.keys))))
                loaded.extend(ex.keys)
        for variable, value in assign:
            variable.assign(np.asarray(value, dtype=variable.dtype).reshape(tuple(variable.shape)))
        return TorchLoadReport(tuple(loaded), tuple(missing), tuple(unexpected))
