"""Moving weights between a Keras model and a torch model (or from a TF1 checkpoint): :func:`move_weights`.

Three ways to say which weight goes where:

* **the project's blocks** (objects with ``tf1_weights()`` / ``load_tf1_weights()`` in both frameworks), with
  ``rules=None``: the TF1 variable names are the exchange format, ``dst.load_tf1_weights(src.tf1_weights())``
  (a dict source -- a TF1 checkpoint read by ``speechblocks.tf1_checkpoint.read_tf1_checkpoint`` -- too);
* **rules**: a dict ``{source name: destination name}`` (exact names, plain copies, or ``(name, converter)``
  values), or an ordered list of ``(regex, replacement)`` / ``(regex, replacement, converter)`` applied to every
  source name (``re.fullmatch``, first match wins, ``\\1`` groups in the replacement). A one-to-one converter
  (``"identity"``, ``"dense_kernel"``, ``"conv1d"``) maps one weight to the weight the replacement names. A grouped
  converter (``"lstm_tf1"``, ``"gru"``, ``"batch_norm"``) takes every source weight its rule maps to the same
  replacement as one group (a layer's weights), and the replacement names the destination *layer*: its path
  (``"lstm"``: the weights under it that the converter knows; when several layers qualify, e.g. a bidirectional
  torch LSTM, the error lists them), or a template with ``*`` for the leaf (``"lstm.*_l0_reverse"``,
  ``"bi/forward_lstm/lstm_cell/*"``), or one destination weight's exact name;
* **by default** (``rules=None``, not project blocks): Keras layers and torch modules of equal names (the Keras
  layer's weight path prefix, ``/`` read as ``.``, equals the torch module path; a Sequential's own name is
  dropped), the converter chosen from their types: Dense/Linear, Conv1D/Conv1d, BatchNormalization/BatchNorm*d,
  GRU/GRU, LSTM/LSTM, Bidirectional(GRU|LSTM)/GRU|LSTM(bidirectional=True), Embedding/Embedding.

Names are Keras weight paths (``w.path``, e.g. ``conv/kernel``, ``lstm/lstm_cell/kernel``), torch state-dict keys
(``conv.weight``; ``num_batches_tracked`` buffers are counters, not weights, and are left out) or a dict's keys.
Nothing is written unless every conversion and shape check has passed (and, with ``strict``, nothing is unmatched).

This module imports no framework: an object's framework is told from its classes, and torch is imported only to
assign into a torch module that was passed in (so it is loaded already).
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from ._converters import Converter, WeightGroup, family, get_converter, register_converter

__all__ = ["move_weights", "WeightReport", "WeightMatchError", "WeightGroup", "Converter", "register_converter"]

_SEP = re.compile(r"[/.]")
_RNN_SUFFIX = re.compile(r"^(.*?)(_l\d+(?:_reverse)?)$")
_LAST = re.compile(r"^(.*[/.])?([^/.]+)$")  # (everything up to the last separator, the last component)


# -- the report ----------------------------------------------------------------------------------------
@dataclasses.dataclass
class WeightReport:
    """What :func:`move_weights` did.

    Attributes:
        moved: ``(source name, destination name, converter)`` per destination weight written; a grouped
            converter's source is the group, ``prefix/{a,b,c}``.
        unmatched_src: source weights that went nowhere.
        unmatched_dst: destination weights nothing was written to.
        warnings: things to check (e.g. batch norm epsilons that differ, rules that matched nothing).
        direction: e.g. ``"keras -> torch"``.
    """

    moved: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    unmatched_src: list[str] = dataclasses.field(default_factory=list)
    unmatched_dst: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    direction: str = ""

    @property
    def ok(self) -> bool:
        """True when no weight is unmatched on either side."""
        return not self.unmatched_src and not self.unmatched_dst

    def table(self) -> str:
        """The report as readable lines: one row per weight moved, then the unmatched and the warnings."""
        head = (f"move_weights {self.direction}: {len(self.moved)} moved, {len(self.unmatched_src)} unmatched in src, "
                f"{len(self.unmatched_dst)} unmatched in dst, {len(self.warnings)} warning(s)")
        lines = [head]
        rows: list[tuple[str, list[str], str]] = []  # a group's destination weights on one row
        for s, d, c in self.moved:
            if rows and rows[-1][0] == s and rows[-1][2] == c and "{" in s:
                rows[-1][1].append(d)
            else:
                rows.append((s, [d], c))
        rows = [(s, _brace(d), c) for s, d, c in rows]
        if rows:
            w0 = max(len("src"), *(len(r[0]) for r in rows))
            w1 = max(len("dst"), *(len(r[1]) for r in rows))
            lines.append(f"  {'src':<{w0}}  {'dst':<{w1}}  converter")
            lines += [f"  {s:<{w0}}  {d:<{w1}}  {c}" for s, d, c in rows]
        for title, items in (("unmatched in src", self.unmatched_src), ("unmatched in dst", self.unmatched_dst),
                             ("warnings", self.warnings)):
            if items:
                lines.append(f"{title}:")
                lines += [f"  - {x}" for x in items]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


class WeightMatchError(ValueError):
    """Raised by a strict :func:`move_weights` when weights are unmatched; ``problems`` lists them and ``report``
    holds what would have been done. Nothing was written."""

    def __init__(self, report: WeightReport):
        self.report = report
        self.problems = ([f"src {n!r}: no destination" for n in report.unmatched_src]
                         + [f"dst {n!r}: no source" for n in report.unmatched_dst])
        lines = "\n".join(f"  - {p}" for p in self.problems + [f"warning: {w}" for w in report.warnings])
        super().__init__(f"move_weights: {len(self.problems)} weight(s) unmatched ({len(report.unmatched_src)} in "
                         f"`src`, {len(report.unmatched_dst)} in `dst`); nothing was written:\n{lines}")


# -- the two sides -------------------------------------------------------------------------------------
def _framework(obj) -> str | None:
    """``"keras"`` for a Keras 3 layer or model, ``"torch"`` for a torch module, else ``None``; no import."""
    for cls in type(obj).__mro__:
        mod = getattr(cls, "__module__", "") or ""
        if cls.__name__ == "Module" and mod == "torch.nn.modules.module":
            return "torch"
        if cls.__name__ == "Layer" and mod.startswith("keras."):
            return "keras"
    return None


def _to_numpy(v) -> np.ndarray:
    if hasattr(v, "detach"):  # a torch tensor
        return v.detach().cpu().numpy()
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):  # a Keras variable / TF tensor
        return np.asarray(v.numpy())
    return np.asarray(v)


class _Side:
    """The weights of one argument: names in order, values (numpy), shapes, owners, assignment."""

    framework: str
    names: list[str]

    def __init__(self, obj, arg: str):
        self.obj, self.arg = obj, arg

    def value(self, name: str) -> np.ndarray:
        raise NotImplementedError

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self._tensors[name].shape)

    def owner(self, name: str):
        return None

    def _check(self) -> None:
        if not self.names:
            raise ValueError(f"argument `{self.arg}` holds no weights (a Keras layer not built yet? call it once on "
                             "an input).")


class _KerasSide(_Side):
    framework = "keras"

    def __init__(self, obj, arg: str):
        super().__init__(obj, arg)
        self._tensors: dict[str, object] = {}
        for w in obj.weights:
            if w.path in self._tensors:
                raise ValueError(f"argument `{arg}`: two Keras weights share the path {w.path!r} (give the layers "
                                 "distinct names).")
            self._tensors[w.path] = w
        self.names = list(self._tensors)
        self._owners: dict[int, object] = {}
        for layer in self.layers():  # parents first: the innermost layer holding a weight wins
            for w in layer.weights:
                self._owners[id(w)] = layer
        self._check()

    def layers(self) -> list:
        flatten = getattr(self.obj, "_flatten_layers", None)
        return list(flatten(include_self=True, recursive=True)) if flatten is not None else [self.obj]

    def value(self, name: str) -> np.ndarray:
        return np.asarray(self._tensors[name].numpy())

    def owner(self, name: str):
        return self._owners.get(id(self._tensors[name]))

    def assign(self, name: str, value: np.ndarray) -> None:
        var = self._tensors[name]
        try:
            value = np.asarray(value, dtype=np.dtype(str(var.dtype)))
        except TypeError:  # a dtype numpy does not know (bfloat16): Keras casts
            pass
        var.assign(value)


class _TorchSide(_Side):
    framework = "torch"

    def __init__(self, obj, arg: str):
        super().__init__(obj, arg)
        state = obj.state_dict(keep_vars=True)
        self._tensors = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
        self.names = list(self._tensors)
        self._check()

    def value(self, name: str) -> np.ndarray:
        return self._tensors[name].detach().cpu().numpy().copy()

    def owner(self, name: str):
        path = name.rpartition(".")[0]
        try:
            return self.obj.get_submodule(path) if path else self.obj
        except AttributeError:
            return None

    def assign_all(self, values: Mapping[str, np.ndarray]) -> None:
        import torch  # loaded already: a torch module was passed in

        with torch.no_grad():
            for name, value in values.items():
                t = self._tensors[name]
                t.copy_(torch.as_tensor(np.ascontiguousarray(value)).to(device=t.device, dtype=t.dtype))


class _DictSide(_Side):
    def __init__(self, obj: Mapping, arg: str):
        super().__init__(obj, arg)
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise TypeError(f"argument `{arg}`: a dict of weights needs string keys; got {bad[0]!r}.")
        self._tensors = dict(obj)
        self.names = list(obj)
        # a torch state dict (tensors) keeps torch's layouts; numpy arrays are read as TF1 / Keras layouts
        self.framework = "torch" if any(hasattr(v, "detach") for v in obj.values()) else "tf1"
        self._check()

    def value(self, name: str) -> np.ndarray:
        return _to_numpy(self._tensors[name])

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in np.shape(self._tensors[name]))


def _side(obj, arg: str, allow_dict: bool) -> _Side:
    fw = _framework(obj)
    if fw == "keras":
        return _KerasSide(obj, arg)
    if fw == "torch":
        return _TorchSide(obj, arg)
    if allow_dict and isinstance(obj, Mapping):
        return _DictSide(obj, arg)
    what = "a Keras layer or model, a torch module" + (" or a dict {name: array}" if allow_dict else "")
    raise TypeError(f"argument `{arg}` must be {what}; got {type(obj).__name__}.")


# -- groups of weights ---------------------------------------------------------------------------------
@dataclasses.dataclass
class _Job:
    """Some source weights, the destination weights they become, and the converter."""

    converter: Converter
    src: list[str]
    dst: list[str]
    where: str  # "rule 2" / "layer 'conv'": for messages


def _leaves(names: Sequence[str], framework: str, conv: Converter, where: str) -> tuple[dict[str, str], str]:
    """``({leaf: name}, torch RNN suffix)``: each name relative to the group's common prefix."""
    parts = [_SEP.split(n) for n in names]
    common = _common_length(parts)
    out, suffixes = {}, set()
    for name, p in zip(names, parts):
        leaf = "/".join(p[common:])
        if family(framework) == "torch" and conv.grouped:
            m = _RNN_SUFFIX.match(leaf)
            if m and m.group(1) in conv.leaves["torch"]:
                leaf = m.group(1)
                suffixes.add(m.group(2))
        if leaf in out:
            raise ValueError(f"{where}: {out[leaf]!r} and {name!r} fall in one group as the same weight {leaf!r} "
                             "(give each layer its own destination).")
        out[leaf] = name
    if len(suffixes) > 1:
        raise ValueError(f"{where}: one group holds weights of several torch RNN layers ({', '.join(sorted(suffixes))}"
                         "): give each its own destination.")
    return out, suffixes.pop() if suffixes else ""


