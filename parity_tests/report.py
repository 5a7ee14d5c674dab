"""Parity rows and the report table: re-exported from :mod:`speechblocks.parity.report`, the one spelling of a row
that the suite, ``speechblocks parity --checkpoint`` and :func:`speechblocks.parity.compare` share
(docs/ARCHITECTURE.md, tolerances)."""
from __future__ import annotations

from speechblocks.parity.report import Row, format_table, stat_row
from speechblocks.parity.report import compare_arrays as compare

__all__ = ["Row", "compare", "format_table", "stat_row"]
