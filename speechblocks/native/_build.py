"""Building, trusting and loading the native library, and saying why it is off.

The library is compiled on first use with the system C compiler into ``$SPEECHBLOCKS_CACHE/native`` (default
``~/.cache/speechblocks/native``, created ``0700``), one file per cache key: the compiler (its path and
``--version``), the flags (:data:`BASE_FLAGS`, ``$SPEECHBLOCKS_NATIVE_CFLAGS`` appended, each link variant), every
source and header, and the CPU's instruction sets. A shared object is code this process runs, so a cached one is
loaded only from a directory and as a file owned by this user and writable by nobody else, in a directory nobody
else can rename away (every directory above it this user's or root's, and not writable by others unless sticky, as
``/tmp``): a file that is not is rebuilt in its place; a cache directory that is not (another user's, group- or
world-writable, under another user's directory: ``SPEECHBLOCKS_CACHE`` on a shared disk) is left alone and the
library built aside, in a private temporary directory removed once loaded.
The library exports its structs' sizes and field offsets and its limits, and a library whose layout differs from the
ctypes mirrors (``_structs.py``) is refused.

Whatever turns it off (``SPEECHBLOCKS_NATIVE=0``, not Linux, no compiler, a failed build, a refused file, a struct
mismatch) is kept as a one-line reason in :func:`status`; the first time a wanted library is unavailable for a given
reason, one ``logging`` warning (logger ``speechblocks.native``) says so.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import logging
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional

from ._fields import _F, MAX_ATTENTION_UNITS, MAX_BATCH, MAX_LAYERS, cpu_budget
from ._structs import LAYOUTS, _Decoder, _State, _Tacotron1Decoder

_HERE = Path(__file__).parent
#: the C sources of the library (one shared object)
SOURCES = (_HERE / "decoder_step.c", _HERE / "decoder_batch.c", _HERE / "encoder_scan.c", _HERE / "tacotron1_step.c")
#: the headers they include (every ``.h`` here: all are in the cache key)
HEADERS = tuple(sorted(_HERE.glob("*.h")))
#: the compile flags before ``$SPEECHBLOCKS_NATIVE_CFLAGS``
BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared")
#: the link variants tried in order: glibc's vector maths, else the scalar libm
VARIANTS = (("-DSB_LIBMVEC", "-lmvec", "-lm"), ("-lm",))
CFLAGS_ENV = "SPEECHBLOCKS_NATIVE_CFLAGS"
BUILD_TIMEOUT_S = 300
_LIMITS = {"MAX_LAYERS": MAX_LAYERS, "MAX_ATTENTION_UNITS": MAX_ATTENTION_UNITS, "MAX_BATCH": MAX_BATCH}

log = logging.getLogger("speechblocks.native")

_LOCK = threading.Lock()
#: (compiler, flags, cache directory) -> (library or None, its status): one build per process and configuration
_LOADED: dict[tuple, tuple[Optional[ctypes.CDLL], NativeStatus]] = {}
_WARNED: set[str] = set()


@dataclasses.dataclass(frozen=True)
class NativeStatus:
    """The native library's state (:func:`status`).

    Attributes:
        available: the library is loaded and the native steps run.
        reason: why not, one line (``""`` when available).
        path: the shared object loaded (or that would be), ``None`` when no compiler was found.
        compiler: the compiler command, ``None`` when none was found; compiler_version: its ``--version`` first line.
        flags: the compile flags (:data:`BASE_FLAGS` then ``$SPEECHBLOCKS_NATIVE_CFLAGS``), link variant excluded.
        build_log: the compiler's output of a build in this process (``""`` when the cached file was loaded).
        note: what was done instead of the plain path (a refused cached file rebuilt, a build aside), or ``""``.
        threads: :func:`cpu_budget`, the OpenMP threads the native steps get by default.
    """
    available: bool
    reason: str = ""
    path: Optional[str] = None
    compiler: Optional[str] = None
    compiler_version: str = ""
    flags: tuple = ()
    build_log: str = ""
    note: str = ""
    threads: int = 1

    def as_dict(self) -> dict:
        """JSON-serialisable."""
        out = dataclasses.asdict(self)
        out["flags"] = list(self.flags)
        return out


def enabled() -> bool:
    """``False`` when ``SPEECHBLOCKS_NATIVE=0`` turns the native step off (read at every call)."""
    return os.environ.get("SPEECHBLOCKS_NATIVE", "1") != "0"


def flags() -> tuple[str, ...]:
    """The compile flags: :data:`BASE_FLAGS`, then ``$SPEECHBLOCKS_NATIVE_CFLAGS`` split as a shell would (later
    flags win: ``-O0`` there builds fast, ``-mno-avx512f`` without AVX-512)."""
    return BASE_FLAGS + tuple(shlex.split(os.environ.get(CFLAGS_ENV, "")))


def compiler() -> tuple[Optional[list[str]], str]:
    """``(command, "")`` of the C compiler, or ``(None, reason)``. ``$CC`` when set (its first word resolved on
    ``PATH``; a ``CC`` that names nothing executable is reported as such, never replaced), else ``cc``, else
    ``gcc``."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        try:
            argv = shlex.split(cc)
        except ValueError as e:
            return None, f"CC={cc!r} cannot be split into a command ({e})"
        found = shutil.which(argv[0]) if argv else None
        if found is None:
            return None, f"no C compiler: CC={cc!r} is not an executable file or a command on PATH"
        return [found, *argv[1:]], ""
    for name in ("cc", "gcc"):
        found = shutil.which(name)
        if found:
            return [found], ""
    return None, "no C compiler: neither cc nor gcc is on PATH (set CC)"