def _common_length(parts: Sequence[Sequence[str]]) -> int:
    """How many leading components all ``parts`` share, leaving each at least its last one."""
    n = min(len(p) for p in parts) - 1
    return next((i for i in range(n) if len({p[i] for p in parts}) > 1), n)


def _brace(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    prefix = os.path.commonprefix(list(names))
    cut = max(prefix.rfind("/"), prefix.rfind(".")) + 1
    return f"{prefix[:cut]}{{{','.join(n[cut:] for n in names)}}}"


def _plan(jobs: list[_Job], src: _Side, dst: _Side, report: WeightReport) -> dict[str, np.ndarray]:
    """Converts every job and checks every shape; returns ``{destination name: array}``. Writes nothing."""
    values: dict[str, np.ndarray] = {}
    writers: dict[str, str] = {}
    for job in jobs:
        conv = job.converter
        src_leaves, _ = _leaves(job.src, src.framework, conv, job.where)
        dst_leaves, _ = _leaves(job.dst, dst.framework, conv, job.where)
        label = f"{_brace(job.src)} -> {_brace(job.dst)}"
        group = WeightGroup(label=label, src={leaf: src.value(n) for leaf, n in src_leaves.items()},
                            src_framework=src.framework,
                            dst_shapes={leaf: dst.shape(n) for leaf, n in dst_leaves.items()},
                            dst_framework=dst.framework, src_owner=src.owner(job.src[0]),
                            dst_owner=dst.owner(job.dst[0]))
        out = conv.fn(group)
        report.warnings += group.warnings
        missing = [dst_leaves[leaf] for leaf in dst_leaves if leaf not in out]
        if missing:
            raise ValueError(f"{job.where}: converter {conv.name!r} gave no value for {missing} ({label}).")
        for leaf, name in dst_leaves.items():
            a = np.asarray(out[leaf])
            if tuple(a.shape) != dst.shape(name):
                raise ValueError(f"`src` {_brace(job.src)!r} -> `dst` {name!r} (converter {conv.name!r}): converted "
                                 f"shape {tuple(a.shape)} does not fit the destination's {dst.shape(name)}.")
            if name in writers:
                raise ValueError(f"`dst` {name!r} is written twice: by {writers[name]} and by {job.where}.")
            writers[name] = job.where
            values[name] = a
            report.moved.append((_brace(job.src), name, conv.name))
    return values


# -- rules ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Rule:
    pattern: re.Pattern
    replacement: str
    converter: Converter
    literal: bool
    where: str

    def destination(self, name: str) -> str | None:
        m = self.pattern.fullmatch(name)
        if m is None:
            return None
        return self.replacement if self.literal else m.expand(self.replacement)


def _parse_rules(rules) -> list[_Rule]:
    if isinstance(rules, Mapping):
        items, literal = [(re.escape(k), *((v,) if isinstance(v, str) else tuple(v))) for k, v in rules.items()
                          if isinstance(k, str)], True
        if len(items) != len(rules):
            raise TypeError("argument `rules`: a dict's keys must be source names (strings).")
    elif isinstance(rules, Sequence) and not isinstance(rules, str):
        items, literal = list(rules), False
    else:
        raise TypeError("argument `rules` must be a dict {source name: destination name} or a list of (regex, "
                        f"replacement[, converter]) tuples; got {type(rules).__name__}.")
    out = []
    for i, item in enumerate(items):
        where = f"rule {i} ({item[0] if literal else item!r})" if isinstance(item, tuple) else f"rule {i}"
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3) or not all(isinstance(x, str)
                                                                                      for x in item[:2]):
            raise TypeError(f"argument `rules`: {where} must be (regex, replacement) or (regex, replacement, "
                            f"converter) with string regex and replacement; got {item!r}.")
        try:
            pattern = re.compile(item[0])
        except re.error as e:
            raise ValueError(f"argument `rules`: {where}: bad regex {item[0]!r}: {e}.") from None
        conv = get_converter(item[2] if len(item) == 3 else "identity")
        out.append(_Rule(pattern, item[1], conv, literal, where))
    if not out:
        raise ValueError("argument `rules` is empty.")
    return out


