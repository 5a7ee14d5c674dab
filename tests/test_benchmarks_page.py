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


# -- every benchmark declares the rows it records ---------------------------------------------------------------------

BENCH_NAMES = sorted(results.declared_rows())


def _module(name: str):
    import importlib

    return importlib.import_module(f"bench.bench_{name}")


def test_every_bench_module_is_found():
    here = sorted(f[len("bench_"):-3] for f in os.listdir(os.path.join(render.ROOT, "bench"))
                  if f.startswith("bench_") and f.endswith(".py"))
    assert BENCH_NAMES == here and len(here) >= 17


@pytest.mark.parametrize("name", BENCH_NAMES)
def test_bench_declares_the_rows_of_the_file(data, name):
    """``ROWS`` of ``bench/bench_<name>.py`` (imported, and as the renderer reads it from the source) and the file's
    rows of that bench: every row of the file is declared (a renamed row cannot orphan a transcribed figure), and
    every declared row is on the page, with a figure or named as not measured yet."""
    module = _module(name)
    rows = module.ROWS
    assert isinstance(rows, tuple) and rows and all(isinstance(r, str) and r for r in rows), name
    assert len(set(rows)) == len(rows), f"bench_{name}.ROWS repeats a row"
    assert rows == results.declared_rows()[name]
    in_file = {r["row"] for r in data["rows"] if r["bench"] == name and not r.get("indicative")}
    assert in_file <= set(rows), f"rows of bench/results.json that bench_{name}.py does not record: " \
                                 f"{sorted(in_file - set(rows))}"
    page = render.render_page(data)
    for row in rows:
        assert f"`{name}/{row}`" in page, f"{name}/{row}: declared, neither shown nor named as not measured"
    assert set(rows) - in_file == {i.split("/", 1)[1] for i in render.unmeasured(data) if i.startswith(name + "/")}


def test_every_row_of_the_file_has_its_bench(data):
    declared = results.declared_rows()
    for r in data["rows"]:
        assert r["bench"] in declared, r["id"]
        if not r.get("indicative"):
            assert r["row"] in declared[r["bench"]], r["id"]


def test_transcribed_figures_are_replaced_by_a_run_only():
    """Transcribed rows (no runs) exist only for rows a benchmark records: none is left without a way to re-measure
    it, and only the indicative probes are transcribed figures no benchmark records."""
    data = results.load()
    declared = results.declared_rows()
    for r in data["rows"]:
        if not r["runs"] and not r.get("indicative"):
            assert r["row"] in declared[r["bench"]], r["id"]


def test_an_undeclared_row_is_refused(tmp_path, monkeypatch):
    _module("cbhg")  # loaded: its ROWS apply
    monkeypatch.setenv(results.PENDING_ENV, str(tmp_path / "pending.jsonl"))
    with pytest.raises(ValueError, match="not in bench_cbhg.ROWS"):
        results.record("cbhg", "torch one thread", 2.0, unit="x faster")
    results.record("cbhg", "keras", 1.3, unit="x faster")
    assert [r["id"] for r in results.read_pending(str(tmp_path / "pending.jsonl"))] == ["cbhg/keras"]


# -- each benchmark's recording, driven with made-up numbers (no timing) ----------------------------------------------

def _sides(**kw):
    return {"keras": kw.get("keras", 0.4), "torch": kw.get("torch", 0.35), "legacy": kw.get("legacy", 0.5)}


