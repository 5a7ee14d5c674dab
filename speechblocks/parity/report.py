"""Parity rows and the report table: the one spelling of a ``make parity`` row (numpy only).

Every parity row of the project -- the suite's case modules (``parity_tests/report.py`` re-exports these names),
``speechblocks parity --checkpoint`` and :func:`speechblocks.parity.compare` -- is a :class:`Row` built here and
printed by :func:`format_table`: block, comparison, output, max |Δ| (``.3e``), tolerance, PASS/FAIL
(``docs/ARCHITECTURE.md``, parity tolerances).
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

__all__ = ["Row", "compare_arrays", "format_table", "stat_row", "rows_to_json", "rows_to_dicts"]


@dataclasses.dataclass
class Row:
    """One comparison: ``block``, ``comparison`` (e.g. ``TF1->Keras``), ``output`` path, ``max_abs``
    difference, ``tol`` and whether NaN/inf positions matched exactly."""

    block: str
    comparison: str
    output: str
    max_abs: float
    tol: float
    masks_match: bool = True
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.masks_match and math.isfinite(self.max_abs) and self.max_abs <= self.tol

    def __str__(self) -> str:
        return (f"{self.block} | {self.comparison} | {self.output} | {self.max_abs:.3e} | {self.tol:.0e} | "
                f"{'PASS' if self.passed else 'FAIL'}")


def max_abs_difference(a, b) -> tuple[float, bool]:
    """``(max |a - b| over the entries finite in both, whether the NaN / +inf / -inf positions match)`` of two
    arrays of one shape (0.0 when no entry is finite in both)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    masks_match = bool(np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isposinf(a), np.isposinf(b))
                       and np.array_equal(np.isneginf(a), np.isneginf(b)))
    finite = np.isfinite(a) & np.isfinite(b)
    return (float(np.max(np.abs(a[finite] - b[finite]))) if finite.any() else 0.0), masks_match


def compare_arrays(block: str, comparison: str, output: str, a, b, tol: float, relative: bool = False) -> Row:
    """Max |a - b| over finite entries; NaN / +inf / -inf positions must match exactly.

    Args:
        block, comparison, output: the row's labels.
        a, b: array-likes (any numeric dtype; compared in float64).
        tol: the largest max |Δ| that passes.
        relative: divide the difference by ``max(1, max |b|)`` (outputs of large scale); the output label gets
            `` (rel)``.

    Returns:
        the :class:`Row`; arrays of different shapes give a failing row (``max_abs`` inf) whose note names both
        shapes.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return Row(block, comparison, output, float("inf"), tol, False, f"shape {a.shape} vs {b.shape}")
    diff, masks_match = max_abs_difference(a, b)
    finite = np.isfinite(a) & np.isfinite(b)
    if relative and finite.any():
        diff /= max(1.0, float(np.max(np.abs(b[finite]))))
    return Row(block, comparison, output + (" (rel)" if relative else ""), diff, tol, masks_match)


def stat_row(block: str, comparison: str, output: str, estimate: float, target: float, tol: float) -> Row:
    """A statistical check ``|estimate - target| <= tol`` as a row."""
    return Row(block, comparison, output, abs(float(estimate) - float(target)), tol, True,
               f"estimate {estimate:.4f}, target {target:.4f}")


def format_table(rows: list[Row]) -> str:
    """The parity table: block, comparison, output, max |Δ|, tolerance, PASS/FAIL."""
    head = ("block", "comparison", "output", "max |Δ|", "tol", "result")
    body = [(r.block, r.comparison, r.output, f"{r.max_abs:.3e}", f"{r.tol:.0e}", "PASS" if r.passed else "FAIL")
            for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    out = [line(head), line(["-" * w for w in widths])] + [line(b) for b in body]
    n_fail = sum(not r.passed for r in rows)
    out.append(f"{len(rows) - n_fail} passed, {n_fail} failed")
    return "\n".join(out)


def rows_to_dicts(rows: list[Row]) -> list[dict]:
    """The rows as JSON-ready dicts ``{"block", "comparison", "output", "max_abs", "tol", "passed", "note"}``;
    ``max_abs`` is ``None`` when it is not finite (e.g. outputs of different shapes; ``note`` says why)."""
    out = []
    for r in rows:
        max_abs = float(r.max_abs)
        out.append({"block": r.block, "comparison": r.comparison, "output": r.output,
                    "max_abs": max_abs if math.isfinite(max_abs) else None, "tol": float(r.tol),
                    "passed": bool(r.passed), "note": r.note})
    return out


def rows_to_json(rows: list[Row]) -> str:
    """The rows as a JSON array of :func:`rows_to_dicts` (``speechblocks parity --json``)."""
    return json.dumps(rows_to_dicts(rows), indent=1, allow_nan=False)
