"""Layout converters for :func:`speechblocks.parity.weights.move_weights` (numpy only, no framework import).

A converter turns a *group* of source weights into a group of destination weights. Two kinds:

* **one to one** (``leaves=None``: ``"identity"``, ``"dense_kernel"``, ``"conv1d"``): the group holds one source
  and one destination weight;
* **grouped** (``"lstm_tf1"``, ``"gru"``, ``"batch_norm"``): the group holds a layer's weights on each side,
  named by their *leaves* (the names relative to the group's common prefix, torch RNN suffixes such as ``_l0`` or
  ``_l1_reverse`` taken off), e.g. Keras ``{kernel, recurrent_kernel, bias}`` -> torch
  ``{weight_ih, weight_hh, bias_ih, bias_hh}``. ``leaves`` lists, per family (``"keras"`` -- which covers TF1
  checkpoints, whose layouts are Keras's -- and ``"torch"``), the destination leaves the converter knows, which is
  how a rule's replacement naming a destination *layer* finds that layer's weights.

Every converter takes a :class:`WeightGroup` and returns ``{destination leaf: numpy array}``; it may add lines to
``group.warnings``. Register your own with :func:`register_converter`.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping

import numpy as np

from speechblocks.layouts import DEFAULT_FORGET_BIAS, keras_lstm_to_tf1, tf1_to_keras_lstm

__all__ = ["WeightGroup", "Converter", "register_converter", "get_converter", "converter_names", "lstm_converter",
           "family"]

#: the families of weight layouts: Keras and TF1 checkpoints share theirs (``(in, out)`` kernels, ...)
FAMILIES = ("keras", "torch")


def family(framework: str) -> str:
    """``"torch"`` for torch, ``"keras"`` for Keras and TF1 checkpoints (same layouts)."""
    return "torch" if framework == "torch" else "keras"


@dataclasses.dataclass
class WeightGroup:
    """One converter call: a group of source weights and the destination weights they become.

    Args:
        label: ``"<source names> -> <destination names>"``, for messages.
        src: ``{source leaf: array}`` in the source's layout.
        src_framework: ``"keras"``, ``"torch"`` or ``"tf1"`` (a dict of arrays: TF1 / Keras layouts).
        dst_shapes: ``{destination leaf: shape}`` of the destination weights to fill.
        dst_framework: ``"keras"`` or ``"torch"``.
        src_owner: the Keras layer or torch module holding the source weights (``None`` for a dict).
        dst_owner: the Keras layer or torch module holding the destination weights.
        warnings: lines the converter adds for the report.
    """

    label: str
    src: dict[str, np.ndarray]
    src_framework: str
    dst_shapes: dict[str, tuple[int, ...]]
    dst_framework: str
    src_owner: object = None
    dst_owner: object = None
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def src_family(self) -> str:
        return family(self.src_framework)

    @property
    def dst_family(self) -> str:
        return family(self.dst_framework)

    def only(self) -> tuple[np.ndarray, str]:
        """``(the one source array, the one destination leaf)`` of a one-to-one group."""
        if len(self.src) != 1 or len(self.dst_shapes) != 1:
            raise ValueError(f"{self.label}: a one-to-one converter needs one source and one destination weight; "
                             f"got {len(self.src)} and {len(self.dst_shapes)}.")
        return next(iter(self.src.values())), next(iter(self.dst_shapes))

    def refuse(self, why: str) -> ValueError:
        return ValueError(f"{self.label}: {why}")


@dataclasses.dataclass(frozen=True)
class Converter:
    """A registered converter.

    Args:
        name: its registry name.
        fn: ``fn(group: WeightGroup) -> {destination leaf: array}``.
        leaves: ``None`` for a one-to-one converter, else ``{"keras": leaves, "torch": leaves}`` -- the leaves a
            layer of that family may hold (how a destination layer's weights are found).
    """

    name: str
    fn: Callable[[WeightGroup], dict[str, np.ndarray]]
    leaves: Mapping[str, frozenset[str]] | None = None

    @property
    def grouped(self) -> bool:
        return self.leaves is not None


_REGISTRY: dict[str, Converter] = {}


def register_converter(name: str, fn: Callable[[WeightGroup], dict[str, np.ndarray]], *,
                       leaves: Mapping[str, object] | None = None, replace: bool = False) -> Converter:
    """Registers a layout converter under ``name`` (then usable as the third item of a rule).

    Args:
        name: the name rules use.
        fn: ``fn(group: WeightGroup) -> {destination leaf: array}``; one-to-one converters read
            ``array, leaf = group.only()``. Raise ``group.refuse("why")`` for a layout it cannot convert.
        leaves: for a grouped converter, ``{"keras": [...], "torch": [...]}``: the leaves a layer of each family holds
            (e.g. ``{"keras": ["gamma", "beta"], "torch": ["weight", "bias"]}``); ``None`` for one to one.
        replace: allow replacing an existing name.

    Returns:
        the :class:`Converter`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"argument `name` must be a non-empty string; got {name!r}.")
    if not callable(fn):
        raise TypeError(f"argument `fn` must be callable; got {type(fn).__name__}.")
    if name in _REGISTRY and not replace:
        raise ValueError(f"argument `name`: converter {name!r} is already registered (pass replace=True).")
    if leaves is not None:
        if set(leaves) != set(FAMILIES):
            raise ValueError(f"argument `leaves` must have the keys {list(FAMILIES)}; got {sorted(leaves)}.")
        leaves = {k: frozenset(v) for k, v in leaves.items()}
    conv = Converter(name, fn, leaves)
    _REGISTRY[name] = conv
    return conv


