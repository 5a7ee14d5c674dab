"""The benchmarks page and the README's performance rows are what ``python -m bench.render`` makes of the committed
``bench/results.json``; the file's rows have the schema (machine, date, runs or median/range, verdict); recording
(``bench.results``) merges a row's runs, keeps the others and computes verdicts. No benchmark runs here."""
from __future__ import annotations

import json
import os

import pytest

from bench import render, results


@pytest.fixture(scope="module")
def data():
    return results.load()


def test_results_schema(data):
    assert data["rows"], "bench/results.json has no rows"
    assert render.schema_problems(data) == []


def test_headline_rows_exist_and_are_not_indicative(data):
    by_id = {r["id"]: r for r in data["rows"]}
    for _, ids in render.HEADLINES:
        for i in ids:
            assert i in by_id and not by_id[i].get("indicative"), i


@pytest.mark.parametrize("path", [render.PAGE, render.README], ids=["docs/benchmarks.md", "README.md"])
def test_committed_files_are_rendered_from_the_results(data, path):
    with open(path, encoding="utf-8") as f:
        committed = f.read()
    assert committed == render.outputs(data)[path], \
        f"{os.path.relpath(path, render.ROOT)} differs from bench/results.json: run python -m bench.render"


def test_indicative_rows_stay_out_of_the_page(data):
    page = render.render_page(data)
    indicative = [r for r in data["rows"] if r.get("indicative")]
    assert indicative, "the transcribed probe runs are kept in the file, marked indicative"
    for r in indicative:
        assert f"`{r['id']}`" not in page
    shown = [r for r in data["rows"] if not r.get("indicative")]
    for r in shown:
        assert f"`{r['id']}`" in page


def test_schema_problems_are_found():
    row = {"id": "x/y", "bench": "x", "row": "y", "topic": "Other", "what": "w", "unit": "x", "runs": [],
           "median": None, "range": None, "target": None, "verdict": "", "machine": {}, "date": "today"}
    problems = render.schema_problems({"schema": results.SCHEMA, "rows": [row]})
    assert any("neither runs nor median" in p for p in problems)
    assert any("no verdict" in p for p in problems)
    assert any("machine" in p for p in problems)
    assert any("date" in p for p in problems)


def test_verdicts():
    assert results.verdict_of([0.8, 0.85, 0.95], "<= 0.9") == "MISSED in 1 of 3 runs"
    assert results.verdict_of([0.8, 0.85], "<= 0.9") == "MET in every run"
    assert results.verdict_of([7.0], ">= 5") == "MET"
    assert results.verdict_of([1.0, 1.2], "< 0.9") == "MISSED in every run"
    assert results.verdict_of([1.0], None) == "reported"
    assert results.verdict_of([1.0], "not slower") is None
    with pytest.raises(ValueError, match="verdict="):
        results.record("b", "r", 1.0, target="not slower")


def test_record_and_merge(tmp_path, monkeypatch):
    """A fake benchmark: two runs through the pending file (as under ``python -m bench``), merged into a file that
    holds another row and an older measurement of the same row."""
    path = str(tmp_path / "results.json")
    other = {"id": "keep/me", "bench": "keep", "row": "me", "median": 1.0}
    results.write({"schema": results.SCHEMA, "rows": [{"id": "fake/ratio", "old": True}, other]}, path)
    pending = tmp_path / "pending.jsonl"
    monkeypatch.setenv(results.PENDING_ENV, str(pending))
    monkeypatch.setenv(results.LOAD_ENV, json.dumps([0.1, 0.2, 0.3]))
    for s in (0.8, 1.0):  # one record a run
        results.record_ratio("fake", "ratio", seconds=s, baseline=1.0, what="fake", target="<= 0.9")
    results.record("fake", "ms", runs=[3.0, 4.0, 5.0], unit=" ms", what="fake ms", fmt=".1f")
    records = results.read_pending(str(pending))
    assert len(records) == 3
    data = results.merge(records, path)
    assert [r["id"] for r in data["rows"]] == ["fake/ratio", "keep/me", "fake/ms"]
    ratio, kept, ms = data["rows"]
    assert kept == other
    assert ratio["n_runs"] == 2 and ratio["range"] == [0.8, 1.0] and ratio["median"] == pytest.approx(0.9)
    assert ratio["verdict"] == "MISSED in 1 of 2 runs"
    assert ratio["runs"][0] == {**ratio["runs"][0], "seconds": 0.8, "baseline": 1.0, "load": [0.1, 0.2, 0.3]}
    assert ms["median"] == 4.0 and ms["verdict"] == "reported"
    assert {"platform", "cpu", "cores", "flags"} <= set(ratio["machine"]) and ratio["date"][:2] == "20"
    assert render.schema_problems({"schema": results.SCHEMA, "rows": [ratio, ms]}) == []
    assert json.load(open(path)) == data  # written, atomically: no temporary file left beside it
    assert sorted(os.listdir(tmp_path)) == ["pending.jsonl", "results.json"]
    assert render.figure(ms) == "4.0 ms (3.0–5.0 ms)"
    assert "0.8× (0.8 s vs 1 s, load 0.10 0.20 0.30)" in render._runs_text(ratio)


def test_machine_reads_this_cpu():
    m = results.machine()
    assert m["cores"] >= 1 and m["cpu"] and isinstance(m["flags"], list)
