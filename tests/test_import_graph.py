"""The import graph of the three packages, read from the sources (every ``import``, at module level or inside a
function): imports flow one way.

* no circle between modules (lazy, function-level imports count: a circle there is still two modules that cannot
  be understood apart);
* the framework-free core (``speechblocks`` without its application layer: the command line, synthesis, the
  audio commands, the migration driver) imports no framework and nothing of ``tf_layers`` / ``torch_layers`` /
  ``parity_tests``, not even lazily, and never through ``importlib``;
* ``tf_layers`` never imports torch, ``torch_layers`` never TensorFlow or Keras;
* the frameworks import only the core, not the application layer (no exception is left: ``KNOWN_UPWARD`` is
  empty);
* nothing reaches a module through ``importlib.import_module`` (an edge the graph cannot see), in any module of
  the three packages: a class of the package is imported by name, and a class a lower module needs from a higher
  one is handed in by its caller (``Tacotron2.from_migrated`` passes itself to ``torch_layers._migrated_model``).
"""
from __future__ import annotations

import ast
import os
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("speechblocks", "tf_layers", "torch_layers")
APPLICATION = {"speechblocks.__main__", "speechblocks.cli", "speechblocks.synthesis", "speechblocks.audio_commands",
               "speechblocks.synthesis_tacotron1",
               "speechblocks.migration.migrate", "speechblocks.assets",
               "speechblocks.migration",  # the package re-exports the driver
               "speechblocks.preprocess",  # loads the GE2E encoder (torch) through audio_commands
               "speechblocks.evaluation.pipeline"}  # `evaluate`'s steps: speaks with a model (synthesis, Griffin-Lim)
# the command modules (speechblocks/commands/<name>.py, one a subcommand) belong to the application layer
APPLICATION |= {"speechblocks.commands"} | {
    "speechblocks.commands." + f[:-3] for f in os.listdir(os.path.join(ROOT, "speechblocks", "commands"))
    if f.endswith(".py") and f != "__init__.py"}
# the public parity API (speechblocks/parity/*) compares the frameworks' models and runs the TF1 reference: it
# imports each framework (and parity_tests) lazily, when a callable of that framework is compared
APPLICATION |= {"speechblocks.parity"} | {
    "speechblocks.parity." + f[:-3] for f in os.listdir(os.path.join(ROOT, "speechblocks", "parity"))
    if f.endswith(".py") and f != "__init__.py"}
FRAMEWORKS = {"tensorflow", "keras", "tf_keras", "torch", "tf_layers", "torch_layers", "parity_tests"}
#: (importer, imported) pairs from a framework into the application layer: none is left (the Keras
#: ``Tacotron2.from_migrated`` and ``tf_layers.checkpoint`` read migrated files with the core's
#: ``speechblocks.migration.migrated_file``; the driver imports the framework it migrates to, never the reverse)
KNOWN_UPWARD: set = set()


def _modules() -> dict[str, str]:
    out = {}
    for pkg in PACKAGES:
        for root, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(root, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _imports(name: str, path: str, modules: dict) -> list[str]:
    """Absolute names of everything ``name`` imports (relative imports resolved; ``from pkg import sub`` -> the
    submodule when it is one)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            out += [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            out.append("importlib.import_module")
    return out


def _graph():
    modules = _modules()
    edges = defaultdict(set)
    raw = {}
    for name, path in modules.items():
        raw[name] = _imports(name, path, modules)
        for target in raw[name]:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].add(target)
    return modules, edges, raw


def _cycles(nodes, edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    modules, edges, _ = _graph()
    assert _cycles(sorted(modules), edges) == []


def test_the_core_imports_no_framework_even_lazily():
    modules, _, raw = _graph()
    core = [m for m in modules if m.split(".")[0] == "speechblocks" and m not in APPLICATION]
    assert len(core) > 30
    bad = sorted((m, t) for m in core for t in raw[m]
                 if t.split(".")[0] in FRAMEWORKS or t == "importlib.import_module" or t in APPLICATION)
    assert bad == []


def test_each_framework_package_imports_only_its_own_framework():
    modules, _, raw = _graph()
    for pkg, foreign in (("tf_layers", {"torch", "torch_layers"}),
                         ("torch_layers", {"tensorflow", "keras", "tf_keras", "tf_layers"})):
        bad = sorted((m, t) for m in modules if m.split(".")[0] == pkg for t in raw[m] if t.split(".")[0] in foreign)
        assert bad == [], pkg


def test_frameworks_import_the_core_not_the_application_layer():
    modules, edges, _ = _graph()
    upward = {(m, t) for m in modules if m.split(".")[0] in ("tf_layers", "torch_layers") for t in edges[m]
              if t in APPLICATION}
    assert upward == KNOWN_UPWARD


def test_no_module_is_reached_through_importlib():
    modules, edges, raw = _graph()
    assert sorted(m for m in modules if "importlib.import_module" in raw[m]) == []
    assert _cycles(sorted(modules), edges) == []  # with no hidden edge left, the graph above is the whole graph
