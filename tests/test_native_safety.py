"""The native library's build and load are safe and say what they did (``speechblocks/native/_build.py``).

A cached shared object is code this process would run: one that another user could have written (group- or
world-writable, another owner, in a directory that is not this user's) is never loaded; the compiler, the flags and
the sources are in the cache key; a library whose structs differ from the ctypes mirrors is refused; every reason
the native step is off is kept, one line, in ``status()``. The "planted" libraries here are real shared objects whose
constructor writes a marker file when loaded: the marker's absence proves they never ran.

Builds use ``SPEECHBLOCKS_NATIVE_CFLAGS=-O0`` (~1 s each instead of ~6 s); each test has its own cache directory and
a fresh process state (``_build._reset``).
"""
from __future__ import annotations

import ctypes
import logging
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from speechblocks import native
from speechblocks.native import _build, _fields, _structs

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None or platform.system() != "Linux", reason="needs Linux and a C compiler")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("SPEECHBLOCKS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE_CFLAGS", "-O0")
    monkeypatch.delenv("SPEECHBLOCKS_NATIVE", raising=False)
    monkeypatch.delenv("CC", raising=False)
    _build._reset()
    yield
    _build._reset()


def _wrapper(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A compiler script: runs the real one and logs each call, or fails like a compiler while ``fail`` exists.
    Returns ``(script, its call log, the fail switch)``."""
    script, calls, fail = tmp_path / "wrapcc", tmp_path / "calls.log", tmp_path / "fail"
    script.write_text(f"""#!/bin/sh
if [ "$1" != "--version" ]; then echo "$@" >> {calls}; fi
if [ "$1" != "--version" ] && [ -e {fail} ]; then
  echo "decoder_step.c:1:1: warning: something minor" >&2
  echo "decoder_step.c:7:3: error: planted failure" >&2
  echo "compilation terminated." >&2
  exit 1
fi
exec {CC} "$@"
""")
    script.chmod(0o755)
    return script, calls, fail


def _planted(tmp_path: Path) -> tuple[bytes, Path]:
    """A shared object that writes a marker file when loaded: ``(its bytes, the marker's path)``."""
    marker, src, out = tmp_path / "PLANTED_RAN", tmp_path / "plant.c", tmp_path / "plant.so"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {\n'
                   f'    FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("ran", f); fclose(f); }}\n}}\n'
                   "int sb_tile_columns(void) { return 999; }\n")
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
    return out.read_bytes(), marker


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """One ``-O0`` build for the module (the tests copy it into their own cache instead of building again)."""
    cache = tmp_path_factory.mktemp("template")
    with pytest.MonkeyPatch.context() as m:
        m.setenv("SPEECHBLOCKS_CACHE", str(cache))
        m.setenv("SPEECHBLOCKS_NATIVE_CFLAGS", "-O0")
        m.delenv("SPEECHBLOCKS_NATIVE", raising=False)
        m.delenv("CC", raising=False)
        _build._reset()
        st = native.status()
        _build._reset()
    assert st.available, st.reason
    return Path(st.path)


@pytest.fixture
def cached(template) -> Path:
    """The template build, in this test's cache where the loader will look for it (nothing loaded yet)."""
    directory = _build.cache_dir()
    directory.mkdir(mode=0o700, parents=True)
    path = directory / template.name
    shutil.copyfile(template, path)
    path.chmod(0o700)
    return path


def _plant(path: Path, data: bytes, mode: int) -> None:
    """Puts ``data`` at ``path`` as a new file (this process keeps the library it loaded from there mapped)."""
    aside = path.with_name("planting")
    aside.write_bytes(data)
    aside.chmod(mode)
    os.replace(aside, path)


def test_a_fresh_cache_is_private_and_the_library_checks_out(tmp_path):
    st = native.status()
    assert st.available and st.reason == "" and st.note == "", st
    path = Path(st.path)
    directory = tmp_path / "cache" / "native"
    assert path.parent == directory
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    info = os.stat(path)
    assert info.st_uid == os.geteuid() and not info.st_mode & 0o022
    assert st.flags == ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-O0")
    assert st.compiler == os.path.realpath(CC) or Path(st.compiler).name in ("cc", "gcc")
    assert st.threads == native.cpu_budget() and "error" not in st.build_log
    lib = native.library()
    assert lib is not None and lib.sb_tile_columns() in (8, 16, 64)
    assert _build.check_layouts(lib) == ""


def test_a_cached_library_others_can_write_is_rebuilt_not_loaded(tmp_path, cached, caplog):
    path = cached
    data, marker = _planted(tmp_path)
    _plant(path, data, 0o775)
    with caplog.at_level(logging.WARNING, "speechblocks.native"):
        st = native.status()
    assert st.available and st.path == str(path), st
    assert st.note == f"cached {path.name} refused (writable by its group (mode 0775)): rebuilt"
    assert not marker.exists(), "the planted library ran"
    assert path.read_bytes() != data and not os.stat(path).st_mode & 0o022
    assert native.library().sb_tile_columns() != 999
    assert [r.getMessage() for r in caplog.records] == [f"speechblocks.native: {st.note}"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_cached_library_of_another_owner_is_rebuilt_not_loaded(tmp_path, cached):
    path = cached
    data, marker = _planted(tmp_path)
    _plant(path, data, 0o755)
    os.chown(path, 4242, 4242)
    st = native.status()
    assert st.available and "owned by uid 4242" in st.note, st
    assert not marker.exists() and path.read_bytes() != data and os.stat(path).st_uid == os.geteuid()


def test_a_cache_directory_of_another_user_is_left_alone(tmp_path, monkeypatch, cached):
    """The ownership check through the uid getter: every file here is "another user's" (works without root)."""
    path = cached
    data, marker = _planted(tmp_path)
    _plant(path, data, 0o700)
    monkeypatch.setattr(_build, "_uid", lambda: os.geteuid() + 1)
    st = native.status()
    assert st.available, st
    assert f"cache directory {path.parent} refused (owned by uid {os.geteuid()}" in st.note
    assert "private temporary directory" in st.note
    assert Path(st.path).parent != path.parent and not Path(st.path).parent.exists()  # built aside, then removed
    assert not marker.exists() and path.read_bytes() == data  # the other user's file: neither run nor touched
    assert native.library().sb_tile_columns() != 999


def test_a_shared_writable_cache_directory_is_left_alone(tmp_path, cached):
    path = cached
    data, marker = _planted(tmp_path)
    _plant(path, data, 0o700)
    path.parent.chmod(0o777)
    st = native.status()
    assert st.available and "refused (writable by its group and every user (mode 0777))" in st.note, st
    assert not marker.exists() and path.read_bytes() == data


def test_a_cache_under_a_directory_others_can_write_is_left_alone(tmp_path, cached):
    """Another user could rename the cache directory away and put their own in its place."""
    base = cached.parent.parent  # $SPEECHBLOCKS_CACHE
    data, marker = _planted(tmp_path)
    _plant(cached, data, 0o700)
    base.chmod(0o1777)  # sticky, as /tmp: others cannot rename what is not theirs
    assert _build.untrusted_ancestor(cached.parent) == ""
    base.chmod(0o777)
    assert _build.untrusted_ancestor(cached.parent) == (f"{base} is writable by others without the sticky bit "
                                                        "(mode 0777)")
    st = native.status()
    assert st.available and not marker.exists() and cached.read_bytes() == data, st
    assert st.note == (f"cache directory {cached.parent} refused ({base} is writable by others without the sticky "
                       "bit (mode 0777)): built in a private temporary directory")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_cache_under_another_users_directory_is_refused(tmp_path):
    other = tmp_path / "alice"
    (other / "cache" / "native").mkdir(parents=True)
    assert _build.untrusted_ancestor(other / "cache" / "native") == ""
    os.chown(other, 4242, 4242)  # alice may rename what her directory holds
    assert _build.untrusted_ancestor(other / "cache" / "native") == f"{other} is owned by uid 4242"


def test_a_refused_file_that_cannot_be_rebuilt_is_refused_in_one_line(tmp_path, monkeypatch):
    script, calls, fail = _wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    version = subprocess.run([str(script), "--version"], capture_output=True, check=True).stdout
    directory = _build.cache_dir()
    directory.mkdir(mode=0o700, parents=True)
    path = directory / f"speechblocks_native-{_build.cache_key([str(script)], _build.flags(), version)}.so"
    data, marker = _planted(tmp_path)
    _plant(path, data, 0o666)
    fail.touch()
    assert native.library() is None
    st = native.status()
    assert not st.available and "\n" not in st.reason and st.path == str(path)
    assert st.reason.startswith(f"cached library {path} refused (writable by its group and every user (mode 0666)); "
                                "rebuilding it failed: the C build failed (wrapcc exit status 1): ")
    assert "decoder_step.c:7:3: error: planted failure" in st.reason and "warning" not in st.reason
    assert not marker.exists() and len(calls.read_text().splitlines()) == len(_build.VARIANTS)


def test_a_changed_flag_is_a_new_cache_key_and_a_rebuild(monkeypatch, cached):
    calls, real = [], _build.build
    monkeypatch.setattr(_build, "build", lambda *a: calls.append(a) or real(*a))
    st = native.status()  # the cached file of these flags: loaded, no compiler run
    assert st.available and st.path == str(cached) and st.build_log == "" and calls == []
    _build._reset()
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE_CFLAGS", "-O0 -DSB_TEST_FLAG=1")
    st = native.status()
    assert st.available and st.path != str(cached) and Path(st.path).parent == cached.parent
    assert st.flags[-2:] == ("-O0", "-DSB_TEST_FLAG=1") and "-DSB_TEST_FLAG=1" in st.build_log
    assert [a[1][-1] for a in calls] == ["-DSB_TEST_FLAG=1"] and cached.exists()


def test_the_cache_key_covers_compiler_flags_and_every_header(tmp_path, monkeypatch):
    cc, flags, version = ["/usr/bin/cc"], _build.flags(), b"cc 12.2.0"
    key = _build.cache_key(cc, flags, version)
    assert key == _build.cache_key(list(cc), tuple(flags), version)
    assert key != _build.cache_key(["/usr/bin/gcc"], flags, version)
    assert key != _build.cache_key(cc, flags, b"cc 12.3.0")
    assert key != _build.cache_key(cc, flags + ("-mno-avx512f",), version)
    assert {p.name for p in _build.HEADERS} >= {"common.h", "stop_rule.h", "vector_maths.h", "vector_tiles.h"}
    header = tmp_path / "extra.h"
    header.write_text("/* one */\n")
    monkeypatch.setattr(_build, "HEADERS", _build.HEADERS + (header,))
    before = _build.cache_key(cc, flags, version)
    header.write_text("/* two */\n")
    assert _build.cache_key(cc, flags, version) != before


class _Moved(ctypes.Structure):  # sb_decoder's mirror with `units` a double: every later offset moves
    _fields_ = [(n, ctypes.c_double if n == "units" else t) for n, t in _structs._Decoder._fields_]


class _Longer(ctypes.Structure):  # sb_batch_state's mirror with a field C does not have
    _fields_ = [*_structs._BatchState._fields_, ("extra", ctypes.c_int)]


class _Shorter(ctypes.Structure):  # sb_decoder's mirror without its last field
    _fields_ = _structs._Decoder._fields_[:-1]


@pytest.mark.parametrize("fn, mirror, expected", [
    ("sb_decoder_layout", _Moved, "struct mismatch: sb_decoder.units is at offset 4 in C, 8 in the ctypes mirror "
                                  "_Moved"),
    ("sb_batch_state_layout", _Longer, "struct mismatch: sb_batch_state.extra is in the ctypes mirror _Longer, not "
                                       "in C"),
    ("sb_decoder_layout", _Shorter, f"struct mismatch: sb_decoder.{_structs._Decoder._fields_[-1][0]} is in C, not "
                                    "in the ctypes mirror _Shorter"),
])
def test_a_struct_mismatch_is_refused_in_one_line(monkeypatch, fn, mirror, expected, cached):
    assert native.library() is not None  # the true mirrors pass
    _build._reset()
    monkeypatch.setattr(_build, "LAYOUTS", {**_structs.LAYOUTS, fn: mirror})
    assert native.library() is None
    st = native.status()
    assert not st.available and st.reason == expected and st.path is not None


def test_a_limit_mismatch_is_refused(monkeypatch, cached):
    monkeypatch.setitem(_build._LIMITS, "MAX_LAYERS", 9)
    assert native.library() is None
    assert native.status().reason == "limit mismatch: MAX_LAYERS is 8 in C, 9 in Python"


def test_an_explicit_missing_compiler_is_reported_as_such(monkeypatch, caplog):
    monkeypatch.setenv("CC", "/nonexistent")
    with caplog.at_level(logging.WARNING, "speechblocks.native"):
        assert native.library() is None
        assert native.library() is None
    st = native.status()
    assert not st.available and st.compiler is None and st.path is None
    assert st.reason == "no C compiler: CC='/nonexistent' is not an executable file or a command on PATH"
    assert [r.getMessage() for r in caplog.records] == [
        f"speechblocks: the native decoder step is unavailable ({st.reason}); the framework loops run"]


def test_no_compiler_on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    st = native.status()
    assert not st.available and st.reason == "no C compiler: neither cc nor gcc is on PATH (set CC)"


def test_a_failing_build_reports_its_first_error_lines(tmp_path, monkeypatch):
    script, _, fail = _wrapper(tmp_path)
    fail.touch()
    monkeypatch.setenv("CC", str(script))
    assert native.library() is None
    st = native.status()
    assert st.reason == "the C build failed (wrapcc exit status 1): decoder_step.c:7:3: error: planted failure"
    assert st.compiler == str(script) and "compilation terminated." in st.build_log
    assert st.build_log.count("planted failure") == len(_build.VARIANTS)  # each link variant was tried
    assert not list((tmp_path / "cache" / "native").iterdir())  # no half-built file left


def test_switched_off(monkeypatch, caplog):
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    with caplog.at_level(logging.WARNING, "speechblocks.native"):
        assert native.library() is None
        st = native.status()
    assert not st.available and st.reason == "SPEECHBLOCKS_NATIVE=0" and st.flags == _build.flags()
    assert caplog.records == []  # not wanted: nothing to warn about
    assert not (Path(os.environ["SPEECHBLOCKS_CACHE"]) / "native").exists()  # nothing built


def test_the_status_is_json_serialisable(cached):
    import json
    st = native.status()
    assert json.loads(json.dumps(st.as_dict()))["flags"] == list(st.flags)


def test_nowhere_to_build_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("SPEECHBLOCKS_CACHE", str(blocker))  # the cache directory cannot be created
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))  # nor a private one
    assert native.library() is None
    reason = native.status().reason
    assert reason.startswith("the native library cannot be prepared: [Errno 20] Not a directory: ")
    assert "\n" not in reason


# ---- the CPU budget ----

def _cgroup(root: Path, rel: str, **files: str) -> None:
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("__", ".")).write_text(text + "\n")


