"""Counting the calls a test relies on (the native tests assert the path they compare really ran)."""
from __future__ import annotations

from collections.abc import Callable


def count_calls(monkeypatch, owner, name: str, counts: Callable[[object], bool] = lambda out: True) -> list:
    """Wraps ``owner.name`` (a module's function or a class's method) for the test: the returned list grows by one
    per call whose result ``counts``."""
    calls = []
    original = getattr(owner, name)

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        if counts(out):
            calls.append(1)
        return out

    monkeypatch.setattr(owner, name, spy)
    return calls
