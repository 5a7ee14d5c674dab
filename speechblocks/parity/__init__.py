"""Parity for your own models: compare a Keras model, a torch module or a TF1 graph, output by output, and name
the first sub-block where they part.

* :func:`compare` -- ``compare(a, b, inputs, *, atol=1e-5, rtol=0.0, outputs=None, trace=False, match=None,
  float64=False) -> ParityReport``: rows exactly like ``make parity``'s (block, comparison, output, max |Δ|,
  tolerance, PASS/FAIL); with ``trace=True`` both sides are instrumented at corresponding sub-blocks and
  ``report.first_divergence`` names the first one whose inputs agree and whose outputs do not.
* :class:`TF1Graph` -- a TF1 graph as one side: a project builder spec or your own checkpoint with its ``.meta``
  graph, run by the legacy TF1 reference in a subprocess.
* :func:`move_weights` / :class:`WeightReport` -- weights between frameworks by TF1 names or by a name map with
  layout converters (:mod:`speechblocks.parity.weights`).
* the pytest plugin (:mod:`speechblocks.parity.pytest_plugin`, entry point ``pytest11``): the ``parity`` fixture,
  ``parity.assert_close(a, b, inputs, atol=1e-5)``.

Importing this package imports neither TensorFlow nor torch: each framework is imported when a callable of that
framework is compared. See ``docs/parity-api.md`` ("Check your own port").
"""
from __future__ import annotations

from .compare import ParityReport, compare
from .report import Row, compare_arrays, format_table, stat_row
from .tf1_graph import TF1Graph
from .trace import TraceRow

__all__ = ["compare", "ParityReport", "Row", "TraceRow", "TF1Graph", "move_weights", "WeightReport",
           "compare_arrays", "format_table", "stat_row"]


def __getattr__(name: str):
    """``move_weights`` and ``WeightReport`` from :mod:`speechblocks.parity.weights`, imported on first use."""
    if name in ("move_weights", "WeightReport"):
        from . import weights

        return getattr(weights, name)
    raise AttributeError(f"module 'speechblocks.parity' has no attribute {name!r}")