def cache_dir() -> Path:
    base = os.environ.get("SPEECHBLOCKS_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "speechblocks") / "native"


def _uid() -> int:
    return os.geteuid()


def untrusted(st: os.stat_result, kind: str = "file") -> str:
    """``""`` when ``st`` (an ``lstat``) is this user's and writable by nobody else, else why not (one phrase)."""
    wanted = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not wanted(st.st_mode):
        return f"not a regular {kind}" if kind == "file" else "not a directory"
    if st.st_uid != _uid():
        return f"owned by uid {st.st_uid}, not this user (uid {_uid()})"
    if st.st_mode & 0o022:
        who = " and ".join(w for bit, w in ((0o020, "its group"), (0o002, "every user")) if st.st_mode & bit)
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def untrusted_ancestor(directory: Path) -> str:
    """``""`` when nobody but this user and root can rename ``directory`` away (and so swap in their own): every
    directory above it owned by this user or root, and writable by nobody else unless sticky (as ``/tmp``); else
    which one is not and why."""
    for parent in Path(os.path.realpath(directory)).parents:
        st = os.stat(parent)
        if st.st_uid not in (0, _uid()):
            return f"{parent} is owned by uid {st.st_uid}"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"{parent} is writable by others without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def _cpu_key() -> str:
    """What the build depends on besides the source and the compiler: this CPU's instruction sets."""
    cpu_flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    cpu_flags = line
                    break
    except OSError:
        pass
    return platform.machine() + cpu_flags


def cache_key(cc: list[str], cflags: tuple[str, ...], version: bytes) -> str:
    """The file name's key: the compiler command and version, the flags and link variants, every source and header
    (name and text), the CPU's instruction sets."""
    h = hashlib.sha256()
    for part in (*cc, "\0", version, "\0", *cflags, "\0", *(" ".join(v) for v in VARIANTS), "\0", _cpu_key()):
        h.update(part if isinstance(part, bytes) else part.encode() + b"\n")
    for p in SOURCES + HEADERS:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:20]


def _error_lines(text: str, n: int = 3) -> str:
    """The first ``n`` lines of a compiler's output that say ``error`` (else its first lines), one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines
    return " | ".join(errors[:n])


def build(cc: list[str], cflags: tuple[str, ...], target: Path) -> tuple[bool, str, str]:
    """Compiles :data:`SOURCES` into ``target`` (atomic: written aside, renamed), each of :data:`VARIANTS` until one
    links. Returns ``(built, reason when not, the compiler's output)``."""
    outputs, reason = [], ""
    for extra in VARIANTS:
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        command = [*cc, *cflags, *map(str, SOURCES), "-o", tmp, *extra]
        try:
            done = subprocess.run(command, capture_output=True, timeout=BUILD_TIMEOUT_S)
            text = (done.stdout + done.stderr).decode(errors="replace")
            outputs.append(f"$ {shlex.join(command)}\n{text}")
            if done.returncode == 0:
                os.replace(tmp, target)
                return True, "", "\n".join(outputs)[-8000:]
            first = _error_lines(text)
            reason = f"the C build failed ({Path(cc[0]).name} exit status {done.returncode}" + (
                f"): {first}" if first else ", no output)")
        except subprocess.TimeoutExpired:
            reason = f"the C build ran past {BUILD_TIMEOUT_S} s"
            outputs.append(f"$ {shlex.join(command)}\n(timed out)")
        except OSError as e:
            reason = f"the C build could not run {cc[0]}: {e.strerror or e}"
            outputs.append(f"$ {shlex.join(command)}\n{e}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return False, reason, "\n".join(outputs)[-8000:]


class _Entry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_long)]


