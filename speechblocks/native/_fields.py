"""What both native decoder loops share (``DecoderLoop``, ``batch_loop.BatchDecoderLoop``): the pointer type, the
limits (``common.h``'s, checked against the library's at load), the OpenMP thread rules (:func:`cpu_budget`, the
fork rule) and the fields both C decoder structs hold."""
from __future__ import annotations

import ctypes
import math
import os
import time
from pathlib import Path
from typing import Optional

import numpy as np

_F = ctypes.POINTER(ctypes.c_float)
MAX_LAYERS = 8  # SB_MAX_LAYERS
MAX_ATTENTION_UNITS = 1024  # SB_MAX_UNITS
MAX_BATCH = 1024  # SB_MAX_BATCH
_POOL_PID: list[int] = []  # the process whose OpenMP threads a native step started
#: :func:`cgroup_cpu_limit` as last read, per process: ``{pid: (time.monotonic() then, limit)}`` (reading the cgroup
#: files costs ~1 ms; the adapters ask at every call)
_QUOTA: dict[int, tuple[float, Optional[float]]] = {}
QUOTA_TTL_S = 10.0


def cpu_budget() -> int:
    """The CPUs this process may use: the CPUs of its affinity mask (``os.sched_getaffinity``: ``taskset``, a
    cpuset), capped by its cgroup's CPU quota rounded up (``cpu.max``, or cgroup v1's ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``, the smallest along the cgroup's path; read again after :data:`QUOTA_TTL_S` seconds): a
    container limited to 2 CPUs on a 64-core host gets 2, where ``os.cpu_count()`` says 64 and a team of 64 OpenMP
    threads would share 2 CPUs' time. At least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    pid, now = os.getpid(), time.monotonic()
    seen = _QUOTA.get(pid)
    if seen is None or now - seen[0] > QUOTA_TTL_S:
        seen = _QUOTA[pid] = (now, cgroup_cpu_limit())
    quota = seen[1]
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _quota(directory: Path, v2: bool) -> Optional[float]:
    """The CPU quota one cgroup directory sets, in CPUs, or ``None`` when it sets none (or it cannot be read)."""
    try:
        if v2:
            fields = (_read(directory / "cpu.max") or "max").split()
            return None if fields[0] == "max" or len(fields) < 2 else int(fields[0]) / int(fields[1])
        quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
        return None if quota is None or period is None or int(quota) <= 0 else int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def cgroup_cpu_limit(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> Optional[float]:
    """The smallest CPU quota (in CPUs, e.g. 1.5) of this process's cgroup and its ancestors, v2 (``cpu.max``) or v1
    (the ``cpu`` controller's ``cpu.cfs_quota_us / cpu.cfs_period_us``); ``None`` when none is set or readable."""
    base = Path(root)
    places: list[tuple[Path, tuple[str, ...], bool]] = []  # (the hierarchy's mount, the cgroup's path in it, v2)
    for line in (_read(Path(proc_cgroup)) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = tuple(p for p in path.split("/") if p)
        if controllers == "":
            places.append((base, relative, True))
        elif "cpu" in controllers.split(","):
            mounts = [base / m for m in (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu") if (base / m).is_dir()]
            if mounts:
                places.append((mounts[0], relative, False))
    if not places:
        places.append((base, (), True))
    limits = [quota for mount, relative, v2 in places for depth in range(len(relative), -1, -1)
              if (quota := _quota(mount.joinpath(*relative[:depth]), v2)) is not None and quota > 0]
    return min(limits) if limits else None


def _threads(requested: int) -> int:
    """The OpenMP threads a native call may use: a child forked after its parent ran OpenMP threads must not reuse
    that pool (GNU libgomp is not fork-safe): one thread there, as torch does in such a child."""
    n = max(1, int(requested))
    if _POOL_PID and _POOL_PID[0] != os.getpid():
        return 1
    if n > 1 and not _POOL_PID:
        _POOL_PID.append(os.getpid())
    return n


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(_F)


def _set_fields(m, lstm_weights, lstm_biases, gates, zoneout, prenet_weights, prenet_biases, num_mels, prenet_rate,
                query_weight, location_weight, v_a, keys, values, score_bias, projection_weight, projection_bias,
                frame_size, pad_before, smoothing, cumulate, stop_at_any, threads) -> None:
    """Fills the fields both C decoder structs share (``_Decoder``, ``batch_loop._BatchDecoder``, the same names):
    the kernels' pointers into ``lstm_weights`` / ``prenet_weights`` / ``query_weight`` / ``projection_weight`` (the
    batch-1 step's own arrays, the batched step's packed panels), the rest from the decoder's arrays and constants.
    Layer 1's input is ``[pre-net output, context]``: its width follows from the last pre-net layer and the memory."""
    u = lstm_biases[0].shape[0] // 4
    m.layers, m.units = len(lstm_biases), u
    m.input0 = prenet_biases[-1].shape[0] + values.shape[-1]
    for k, (x, b) in enumerate(zip(lstm_weights, lstm_biases)):
        m.lstm_w[k], m.lstm_b[k] = _ptr(x), _ptr(b)
    m.gate_i, m.gate_f, m.gate_g, m.gate_o = gates
    m.zoneout = int(zoneout != 0.0)
    m.keep_new, m.keep_old = 1.0 - zoneout, zoneout
    m.prenet_layers, m.num_mels = len(prenet_biases), num_mels
    for k, (x, b) in enumerate(zip(prenet_weights, prenet_biases)):
        m.prenet_sizes[k] = int(b.shape[0])
        m.prenet_w[k], m.prenet_b[k] = _ptr(x), _ptr(b)
    m.drop_rate, m.drop_scale = prenet_rate, 1.0 / (1.0 - prenet_rate)
    m.att_units, m.max_time, m.memory_size = v_a.shape[0], values.shape[-2], values.shape[-1]
    m.kernel, m.pad_before = location_weight.shape[0], pad_before
    m.smoothing, m.cumulate = int(smoothing), int(cumulate)
    m.query_w, m.location_wt, m.v_a = _ptr(query_weight), _ptr(location_weight), _ptr(v_a)
    m.keys_t, m.values = _ptr(keys), _ptr(values)
    m.score_bias = None if score_bias is None else _ptr(score_bias)
    m.proj_rows, m.frame_size = projection_bias.shape[0], frame_size
    m.r, m.stop_at_any = m.proj_rows - frame_size, int(stop_at_any)
    m.proj_w, m.proj_b = _ptr(projection_weight), _ptr(projection_bias)
    m.threads = _threads(threads)
