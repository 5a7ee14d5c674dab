"""Alignment health of one synthesized sentence: how sharply and how monotonically the attention moves.

The two scores ``make train-demo`` judges alignment by (``bench/train_demo.py``), for every caller.
"""
from __future__ import annotations

import numpy as np

__all__ = ["alignment_scores"]


def alignment_scores(alignment) -> tuple[float, float]:
    """``(focus, monotonicity)`` of one attention alignment.

    Args:
        alignment: ``(T_in, steps)`` attention weights (each column one decoder step's distribution over the
            input symbols).

    Returns:
        ``focus``: the mean over decoder steps of the largest weight (1.0: every step attends to one symbol; about
        ``1 / T_in``: spread evenly); ``monotonicity``: the share of consecutive steps whose most attended symbol
        does not move back (1.0 with a single step).

    Raises:
        ValueError: when ``alignment`` is not a non-empty 2-D array or holds NaN/inf.
    """
    a = np.asarray(alignment, np.float64)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"alignment_scores: `alignment` must be a non-empty (T_in, steps) array; got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError("alignment_scores: `alignment` holds NaN or inf.")
    focus = float(a.max(axis=0).mean())
    peaks = a.argmax(axis=0)
    monotonicity = float(np.mean(np.diff(peaks) >= 0)) if peaks.size > 1 else 1.0
    return focus, monotonicity
