"""Benchmark results: what a benchmark records, and ``bench/results.json``, the file ``make bench`` writes.

Framework-free (the standard library only). A benchmark's ``main()`` keeps printing its lines and also records each
figure it computes::

    from bench.results import record, record_ratio

    record_ratio("tacotron2", "synthesis keras", seconds=t_keras, baseline=t_tf1, what="...", target="<= 0.9")
    record("audio", "melspectrogram rtvc", value=2.38, unit=" s", what="1 hour of audio")

One call is **one run** of a row: ``value`` (or ``seconds / baseline`` for a ratio) is this process's figure, the
median of the benchmark's own interleaved repeats. ``python -m bench --runs 3`` runs every benchmark 3 times, each
in its own process; a row's measurement is then all its runs of that invocation, with their median and range, each
run with the load average when its benchmark process started. ``runs=[...]`` records several runs at once (a
benchmark that repeats itself).

Under ``python -m bench`` a record goes to the pending file named by ``$SPEECHBLOCKS_BENCH_PENDING`` (one JSON line a
record) and the parent merges them at the end. A benchmark run alone (``python -m bench.bench_x``) is a probe: it
writes nothing (so a probe on a busy machine cannot replace a committed figure) unless ``$SPEECHBLOCKS_BENCH_RESULTS``
names a file to merge each record into at once. Merging replaces a row by its new measurement and keeps every other row;
the file is written atomically (a temporary file renamed over it).

A target is a comparison the verdict is computed from: ``"<= 0.9"``, ``">= 5"`` (on the row's value: a ratio, or a
speed-up where the unit says ``faster``). A target that is not a comparison (``"not slower"``, ``"< 30 s"`` on a
figure the benchmark does not record) needs its ``verdict=``; without a target the verdict is ``"reported"``.

Each row of the file::

    {"id": "bench/row", "bench", "row", "label", "topic", "setup", "what", "unit", "fmt",
     "runs": [{"value", "seconds"?, "baseline"?, "load"?, "started"?}, ...] (or, transcribed: none),
     "median" (null: range only), "range": [lo, hi] or null, "n_runs" (null: not stated), "target", "verdict",
     "machine": {"platform", "cpu", "cores", "flags", "python"?, "description"?, "label"?}, "date", "time"?,
     "load_at_start"? (transcribed rows: the doc's words),
     "notes", "source"?, "indicative"?}

``indicative: true`` marks a figure of one probe run: kept in the file, left out of the page.

Every ``bench/bench_<name>.py`` declares the rows it records as a literal tuple, ``ROWS = ("row", ...)``; recording a
row its module does not declare fails (a renamed row would otherwise leave the old figure in the file, orphaned), and
:func:`declared_rows` reads the tuples without importing the modules (the page names declared rows never measured).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results.json")
PENDING_ENV = "SPEECHBLOCKS_BENCH_PENDING"
#: set by ``python -m bench`` for each benchmark process: the load average (1, 5, 15 min) when it started
LOAD_ENV = "SPEECHBLOCKS_BENCH_LOAD"
#: a benchmark run alone (``python -m bench.bench_x``) merges its records into this file; unset: it writes nothing
RESULTS_ENV = "SPEECHBLOCKS_BENCH_RESULTS"
_told = False
SCHEMA = 1
#: CPU flags worth naming beside a timing (vector width and fused multiply-add decide a GEMV's speed)
FLAGS_OF_INTEREST = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                     "amx_tile", "amx_bf16", "neon", "asimd", "sve")
#: a benchmark module's topic on the page (``bench_<name>.py`` -> title); others fall under "Other"
TOPICS = {
    "tacotron2": "Tacotron-2 synthesis and training", "batch_synthesis": "Batched synthesis",
    "tacotron1": "Tacotron-1", "recurrent": "Recurrent blocks", "cbhg": "Recurrent blocks",
    "ge2e_tac": "PyTorch speech modules", "gaussian_embedding": "PyTorch speech modules",
    "contrastive_loss": "PyTorch speech modules", "griffin_lim": "Audio", "audio": "Audio",
    "migration": "Migration", "training": "Training loop", "litert": "Export and deployment",
    "onnx": "Export and deployment", "savedmodel": "Export and deployment", "inductor": "Export and deployment",
    "precision": "Precision (bf16)",
}
_TARGET = re.compile(r"^\s*(<=|>=|<|>|≤|≥)\s*([0-9.eE+-]+)")
_OPS = {"<=": lambda v, t: v <= t, "≤": lambda v, t: v <= t, ">=": lambda v, t: v >= t,
        "≥": lambda v, t: v >= t, "<": lambda v, t: v < t, ">": lambda v, t: v > t}


# -- the machine ------------------------------------------------------------------------------------------------------

def machine() -> dict:
    """This machine: platform, CPU model (``/proc/cpuinfo``), core count, the flags of interest, Python."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "hardware", "cpu model") and cpu in ("", platform.machine(),
                                                                               platform.processor()):
                    cpu = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"platform": f"{platform.system()} {platform.machine()}", "cpu": cpu, "cores": os.cpu_count(),
            "flags": [f for f in FLAGS_OF_INTEREST if f in flags], "python": platform.python_version()}


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