def _drive(name: str) -> None:
    """Calls ``bench_<name>``'s recording functions as its ``main()`` does, with made-up medians."""
    m = _module(name)
    if name == "cbhg":
        m.record_times("torch 1 thread", {"per_step": 0.2, "fast": 0.08, "cbhg": 0.3, "script": 0.28})
        m.record_times("keras", {"per_step": 0.2, "fast": 0.15, "cbhg": 0.3})
    elif name == "recurrent":
        m.record_keras_encoder("mixed", 0.09, 0.1)
        m.record_keras_encoder("full", 0.095, 0.1)
        m.record_keras_decoder_step(0.00102, 0.001)
        m.record_torch("encoder", {"eager": 0.06, "script": 0.08, "loop": 0.09, "lstm": 0.066})
        m.record_torch("decoder step", {"eager": 0.001, "script": 0.0012, "lstm": 0.0016})
    elif name == "audio":
        m.record_mel("rtvc", {"speechblocks": 2.4, "original": 2.5}, 3600.0)
        m.record_mel("rayhane", {"speechblocks": 6.5, "original": 6.2}, 3600.0)
        m.record_griffin_lim({"speechblocks": 0.84, "original": 1.0})
    elif name == "tacotron2":
        m.record_results(_sides(), _sides(keras=1.1, torch=1.2, legacy=1.7), _sides(keras=0.002, torch=0.0019,
                                                                                     legacy=0.0026),
                         [0.0015, 0.0016], {"keras": None, "torch": None, "legacy": None})
    elif name == "batch_synthesis":
        t = {(s, w): v for s in ("keras", "torch") for w, v in (("b1", 6.0), ("alone", 5.8), ("b4", 3.0),
                                                                ("b16", 1.9))}
        t[("legacy", "b16")] = 3.4
        info = {s: {"alone_max_diff": 2e-6, "alone_shape_mismatches": [], "native_alone_max_diff": 9e-6,
                    "native_batch_max_diff": 9e-6} for s in ("keras", "torch")}
        m.record_results(t, info, 146.7e9, 205e9, 2)
    elif name == "training":
        for fw in ("torch", "keras"):
            for size in ("demo", "rtvc"):
                for threads in ("1", "all", "3"):  # a third count is printed only
                    m.record_row({"framework": fw, "size": size, "batch": m.BATCH[size], "steps": 10,
                                  "threads": threads, "warmup_s": 1.0, "load_s": 0.05, "step_s": 3.5, "frames": 30000,
                                  "loss": 1.0})
    elif name == "litert":
        m.record_result({"lite": 0.43, "model": 0.46}, 2, 5, 2e-7)
    elif name == "savedmodel":
        m.record_results({"served": 0.6, "model": 0.45, "served1": 0.02, "model1": 0.027}, 2, 1e-6)
    elif name == "onnx":
        for threads in m.THREAD_COUNTS:
            m.record_results({"ORT encoder": 0.02, "torch encoder": 0.024, "ORT step": 0.0014, "torch step": 0.002},
                             0.0011, threads)
    elif name == "inductor":
        for threads in m.THREAD_COUNTS:
            m.record_result({"inductor": 0.00099, "eager": 0.001}, threads)
    elif name == "precision":
        m.record_results({"device": "cpu", "parameters": 28_400_000, "sentences": 4, "max_iters": 300,
                          "torch": "x", "mel_max_abs": 5.5e-4, "mel_mean_abs": 8.6e-5, "argmax_agreement": 0.996,
                          "stop_steps": [[300, 300]] * 4, "mel_range": [-0.1, 0.09], "fp32_seconds": 12.9,
                          "bf16_seconds": 35.3, "fp32_loop": "native", "bf16_loop": "loop"}, 100)
    elif name == "tacotron1":
        m.record_results(_sides(keras=0.374, torch=0.39, legacy=0.34), _sides(keras=0.4, legacy=0.34),
                         _sides(keras=0.0018, torch=0.0018, legacy=0.0017))
    elif name == "gaussian_embedding":
        m.record_memory({("profiler", False): (22.6, 93.1), ("profiler", True): (22.6, 93.1),
                         ("rss", False): (23.1, 93.0), ("rss", True): (24.2, 117.0)}, 1244)
        m.record_time({"library": 0.013, "reference": 0.1}, 1244)
    else:
        raise KeyError(name)


#: benchmarks whose recording sits inline in main() (checked by their own row declarations above)
INLINE = {"griffin_lim", "ge2e_tac", "contrastive_loss", "migration"}