def _rule_destinations(rule: _Rule, repl: str, dst: _Side, src_suffix: str) -> list[str]:
    """The destination names a rule's replacement names for one group (``[]``: none exists)."""
    if repl in dst._tensors:
        return [repl]
    conv = rule.converter
    if not conv.grouped:
        return []
    known = conv.leaves[family(dst.framework)]
    if "*" in repl:
        wanted = {repl.replace("*", leaf) for leaf in known}
        return [n for n in dst.names if n in wanted]  # in the destination's order
    sets: dict[tuple[str, str], list[str]] = defaultdict(list)
    for n in dst.names:
        if not (n.startswith(repl) and n[len(repl):len(repl) + 1] in ("/", ".")):
            continue
        head, leaf = _LAST.match(n).groups()
        suffix = ""
        m = _RNN_SUFFIX.match(leaf) if dst.framework == "torch" else None
        if m and m.group(1) in known:
            leaf, suffix = m.groups()
        if leaf in known:
            sets[(head, suffix)].append(n)
    if len(sets) > 1 and src_suffix:
        sets = {k: v for k, v in sets.items() if k[1] == src_suffix} or sets
    if len(sets) > 1:
        options = ", ".join(f"{h}*{s}" for h, s in sorted(sets))
        raise ValueError(f"argument `rules`: {rule.where}: destination {repl!r} holds {len(sets)} weight sets for "
                         f"{conv.name!r} ({options}): name one, '*' standing for the leaf.")
    return next(iter(sets.values()), [])


