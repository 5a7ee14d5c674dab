"""Errors of the user's making that every layer of the package may raise (no framework, no command line here)."""
from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(ValueError):
    """A mistake of the user's (arguments, input files, text): the command line answers with exit status 2 and
    one line."""
