"""MkDocs hooks (``hooks:`` in ``mkdocs.yml``): the docstrings' Sphinx markup, rendered.

The library's docstrings are written in the Sphinx/torchaudio style: ``:class:`Tacotron2```, ``:meth:`from_migrated```,
``:func:`~speechblocks.audio.melspectrogram```, and a paragraph ending in ``::`` before a literal block. mkdocstrings
reads them as Google-style Markdown, which shows the role names and the doubled colon as text
(``:class:Tacotron2``). Two events fix that, without touching the docstrings:

* :func:`on_page_content` turns every role into code, as Sphinx shows it (``~a.b.C`` shows ``C``, ``title <target>``
  shows ``title``; ``:class:`torch.nn.Module``` stays ``torch.nn.Module``), tagged with the role's target and the
  object it was written in; and a paragraph's closing ``::`` into ``:`` (`` ::`` into nothing), as reStructuredText
  does;
* :func:`on_env` (before autorefs applies the cross-references) looks each tagged target up among the objects the
  site documents -- as written, then relative to the enclosing object, its class and its module, as Sphinx searches
  -- and makes it a link through autorefs where one is found; the others stay code.

Both are plain functions of the HTML (``render_roles``, ``link_roles``), tested in ``tests/test_docs.py``.
"""
from __future__ import annotations

import html as _html
import re

from mkdocs.plugins import event_priority

#: the packages whose objects the API pages document (their headings' ids are the objects' paths)
ROOTS = ("speechblocks", "tf_layers", "torch_layers")
_ROLES = "meth|class|func|attr|data|mod|exc|obj|const|property"
# a role as the Markdown renders it: :class:<code>X</code> (also :py:class:)
_ROLE = re.compile(rf":(?:py:)?(?P<role>{_ROLES}):<code>(?P<text>[^<]*)</code>")
# a paragraph's (list item's, cell's) closing literal-block marker
_LITERAL = re.compile(r"(?P<space>\s?)::(?=</(?:p|li|td|dd)>)")
_ID = re.compile(r'\bid="(?P<id>(?:' + "|".join(ROOTS) + r')(?:\.\w+)*)"')
_TAGGED = re.compile(r'<code class="sb-role" data-target="(?P<target>[^"]*)" data-context="(?P<context>[^"]*)">'
                     r"(?P<text>[^<]*)</code>")


def _split(text: str) -> tuple[str, str]:
    """``(shown, target)`` of a role's text, as Sphinx reads it."""
    raw = _html.unescape(text).strip()
    m = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", raw)
    if m:
        return m["title"], m["target"].lstrip("~.!")
    bare = raw.lstrip("!")
    target = bare.lstrip("~.")
    return (target.rsplit(".", 1)[-1] if bare.startswith("~") else bare.lstrip(".")), target


def render_roles(html: str) -> str:
    """Sphinx roles as code (tagged with their target and the enclosing object's id), closing ``::`` as ``:``."""
    ids = [(m.start(), m["id"]) for m in _ID.finditer(html)]

    def context(pos: int) -> str:
        last = ""
        for start, ident in ids:
            if start > pos:
                break
            last = ident
        return last

    def role(m: re.Match) -> str:
        shown, target = _split(m["text"])
        return (f'<code class="sb-role" data-target="{_html.escape(target, quote=True)}" '
                f'data-context="{context(m.start())}">{_html.escape(shown, quote=False)}</code>')

    html = _ROLE.sub(role, html)
    return _LITERAL.sub(lambda m: "" if m["space"] else ":", html)


def resolve(target: str, context: str, known: set[str]) -> str | None:
    """The documented object ``target`` names, written in the object ``context``: as written, then relative to
    ``context`` and each of its parents (method, class, module, package); ``None`` if none is documented."""
    if target in known:
        return target
    parts = context.split(".") if context else []
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i] + [target])
        if candidate in known:
            return candidate
    # a name exported elsewhere (``Tacotron2.synthesize`` from a module page): only when exactly one object ends so,
    # preferring the context's own package
    ends = [k for k in known if k.endswith("." + target)]
    own = [k for k in ends if parts and k.split(".")[0] == parts[0]]
    # a private module's path to an object its package re-exports (``torch_layers.tf_batch_norm.TFBatchNorm``)
    root, _, name = target.partition(".")
    exported = [k for k in known if root in ROOTS and name and k.split(".")[0] == root
                and k.endswith("." + target.rsplit(".", 1)[-1])]
    for found in (own, ends, exported):
        if len(found) == 1:
            return found[0]
    return None


def link_roles(html: str, known: set[str]) -> str:
    """The tagged roles of :func:`render_roles` as autorefs links where their target is documented, else code."""

    def link(m: re.Match) -> str:
        code = f"<code>{m['text']}</code>"
        found = resolve(_html.unescape(m["target"]), m["context"], known)
        return f'<autoref identifier="{found}" optional>{code}</autoref>' if found else code

    return _TAGGED.sub(link, html)


def on_page_content(html, page, config, files):
    return render_roles(html)


@event_priority(0)  # before autorefs' on_env (-50), which turns <autoref> elements into links
def on_env(env, config, files):
    pages = [f.page for f in files if getattr(f, "page", None) is not None and f.page.content]
    known = {m["id"] for p in pages for m in _ID.finditer(p.content)}
    for p in pages:
        if "sb-role" in p.content:
            p.content = link_roles(p.content, known)
    return env