def get_converter(name) -> Converter:
    """The converter registered as ``name`` (a :class:`Converter` is returned as is)."""
    if isinstance(name, Converter):
        return name
    if name not in _REGISTRY:
        raise ValueError(f"unknown converter {name!r}; registered: {', '.join(sorted(_REGISTRY))}.")
    return _REGISTRY[name]


def converter_names() -> list[str]:
    """The registered converter names."""
    return sorted(_REGISTRY)


# -- one to one ----------------------------------------------------------------------------------------
def _identity(group: WeightGroup) -> dict[str, np.ndarray]:
    a, leaf = group.only()
    return {leaf: np.array(a, copy=True)}


def _dense_kernel(group: WeightGroup) -> dict[str, np.ndarray]:
    """Keras / TF1 dense kernel ``(in, out)`` <-> torch ``Linear.weight`` ``(out, in)``."""
    a, leaf = group.only()
    if a.ndim != 2:
        raise group.refuse(f"converter 'dense_kernel' needs a 2-D kernel; got shape {tuple(a.shape)} "
                           f"(a conv1d kernel is 3-D: use 'conv1d').")
    return {leaf: np.ascontiguousarray(a.T if group.src_family != group.dst_family else a)}


def _conv1d(group: WeightGroup) -> dict[str, np.ndarray]:
    """Keras / TF1 conv1d kernel ``(k, in, out)`` <-> torch ``Conv1d.weight`` ``(out, in, k)``."""
    a, leaf = group.only()
    if a.ndim != 3:
        raise group.refuse(f"converter 'conv1d' needs a 3-D kernel; got shape {tuple(a.shape)}.")
    same = group.src_family == group.dst_family
    return {leaf: np.ascontiguousarray(a if same else np.transpose(a, (2, 1, 0)))}


# -- LSTM ----------------------------------------------------------------------------------------------
_KERAS_LSTM = ("kernel", "recurrent_kernel", "bias")
_TORCH_RNN = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _leaves_check(group: WeightGroup, allowed, side: str, leaves) -> None:
    extra = sorted(set(leaves) - set(allowed))
    if extra:
        raise group.refuse(f"unexpected {side} weights {extra} for this converter (expected some of "
                           f"{list(allowed)}).")