# -- verdicts ---------------------------------------------------------------------------------------------------------

def parse_target(target: str | None):
    """``(operator, number)`` of a comparison target, or None."""
    m = _TARGET.match(target or "")
    return (m[1], float(m[2])) if m else None


def met(value: float, target: str) -> bool | None:
    parsed = parse_target(target)
    return None if parsed is None else _OPS[parsed[0]](value, parsed[1])


def verdict_of(values: list[float], target: str | None) -> str | None:
    """``MET`` / ``MISSED`` (one run), ``MET in every run``, ``MISSED in k of n runs``; None if the target is not a
    comparison; ``reported`` without a target."""
    if not target:
        return "reported"
    if parse_target(target) is None:
        return None
    missed = sum(not met(v, target) for v in values)
    if len(values) == 1:
        return "MISSED" if missed else "MET"
    if not missed:
        return "MET in every run"
    return "MISSED in every run" if missed == len(values) else f"MISSED in {missed} of {len(values)} runs"


# -- recording --------------------------------------------------------------------------------------------------------

def _as_list(x, n: int) -> list:
    if x is None:
        return [None] * n
    if isinstance(x, (int, float)):
        return [float(x)] * n if n == 1 else _fail("one number given for several runs")
    if len(x) != n:
        _fail(f"{len(x)} numbers for {n} runs")
    return [None if v is None else float(v) for v in x]


def _fail(message: str):
    raise ValueError(f"bench.results.record: {message}")


def record(bench: str, row: str, value: float | None = None, *, runs: list[float] | None = None, unit: str = "",
           what: str = "", seconds=None, baseline=None, target: str | None = None, verdict: str | None = None,
           notes: str = "", decimals: int | None = None, fmt: str | None = None, label: str | None = None,
           setup: str = "", topic: str | None = None) -> dict:
    """Records one run (``value``) or several (``runs``) of the row ``bench/row``; returns the record.

    Args:
        bench: the benchmark's name (``bench_<bench>.py``).
        row: the row's name within it (stable: a new measurement replaces the row of the same name).
        value: this run's figure. runs: several runs' figures instead.
        unit: appended to the figure on the page (``"x"``, ``"x faster"``, ``" ms"``, ``" s"``).
        what: what is measured, for a reader (sizes, sides, threads).
        seconds, baseline: the measured and the baseline's seconds of each run (a ratio row), kept beside it.
        target: ``"<= 0.9"``-style comparison (the verdict is computed) or a phrase (then give ``verdict``).
        verdict: overrides the computed verdict. notes: method notes for the row's details.
        decimals: digits after the point on the page; fmt: a format spec instead (``".1e"``); default ``".3g"``.
        label: the row's short name in the page's table (default: ``row``). setup: what the rows of one benchmark
            share (sizes, threads, the baseline): the page says it once above them, ``what`` then says this row's part.
        topic: the page's section (default: from :data:`TOPICS`).
    """
    if (value is None) == (runs is None):
        _fail("give exactly one of value= and runs=")
    values = [float(value)] if runs is None else [float(v) for v in runs]
    if not values:
        _fail("no runs")
    n = len(values)
    load = os.environ.get(LOAD_ENV)
    load = json.loads(load) if load else load_average()
    run_entries = []
    for v, s, b in zip(values, _as_list(seconds, n), _as_list(baseline, n)):
        entry = {"value": v}
        if s is not None:
            entry["seconds"] = s
        if b is not None:
            entry["baseline"] = b
        entry["load"] = load
        entry["started"] = _now().isoformat(timespec="seconds")
        run_entries.append(entry)
    rec = {"id": f"{bench}/{row}", "bench": bench, "row": row, "topic": topic or TOPICS.get(bench, "Other"),
           "setup": setup, "what": what, "label": label or row,
           "unit": unit,
           "fmt": fmt or (f".{decimals}f" if decimals is not None else ".3g"), "runs": run_entries, "target": target,
           "verdict": verdict, "notes": notes}
    if verdict is None and target and parse_target(target) is None:
        _fail(f"target {target!r} is not a comparison: give verdict=")
    declared = _module_rows(bench)
    if declared is not None and row not in declared:
        _fail(f"row {row!r} is not in bench_{bench}.ROWS {declared}")
    pending = os.environ.get(PENDING_ENV)
    if pending:
        with open(pending, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    elif os.environ.get(RESULTS_ENV):
        merge([rec], os.environ[RESULTS_ENV])
    else:
        global _told
        if not _told:
            _told = True
            print(f"(bench.results: {rec['id']} and the rest of this run not written: a benchmark run alone is a "
                  "probe; `python -m bench NAME` records, or set SPEECHBLOCKS_BENCH_RESULTS=PATH)", file=sys.stderr)
    return rec


def _module_rows(bench: str):
    """``ROWS`` of the running ``bench_<bench>`` module (imported as ``bench.bench_<bench>`` or run as ``__main__``),
    or None when it is not loaded (a record made elsewhere, e.g. a test's)."""
    name = f"bench.bench_{bench}"
    module = sys.modules.get(name)
    if module is None:
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        module = main if spec is not None and spec.name == name else None
    return getattr(module, "ROWS", None)


def declared_rows(folder: str | None = None) -> dict[str, tuple[str, ...]]:
    """``{bench: ROWS}`` of every ``bench_<bench>.py`` in ``folder`` (default: this package), read from the source
    (``ast.literal_eval`` of the module-level ``ROWS = (...)``; no import, no framework); a module without one maps
    to ``()``."""
    import ast

    folder = folder or os.path.dirname(os.path.abspath(__file__))
    out = {}
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("bench_") and name.endswith(".py")):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read(), name)
        rows = ()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROWS" for t in node.targets):
                rows = tuple(ast.literal_eval(node.value))
        out[name[len("bench_"):-len(".py")]] = rows
    return out


