"""Assertion used by every ``parity_tests/test_*_parity.py``: all rows of a case module pass."""
from __future__ import annotations

from .cases import run_case
from .report import format_table


def assert_case_passes(module) -> list:
    return assert_rows_pass(run_case(module), module.__name__)


def assert_rows_pass(rows: list, name: str) -> list:
    """Every row passes (and there is at least one)."""
    assert rows, f"{name} produced no parity row"
    failed = [r for r in rows if not r.passed]
    assert not failed, "parity failures:\n" + format_table(failed)
    return rows