def _table(lib: ctypes.CDLL, fn: str) -> tuple[list[tuple[str, int]], int]:
    """A ``sb_layout_entry`` table of the library: ``([(name, value)...], the closing entry's value)``."""
    f = getattr(lib, fn)
    f.restype, f.argtypes = ctypes.POINTER(_Entry), []
    p, rows, i = f(), [], 0
    while p[i].name is not None:
        rows.append((p[i].name.decode(), int(p[i].value)))
        i += 1
    return rows, int(p[i].value)


def check_layouts(lib: ctypes.CDLL, layouts: Optional[dict] = None) -> str:
    """``""`` when every struct the library exports (``sb_*_layout``) has the size, the fields and the offsets of its
    ctypes mirror (:data:`_structs.LAYOUTS`) and its limits are Python's; else the first difference, one line."""
    for fn, mirror in (LAYOUTS if layouts is None else layouts).items():
        c_name = fn[: -len("_layout")]
        try:
            rows, size = _table(lib, fn)
        except AttributeError:
            return f"struct mismatch: the library exports no {fn}"
        fields = dict(rows)
        for name, *_ in mirror._fields_:
            offset = getattr(mirror, name).offset
            if name not in fields:
                return f"struct mismatch: {c_name}.{name} is in the ctypes mirror {mirror.__name__}, not in C"
            if fields.pop(name) != offset:
                return (f"struct mismatch: {c_name}.{name} is at offset {dict(rows)[name]} in C, {offset} in the "
                        f"ctypes mirror {mirror.__name__}")
        if fields:
            return f"struct mismatch: {c_name}.{next(iter(fields))} is in C, not in the ctypes mirror {mirror.__name__}"
        if size != ctypes.sizeof(mirror):
            return (f"struct mismatch: sizeof({c_name}) is {size} in C, {ctypes.sizeof(mirror)} in the ctypes mirror "
                    f"{mirror.__name__}")
    try:
        limits, _ = _table(lib, "sb_limits")
    except AttributeError:
        return "struct mismatch: the library exports no sb_limits"
    for name, value in limits:
        if _LIMITS.get(name) != value:
            return f"limit mismatch: {name} is {value} in C, {_LIMITS.get(name)} in Python"
    return ""


def _declare(lib: ctypes.CDLL) -> None:
    lib.sb_decoder_step.restype = ctypes.c_int
    lib.sb_decoder_step.argtypes = [ctypes.POINTER(_Decoder), ctypes.POINTER(_State), _F, ctypes.c_int, _F, _F]
    lib.sb_decoder_step_batch.restype = ctypes.c_int
    lib.sb_decoder_step_batch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_int), _F, ctypes.c_int, _F, _F,
                                          ctypes.POINTER(ctypes.c_int)]
    lib.sb_pack_panels.restype = None
    lib.sb_pack_panels.argtypes = [_F, ctypes.c_int, ctypes.c_int, ctypes.c_int, _F]
    lib.sb_tile_columns.restype = ctypes.c_int
    lib.sb_tacotron1_decode.restype = ctypes.c_int
    lib.sb_tacotron1_decode.argtypes = [ctypes.POINTER(_Tacotron1Decoder), ctypes.c_int, _F, _F,
                                        ctypes.POINTER(ctypes.c_int)]
    lib.sb_encoder_scan.restype = ctypes.c_int
    lib.sb_encoder_scan.argtypes = [_F, _F, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_float, ctypes.c_float, ctypes.c_int, ctypes.c_int, _F]


def _directory() -> tuple[Path, str, bool]:
    """``(where to build and load, a note, aside)``: the cache directory (created ``0700``) when it is this user's
    and writable by nobody else, else a fresh private temporary directory (``aside``: removed once loaded)."""
    d = cache_dir()
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = untrusted(os.lstat(d), "directory") or untrusted_ancestor(d)
    except OSError as e:
        why = f"cannot be created or read ({e.strerror or e})"
    if not why:
        return d, "", False
    return (Path(tempfile.mkdtemp(prefix="speechblocks-native-")),
            f"cache directory {d} refused ({why}): built in a private temporary directory", True)


