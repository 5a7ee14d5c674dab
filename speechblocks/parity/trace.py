"""First divergence: both sides instrumented at corresponding sub-blocks, compared call by call.

Instrumentation: torch sub-modules get forward hooks (``with_kwargs=True``); Keras sub-layers get their ``call``
wrapped on the instance (restored afterwards, also when the call raises), and the Keras side runs eagerly
(``tf.config.run_functions_eagerly``) so a ``tf.function`` cannot hide a sub-layer's calls.

Matching, in this order: the user's ``match={sub-block of a: sub-block of b}``; the project's TF1 scopes (the
``tf1_scope`` chain of a project block, the same in both frameworks: ``decoder/decoder_LSTM``); equal names (a
Keras layer's name equal to the last component of a torch module path, or its ``/`` path equal to the ``.`` path).
A sub-block called many times (once per decoder step) is compared call by call. Intermediate tensors whose shapes
differ only by the last two axes (channels-first torch convolutions vs channels-last Keras) are compared transposed.

The project's Tacotron-2 models fuse their decoder step into one function over packed weights (and run it in a
compiled or native loop), so no decoder sub-block is called there. Traced, each side runs its model block by
block instead -- embedding, encoder convolutions, encoder LSTM, then per decoder step the pre-net, the decoder LSTM
stack, the attention, the frame and stop projections as the blocks' own calls, then the post-net -- for as many
steps as the compared call ran (``speechblocks.parity._replay``); a note says if that replay's outputs differ from
the side's own call. Tacotron-1's torch decoder (a TorchScript loop) is replaced for the traced call by the same
step over its modules; its Keras decoder calls its layers per step. The names the two frameworks give the
Tacotron models' blocks differently are paired by :data:`BUILTIN_MATCH`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from ._sides import KERAS, TORCH, Side, iter_blocks, tolerance
from .report import max_abs_difference

__all__ = ["TraceRow", "TracePlan", "plan_trace", "run_trace", "format_trace", "first_divergence_line",
           "trace_rows_to_dicts"]

#: names the project's models give one block differently in the two frameworks (Keras path -> torch path)
BUILTIN_MATCH = {
    "Tacotron2": {"inputs_embedding": "embedding"},
    "Tacotron1": {"decoder/decoder_prenet": "decoder.prenet", "decoder/attention_gru": "decoder.attention_gru",
                  "decoder/bahdanau_attention": "decoder.attention",
                  "decoder/location_sensitive_attention": "decoder.attention",
                  "decoder/cell_0_projection": "decoder.cell0_projection", "decoder/cell_1": "decoder.gru1",
                  "decoder/cell_2": "decoder.gru2", "decoder/output_projection": "decoder.output_projection"}}
#: Keras call arguments that are call context, not data
_CONTEXT_ARGS = ("training", "mask")


@dataclasses.dataclass
class TraceRow:
    """One call of one matched sub-block on both sides.

    Attributes:
        block: the pair's name (the TF1 scope path for project blocks, else the sub-block of ``a``).
        a_name, b_name: the sub-block's path on each side.
        call: which call (1-based) of the sub-block; ``calls`` how many each side made.
        inputs_max_abs: max |Δ| over its tensor inputs (``None`` when it took none).
        outputs_max_abs: max |Δ| over its tensor outputs.
        inputs_tol, outputs_tol: ``atol + rtol * max |b|`` of each.
        note: layout swaps, input/output counts that differ, shapes that differ.
    """

    block: str
    a_name: str
    b_name: str
    call: int
    calls: tuple
    inputs_max_abs: Optional[float]
    outputs_max_abs: float
    inputs_tol: float
    outputs_tol: float
    note: str = ""

    @property
    def inputs_agree(self) -> bool:
        return self.inputs_max_abs is None or (math.isfinite(self.inputs_max_abs)
                                               and self.inputs_max_abs <= self.inputs_tol)

    @property
    def outputs_agree(self) -> bool:
        return math.isfinite(self.outputs_max_abs) and self.outputs_max_abs <= self.outputs_tol

    @property
    def diverges(self) -> bool:
        """Inputs agree, outputs do not: the cause is inside this sub-block."""
        return self.inputs_agree and not self.outputs_agree


@dataclasses.dataclass
class TracePlan:
    """The matched pairs ``(name, path in a, path in b)`` and the two sides."""

    a: Side
    b: Side
    pairs: list
    notes: list


@dataclasses.dataclass
class _Entry:
    path: str
    block: Any
    tf1: Optional[str]
    leaf: str


def _catalog(side: Side) -> list[_Entry]:
    """Every sub-block of a Keras or torch side (not the model itself) with its TF1 scope path: the ``tf1_scope``
    of the block and of its ancestors below the model, joined by ``/`` (``None`` where the block has none)."""
    out = []
    sep = "/" if side.kind == KERAS else "."
    scopes: dict[str, Optional[str]] = {"": None}
    for path, block in iter_blocks(side.obj, side.kind):
        if not path:
            continue
        parent = path.rpartition(sep)[0]
        own = getattr(block, "tf1_scope", None)
        chain = scopes.get(parent)
        own = own if isinstance(own, str) and own else None
        scopes[path] = (f"{chain}/{own}" if chain else own) if own else chain
        out.append(_Entry(path, block, scopes[path] if own else None, path.rpartition(sep)[2]))
    return out


def _lookup(entries: list[_Entry], name: str, side: Side) -> Optional[_Entry]:
    """A sub-block by path, or by its last name when that is unique."""
    for e in entries:
        if e.path == name:
            return e
    found = [e for e in entries if e.leaf == name]
    return found[0] if len(found) == 1 else None


def _unique(entries: list[_Entry], key) -> dict:
    seen: dict = {}
    for e in entries:
        k = key(e)
        if k is not None:
            seen.setdefault(k, []).append(e)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def plan_trace(a: Side, b: Side, match: Optional[Mapping[str, str]]) -> TracePlan:
    """The matched sub-blocks of ``a`` and ``b`` (user's map, TF1 scopes, equal names), before anything runs.

    Raises:
        TypeError: ``match`` not a dict of names.
        ValueError: a ``match`` entry that names no sub-block of its side, or a ``match`` with a side that cannot
            be instrumented.
    """
    if match is not None and (not isinstance(match, Mapping)
                              or not all(isinstance(k, str) and isinstance(v, str) for k, v in match.items())):
        raise TypeError("compare: argument `match` must be a dict {sub-block of a: sub-block of b} of names.")
    for side in (a, b):
        if side.kind not in (KERAS, TORCH):
            if match:
                raise ValueError(f"compare: argument `match` needs sub-blocks on both sides; {side.label} cannot be "
                                 f"instrumented (only Keras and torch sides can).")
            return TracePlan(a, b, [], [f"trace: {side.label} cannot be instrumented (only Keras and torch sides "
                                        f"can): nothing traced"])
    ea, eb = _catalog(a), _catalog(b)
    pairs, used_a, used_b = [], set(), set()

    def add(name, x: _Entry, y: _Entry):
        if x.path not in used_a and y.path not in used_b:
            pairs.append((name, x.path, y.path))
            used_a.add(x.path)
            used_b.add(y.path)

    for ka, kb in (match or {}).items():
        x, y = _lookup(ea, ka, a), _lookup(eb, kb, b)
        if x is None or y is None:
            side, name, entries = (a, ka, ea) if x is None else (b, kb, eb)
            known = ", ".join(e.path for e in entries[:12]) + (", ..." if len(entries) > 12 else "")
            raise ValueError(f"compare: argument `match` names {name!r}, which is no sub-block of {side.label} "
                             f"(its sub-blocks: {known or 'none'}).")
        add(ka, x, y)
    ta, tb = _unique(ea, lambda e: e.tf1), _unique(eb, lambda e: e.tf1)
    for scope, x in ta.items():
        if scope in tb:
            add(scope, x, tb[scope])
    builtin = {}
    if type(a.obj).__name__ == type(b.obj).__name__:
        builtin = BUILTIN_MATCH.get(type(a.obj).__name__, {})
    pa, pb = {e.path: e for e in ea}, {e.path: e for e in eb}
    for keras_name, torch_name in builtin.items():
        x = pa.get(keras_name if a.kind == KERAS else torch_name)
        y = pb.get(keras_name if b.kind == KERAS else torch_name)
        if x is not None and y is not None:
            add(x.path, x, y)
    la, lb = _unique(ea, lambda e: e.leaf), _unique(eb, lambda e: e.leaf)
    dotted_b = {e.path.replace("/", "."): e for e in eb}
    for x in ea:
        y = dotted_b.get(x.path.replace("/", ".")) or (lb.get(x.leaf) if x.leaf in la else None)
        if y is not None:
            add(x.path, x, y)
    notes = [] if pairs else ["trace: no sub-block of the two sides matched by TF1 scope or name: pass "
                              "match={sub-block of a: sub-block of b}"]
    return TracePlan(a, b, pairs, notes)


# -- recording ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Record:
    path: str
    seq: int
    inputs: list
    outputs: list


class _Recorder:
    def __init__(self, side: Side):
        self.side = side
        self.records: list[_Record] = []
        self.unreadable: set = set()

    def _arrays(self, value) -> Optional[list]:
        out = []

        def walk(x):
            if isinstance(x, Mapping):
                for v in x.values():
                    walk(v)
            elif isinstance(x, (list, tuple)):
                for v in x:
                    walk(v)
            elif x is not None and not isinstance(x, (bool, int, float, str)):
                arr = self.side.to_numpy(x)
                if arr is None:
                    raise TypeError
                out.append(arr)

        try:
            walk(value)
        except (TypeError, ValueError, AttributeError, NotImplementedError):  # a symbolic tensor (graph mode)
            return None
        return out

    def add(self, path: str, inputs, outputs) -> None:
        ins, outs = self._arrays(inputs), self._arrays(outputs)
        if ins is None or outs is None:
            self.unreadable.add(path)
            return
        self.records.append(_Record(path, len(self.records), ins, outs))


@contextlib.contextmanager
def _keras_taps(blocks: dict, recorder: _Recorder):
    """Each Keras layer's ``call`` wrapped on the instance; the previous state restored on exit."""
    patched = []
    try:
        for path, layer in blocks.items():
            had = "call" in layer.__dict__
            previous = layer.__dict__.get("call")
            original = layer.call

            def wrapper(*args, _original=original, _path=path, **kwargs):
                out = _original(*args, **kwargs)
                recorder.add(_path, (args, {k: v for k, v in kwargs.items() if k not in _CONTEXT_ARGS}), out)
                return out

            object.__setattr__(layer, "call", wrapper)
            patched.append((layer, had, previous))
        yield
    finally:
        for layer, had, previous in reversed(patched):
            if had:
                object.__setattr__(layer, "call", previous)
            else:
                object.__delattr__(layer, "call")


@contextlib.contextmanager
def _torch_taps(blocks: dict, recorder: _Recorder):
    """A forward hook (with keyword arguments) on each torch module; removed on exit."""
    handles = []
    try:
        for path, module in blocks.items():
            def hook(module, args, kwargs, output, _path=path):
                recorder.add(_path, (args, kwargs), output)

            handles.append(module.register_forward_hook(hook, with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def _eager(side: Side):
    """Keras (TensorFlow backend): every ``tf.function`` runs eagerly, so sub-layer calls are seen with values."""
    if side.kind != KERAS:
        yield
        return
    import keras

    if keras.backend.backend() != "tensorflow":
        yield
        return
    import tensorflow as tf

    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(before)


def _record(side: Side, paths: list[str], inputs, steps: Optional[int], called: dict) -> tuple[_Recorder, list[str]]:
    """Runs one side with its matched sub-blocks instrumented (``called``: its outputs of the compared call, which
    a block-by-block replay is checked against); the records and notes."""
    from . import _replay

    blocks = dict(iter_blocks(side.model, side.kind))
    chosen = {p: blocks[p] for p in paths if p in blocks}
    recorder = _Recorder(side)
    taps = _keras_taps if side.kind == KERAS else _torch_taps
    replay = _replay.replayer(side) if steps else None
    with _eager(side), taps(chosen, recorder):
        if replay is not None:
            replayed = replay(side, inputs, steps)
        else:
            side.invoke(side.model, side.convert(inputs))
    notes = [] if replay is None else _replay.replay_notes(side, replayed, called)
    if recorder.unreadable:
        notes.append(f"trace: {side.label}: {sorted(recorder.unreadable)} ran inside a compiled graph (no values "
                     f"to compare)")
    return recorder, notes


# -- comparing ----------------------------------------------------------------------------------------------------
def _pair_arrays(xs: list, ys: list, atol: float, rtol: float) -> tuple[Optional[float], float, list[str]]:
    """Max |Δ| over paired tensors (last two axes swapped where that makes the shapes equal), its tolerance and
    notes."""
    notes = []
    if len(xs) != len(ys):
        notes.append(f"{len(xs)} vs {len(ys)} tensors, the first {min(len(xs), len(ys))} compared")
    if not xs or not ys:
        return None, float(atol), notes
    worst, tol = 0.0, float(atol)
    for i, (x, y) in enumerate(zip(xs, ys)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            if x.ndim >= 2 and x.shape == y.shape[:-2] + (y.shape[-1], y.shape[-2]):
                y = np.swapaxes(y, -1, -2)
                notes.append(f"tensor {i}: last two axes swapped ({x.shape} vs {y.shape[:-2] + y.shape[:-3:-1]})")
            else:
                notes.append(f"tensor {i}: shapes {x.shape} vs {y.shape}")
                worst = float("inf")
                continue
        if not (np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
            continue
        diff, masks_match = max_abs_difference(x, y)
        worst = max(worst, diff if masks_match else float("inf"))
        tol = max(tol, tolerance(atol, rtol, y))
    return worst, tol, notes


def run_trace(plan: TracePlan, inputs, atol: float, rtol: float, outputs: tuple) -> tuple[list, Optional[str], list]:
    """Runs both instrumented sides and compares the matched sub-blocks call by call.

    Returns:
        ``(trace rows in the execution order of a, the first divergence's name or None, notes)``.
    """
    from . import _replay

    notes = list(plan.notes)
    if not plan.pairs:
        return [], None, notes
    steps = _replay.decoder_steps(outputs)
    rec_a, notes_a = _record(plan.a, [p[1] for p in plan.pairs], inputs, steps, outputs[0])
    rec_b, notes_b = _record(plan.b, [p[2] for p in plan.pairs], inputs, steps, outputs[1])
    notes += notes_a + notes_b
    by_a: dict = {}
    by_b: dict = {}
    for r in rec_a.records:
        by_a.setdefault(r.path, []).append(r)
    for r in rec_b.records:
        by_b.setdefault(r.path, []).append(r)
    rows = []
    for name, pa, pb in plan.pairs:
        ca, cb = by_a.get(pa, []), by_b.get(pb, [])
        if not ca or not cb:
            if ca or cb:
                notes.append(f"trace: {name} was called by {plan.a.label if ca else plan.b.label} only")
            continue
        for k, (ra, rb) in enumerate(zip(ca, cb)):
            in_diff, in_tol, in_notes = _pair_arrays(ra.inputs, rb.inputs, atol, rtol)
            out_diff, out_tol, out_notes = _pair_arrays(ra.outputs, rb.outputs, atol, rtol)
            note = "; ".join([f"inputs: {n}" for n in in_notes] + [f"outputs: {n}" for n in out_notes])
            if k == 0 and len(ca) != len(cb):
                note = "; ".join(filter(None, [f"{len(ca)} vs {len(cb)} calls", note]))
            rows.append((ra.seq, TraceRow(name, pa, pb, k + 1, (len(ca), len(cb)), in_diff,
                                          float("inf") if out_diff is None else out_diff, in_tol, out_tol, note)))
    rows = [r for _, r in sorted(rows, key=lambda x: x[0])]
    first = next((r.block for r in rows if r.diverges), None)
    return rows, first, notes


# -- printing -----------------------------------------------------------------------------------------------------
def _fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3e}"


def format_trace(rows: list[TraceRow]) -> str:
    """The trace table: each matched sub-block's calls in execution order, inputs and outputs max |Δ|."""
    head = ("sub-block", "call", "inputs max |Δ|", "outputs max |Δ|", "tol", "result")
    first = next((i for i, r in enumerate(rows) if r.diverges), None)
    body = []
    for i, r in enumerate(rows):
        result = ("agree" if r.outputs_agree else "DIVERGES" if r.diverges else "inherits")
        if i == first:
            result += "  <- first divergence"
        body.append((r.block, f"{r.call}/{max(r.calls)}", _fmt(r.inputs_max_abs), _fmt(r.outputs_max_abs),
                     f"{r.outputs_tol:.0e}", result))
    if not body:
        return "trace: no matched sub-block was called on both sides"
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = ["trace (matched sub-blocks, each call, in the order side a ran them):", line(head),
           line(["-" * w for w in widths])] + [line(b) for b in body]
    out += [f"  {r.block} call {r.call}: {r.note}" for r in rows if r.note]
    return "\n".join(out)


def first_divergence_line(rows: list[TraceRow], traced: bool = True) -> str:
    """One line naming the first sub-block whose inputs agree and whose outputs do not, with both max |Δ|."""
    if not traced:
        return "first divergence: not traced (compare(..., trace=True))"
    if not rows:
        return "first divergence: nothing traced (no matched sub-block ran on both sides)"
    for r in rows:
        if r.diverges:
            inputs = ("it takes no tensor input" if r.inputs_max_abs is None
                      else f"inputs agree (max |Δ| {r.inputs_max_abs:.3e} <= {r.inputs_tol:.0e})")
            return (f"first divergence: {r.block} (call {r.call} of {max(r.calls)}): {inputs}, outputs differ "
                    f"(max |Δ| {r.outputs_max_abs:.3e} > {r.outputs_tol:.0e}): the cause is inside it")
    if all(r.outputs_agree for r in rows):
        return "first divergence: none (every matched sub-block's outputs agree)"
    bad = next(r for r in rows if not r.outputs_agree)
    return (f"first divergence: none found: {bad.block} (call {bad.call}) is the first whose outputs differ, and its "
            f"inputs already differ: the cause is in code between the matched sub-blocks")


def trace_rows_to_dicts(rows: list[TraceRow]) -> list[dict]:
    """The trace rows as JSON-ready dicts (a max |Δ| that is not finite is ``None``)."""
    def num(x):
        return None if x is None or not math.isfinite(x) else float(x)

    return [{"block": r.block, "a": r.a_name, "b": r.b_name, "call": r.call, "calls": list(r.calls),
             "inputs_max_abs": num(r.inputs_max_abs), "outputs_max_abs": num(r.outputs_max_abs),
             "inputs_tol": r.inputs_tol, "outputs_tol": r.outputs_tol, "diverges": r.diverges, "note": r.note}
            for r in rows]

