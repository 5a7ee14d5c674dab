"""``python -m bench.render [--check]``: ``docs/benchmarks.md`` and the README's performance rows from
``bench/results.json``.

The page is ``bench/benchmarks_page.md`` (the static prose: method, where the time goes) with, at its
``<!-- rendered: ... -->`` line, one short table per topic (what, result, target, verdict, machine, date) and each
row's details (runs, load, method notes, source). Indicative rows (one probe run) are left out; a row with no
recorded runs is marked *transcribed* (copied from the hand-written page, not yet re-measured), and the rows a
benchmark declares (``ROWS``) without a figure in the file are named. The README's rows sit
between ``<!-- benchmarks:start -->`` and ``<!-- benchmarks:end -->``. ``--check`` writes nothing and exits 1 when
a file differs from what the results make of it (``tests/test_benchmarks_page.py`` does the same).
"""
from __future__ import annotations

import os
import re
import sys

from bench import results

ROOT = results.ROOT
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
TEMPLATE = os.path.join(ROOT, "bench", "benchmarks_page.md")
README = os.path.join(ROOT, "README.md")
SLOT = re.compile(r"^<!-- rendered: .*-->$", re.M)
README_START, README_END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"
#: the page's sections, in this order (a topic not listed comes after them, alphabetically)
TOPIC_ORDER = ["Tacotron-2 synthesis and training", "Batched synthesis", "Tacotron-1", "Recurrent blocks",
               "PyTorch speech modules", "Audio", "Migration", "Training loop", "Export and deployment",
               "Precision (bf16)", "Other"]
#: the README's headline rows: (what, [row ids, joined by " / "])
HEADLINES = [
    ("Tacotron-2 synthesis (B=1, 200 steps) vs the TF1 graph's time: Keras / torch",
     ["tacotron2/synthesis keras", "tacotron2/synthesis torch"]),
    ("Tacotron-2 training step vs TF1: Keras / torch", ["tacotron2/training keras", "tacotron2/training torch"]),
    ("16 sentences, `synthesize_batch`, throughput vs the TF1 graph at B=16: Keras / torch",
     ["batch_synthesis/b16 vs tf1 keras", "batch_synthesis/b16 vs tf1 torch"]),
    ("Tacotron-1 (keithito) synthesis (B=1, 200 steps) vs the TF1 graph's time: Keras / torch",
     ["tacotron1/synthesis keras", "tacotron1/synthesis torch"]),
    ("Griffin-Lim (torch, default threads) vs the original numpy/librosa loop",
     ["griffin_lim/torch default threads"]),
]
_COUNT = {4: "Four", 5: "Five", 6: "Six"}
REQUIRED = ("id", "bench", "row", "topic", "what", "unit", "runs", "median", "range", "target", "verdict", "machine",
            "date")


# -- checks -----------------------------------------------------------------------------------------------------------

def schema_problems(data: dict) -> list[str]:
    """What is wrong with a results file's rows (empty: nothing)."""
    problems, seen = [], set()
    if data.get("schema") != results.SCHEMA:
        problems.append(f"schema {data.get('schema')!r}, expected {results.SCHEMA}")
    for i, row in enumerate(data.get("rows", [])):
        name = row.get("id", f"row {i}")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            problems.append(f"{name}: missing {', '.join(missing)}")
            continue
        if name in seen:
            problems.append(f"{name}: twice")
        seen.add(name)
        if name != f"{row['bench']}/{row['row']}":
            problems.append(f"{name}: id is not bench/row")
        if not row["runs"] and row["median"] is None and not row["range"]:
            problems.append(f"{name}: neither runs nor median/range")
        if not row["runs"] and not row.get("source"):
            problems.append(f"{name}: no runs recorded and no source")
        if row["runs"]:
            values = [r["value"] for r in row["runs"]]
            if row["range"] != [min(values), max(values)] or row.get("n_runs") != len(values):
                problems.append(f"{name}: range or n_runs is not that of its runs")
        if row["range"] and not row["range"][0] <= (row["median"] if row["median"] is not None
                                                     else row["range"][0]) <= row["range"][1]:
            problems.append(f"{name}: median outside its range")
        if not row["verdict"]:
            problems.append(f"{name}: no verdict")
        machine = row["machine"]
        if not isinstance(machine, dict) or not (machine.get("cpu") and machine.get("cores")):
            problems.append(f"{name}: machine without cpu and cores")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(row["date"])):
            problems.append(f"{name}: date {row['date']!r} is not YYYY-MM-DD")
    return problems


# -- formatting -------------------------------------------------------------------------------------------------------