def _load(cc: list[str], cflags: tuple[str, ...]) -> tuple[Optional[ctypes.CDLL], NativeStatus]:
    """Builds (when needed), checks and loads the library for this compiler and these flags."""
    info = dict(compiler=shlex.join(cc), flags=cflags)
    try:
        version = subprocess.run([*cc, "--version"], capture_output=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, NativeStatus(False, f"the compiler {cc[0]} does not run ({e})", **info)
    info["compiler_version"] = version.decode(errors="replace").partition("\n")[0].strip()
    directory, note, aside = _directory()
    target = directory / f"speechblocks_native-{cache_key(cc, cflags, version)}.so"
    info["path"] = str(target)
    build_log = ""
    try:
        try:
            why = untrusted(os.lstat(target))  # "": a cached file to load
        except FileNotFoundError:
            why = None  # not built yet
        if why:
            note = f"cached {target.name} refused ({why}): rebuilt"
        if why != "":
            built, reason, build_log = build(cc, cflags, target)
            if not built:
                if why:
                    reason = f"cached library {target} refused ({why}); rebuilding it failed: {reason}"
                return None, NativeStatus(False, reason, build_log=build_log, note=note, **info)
        try:
            lib = ctypes.CDLL(str(target))
        except OSError:  # a damaged file in the cache: built again, once
            built, reason, build_log = build(cc, cflags, target)
            if not built:
                return None, NativeStatus(False, reason, build_log=build_log, note=note, **info)
            try:
                lib = ctypes.CDLL(str(target))
            except OSError as e:
                return None, NativeStatus(False, f"the built library does not load: {e}", build_log=build_log,
                                          note=note, **info)
        mismatch = check_layouts(lib)
        if mismatch:
            return None, NativeStatus(False, mismatch, build_log=build_log, note=note, **info)
        _declare(lib)
        return lib, NativeStatus(True, build_log=build_log, note=note, **info)
    finally:
        if aside:
            shutil.rmtree(directory, ignore_errors=True)


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def _resolve() -> tuple[Optional[ctypes.CDLL], NativeStatus]:
    cflags = flags()
    if not enabled():
        cc, _ = compiler()
        return None, NativeStatus(False, "SPEECHBLOCKS_NATIVE=0", compiler=cc and shlex.join(cc), flags=cflags)
    if platform.system() != "Linux":
        lib, st = None, NativeStatus(False, f"not Linux ({platform.system()}): the native step is built on Linux only",
                                     flags=cflags)
    else:
        cc, why = compiler()
        if cc is None:
            lib, st = None, NativeStatus(False, why, flags=cflags)
        else:
            key = (tuple(cc), cflags, str(cache_dir()))
            with _LOCK:
                if key not in _LOADED:
                    try:
                        _LOADED[key] = _load(cc, cflags)
                    except OSError as e:  # the cache or a temporary directory cannot be written or read
                        _LOADED[key] = None, NativeStatus(False, f"the native library cannot be prepared: {e}",
                                                          compiler=shlex.join(cc), flags=cflags)
                lib, st = _LOADED[key]
    if lib is None:
        _warn_once(f"speechblocks: the native decoder step is unavailable ({st.reason}); the framework loops run")
    elif st.note:
        _warn_once(f"speechblocks.native: {st.note}")
    return lib, st


def library() -> Optional[ctypes.CDLL]:
    """The compiled native library (built on first use), or ``None`` when it is disabled or cannot be built, loaded
    or trusted (:func:`status` says why).

    In a process that imported torch, the library's OpenMP runtime is torch's (the dynamic loader resolves
    ``libgomp.so.1`` to the copy already loaded), so the two share one pool of threads."""
    return _resolve()[0]


def status() -> NativeStatus:
    """The native library's state: built and loaded (on first use, as :func:`library`), or off and why
    (``SPEECHBLOCKS_NATIVE=0``, not Linux, no compiler, the build's first error lines, a refused cached file or
    cache directory, a struct mismatch), with the compiler, the flags and :func:`cpu_budget`."""
    return dataclasses.replace(_resolve()[1], threads=cpu_budget())


def _reset() -> None:
    """Forgets the libraries loaded and the warnings given (tests)."""
    with _LOCK:
        _LOADED.clear()
        _WARNED.clear()
