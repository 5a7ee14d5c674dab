"""Assertion used by every ``parity_tests/test_*_parity.py``: all rows of a case module pass."""
from __future__ import annotations

from .cases import run_case
from .report import format_table


def assert_case_passes(module) -> list:
    rows = run_case(module)
    assert rows, f"{module.__name__} produced no parity row"
    failed = [r for r in rows if not r.passed]
    assert not failed, "parity failures:\n" + format_table(failed)
    return rows
