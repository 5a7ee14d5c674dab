"""The two sides of a comparison: which framework a callable is, its inputs in that framework's tensors, its
outputs flattened to named arrays, a float64 copy, and what the report must say about its randomness. Each framework
is imported only when a callable of that framework is passed."""
from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Optional

import numpy as np

__all__ = ["Side", "KERAS", "TORCH", "TF1", "FUNCTION", "flatten_outputs", "iter_blocks", "tolerance"]

KERAS, TORCH, TF1, FUNCTION = "Keras", "torch", "TF1", "function"
#: input keys that carry injected randomness (the project's blocks: ``noise_masks``, ``dropout_masks``, ...)
_MASK_WORDS = ("mask", "noise")


def _kind(obj: Any, arg: str) -> str:
    """``"Keras"``, ``"torch"``, ``"TF1"`` or ``"function"`` (read from the class hierarchy: no framework import)."""
    from .tf1_graph import TF1Graph

    if isinstance(obj, TF1Graph):
        return TF1
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if module.startswith("keras.") and cls.__name__ == "Layer":
            return KERAS
        if module == "torch.nn.modules.module" and cls.__name__ == "Module":
            return TORCH
    if not callable(obj):
        raise TypeError(f"compare: argument `{arg}` must be a Keras model or layer, a torch module or a TF1Graph; "
                        f"got a {type(obj).__name__}, which is not callable.")
    return FUNCTION


def _has_masks(inputs: Any) -> bool:
    return isinstance(inputs, Mapping) and any(
        any(w in str(k).lower() for w in _MASK_WORDS) and v is not None for k, v in inputs.items())


def _convert(value: Any, to_tensor: Callable[[np.ndarray], Any], float_dtype) -> Any:
    """Numpy arrays (at any depth of dicts, lists and tuples) to tensors; floating arrays cast to ``float_dtype``;
    numpy scalars to Python numbers; anything else as given."""
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating):
            value = value.astype(float_dtype, copy=False)
        return to_tensor(np.ascontiguousarray(value))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: _convert(v, to_tensor, float_dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_convert(v, to_tensor, float_dtype) for v in value)
    return value


def flatten_outputs(out: Any, to_numpy: Callable[[Any], Optional[np.ndarray]], prefix: str = "") -> dict:
    """Outputs as ``{name: array}``: dict keys, tuple/list indices ``0``, ``1``, nested names joined by ``.``; a
    single tensor is ``output``; ``None`` and non-array leaves are left out."""
    flat: dict = {}

    def walk(x, name):
        if isinstance(x, Mapping):
            for k, v in x.items():
                walk(v, f"{name}.{k}" if name else str(k))
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{name}.{i}" if name else str(i))
        elif x is not None:
            arr = to_numpy(x)
            if arr is not None:
                flat[name or "output"] = arr

    walk(out, prefix)
    return flat


def _keras_numpy(x) -> Optional[np.ndarray]:
    import keras

    if isinstance(x, (bool, int, float, str)):
        return None
    try:
        return np.asarray(keras.ops.convert_to_numpy(x))
    except (TypeError, ValueError):
        return None


def _torch_numpy(x) -> Optional[np.ndarray]:
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    return None


def _plain_numpy(x) -> Optional[np.ndarray]:
    if isinstance(x, (np.ndarray, np.generic, float, int)) and not isinstance(x, bool):
        return np.asarray(x)
    return None