def _rule_jobs(rules, src: _Side, dst: _Side, report: WeightReport) -> list[_Job]:
    parsed = _parse_rules(rules)
    groups: dict[tuple[int, str], list[str]] = defaultdict(list)
    for name in src.names:
        for i, rule in enumerate(parsed):
            repl = rule.destination(name)
            if repl is not None:
                groups[(i, repl)].append(name)
                break
    if not groups:
        shown = ", ".join(repr(n) for n in src.names[:3]) + (", ..." if len(src.names) > 3 else "")
        raise ValueError(f"argument `rules`: no rule matches any of the {len(src.names)} source weights ({shown}).")
    used = {i for i, _ in groups}
    report.warnings += [f"{r.where} matched no source weight" for i, r in enumerate(parsed) if i not in used]
    jobs = []
    for (i, repl), names in groups.items():
        rule = parsed[i]
        if not rule.converter.grouped and len(names) > 1:
            raise ValueError(f"argument `rules`: {rule.where} maps {names[0]!r} and {names[1]!r} to one destination "
                             f"{repl!r}; converter {rule.converter.name!r} moves one weight to one.")
        _, suffix = _leaves(names, src.framework, rule.converter, rule.where)
        targets = _rule_destinations(rule, repl, dst, suffix)
        if not targets:
            report.warnings.append(f"{rule.where}: destination {repl!r} (for {_brace(names)}) is not in `dst`")
            continue
        jobs.append(_Job(rule.converter, names, targets, rule.where))
    return jobs


