"""``compare(a, b, inputs)``: two implementations of one model, output by output, as ``make parity`` rows.

The sides are any two of a Keras model or layer, a torch module, a :class:`~speechblocks.parity.TF1Graph` (or a
plain Python function returning arrays, e.g. a numpy reference). Each framework is imported only when a callable
of that framework is passed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from ._sides import TF1, Side, tolerance
from .report import Row, compare_arrays, format_table, rows_to_dicts
from .trace import first_divergence_line, format_trace, plan_trace, run_trace, trace_rows_to_dicts

__all__ = ["compare", "ParityReport"]

@dataclasses.dataclass
class ParityReport:
    """What :func:`compare` found.

    Attributes:
        rows: one :class:`~speechblocks.parity.Row` per output (``make parity``'s columns).
        notes: what the reader must know (a side that ran in float32, randomness a side was not given, outputs
            paired by position, ...).
        trace_rows: with ``trace=True``, one :class:`~speechblocks.parity.TraceRow` per call of each matched
            sub-block, in execution order.
        first_divergence: with ``trace=True``, the name of the first sub-block whose inputs agree and whose
            outputs do not (the cause is inside it), or ``None``.
        traced: whether a trace ran.
    """

    rows: list[Row]
    notes: list[str] = dataclasses.field(default_factory=list)
    trace_rows: list = dataclasses.field(default_factory=list)
    first_divergence: Optional[str] = None
    traced: bool = False

    @property
    def ok(self) -> bool:
        """Every row passes (and there is at least one)."""
        return bool(self.rows) and all(r.passed for r in self.rows)

    def first_divergence_line(self) -> str:
        """One line: the first sub-block whose inputs agree and whose outputs do not, with both max |Δ|."""
        return first_divergence_line(self.trace_rows, self.traced)

    def table(self) -> str:
        """The rows (``make parity``'s table), the notes, and with a trace its table and first-divergence line."""
        out = [format_table(self.rows)]
        out += [f"note: {r.output}: {r.note}" for r in self.rows if r.note]
        out += [f"note: {n}" for n in self.notes]
        if self.traced:
            out += ["", format_trace(self.trace_rows), self.first_divergence_line()]
        return "\n".join(out)

    __str__ = table

    def to_json(self) -> str:
        """``{"ok", "rows", "notes", "first_divergence", "trace"}`` as JSON (rows as ``speechblocks parity --json``;
        a max |Δ| that is not finite is ``null``)."""
        return json.dumps({"ok": self.ok, "rows": rows_to_dicts(self.rows), "notes": self.notes,
                           "first_divergence": self.first_divergence,
                           "trace": trace_rows_to_dicts(self.trace_rows) if self.traced else None},
                          indent=1, allow_nan=False)


def _check_inputs(inputs: Any) -> None:
    if isinstance(inputs, Mapping):
        bad = [k for k in inputs if not isinstance(k, str)]
        if bad:
            raise TypeError(f"compare: argument `inputs` must have string keys (keyword arguments); got {bad[:3]}.")
        return
    if not isinstance(inputs, np.ndarray):
        raise TypeError(f"compare: argument `inputs` must be a dict of numpy arrays (keyword arguments of both "
                        f"calls) or one numpy array; got a {type(inputs).__name__}.")


def _check_tolerance(atol: float, rtol: float) -> None:
    for name, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"compare: argument `{name}` must be a finite number >= 0; got {value!r}.")
    if atol == 0 and rtol == 0:
        raise ValueError("compare: arguments `atol` and `rtol` are both 0: float32 (and float64) arithmetic in two "
                         "frameworks is never bit-identical; give a tolerance (1e-5 per block in float32).")


def comparison_label(a: Side, b: Side) -> str:
    """``TF1->Keras``, ``TF1->torch`` (the TF1 graph is the reference), else ``Keras<->torch`` etc."""
    if a.kind == TF1 and b.kind != TF1:
        return f"TF1->{b.kind}"
    if b.kind == TF1 and a.kind != TF1:
        return f"TF1->{a.kind}"
    return f"{a.kind}<->{b.kind}"


def output_rows(block: str, comparison: str, out_a: dict, out_b: dict, atol: float, rtol: float,
                outputs: Optional[Sequence[str]], labels: tuple[str, str]) -> tuple[list[Row], list[str]]:
    """The rows of two flattened outputs (paired by name; by position when the names differ but the counts
    agree), and the notes on the pairing."""
    notes = []
    if outputs is not None:
        if isinstance(outputs, str) or not all(isinstance(n, str) for n in outputs):
            raise TypeError("compare: argument `outputs` must be a list of output names.")
        missing = [(n, side) for n in outputs for side, out in zip(labels, (out_a, out_b)) if n not in out]
        if missing:
            n, side = missing[0]
            have = sorted(out_a if side == labels[0] else out_b)
            raise ValueError(f"compare: argument `outputs` names {n!r}, which {side} does not return; its outputs: "
                             f"{have}.")
        pairs = [(n, n, n) for n in outputs]
    elif set(out_a) == set(out_b):
        pairs = [(n, n, n) for n in out_a]
    elif len(out_a) == len(out_b):
        pairs = [(na if na == nb else f"{na} / {nb}", na, nb) for na, nb in zip(out_a, out_b)]
        notes.append(f"outputs paired by position ({labels[0]}: {list(out_a)}; {labels[1]}: {list(out_b)})")
    else:
        pairs = [(n, n, n) for n in out_a if n in out_b]
        pairs += [(n, n, None) for n in out_a if n not in out_b] + [(n, None, n) for n in out_b if n not in out_a]
    rows = []
    for label, na, nb in pairs:
        if na is None or nb is None:
            only = labels[0] if nb is None else labels[1]
            rows.append(Row(block, comparison, label, float("inf"), float(atol), False, f"only {only} returns it"))
            continue
        ref = out_b[nb]
        tol = tolerance(atol, rtol, ref) if np.asarray(ref).shape == np.asarray(out_a[na]).shape else float(atol)
        rows.append(compare_arrays(block, comparison, label, out_a[na], ref, tol))
    return rows, notes


def compare(a: Any, b: Any, inputs: Union[Mapping[str, Any], np.ndarray], *, atol: float = 1e-5, rtol: float = 0.0,
            outputs: Optional[Sequence[str]] = None, trace: bool = False,
            match: Optional[Mapping[str, str]] = None, float64: bool = False,
            block: Optional[str] = None) -> ParityReport:
    """Runs two implementations of one model on the same inputs and compares every output.

    Args:
        a, b: any two of a Keras model or layer, a torch module, a :class:`~speechblocks.parity.TF1Graph` (or a
            plain function returning arrays). ``b`` is the reference of ``rtol``.
        inputs: dict of numpy arrays, the keyword arguments of both calls (nested lists/dicts of arrays, e.g.
            ``noise_masks``, and plain values such as ``max_iters`` or Keras' ``training`` pass through), or one
            array, the single positional argument. Converted to each framework's tensors (floating arrays in
            float32, or float64 with ``float64``); torch runs without gradients.
        atol: absolute tolerance (1e-5 per block in float32: ``docs/ARCHITECTURE.md``).
        rtol: relative tolerance; a row's tolerance is ``atol + rtol * max |b|``.
        outputs: output names to compare (default all). Outputs are flattened to names: dict keys, tuple indices
            ``0``, ``1``, nested ``a.b``; a single tensor is ``output``.
        trace: instrument both sides at corresponding sub-blocks and find the first divergence
            (:mod:`speechblocks.parity.trace`); implied by ``match``.
        match: ``{sub-block of a: sub-block of b}`` (Keras layer paths ``outer/inner`` or names, torch module
            paths ``outer.inner``), tried before the built-in matching (TF1 scopes, then equal names).
        float64: run both sides in float64 where they allow (torch: a deep copy ``.double()``; Keras: a clone at
            dtype float64 with the weights copied); a side that cannot is named in a note (it runs in float32).
        block: the rows' block label (default: the class of ``a``, or a Keras functional model's name).

    Returns:
        :class:`ParityReport` -- ``report.ok``, ``report.rows``, ``report.table()``, ``report.to_json()``,
        ``report.first_divergence``, ``report.trace_rows``.

    Raises:
        TypeError: a side that is not callable, ``inputs`` neither a dict nor an array, ``outputs`` not a list.
        ValueError: a negative or all-zero tolerance, an output name a side does not return, a ``match`` entry that
            names no sub-block.
    """
    side_a, side_b = Side(a, "a"), Side(b, "b")
    _check_inputs(inputs)
    _check_tolerance(atol, rtol)
    trace = bool(trace) or match is not None
    plan = None
    if trace:  # the match is checked before anything runs: a map that names nothing fails in one line
        plan = plan_trace(side_a, side_b, match)
    side_a.prepare(inputs, float64)
    side_b.prepare(inputs, float64)
    out_a, out_b = side_a.run(inputs), side_b.run(inputs)
    label = comparison_label(side_a, side_b)
    rows, notes = output_rows(block or side_a.name, label, out_a, out_b, atol, rtol, outputs,
                              (side_a.label, side_b.label))
    report = ParityReport(rows, side_a.notes + side_b.notes + notes)
    if plan is not None:
        report.trace_rows, report.first_divergence, trace_notes = run_trace(plan, inputs, atol, rtol,
                                                                             (out_a, out_b))
        report.notes.extend(trace_notes)
        report.traced = True
    return report
