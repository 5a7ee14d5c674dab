"""Parity cases: one module per block (``parity_tests/cases/<block>.py``).

Each module defines ``legacy_specs() -> list[LegacySpec]`` (may be empty) and
``rows(legacy: list[LegacyResult]) -> list[Row]`` (``legacy`` in the order of ``legacy_specs()``).
"""
from __future__ import annotations

import importlib
import pkgutil


def discover() -> list:
    """All case modules, sorted by name."""
    return [importlib.import_module(f"{__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name) if not m.name.startswith("_")]


def run_case(module) -> list:
    """Runs one case module (its legacy specs in one subprocess) and returns its rows."""
    from ..reference import run_legacy

    specs = module.legacy_specs()
    return module.rows(run_legacy(specs) if specs else [])


def run_all(modules=None) -> list:
    """Runs every case module; all legacy specs go to one subprocess first."""
    from ..reference import run_legacy

    modules = discover() if modules is None else modules
    all_specs = [s for m in modules for s in m.legacy_specs()]
    if all_specs:
        run_legacy(all_specs)  # one subprocess, memoised for the per-module calls below
    rows = []
    for m in modules:
        rows.extend(run_case(m))
    return rows