# -- default matching by names and types -----------------------------------------------------------------
_KERAS_KINDS = {"Dense": "dense", "Conv1D": "conv1d", "BatchNormalization": "batch_norm", "GRU": "gru",
                "LSTM": "lstm", "Embedding": "embedding", "Bidirectional": "bidirectional"}
_TORCH_KINDS = {"Linear": "dense", "Conv1d": "conv1d", "BatchNorm1d": "batch_norm", "BatchNorm2d": "batch_norm",
                "BatchNorm3d": "batch_norm", "GRU": "gru", "LSTM": "lstm", "Embedding": "embedding"}
_RNN_CONVERTER = {"gru": "gru", "lstm": "lstm_tf1"}
# one-to-one pairs of a simple layer: (Keras leaf, torch leaf, converter)
_SIMPLE = {"dense": [("kernel", "weight", "dense_kernel"), ("bias", "bias", "identity")],
           "conv1d": [("kernel", "weight", "conv1d"), ("bias", "bias", "identity")],
           "embedding": [("embeddings", "weight", "identity")]}


def _kind(obj, table: Mapping[str, str], prefix: str) -> str | None:
    for cls in type(obj).__mro__:
        if cls.__name__ in table and (getattr(cls, "__module__", "") or "").startswith(prefix):
            return table[cls.__name__]
    return None