class Side:
    """One side of a comparison: the callable, its framework, the model that runs (a float64 copy when asked) and
    what the report must say about it.

    Args:
        obj: the Keras model/layer, torch module, :class:`~speechblocks.parity.TF1Graph` or function.
        arg: the argument's name (``"a"`` or ``"b"``), for messages.
    """

    def __init__(self, obj: Any, arg: str):
        self.obj = obj
        self.arg = arg
        self.kind = _kind(obj, arg)
        self.model = obj
        self.notes: list[str] = []
        self.float64 = False

    @property
    def label(self) -> str:
        """``a (Keras)``: how notes name the side."""
        return f"`{self.arg}` ({self.kind})"

    @property
    def name(self) -> str:
        """The block name of a row: a project block's class, a Keras functional model's name, the graph's name."""
        obj = self.obj
        if self.kind == TF1:
            return obj.name
        if self.kind == KERAS and type(obj).__name__ in ("Functional", "Sequential"):
            return obj.name
        return getattr(obj, "__name__", None) or type(obj).__name__

    # -- inputs --------------------------------------------------------------------------------------------------
    def convert(self, inputs: Any) -> Any:
        """The inputs in this side's tensors (floating arrays in float32, or float64 when it runs in float64)."""
        float_dtype = np.float64 if self.float64 else np.float32
        if self.kind == KERAS:
            import keras

            return _convert(inputs, keras.ops.convert_to_tensor, float_dtype)
        if self.kind == TORCH:
            import torch

            return _convert(inputs, torch.from_numpy, float_dtype)
        return _convert(inputs, lambda a: a, float_dtype)

    # -- running -------------------------------------------------------------------------------------------------
    def invoke(self, model: Any, converted: Any) -> Any:
        """One call of ``model`` on converted inputs (keywords for a dict); torch without gradients."""
        if self.kind == TORCH:
            import torch

            with torch.no_grad():
                return model(**converted) if isinstance(converted, Mapping) else model(converted)
        return model(**converted) if isinstance(converted, Mapping) else model(converted)

    def to_numpy(self, x) -> Optional[np.ndarray]:
        return {KERAS: _keras_numpy, TORCH: _torch_numpy}.get(self.kind, _plain_numpy)(x)

    def run(self, inputs: Any) -> dict:
        """``{output name: array}`` of one call on ``inputs`` (numpy); a side meant to run in float64 whose floating
        outputs are not float64 is noted."""
        out = flatten_outputs(self.invoke(self.model, self.convert(inputs)), self.to_numpy)
        narrow = sorted(k for k, v in out.items() if np.issubdtype(v.dtype, np.floating) and v.dtype != np.float64)
        note = f"{self.label} ran in float64 but returned {narrow} in lower precision"
        if self.float64 and narrow and note not in self.notes:
            self.notes.append(note)
        return out

    # -- float64 and randomness ----------------------------------------------------------------------------------
    def prepare(self, inputs: Any, float64: bool) -> None:
        """Selects the model that runs: with ``float64`` a float64 copy where the framework allows (torch: a deep
        copy ``.double()``; Keras: a clone at dtype float64 with the weights copied), else a note says that this
        side ran in its own precision. Adds the randomness notes."""
        if float64:
            if self.kind == TORCH:
                try:
                    self.model = copy.deepcopy(self.obj).double()
                    self.float64 = True
                except (RuntimeError, TypeError) as e:  # a module that cannot be copied or cast
                    self.notes.append(f"{self.label} cannot run in float64 ({_first_line(e)}): it ran in float32")
            elif self.kind == KERAS:
                self.model, why = _keras_float64(self, inputs)
                self.float64 = why is None
                if why:
                    self.notes.append(f"{self.label} cannot run in float64 ({why}): it ran in float32")
            elif self.kind == TF1:
                self.notes.append(f"{self.label} runs the graph in its own dtype (float32): not in float64")
            else:
                self.float64 = True
                self.notes.append(f"{self.label} got float64 inputs; its own precision is its business")
        self.notes.extend(self._randomness_notes(inputs))

    def _randomness_notes(self, inputs: Any) -> list[str]:
        notes = []
        masks = _has_masks(inputs)
        advice = ("draw the masks once and give both sides the same (the project's blocks take `noise_masks` / "
                  "`dropout_masks`)")
        if self.kind == TORCH and getattr(self.obj, "training", False):
            notes.append(f"{self.label} ran in train() mode" + (
                "" if masks else f" without injected masks: its dropout/zoneout draws and batch statistics are its "
                                 f"own; {advice}"))
        if self.kind == KERAS and isinstance(inputs, Mapping) and inputs.get("training") is True and not masks:
            notes.append(f"{self.label} ran with training=True without injected masks: its dropout/zoneout draws "
                         f"and batch statistics are its own; {advice}")
        if self.kind in (KERAS, TORCH) and not masks:
            for path, block in iter_blocks(self.obj, self.kind):
                rate = getattr(block, "drop_rate", 0.0)
                always_on = getattr(block, "dropout", "always") != "training"  # Tacotron-1's drops in training only
                if type(block).__name__ == "Prenet" and isinstance(rate, (int, float)) and rate > 0 and always_on:
                    notes.append(f"{self.label}: the pre-net {path or type(block).__name__!r} drops units at "
                                 f"inference too (the original's always-on dropout, rate {rate:g}) and no masks were "
                                 f"given; {advice}, or build it with drop_rate=0")
        return notes


def iter_blocks(obj: Any, kind: str):
    """``(path, block)`` of ``obj`` and every sub-block: Keras layer names joined by ``/`` (the model itself is
    ``""``), torch module paths joined by ``.``."""
    if kind == TORCH:
        yield from obj.named_modules()
        return
    if kind != KERAS:
        return

    def walk(layer, path):
        yield path, layer
        seen = set()
        for sub in layer._flatten_layers(include_self=False, recursive=False):
            if type(sub).__name__ == "InputLayer" or id(sub) in seen:
                continue
            seen.add(id(sub))
            yield from walk(sub, f"{path}/{sub.name}" if path else sub.name)

    yield from walk(obj, "")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:200]


def _keras_float64(side: Side, inputs: Any) -> tuple[Any, Optional[str]]:
    """A float64 clone of a Keras model/layer with its weights, or ``(the model, why not)``."""
    import keras

    model = side.obj

    def at_float64(layer):
        return layer.__class__.from_config({**layer.get_config(), "dtype": "float64"})

    side.float64 = True  # the clone is built (if it must be) on float64 inputs
    try:
        if type(model).__name__ in ("Functional", "Sequential"):
            clone = keras.models.clone_model(model, clone_function=at_float64)
        else:
            clone = at_float64(model)
        if len(clone.weights) != len(model.weights):
            side.invoke(clone, side.convert(inputs))
        clone.set_weights(model.get_weights())
    except (TypeError, ValueError, NotImplementedError, AttributeError, KeyError) as e:
        side.float64 = False
        return model, _first_line(e)
    finally:
        side.float64 = False
    return clone, None


def tolerance(atol: float, rtol: float, reference: np.ndarray) -> float:
    """``atol + rtol * max |reference|`` over its finite entries."""
    if rtol == 0:
        return float(atol)
    ref = np.asarray(reference, dtype=np.float64)
    finite = ref[np.isfinite(ref)]
    return float(atol + rtol * (float(np.max(np.abs(finite))) if finite.size else 0.0))