def record_ratio(bench: str, row: str, *, seconds, baseline, **kwargs) -> dict:
    """:func:`record` of ``seconds / baseline`` (one run: numbers; several: lists), unit ``x`` by default."""
    if isinstance(seconds, (int, float)):
        return record(bench, row, seconds / baseline, seconds=seconds, baseline=baseline,
                      **{"unit": "x", **kwargs})
    return record(bench, row, runs=[s / b for s, b in zip(seconds, baseline)], seconds=seconds, baseline=baseline,
                  **{"unit": "x", **kwargs})


def _now() -> datetime.datetime:
    return datetime.datetime.now().astimezone()


# -- the file ---------------------------------------------------------------------------------------------------------

def load(path: str = RESULTS) -> dict:
    if not os.path.exists(path):
        return {"schema": SCHEMA, "rows": []}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(data: dict, path: str = RESULTS) -> None:
    """``data`` to ``path`` as JSON, atomically (:func:`write_text`)."""
    write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def write_text(path: str, text: str) -> None:
    """``text`` to ``path`` atomically: a temporary file in the same folder, renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def summarise(records: list[dict], machine_info: dict | None = None) -> dict:
    """One row of the file from the records of one id (in run order): every run, median, range, verdict."""
    last = records[-1]
    runs = [r for rec in records for r in rec["runs"]]
    values = [r["value"] for r in runs]
    verdict = last["verdict"] or verdict_of(values, last["target"])
    started = runs[0].get("started") or _now().isoformat(timespec="seconds")
    row = {k: last[k] for k in ("id", "bench", "row", "label", "topic", "setup", "what", "unit", "fmt")}
    row.update(runs=runs, n_runs=len(runs), median=statistics.median(values), range=[min(values), max(values)],
               target=last["target"], verdict=verdict, machine=machine_info or machine(), date=started[:10],
               time="-".join(dict.fromkeys((started[11:16], (runs[-1].get("started") or started)[11:16]))),
               notes=last["notes"])
    return row


def merge(records: list[dict], path: str = RESULTS, machine_info: dict | None = None) -> dict:
    """Merges records into the file at ``path``: each id's row replaced by its new measurement (all its records
    here), the others kept in place, new ids appended. Returns the file's data."""
    data = load(path)
    by_id: dict[str, list[dict]] = {}
    for rec in records:
        by_id.setdefault(rec["id"], []).append(rec)
    new = {i: summarise(recs, machine_info) for i, recs in by_id.items()}
    rows = [new.pop(row["id"], row) for row in data["rows"]]
    rows += list(new.values())
    data = {"schema": SCHEMA, **{k: v for k, v in data.items() if k not in ("schema", "rows")}, "rows": rows}
    write(data, path)
    return data


def read_pending(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