def _unit(unit: str, ascii_only: bool) -> tuple[str, str]:
    """(what follows a number, what follows the whole figure): ``x faster`` -> (``×``, `` faster``)."""
    if unit.startswith("x"):
        return ("x" if ascii_only else "×"), unit[1:]
    return unit, ""


def figure(row: dict, ascii_only: bool = False) -> str:
    """``0.86× (0.75–0.90×)``; ``1.35–1.38×`` for a range only; ``15.6× faster`` without a range."""
    num, tail = _unit(row["unit"], ascii_only)
    dash = "-" if ascii_only else "–"
    fmt = row.get("fmt") or ".3g"
    rng = row["range"]
    if row["median"] is None:
        text = f"{rng[0]:{fmt}}{dash}{rng[1]:{fmt}}{num}"
    elif rng and row.get("n_runs") != 1:
        text = f"{row['median']:{fmt}}{num} ({rng[0]:{fmt}}{dash}{rng[1]:{fmt}}{num})"
    else:
        text = f"{row['median']:{fmt}}{num}"
    return text + tail


def target_text(row: dict) -> str:
    target = row["target"]
    if not target:
        return "—"
    parsed = results.parse_target(target)
    shown = target.replace("<=", "≤").replace(">=", "≥")
    if parsed and re.fullmatch(r"\s*(<=|>=|<|>|≤|≥)\s*[0-9.eE+-]+\s*", target):
        num, _ = _unit(row["unit"], False)
        shown += num
    return shown


def machine_label(machine: dict) -> str:
    if machine.get("label"):
        return machine["label"]
    avx = " (AVX-512)" if any(f.startswith("avx512") for f in machine.get("flags", [])) else ""
    return f"{machine.get('cpu', '?')}{avx}, {machine.get('cores', '?')} cores"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _when(row: dict) -> str:
    return f"{row['date']}" + (f" {row['time'].replace('-', '–')}" if row.get("time") else "")


def _group_text(row: dict) -> str:
    """What a group of rows shares: its setup, runs (as reported), machine, source."""
    parts = [row["setup"]] if row.get("setup") else []
    if not row["runs"]:
        n = row.get("n_runs")
        count = f"{n} run{'s' if n != 1 else ''}" if n else "Runs not stated"
        load = f", {row['load_at_start']}" if row.get("load_at_start") else ""
        parts.append(f"{count}, {_when(row)}{load}; median (range) as reported, the individual runs not recorded.")
    machine = row["machine"]
    described = machine.get("description") or ", ".join(
        x for x in (machine.get("platform"), machine.get("cpu"), f"{machine.get('cores')} cores",
                    " ".join(machine.get("flags", [])), machine.get("python") and f"Python {machine['python']}") if x)
    parts.append(f"Machine: {described}.")
    if row.get("source"):
        parts.append(f"*Source: {row['source']}.*")
    return " ".join(parts)


def _runs_text(row: dict) -> str:
    """A recorded row's runs, each with its seconds and load."""
    parts = []
    for r in row["runs"]:
        extra = []
        if r.get("seconds") is not None and r.get("baseline") is not None:
            extra.append(f"{r['seconds']:.4g} s vs {r['baseline']:.4g} s")
        if r.get("load"):
            extra.append("load " + " ".join(f"{x:.2f}" for x in r["load"]))
        value = figure({**row, "median": r["value"], "range": None, "n_runs": 1})
        parts.append(value + (f" ({', '.join(extra)})" if extra else ""))
    n = len(row["runs"])
    return f"{n} run{'s' if n > 1 else ''}, {_when(row)}: " + "; ".join(parts) + "."


_GROUP_KEYS = ("setup", "machine", "date", "time", "n_runs", "load_at_start", "source")


def _sorted_topics(rows: list[dict]) -> list[str]:
    topics = {r["topic"] for r in rows}
    known = [t for t in TOPIC_ORDER if t in topics]
    return known + sorted(topics - set(known))


def transcribed(row: dict) -> bool:
    """A figure copied from the hand-written page, not yet re-measured by ``python -m bench`` (no runs recorded)."""
    return not row["runs"]


def _date_cell(row: dict) -> str:
    return f"{row['date']}, transcribed" if transcribed(row) else row["date"]