def test_cgroup_v2_quota_smallest_along_the_path(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/outer/inner\n")
    root = tmp_path / "fs"
    _cgroup(root, "", cpu__max="max 100000")
    _cgroup(root, "outer", cpu__max="150000 100000")
    _cgroup(root, "outer/inner", cpu__max="max 100000")
    assert _fields.cgroup_cpu_limit(str(proc), str(root)) == 1.5
    _cgroup(root, "outer/inner", cpu__max="50000 100000")
    assert _fields.cgroup_cpu_limit(str(proc), str(root)) == 0.5
    _cgroup(root, "outer", cpu__max="max 100000")
    _cgroup(root, "outer/inner", cpu__max="max 100000")
    assert _fields.cgroup_cpu_limit(str(proc), str(root)) is None


def test_cgroup_v1_quota(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/x\n3:cpu,cpuacct:/job\n0::/\n")
    root = tmp_path / "fs"
    _cgroup(root, "cpu,cpuacct", cpu__cfs_quota_us="-1", cpu__cfs_period_us="100000")
    _cgroup(root, "cpu,cpuacct/job", cpu__cfs_quota_us="250000", cpu__cfs_period_us="100000")
    assert _fields.cgroup_cpu_limit(str(proc), str(root)) == 2.5
    _cgroup(root, "cpu,cpuacct/job", cpu__cfs_quota_us="-1", cpu__cfs_period_us="100000")
    assert _fields.cgroup_cpu_limit(str(proc), str(root)) is None
    assert _fields.cgroup_cpu_limit(str(tmp_path / "absent"), str(tmp_path / "absent_fs")) is None


def test_cpu_budget_follows_the_affinity_and_the_quota(monkeypatch):
    code = ("import os; from speechblocks.native import cpu_budget\n"
            "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); print(cpu_budget())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"
    affinity = len(os.sched_getaffinity(0))
    for limit, expected in ((None, affinity), (0.3, 1), (affinity - 0.5 if affinity > 1 else 0.5, affinity)):
        monkeypatch.setattr(_fields, "cgroup_cpu_limit", lambda limit=limit: limit)
        monkeypatch.setattr(_fields, "_QUOTA", {})
        assert native.cpu_budget() == expected, limit  # a fractional quota rounds up
    monkeypatch.setattr(_fields, "cgroup_cpu_limit", lambda: 0.3)
    assert native.cpu_budget() == affinity  # the last reading, until QUOTA_TTL_S has passed
    monkeypatch.setattr(_fields, "QUOTA_TTL_S", 0.0)
    assert native.cpu_budget() == 1
