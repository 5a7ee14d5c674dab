"""Timing helpers for benchmarks: median of repeats after warm-up, interleaved to share machine noise."""
from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeats: int = 7, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare_times(fns: dict[str, Callable[[], object]], repeats: int = 7, warmup: int = 2) -> dict[str, float]:
    """Median seconds of each callable, runs interleaved round-robin so noise hits all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}



@contextlib.contextmanager
def native_code(on: bool):
    """``SPEECHBLOCKS_NATIVE`` set for the block: the native decoder step and encoder scan on or off (the frameworks'
    own loops)."""
    old = os.environ.get("SPEECHBLOCKS_NATIVE")
    os.environ["SPEECHBLOCKS_NATIVE"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["SPEECHBLOCKS_NATIVE"]
        else:
            os.environ["SPEECHBLOCKS_NATIVE"] = old


# -- timing servers: one side of a cross-framework bench in its own clean process ------------------------------------

def serve(runs: dict, warmup: dict, info: dict, protocol) -> int:
    """A timing server's loop: warm each run up (``warmup[name]`` calls, default 1), write ``ready`` and ``info`` as
    JSON on one line to ``protocol``; then for each stdin line ``NAME N`` run ``runs[NAME]`` N times and write the
    seconds."""
    import json
    import sys
    import time

    for name, fn in runs.items():
        for _ in range(warmup.get(name, 1)):
            fn()
    protocol.write("ready " + json.dumps(info) + "\n")
    protocol.flush()
    for line in sys.stdin:
        name, n = line.split()
        fn = runs[name]
        t0 = time.perf_counter()
        for _ in range(int(n)):
            fn()
        protocol.write(f"{time.perf_counter() - t0}\n")
        protocol.flush()
    return 0


class TimingServer:
    """One side's timing subprocess (``python -m MODULE SIDE CONFIG_JSON THREADS``, the legacy side with
    ``TF_USE_LEGACY_KERAS=1``, stderr to ``log``); ``time(name, n)`` runs a call n times there."""

    def __init__(self, module: str, side: str, config: dict, threads: int, log: str):
        import json
        import os
        import subprocess
        import sys

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.side = side
        self.log = log  # the server's stderr (a file: nothing blocks, nothing breaks when nobody reads it)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        env.pop("TF_USE_LEGACY_KERAS", None)
        if side == "legacy":
            env["TF_USE_LEGACY_KERAS"] = "1"
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        with open(log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", module, side, json.dumps(config), str(threads)],
                                         cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True)

    def expect(self, word: str) -> dict:
        """Blocks until the server writes a line starting with ``word``; returns the JSON after it."""
        import json

        line = self.proc.stdout.readline().strip()
        if not line.startswith(word):
            self.close()
            with open(self.log) as f:
                err = f.read()
            raise RuntimeError(f"{self.side} timing subprocess failed ({line!r}):\n{err[-3000:]}")
        return json.loads(line[len(word):] or "{}")

    def wait_ready(self) -> dict:
        """Blocks until the server is built, checked and warmed up; returns its info."""
        return self.expect("ready")

    def time(self, name: str, n: int = 1) -> float:
        self.proc.stdin.write(f"{name} {n}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self):
        import subprocess

        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

