"""``speechblocks.diagnostics`` (``speechblocks doctor``): the report states facts checked here against independent
sources (``importlib.metadata``, ``setup.cfg``, the native library's own status, a fresh process with
``SPEECHBLOCKS_NATIVE=0``), stays JSON-serialisable, and imports no framework in this process.

The framework probes run in child processes: torch is probed for real (its version against its distribution's
metadata); TensorFlow's real import (~10 s of CPU) is left to ``speechblocks doctor``: its probe's wiring is checked
with planted stand-in modules on ``PYTHONPATH``, as are an import error and a crash.
"""
from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from speechblocks import diagnostics, native

ROOT = Path(__file__).resolve().parents[1]
HAS_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None


def _groups_in_setup_cfg() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return (set(parser["options.extras_require"]) - {"all"}) | {"required"}


def _plant(tmp_path: Path, **modules: str) -> Path:
    """Packages ``name/__init__.py`` with the given code, in a directory to put first on ``PYTHONPATH``."""
    for name, code in modules.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(textwrap.dedent(code))
    return tmp_path


def test_the_report_without_frameworks_states_the_facts():
    r = diagnostics.report(frameworks=False)
    assert json.loads(json.dumps(r)) == r
    assert set(r["packages"]) == _groups_in_setup_cfg()
    for name in ("numpy", "scipy"):
        assert r["packages"]["required"][name] == importlib.metadata.version(name)
    assert r["packages"]["test"]["pytest"] == importlib.metadata.version("pytest")
    assert r["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert r["python"]["executable"] == sys.executable
    assert r["frameworks"] == {} and r["threads"]["torch"] is None
    assert r["threads"]["cpu_budget"] == native.cpu_budget() >= 1
    assert r["threads"]["affinity"] == len(os.sched_getaffinity(0)) and r["threads"]["os_cpu_count"] == os.cpu_count()
    st = native.status()
    assert r["native"]["available"] == st.available and r["native"]["path"] == st.path
    assert r["native"]["flags"] == list(st.flags) and r["native"]["reason"] == st.reason
    if HAS_CC and st.available:
        assert Path(r["native"]["path"]).is_file()
    text = diagnostics.format_report(r)
    assert f"numpy {importlib.metadata.version('numpy')}" in text and "(not probed)" in text
    assert ("native kernels: available" if st.available else f"native kernels: off: {st.reason}") in text


def test_a_missing_package_is_not_installed():
    found = diagnostics.packages({"x": ["surely-not-a-real-package-4242", "numpy"]})
    assert found == {"x": {"surely-not-a-real-package-4242": "not installed",
                           "numpy": importlib.metadata.version("numpy")}}


def test_the_installed_metadata_lists_what_setup_cfg_does(tmp_path):
    """An installed wheel has no setup.cfg: the distribution's Requires-Dist gives the same groups and names."""
    from_cfg = diagnostics.extras()
    from_metadata = diagnostics.extras(tmp_path / "no_setup.cfg")
    assert set(from_cfg) == _groups_in_setup_cfg()
    assert {g: sorted(n) for g, n in from_metadata.items()} == {g: sorted(n) for g, n in from_cfg.items()}


def test_switched_off_in_a_fresh_process(tmp_path):
    code = ("import json, sys\nfrom speechblocks.diagnostics import report, format_report\n"
            "r = report(frameworks=False)\n"
            "loaded = [m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules]\n"
            "print(json.dumps([r, format_report(r), loaded]))")
    env = {**os.environ, "SPEECHBLOCKS_NATIVE": "0", "SPEECHBLOCKS_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    r, text, frameworks = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["native"]["enabled"] is False and r["native"]["available"] is False
    assert r["native"]["reason"] == "SPEECHBLOCKS_NATIVE=0" and "native kernels: off: SPEECHBLOCKS_NATIVE=0" in text
    assert r["environment"]["SPEECHBLOCKS_CACHE"] == str(tmp_path) and r["environment"]["SPEECHBLOCKS_NATIVE"] == "0"
    assert r["environment"]["native_cache"] == str(tmp_path / "native") and not (tmp_path / "native").exists()
    assert f"SPEECHBLOCKS_CACHE={tmp_path}" in text
    assert frameworks == []  # the report imported no framework in its process


@pytest.mark.skipif(not any(d.metadata["Name"] == "torch" for d in importlib.metadata.distributions()),
                    reason="torch is not installed")
def test_the_torch_probe_matches_the_installed_torch(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torch documents: its intra-op threads
    (found,) = diagnostics.probe("torch").values()
    assert found["imports"] is True
    assert found["version"] == importlib.metadata.version("torch")
    assert found["threads"] == 1


def test_planted_frameworks_errors_and_crashes(tmp_path, monkeypatch):
    path = _plant(tmp_path,
                  tensorflow="""
                      import types
                      __version__ = "9.8.7"
                      config = types.SimpleNamespace(threading=types.SimpleNamespace(
                          get_intra_op_parallelism_threads=lambda: 3, get_inter_op_parallelism_threads=lambda: 2))
                  """,
                  keras="""
                      import types
                      __version__ = "6.5.4"
                      backend = types.SimpleNamespace(backend=lambda: "planted")
                  """,
                  torch='raise ImportError("planted: torch is broken\\nsecond line")\n',
                  crashing="import os\nos.kill(os.getpid(), 9)\n")
    monkeypatch.setenv("PYTHONPATH", str(path))
    r = diagnostics.report()
    assert json.loads(json.dumps(r)) == r
    assert r["frameworks"]["tensorflow"] == dict(imports=True, version="9.8.7", intra_op_threads=3, inter_op_threads=2)
    assert r["frameworks"]["keras"] == dict(imports=True, version="6.5.4", backend="planted")
    assert r["frameworks"]["torch"] == dict(imports=False, error="ImportError: planted: torch is broken")
    assert (r["threads"]["tensorflow_intra_op"], r["threads"]["tensorflow_inter_op"], r["threads"]["torch"]) == (3, 2,
                                                                                                                None)
    text = diagnostics.format_report(r)
    assert "torch       does not import: ImportError: planted: torch is broken" in text
    assert "tensorflow  9.8.7  (intra-op threads 3, inter-op 2" in text
    assert "keras       6.5.4  (backend planted)" in text
    monkeypatch.setitem(diagnostics._PROBES, "crashing", "import crashing\nout = {}\n")
    crashed = dict(imports=False, error="the import crashed (exit status -9): no output")
    assert diagnostics.probe("crashing", "torch") == {"crashing": crashed, "torch": crashed}
