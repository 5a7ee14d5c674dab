"""What this installation can do: Python and the platform, the versions of every package the extras bring, which
frameworks import, the native library's state, the threads each side will use (``speechblocks doctor``).

Framework-free at import and at run time: each framework is imported in a child Python process (its import error,
or a crash, is reported there and cannot take this process down, and this process loads no framework).
:func:`report` returns plain JSON-serialisable data (``speechblocks doctor --json`` dumps it);
:func:`format_report` writes it for a person.
"""
from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from . import native
from .native._build import cache_dir
from .native._fields import cgroup_cpu_limit

__all__ = ["report", "format_report"]

NOT_INSTALLED = "not installed"
#: environment variables that change what runs
ENVIRONMENT = ("SPEECHBLOCKS_CACHE", "SPEECHBLOCKS_NATIVE", "SPEECHBLOCKS_NATIVE_CFLAGS", "CC", "OMP_NUM_THREADS",
               "KERAS_BACKEND", "TF_USE_LEGACY_KERAS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
PROBE_TIMEOUT_S = 300

#: what a child process runs per framework (``out``: what it reports)
_PROBES = {
    "tensorflow": ("import tensorflow as tf\n"
                   "out = dict(version=tf.__version__,\n"
                   "           intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),\n"
                   "           inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads())\n"),
    "keras": "import keras\nout = dict(version=keras.__version__, backend=keras.backend.backend())\n",
    "torch": ("import torch\n"
              "out = dict(version=torch.__version__, threads=torch.get_num_threads(),\n"
              "           interop_threads=torch.get_num_interop_threads())\n"),
}
#: the frameworks imported together, one child process each (Keras 3 imports its backend: TensorFlow once)
_CHILDREN = (("tensorflow", "keras"), ("torch",))
_CHILD = """import json, sys
found = {}
for name, code in json.loads(sys.argv[1]).items():
    ns = {}
    try:
        exec(code, ns)
        found[name] = dict(imports=True, **ns["out"])
    except BaseException as e:
        text = str(e).strip().splitlines()
        found[name] = dict(imports=False, error=type(e).__name__ + (": " + text[0] if text else ""))
print(json.dumps(found))
"""


def _requirement_name(line: str) -> Optional[str]:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return m.group(1) if m else None


SETUP_CFG = Path(__file__).resolve().parent.parent / "setup.cfg"


def extras(cfg: Path = SETUP_CFG) -> dict[str, list[str]]:
    """``{"required": [...], extra: [package names]}``: ``setup.cfg``'s ``install_requires`` and
    ``extras_require`` (a source checkout), else the installed distribution's ``Requires-Dist``; ``all`` (the union)
    left out."""
    out: dict[str, list[str]] = {}
    if cfg.is_file():
        parser = configparser.ConfigParser()
        parser.read(cfg, encoding="utf-8")
        out["required"] = [n for n in map(_requirement_name, parser.get("options", "install_requires",
                                                                        fallback="").splitlines()) if n]
        if parser.has_section("options.extras_require"):
            for extra, text in parser.items("options.extras_require"):
                out[extra] = [n for n in map(_requirement_name, text.splitlines()) if n]
    else:
        try:
            lines = importlib.metadata.metadata("speechblocks").get_all("Requires-Dist") or []
        except importlib.metadata.PackageNotFoundError:
            lines = []
        for line in lines:
            m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", line)
            out.setdefault(m.group(1) if m else "required", []).append(_requirement_name(line))
    out.pop("all", None)
    return out


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return NOT_INSTALLED


def packages(groups: Optional[dict[str, list[str]]] = None) -> dict[str, dict[str, str]]:
    """``{group: {package: version or "not installed"}}`` for :func:`extras` (or ``groups``)."""
    return {group: {name: _version(name) for name in names} for group, names in (groups or extras()).items()}


def probe(*frameworks: str) -> dict[str, dict]:
    """Imports each of ``frameworks`` (tensorflow, keras, torch), in order, in one child Python process: per name
    ``{"imports": True, "version": ..., its thread settings}`` or ``{"imports": False, "error": the error's first
    line}`` (a child that crashes or hangs: that, for each)."""
    codes = json.dumps({name: _PROBES[name] for name in frameworks})
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    failed = None
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, codes], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        failed = f"the import ran past {PROBE_TIMEOUT_S} s"
    except OSError as e:
        failed = f"no child Python process ({e})"
    else:
        lines = done.stdout.strip().splitlines()
        try:
            found = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            found = None
        if done.returncode == 0 and isinstance(found, dict) and set(found) == set(frameworks):
            return found
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        failed = f"the import crashed (exit status {done.returncode}): {last}"
    return {name: {"imports": False, "error": failed} for name in frameworks}