def unmeasured(data: dict, declared: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Row ids a benchmark declares (its ``ROWS``) that the file has no figure for."""
    declared = results.declared_rows() if declared is None else declared
    have = {r["id"] for r in data["rows"]}
    return [f"{b}/{row}" for b, rows in declared.items() for row in rows if f"{b}/{row}" not in have]


def status_text(data: dict, declared: dict[str, tuple[str, ...]] | None = None) -> str:
    """How many shown rows ``make bench`` measured, how many are transcribed, which declared rows have no figure."""
    rows = [r for r in data["rows"] if not r.get("indicative")]
    old = [r for r in rows if transcribed(r)]
    text = (f"**{len(rows) - len(old)} of the {len(rows)} rows below were measured by `make bench`; {len(old)} are "
            "transcribed** (their date says so): figures copied from the hand-written page before the file existed, "
            "each naming its source, that `python -m bench` has not re-measured yet. A run replaces such a row by "
            "its own runs.")
    missing = unmeasured(data, declared)
    if missing:
        text += (f" Declared by a benchmark but not measured yet (no figure: {len(missing)} rows): "
                 + ", ".join(f"`{i}`" for i in missing) + ".")
    return text


def render_rows(data: dict) -> str:
    rows = [r for r in data["rows"] if not r.get("indicative")]
    out = [status_text(data), ""]
    for topic in _sorted_topics(rows):
        mine = [r for r in rows if r["topic"] == topic]
        out += [f"## {topic}", "", "| what | result | target | verdict | machine | date |", "|---|---|---|---|---|---|"]
        for r in mine:
            out.append("| " + " | ".join(_cell(x) for x in (r.get("label") or r["row"], figure(r), target_text(r),
                                                             r["verdict"], machine_label(r["machine"]), _date_cell(r)))
                       + " |")
        out += ["", f"### {topic}: details"]
        key = None
        for r in mine:
            if key != (key := [r.get(k) for k in _GROUP_KEYS] if r["runs"] is None or not r["runs"]
                       else [r.get(k) for k in ("setup", "machine", "source")]):
                out += ["", _group_text(r), ""]
            text = f"- **{r.get('label') or r['row']}** (`{r['id']}`, {figure(r)}): {r['what']}."
            if r["runs"]:
                text += f" {_runs_text(r)}"
            if r.get("notes"):
                text += f" {r['notes']}"
            out.append(text)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_page(data: dict, template: str | None = None) -> str:
    if template is None:
        with open(TEMPLATE, encoding="utf-8") as f:
            template = f.read()
    if not SLOT.search(template):
        raise ValueError(f"{TEMPLATE}: no <!-- rendered: ... --> line")
    head = "<!-- generated by python -m bench.render from bench/results.json and bench/benchmarks_page.md: do not " \
           "edit -->\n"
    return head + SLOT.sub(lambda _: render_rows(data).rstrip(), template, count=1)


def render_readme_rows(data: dict) -> str:
    by_id = {r["id"]: r for r in data["rows"]}
    lines, counts = [], set()
    table = ["| what | ratio | machine | date |", "|---|---|---|---|"]
    for what, ids in HEADLINES:
        rows = [by_id[i] for i in ids]
        counts |= {r.get("n_runs") for r in rows}
        machines = list(dict.fromkeys(machine_label(r["machine"]) for r in rows))
        dates = list(dict.fromkeys(_date_cell(r) for r in rows))
        table.append(f"| {what} | {' / '.join(figure(r, ascii_only=True) for r in rows)} | {' / '.join(machines)} | "
                     f"{' / '.join(dates)} |")
    runs = f"of {counts.pop()} runs" if len(counts) == 1 and None not in counts else "of the runs"
    lines.append(f"{_COUNT.get(len(HEADLINES), len(HEADLINES))} headline rows of `bench/results.json` (`make bench`; ratios against the baseline measured in "
                 f"the same run,\nmedian (range) {runs} each started on a quiet machine; every row with its runs: "
                 f"`docs/benchmarks.md`" + (";\n*transcribed*: copied from the hand-written page, not yet "
                                              "re-measured by `make bench`" if any(transcribed(by_id[i]) for _, ids
                                                                                   in HEADLINES for i in ids) else "")
                 + "):")
    return "\n".join([README_START, *lines, "", *table, README_END])


def render_readme(data: dict, readme: str) -> str:
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"README.md: no {README_START} ... {README_END}")
    return readme[:start] + render_readme_rows(data) + readme[end + len(README_END):]


def outputs(data: dict | None = None) -> dict[str, str]:
    """``{path: text}`` the results make of the page and the README."""
    data = results.load() if data is None else data
    with open(README, encoding="utf-8") as f:
        readme = f.read()
    return {PAGE: render_page(data), README: render_readme(data, readme)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = results.load()
    problems = schema_problems(data)
    if problems:
        print("bench/results.json:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    stale = []
    for path, text in outputs(data).items():
        with open(path, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            stale.append(os.path.relpath(path, ROOT))
            if "--check" not in argv:
                results.write_text(path, text)
    if "--check" in argv:
        if stale:
            print(f"out of date with bench/results.json: {', '.join(stale)} (python -m bench.render)", file=sys.stderr)
        return 1 if stale else 0
    print(f"rendered: {', '.join(stale) or 'nothing changed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