def _lstm_to_canonical(group: WeightGroup, forget_bias: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source LSTM -> Keras ``(kernel (in, 4u), recurrent_kernel (u, 4u), bias (4u,))``, gates i, f, c, o, the bias
    being all a step adds (TF1's run-time forget bias folded in)."""
    s = group.src
    if group.src_family == "torch":
        _leaves_check(group, _TORCH_RNN, "source", s)
        if "weight_ih" not in s or "weight_hh" not in s:
            raise group.refuse("a torch LSTM needs weight_ih and weight_hh.")
        wi, wh = np.asarray(s["weight_ih"]), np.asarray(s["weight_hh"])
        if wh.shape[0] != 4 * wh.shape[1]:
            raise group.refuse(f"weight_hh has shape {wh.shape}: not an LSTM (4u, u) (proj_size is not supported).")
        b = np.zeros(wi.shape[0], wi.dtype)
        for k in ("bias_ih", "bias_hh"):
            b = b + np.asarray(s[k]) if k in s else b
        return wi.T, wh.T, b  # torch's i, f, g, o is Keras's i, f, c, o
    _leaves_check(group, _KERAS_LSTM, "source", s)
    if "kernel" not in s:
        raise group.refuse("an LSTM needs a kernel.")
    k = np.asarray(s["kernel"])
    if "recurrent_kernel" in s:  # Keras LSTMCell: already the canonical layout
        rk = np.asarray(s["recurrent_kernel"])
        return k, rk, np.asarray(s["bias"]) if "bias" in s else np.zeros(k.shape[1], k.dtype)
    # TF1 LSTMCell / LSTMBlockCell: one kernel (in + u, 4u) over concat([x, h]), gates i, j, f, o
    units = k.shape[1] // 4
    if k.ndim != 2 or k.shape[1] % 4 or k.shape[0] <= units:
        raise group.refuse(f"a TF1 LSTM kernel must be (in + u, 4u); got {k.shape}.")
    bias = np.asarray(s["bias"]) if "bias" in s else np.zeros(4 * units, k.dtype)
    return tf1_to_keras_lstm(k, bias, k.shape[0] - units, forget_bias)


def _convert_lstm(group: WeightGroup, forget_bias: float = DEFAULT_FORGET_BIAS) -> dict[str, np.ndarray]:
    """TF1 ``LSTMCell`` (fused ``kernel (in+u, 4u)``, gates i, j, f, o, run-time ``forget_bias``) or Keras ``LSTM``
    (``kernel``/``recurrent_kernel``, gates i, f, c, o) or torch ``nn.LSTM`` (``weight_ih``/``weight_hh``, gates
    i, f, g, o, two biases) to any other of them.

    The TF1 layout is told from the Keras one by its leaves: ``kernel`` and ``bias`` without ``recurrent_kernel``.
    Going TF1 -> torch/Keras, ``forget_bias`` is added to the forget gate's bias (TF1 adds it at run time, it is not
    stored); the reverse subtracts it. torch gets the whole bias in ``bias_ih`` and zeros in ``bias_hh``.
    """
    wx, wh, b = _lstm_to_canonical(group, forget_bias)
    dst = group.dst_shapes
    if group.dst_family == "torch":
        _leaves_check(group, _TORCH_RNN, "destination", dst)
        out = {"weight_ih": wx.T, "weight_hh": wh.T, "bias_ih": b, "bias_hh": np.zeros_like(b)}
        if not {"bias_ih", "bias_hh"} & set(dst) and np.any(b):
            raise group.refuse("the destination LSTM has no bias (bias=False) but the source's is not zero.")
    else:
        _leaves_check(group, _KERAS_LSTM, "destination", dst)
        if "recurrent_kernel" in dst:
            out = {"kernel": wx, "recurrent_kernel": wh, "bias": b}
        else:  # a Keras layer holding TF1's fused layout (the project's ZoneoutLSTMCell)
            k, tb = keras_lstm_to_tf1(wx, wh, b, forget_bias)
            out = {"kernel": k, "bias": tb}
    return {leaf: np.ascontiguousarray(out[leaf]) for leaf in dst if leaf in out}


def lstm_converter(forget_bias: float = DEFAULT_FORGET_BIAS) -> Callable[[WeightGroup], dict[str, np.ndarray]]:
    """The ``"lstm_tf1"`` conversion with another TF1 ``forget_bias``; register it under a name of your own.

    Args:
        forget_bias: the ``forget_bias`` the TF1 ``LSTMCell`` was built with (TF1's default 1.0).

    Returns:
        a converter function for :func:`register_converter` (with the LSTM ``leaves``).
    """
    return functools.partial(_convert_lstm, forget_bias=float(forget_bias))


# -- GRU -----------------------------------------------------------------------------------------------
_GRU_PERM = (1, 0, 2)  # Keras (z, r, h) <-> torch (r, z, n): its own inverse
_NOT_NN_GRU = ("resets before its candidate matmul while torch nn.GRU (and Keras GRU(reset_after=True)) reset after "
               "it: no weights make them compute the same (use the project's TF1GRUCell).")


def _gate_permute(a: np.ndarray, axis: int) -> np.ndarray:
    blocks = np.split(np.asarray(a), 3, axis=axis)
    return np.concatenate([blocks[k] for k in _GRU_PERM], axis=axis)


def _reset_after(owner) -> bool | None:
    for obj in (owner, getattr(owner, "cell", None)):
        if obj is not None and hasattr(obj, "reset_after"):
            return bool(obj.reset_after)
    return None


def _convert_gru(group: WeightGroup) -> dict[str, np.ndarray]:
    """Keras ``GRU(reset_after=True)`` (``kernel (in, 3u)``, ``recurrent_kernel (u, 3u)``, ``bias (2, 3u)``, gates
    z, r, h) <-> torch ``nn.GRU`` (``weight_ih (3u, in)``, ``weight_hh``, ``bias_ih``, ``bias_hh``, gates r, z, n).

    A Keras ``GRU(reset_after=False)`` and a TF1 ``GRUCell`` reset *before* the recurrent matmul: refused.
    """
    s, dst = group.src, group.dst_shapes
    for side, fam, leaves, owner in (("source", group.src_family, s, group.src_owner),
                                     ("destination", group.dst_family, dst, group.dst_owner)):
        if fam == "keras" and any("/" in leaf or leaf.startswith(("gates", "candidate")) for leaf in leaves):
            raise group.refuse("a TF1 GRUCell " + _NOT_NN_GRU)
        bias_shape = tuple(np.shape(s["bias"])) if side == "source" and "bias" in s else dst.get("bias")
        if fam == "keras" and (_reset_after(owner) is False or (bias_shape is not None and len(bias_shape) == 1)):
            raise group.refuse("a Keras GRU(reset_after=False) " + _NOT_NN_GRU)
        _leaves_check(group, _TORCH_RNN if fam == "torch" else _KERAS_LSTM, side, leaves)
    if group.src_family == "torch":
        wi, wh = np.asarray(s["weight_ih"]), np.asarray(s["weight_hh"])
        zeros = np.zeros(wi.shape[0], wi.dtype)
        k, rk = _gate_permute(wi, 0).T, _gate_permute(wh, 0).T
        b = np.stack([_gate_permute(s.get("bias_ih", zeros), 0), _gate_permute(s.get("bias_hh", zeros), 0)])
    else:
        k, rk = np.asarray(s["kernel"]), np.asarray(s["recurrent_kernel"])
        b = np.asarray(s["bias"]) if "bias" in s else np.zeros((2, k.shape[1]), k.dtype)
    if group.dst_family == "torch":
        out = {"weight_ih": _gate_permute(k, 1).T, "weight_hh": _gate_permute(rk, 1).T,
               "bias_ih": _gate_permute(b[0], 0), "bias_hh": _gate_permute(b[1], 0)}
    else:
        out = {"kernel": k, "recurrent_kernel": rk, "bias": b}
    return {leaf: np.ascontiguousarray(out[leaf]) for leaf in dst if leaf in out}


# -- batch norm ----------------------------------------------------------------------------------------
_BN = {"keras": ("gamma", "beta", "moving_mean", "moving_variance"),
       "torch": ("weight", "bias", "running_mean", "running_var")}


def _bn_attr(owner, fam: str, what: str):
    names = {"keras": {"eps": "epsilon", "momentum": "momentum"}, "torch": {"eps": "eps", "momentum": "momentum"}}
    v = getattr(owner, names[fam][what], None) if owner is not None else None
    return float(v) if isinstance(v, (int, float)) else None


def _convert_batch_norm(group: WeightGroup) -> dict[str, np.ndarray]:
    """Keras / TF1 ``gamma, beta, moving_mean, moving_variance`` <-> torch ``weight, bias, running_mean,
    running_var`` (same layout). A side without scale/offset (``scale=False`` / ``affine=False``) reads as ones /
    zeros. Epsilon and momentum are attributes, not weights: the group warns when both sides show them and they
    differ (Keras momentum ``m`` equals torch momentum ``1 - m``)."""
    src_names, dst_names = _BN[group.src_family], _BN[group.dst_family]
    _leaves_check(group, src_names, "source", group.src)
    _leaves_check(group, dst_names, "destination", group.dst_shapes)
    out = {}
    for leaf, shape in group.dst_shapes.items():
        i = dst_names.index(leaf)
        if src_names[i] in group.src:
            out[leaf] = np.array(group.src[src_names[i]], copy=True)
        elif i < 2:  # a source without scale / offset (scale=False, affine=False): the identity
            out[leaf] = np.full(shape, 1.0 - i, np.float32)
        else:
            raise group.refuse(f"no source for the destination's {leaf} (expected {src_names[i]!r}).")
    for i, name in enumerate(src_names[:2]):
        if name in group.src and dst_names[i] not in group.dst_shapes and np.any(group.src[name] != 1.0 - i):
            group.warnings.append(f"{group.label}: the destination has no {dst_names[i]} (affine=False / "
                                  f"scale=False): the source's {name} is dropped and it is not {1 - i}.")
    se, de = (_bn_attr(group.src_owner, group.src_family, "eps"), _bn_attr(group.dst_owner, group.dst_family, "eps"))
    if se is not None and de is not None and not np.isclose(se, de, rtol=1e-6, atol=0.0):
        group.warnings.append(f"{group.label}: batch norm epsilon differs: source {se:g}, destination {de:g} "
                              "(a module attribute, not a weight: set it on the destination).")
    sm, dm = (_bn_attr(group.src_owner, group.src_family, "momentum"),
              _bn_attr(group.dst_owner, group.dst_family, "momentum"))
    if sm is not None and dm is not None:
        # Keras: moving = moving * m + batch * (1 - m); torch: running = running * (1 - m) + batch * m
        as_keras = (sm if group.src_family == "keras" else 1 - sm, dm if group.dst_family == "keras" else 1 - dm)
        if not np.isclose(*as_keras, rtol=0.0, atol=1e-9):
            group.warnings.append(f"{group.label}: batch norm momentum differs (as Keras's decay: source "
                                  f"{as_keras[0]:g}, destination {as_keras[1]:g}): only training updates differ.")
    return out


_RNN_LEAVES = {"keras": _KERAS_LSTM, "torch": _TORCH_RNN}
register_converter("identity", _identity)
register_converter("dense_kernel", _dense_kernel)
register_converter("conv1d", _conv1d)
register_converter("lstm_tf1", lstm_converter(), leaves=_RNN_LEAVES)
register_converter("gru", _convert_gru, leaves=_RNN_LEAVES)
register_converter("batch_norm", _convert_batch_norm, leaves=_BN)
