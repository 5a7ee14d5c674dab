"""Parity rows and the report table (docs/ARCHITECTURE.md, tolerances)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["Row", "compare", "format_table", "stat_row"]


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


def compare(block: str, comparison: str, output: str, a, b, tol: float, relative: bool = False) -> Row:
    """Max |a - b| over finite entries; NaN / +inf / -inf positions must match exactly.

    With ``relative=True`` the difference is divided by ``max(1, max |b|)`` (outputs of large scale).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return Row(block, comparison, output, float("inf"), tol, False, f"shape {a.shape} vs {b.shape}")
    masks_match = bool(np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isposinf(a), np.isposinf(b))
                       and np.array_equal(np.isneginf(a), np.isneginf(b)))
    finite = np.isfinite(a) & np.isfinite(b)
    diff = float(np.max(np.abs(a[finite] - b[finite]))) if finite.any() else 0.0
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