def _affinity() -> Optional[int]:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def report(frameworks: bool = True) -> dict:
    """What this installation can do, as JSON-serialisable data.

    Args:
        frameworks: import each framework in a child process (seconds each); ``False`` leaves them out.

    Returns:
        ``{"speechblocks", "python", "platform", "packages", "frameworks", "native", "threads", "environment"}``:
        versions (``"not installed"`` when missing) by group of ``setup.cfg``; per framework ``imports`` and its
        version or its import error's first line; :func:`speechblocks.native.status` (built on first use); the CPU
        budget the native steps use and the frameworks' own thread settings; the variables that change what runs.
    """
    with ThreadPoolExecutor(len(_CHILDREN)) as pool:  # the children import at once
        futures = [pool.submit(probe, *names) for names in _CHILDREN] if frameworks else []
        st = native.status()
        found = {name: info for f in futures for name, info in f.result().items()}
    limit = cgroup_cpu_limit()
    return {
        "speechblocks": {"version": _version("speechblocks"), "location": str(Path(__file__).resolve().parent)},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
                     "description": platform.platform()},
        "packages": packages(),
        "frameworks": found,
        "native": {"enabled": native.enabled(), **st.as_dict()},
        "threads": {
            "cpu_budget": native.cpu_budget(), "os_cpu_count": os.cpu_count(), "affinity": _affinity(),
            "cgroup_cpu_limit": limit,
            "torch": found.get("torch", {}).get("threads"),
            "tensorflow_intra_op": found.get("tensorflow", {}).get("intra_op_threads"),
            "tensorflow_inter_op": found.get("tensorflow", {}).get("inter_op_threads"),
        },
        "environment": {**{name: os.environ.get(name) for name in ENVIRONMENT}, "native_cache": str(cache_dir())},
    }


def _framework_line(name: str, info: dict) -> str:
    if not info.get("imports"):
        return f"  {name:<11} does not import: {info.get('error', '?')}"
    extra = {"tensorflow": lambda i: f"intra-op threads {i.get('intra_op_threads')}, inter-op "
                                     f"{i.get('inter_op_threads')}; 0: TensorFlow's own choice",
             "keras": lambda i: f"backend {i.get('backend')}",
             "torch": lambda i: f"threads {i.get('threads')}, inter-op {i.get('interop_threads')}"}[name](info)
    return f"  {name:<11} {info.get('version')}  ({extra})"


def format_report(report: dict) -> str:
    """:func:`report`'s data for a person, one fact a line."""
    r = report
    py, plat, nat, th = r["python"], r["platform"], r["native"], r["threads"]
    lines = [f"speechblocks {r['speechblocks']['version']} ({r['speechblocks']['location']})",
             f"Python {py['version']} ({py['implementation']}, {py['executable']})",
             f"platform {plat['description']} ({plat['machine']})", "", "frameworks:"]
    if r["frameworks"]:
        lines += [_framework_line(name, info) for name, info in r["frameworks"].items()]
    else:
        lines.append("  (not probed)")
    lines += ["", "native kernels: " + ("available" if nat["available"] else f"off: {nat['reason']}"),
              f"  library     {nat['path'] or '-'}",
              f"  compiler    {nat['compiler'] or '-'}" + (f" ({nat['compiler_version']})"
                                                            if nat.get("compiler_version") else ""),
              f"  flags       {' '.join(nat['flags'])}"]
    if nat.get("note"):
        lines.append(f"  note        {nat['note']}")
    if nat.get("build_log") and not nat["available"]:
        lines += ["  build log:"] + ["    " + line for line in nat["build_log"].splitlines()[:12]]
    limit = th["cgroup_cpu_limit"]
    lines += ["", f"threads: native steps {th['cpu_budget']} (CPU budget: affinity {th['affinity']}, cgroup quota "
                  f"{'none' if limit is None else f'{limit:g} CPUs'}, os.cpu_count {th['os_cpu_count']}); torch "
                  f"{th['torch'] if th['torch'] is not None else '-'}; TensorFlow intra-op "
                  f"{th['tensorflow_intra_op'] if th['tensorflow_intra_op'] is not None else '-'}", "", "packages:"]
    for group, versions in r["packages"].items():
        lines.append(f"  [{group}] " + ", ".join(f"{name} {version}" for name, version in versions.items()))
    env = r["environment"]
    lines += ["", "environment:"] + [f"  {name}={value}" for name, value in env.items()
                                     if name != "native_cache" and value is not None]
    lines.append(f"  native cache: {env['native_cache']}")
    return "\n".join(lines)
