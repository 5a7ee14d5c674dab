"""The ``parity`` pytest fixture (entry point ``pytest11``: loaded wherever speechblocks is installed).

In your own test suite, with nothing but the package installed::

    def test_port(parity):
        parity.assert_close(keras_model, torch_model, {"x": x}, atol=1e-5)

A failure prints the parity table (block, comparison, output, max |Δ|, tolerance, PASS/FAIL) and the
first-divergence line: the first sub-block whose inputs agree and whose outputs do not (the comparison is rerun
with ``trace=True`` when it failed untraced). Importing this module imports no framework.
"""
from __future__ import annotations

from typing import Any

import pytest

__all__ = ["ParityFixture", "parity"]


class ParityFixture:
    """What the ``parity`` fixture gives a test: :meth:`compare` and :meth:`assert_close`."""

    def compare(self, a: Any, b: Any, inputs: Any, **kwargs):
        """:func:`speechblocks.parity.compare` (the same arguments); returns the report."""
        from speechblocks.parity import compare

        return compare(a, b, inputs, **kwargs)

    def assert_close(self, a: Any, b: Any, inputs: Any, atol: float = 1e-5, **kwargs):
        """Fails the test unless every output of ``a`` and ``b`` on ``inputs`` agrees within the tolerance.

        Args:
            a, b: a Keras model or layer, a torch module or a :class:`speechblocks.parity.TF1Graph`.
            inputs: dict of numpy arrays (keyword arguments of both calls) or one array.
            atol: absolute tolerance (a row's tolerance is ``atol + rtol * max |b|``).
            **kwargs: the other keywords of :func:`speechblocks.parity.compare` (``rtol``, ``outputs``, ``match``,
                ``float64``, ``trace``); ``trace=False`` keeps a failure untraced.

        Returns:
            the :class:`speechblocks.parity.ParityReport` when it passes.
        """
        trace = kwargs.pop("trace", None)
        report = self.compare(a, b, inputs, atol=atol, trace=bool(trace) or "match" in kwargs, **kwargs)
        if not report.ok and trace is None and not report.traced:
            report = self.compare(a, b, inputs, atol=atol, trace=True, **kwargs)
        if not report.ok:
            failed = sum(not r.passed for r in report.rows)
            pytest.fail(f"parity: {failed} of {len(report.rows)} outputs differ beyond the tolerance\n"
                        f"{report.table()}", pytrace=False)
        return report


@pytest.fixture
def parity() -> ParityFixture:
    """Cross-framework parity checks: ``parity.assert_close(a, b, inputs, atol=1e-5)``, ``parity.compare(...)``."""
    return ParityFixture()