def _keras_units(side: _KerasSide) -> dict[str, tuple[str, object, list[str]]]:
    """``{key: (kind, layer, weight paths)}`` of the Keras layers the default matching knows."""
    ids = {id(w): w.path for w in side.obj.weights}
    top = getattr(side.obj, "name", "")
    units, seen = {}, set()
    for layer in side.layers():
        kind = _kind(layer, _KERAS_KINDS, "keras.")
        paths = [ids[id(w)] for w in layer.weights if id(w) in ids]
        if kind is None or not paths or seen & set(paths):
            continue
        seen.update(paths)
        parts = [p.split("/") for p in paths]
        key_parts = parts[0][:_common_length(parts)]
        cell = getattr(layer, "cell", None)
        if kind in ("gru", "lstm") and key_parts and key_parts[-1] == getattr(cell, "name", None):
            key_parts = key_parts[:-1]  # the cell's own scope: gru/gru_cell/kernel -> gru
        if len(key_parts) > 1 and key_parts[0] == top and side.obj is not layer:
            key_parts = key_parts[1:]  # a Sequential's paths start with its own name
        units[".".join(key_parts)] = (kind, layer, paths)
    return units


def _torch_units(side: _TorchSide) -> dict[str, tuple[str, object, list[str]]]:
    units = {}
    for path, module in side.obj.named_modules():
        kind = _kind(module, _TORCH_KINDS, "torch.")
        if kind is not None:
            prefix = f"{path}." if path else ""
            names = [prefix + k for k, _ in module.named_parameters(recurse=False)]
            names += [prefix + k for k, _ in module.named_buffers(recurse=False) if k != "num_batches_tracked"]
            units[path] = (kind, module, [n for n in names if n in side._tensors])
    return units


def _pair_jobs(key: str, k_unit, t_unit, keras_first: bool, report: WeightReport) -> list[_Job]:
    """The jobs moving one Keras layer's weights to the torch module of the same name (or back)."""
    (kk, klayer, kpaths), (tk, tmod, tnames) = k_unit, t_unit
    where = f"layer {key!r}"
    inner = _kind(getattr(klayer, "forward_layer", None), _KERAS_KINDS, "keras.") if kk == "bidirectional" else kk
    if inner != tk:
        report.warnings.append(f"{where}: Keras {type(klayer).__name__} and torch {type(tmod).__name__} have no "
                               "converter between them")
        return []
    jobs = []

    def job(conv: str, kn: list[str], tn: list[str]) -> None:
        if kn and tn:
            src, dst = (kn, tn) if keras_first else (tn, kn)
            jobs.append(_Job(get_converter(conv), src, dst, where))

    if tk in _SIMPLE:
        for kleaf, tleaf, conv in _SIMPLE[tk]:
            job(conv, [p for p in kpaths if p.rpartition("/")[2] == kleaf],
                [n for n in tnames if n.rpartition(".")[2] == tleaf])
    elif tk == "batch_norm":
        job("batch_norm", kpaths, tnames)
    else:
        layers = int(getattr(tmod, "num_layers", 1))
        bidirectional = kk == "bidirectional"
        if layers != 1 or bool(getattr(tmod, "bidirectional", False)) != bidirectional:
            report.warnings.append(f"{where}: torch {type(tmod).__name__}(num_layers={layers}, bidirectional="
                                   f"{getattr(tmod, 'bidirectional', False)}) is not one Keras "
                                   f"{type(klayer).__name__} layer")
            return []
        ids = {id(w) for w in klayer.forward_layer.weights} if bidirectional else None
        directions = [("_l0", [p for p in kpaths if ids is None or id(_weight(klayer, p)) in ids])]
        if bidirectional:
            directions.append(("_l0_reverse", [p for p in kpaths if id(_weight(klayer, p)) not in ids]))
        for suffix, kn in directions:
            job(_RNN_CONVERTER[tk], kn, [n for n in tnames if n.endswith(suffix)
                                         and not (suffix == "_l0" and n.endswith("_reverse"))])
    return jobs


def _weight(layer, path: str):
    return next(w for w in layer.weights if w.path == path)


def _default_jobs(src: _Side, dst: _Side, report: WeightReport) -> list[_Job]:
    sides = {src.framework: src, dst.framework: dst}
    if set(sides) != {"keras", "torch"}:
        raise ValueError(f"argument `rules` is needed here: matching by layer names and types works between a Keras "
                         f"model and a torch module, not {src.framework} -> {dst.framework}.")
    k_units, t_units = _keras_units(sides["keras"]), _torch_units(sides["torch"])
    jobs = []
    for key, k_unit in k_units.items():
        if key in t_units:
            jobs += _pair_jobs(key, k_unit, t_units[key], src.framework == "keras", report)
    return jobs


