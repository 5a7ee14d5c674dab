"""A griffe extension for ``mkdocs.yml``: the library's docstrings head their doctest examples ``Example:`` (the
torchaudio convention), which Google-style parsing reads as an admonition of Markdown prose; this reads them as
the ``Examples:`` section (code) instead. The docstrings themselves are left as they are."""
from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and "Example:" in docstring.value:
            docstring.value = _EXAMPLE.sub(r"\1Examples:", docstring.value)