@pytest.mark.parametrize("name", sorted(set(BENCH_NAMES) - INLINE))
def test_bench_records_exactly_its_declared_rows(tmp_path, monkeypatch, name):
    """The benchmark's recording code, fed made-up medians as its main() feeds the measured ones: it records every
    declared row (and nothing else: record() refuses an undeclared row), each a valid row of the file."""
    pending = tmp_path / "pending.jsonl"
    monkeypatch.setenv(results.PENDING_ENV, str(pending))
    monkeypatch.setenv(results.LOAD_ENV, json.dumps([0.1, 0.1, 0.1]))
    module = _module(name)
    _drive(name)
    records = results.read_pending(str(pending))
    expected = set(module.ROWS)
    if name in ("onnx", "inductor") and len(module.THREAD_COUNTS) == 1:  # one core: no "every core" rows
        expected = {r for r in expected if not r.endswith("default threads")}
    assert {r["row"] for r in records} == expected
    assert all(r["bench"] == name for r in records)
    merged = results.merge(records, str(tmp_path / "results.json"))
    assert render.schema_problems(merged) == []
    page = render.render_rows(merged)
    assert "transcribed" not in page.split("## ", 1)[1]  # every row measured here


def test_inline_benches_record_only_declared_rows():
    """The four benchmarks that record inline in main(): every literal row name they pass to record() is declared
    (their f-string names are checked at run time by record())."""
    import ast

    for name in sorted(INLINE):
        path = os.path.join(render.ROOT, "bench", f"bench_{name}.py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        rows = results.declared_rows()[name]
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "record"]
        assert calls, name
        for call in calls:
            arg = call.args[1]
            if isinstance(arg, ast.Constant):
                assert arg.value in rows, (name, arg.value)


def test_transcribed_rows_are_marked(data):
    page = render.render_page(data)
    old = [r for r in data["rows"] if not r["runs"] and not r.get("indicative")]
    shown = [r for r in data["rows"] if not r.get("indicative")]
    assert f"**{len(shown) - len(old)} of the {len(shown)} rows below were measured by `make bench`; {len(old)} are " \
           "transcribed**" in page
    table_rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    for r in shown:
        (line,) = [x for x in table_rows if x.startswith(f"| {render._cell(r.get('label') or r['row'])} |")]
        assert line.endswith(f"| {r['date']}, transcribed |") == (not r["runs"]), r["id"]
    readme = render.render_readme_rows(data)
    assert ("transcribed" in readme) == any(not r["runs"] for r in shown if any(r["id"] in ids for _, ids in
                                                                                  render.HEADLINES))


def test_a_measured_row_is_not_marked(tmp_path, monkeypatch):
    monkeypatch.setenv(results.PENDING_ENV, str(tmp_path / "pending.jsonl"))
    results.record("fake", "ratio", 0.8, unit="x", target="<= 0.9")
    data = results.merge(results.read_pending(str(tmp_path / "pending.jsonl")), str(tmp_path / "r.json"))
    text = render.status_text(data, declared={"fake": ("ratio", "later")})
    assert text.startswith("**1 of the 1 rows below were measured by `make bench`; 0 are transcribed**")
    assert "`fake/later`" in text
    assert "transcribed |" not in render.render_rows(data)


def test_a_bench_run_alone_writes_nothing(tmp_path, monkeypatch, capsys):
    """Outside ``python -m bench`` a record is a probe's: bench/results.json is left alone (a probe on a busy machine
    must not replace a committed figure) unless SPEECHBLOCKS_BENCH_RESULTS names a file."""
    monkeypatch.delenv(results.PENDING_ENV, raising=False)
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    monkeypatch.setattr(results, "_told", False)
    before = os.stat(results.RESULTS).st_mtime_ns
    results.record("fake", "probe", 1.0)
    assert os.stat(results.RESULTS).st_mtime_ns == before
    assert "not written" in capsys.readouterr().err
    path = tmp_path / "r.json"
    monkeypatch.setenv(results.RESULTS_ENV, str(path))
    results.record("fake", "probe", 1.0)
    assert [r["id"] for r in results.load(str(path))["rows"]] == ["fake/probe"]