# -- the entry point -----------------------------------------------------------------------------------
def _is_tf1_block(obj) -> bool:
    return callable(getattr(obj, "tf1_weights", None)) and callable(getattr(obj, "load_tf1_weights", None))


def _move_tf1_names(weights: Mapping, dst, strict: bool, report: WeightReport) -> WeightReport:
    loaded = dst.load_tf1_weights(weights, strict=strict)  # all or nothing, every problem listed
    report.moved += [(k, k, "tf1_names") for k in loaded.loaded]
    report.unmatched_src += list(loaded.unexpected)
    report.unmatched_dst += list(loaded.missing)
    return report


def move_weights(src, dst, rules=None, strict: bool = True) -> WeightReport:
    """Copies the weights of ``src`` into ``dst``, across frameworks, converting layouts.

    Args:
        src: a Keras 3 layer or model, a torch module, or a dict ``{name: array}`` (numpy arrays are read in TF1 /
            Keras layouts -- e.g. a TF1 checkpoint from ``speechblocks.tf1_checkpoint.read_tf1_checkpoint``; torch
            tensors in torch's).
        dst: a Keras 3 layer or model (built) or a torch module.
        rules: ``None`` (the project's TF1 names when both sides are the project's blocks, else equal layer names
            and the converter their types imply), a dict ``{source name: destination name or (name, converter)}``
            (exact names), or a list of ``(regex, replacement)`` / ``(regex, replacement, converter)``; converters
            are registry names (``"identity"``, ``"dense_kernel"``, ``"conv1d"``, ``"lstm_tf1"``, ``"gru"``,
            ``"batch_norm"``, yours from :func:`register_converter`). See the module docstring.
        strict: raise when any weight is unmatched on either side (and write nothing); else move what matched.

    Returns:
        a :class:`WeightReport` (``moved``, ``unmatched_src``, ``unmatched_dst``, ``warnings``, ``ok``, ``table()``).

    Raises:
        TypeError: ``src`` or ``dst`` is none of the above, or ``rules`` has the wrong form.
        ValueError: (nothing written) a rule list matching no source weight; a converted shape that does not fit
            (``src`` name, ``dst`` name, both shapes); a layout a converter refuses (e.g. a Keras
            ``GRU(reset_after=False)`` into ``nn.GRU``); with ``strict``, :class:`WeightMatchError` listing every
            unmatched weight (the project's blocks raise their ``TF1WeightsError``, a ``ValueError`` too).
    """
    is_dict = isinstance(src, Mapping) and _framework(src) is None
    if rules is None and (is_dict or _is_tf1_block(src)) and _is_tf1_block(dst):
        for arg, obj in (("src", src), ("dst", dst)):
            if _framework(obj) is None and not (arg == "src" and is_dict):
                _side(obj, arg, allow_dict=arg == "src")  # raises the TypeError naming the argument
        weights = ({k: _to_numpy(v) for k, v in _DictSide(src, "src")._tensors.items()} if is_dict
                   else src.tf1_weights())
        report = WeightReport(direction=f"{'tf1' if is_dict else _framework(src)} -> {_framework(dst)} (TF1 names)")
        return _move_tf1_names(weights, dst, strict, report)
    src_side = _side(src, "src", allow_dict=True)
    if _framework(dst) is None:
        raise TypeError(f"argument `dst` must be a Keras layer or model or a torch module; got {type(dst).__name__}.")
    dst_side = _side(dst, "dst", allow_dict=False)
    report = WeightReport(direction=f"{src_side.framework} -> {dst_side.framework}")
    if rules is None:
        jobs = _default_jobs(src_side, dst_side, report)
    else:
        jobs = _rule_jobs(rules, src_side, dst_side, report)
    values = _plan(jobs, src_side, dst_side, report)
    placed = {n for job in jobs for n in job.src}
    report.unmatched_src = [n for n in src_side.names if n not in placed]
    report.unmatched_dst = [n for n in dst_side.names if n not in values]
    if strict and not report.ok:
        raise WeightMatchError(report)
    if isinstance(dst_side, _TorchSide):
        dst_side.assign_all(values)
    else:
        for name, value in values.items():
            dst_side.assign(name, value)
    return report
