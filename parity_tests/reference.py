"""Main-process client of the TF1 legacy reference: runs specs in one subprocess, memoised.

The library and the test process always use Keras 3; only the subprocess sets ``TF_USE_LEGACY_KERAS=1``.
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

__all__ = ["LegacySpec", "LegacyResult", "run_legacy", "LegacyReferenceError"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKDIR = None
_MEMO: dict[str, LegacyResult] = {}


class LegacyReferenceError(RuntimeError):
    """The legacy subprocess failed; the message carries its stderr tail."""


@dataclasses.dataclass
class LegacySpec:
    """One TF1 graph to build and run.

    Args:
        block: builder name (``parity_tests/legacy/builders_*.py`` ``BUILDERS`` keys).
        config: block constructor keywords (JSON-serialisable).
        inputs: ``{name: array}`` fed to placeholders.
        scope: variable-scope prefix the block is built under.
        training: ``is_training`` of the TF1 block.
        seed: seed of the variable values and of the graph's random ops.
        options: builder/runner options (e.g. ``{"adam_step": True}``; ``{"assign": {name: value}}`` sets variables
            -- names relative to ``scope`` -- to fixed values after the random fill).
        dynamic_shapes: placeholders with unknown dimensions (as the real graph) when True.
    """

    block: str
    config: dict
    inputs: dict
    scope: str = "Tacotron_model/inference"
    training: bool = False
    seed: int = 0
    options: dict = dataclasses.field(default_factory=dict)
    dynamic_shapes: bool = True

    def key(self) -> str:
        h = hashlib.sha1()
        h.update(json.dumps([self.block, self.config, self.scope, self.training, self.seed, self.options,
                             self.dynamic_shapes], sort_keys=True, default=str).encode())
        for k in sorted(self.inputs):
            a = np.ascontiguousarray(self.inputs[k])
            h.update(k.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
        return h.hexdigest()[:16]


@dataclasses.dataclass
class LegacyResult:
    """Outputs of one spec: ``checkpoint`` (a real TF1 checkpoint prefix), ``block_scope`` (the block's
    full scope in it) and ``outputs`` (``{name: array}``; ``mask/...`` entries are dropout/zoneout masks)."""

    spec: LegacySpec
    checkpoint: str
    block_scope: str
    outputs: dict


class _LegacyServer:
    """The TF1 reference subprocess (``parity_tests.legacy.runner --serve``), one per test process: TensorFlow with
    tf_keras is imported once (~7 s of CPU), not once per :func:`run_legacy` call. Started on first use, restarted
    if it died; one batch at a time (a lock: ``run_checkpoint_parity`` calls from a thread); its stderr goes to a
    file whose tail a failure reports."""

    def __init__(self):
        self.proc = None
        self.log = None
        self.lock = threading.Lock()

    def _start(self):
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
        if self.log is not None:  # the previous (dead) server's
            self.log.close()
        else:  # the first start: stopped at exit before the work directory (registered earlier) is removed
            atexit.register(self.close)
        self.log = tempfile.TemporaryFile("w+", dir=_workdir())
        self.proc = subprocess.Popen([sys.executable, "-m", "parity_tests.legacy.runner", "--serve"], env=env,
                                     cwd=_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        self.lines = queue.Queue()

        def pump(stream, lines):
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, args=(self.proc.stdout, self.lines), daemon=True).start()

    def _stderr_tail(self) -> str:
        self.log.seek(0)
        return _tail(self.log.read())

    def _reply(self, deadline: float) -> str:
        """The next ``LEGACY-*`` line (other stdout lines are the graphs' own prints)."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:  # a stuck server is killed, as subprocess.run(timeout=) did
                self.proc.kill()
                self.close()
                raise LegacyReferenceError("legacy reference timed out") from None
            if line is None:  # stdout closed: the process ended
                code = self.proc.wait()
                tail = self._stderr_tail()
                self.proc = None
                raise LegacyReferenceError(f"legacy reference failed (exit {code}):\n{tail}")
            if line.startswith("LEGACY-"):
                return line.rstrip("\n")

    def run(self, spec_path: str, inputs_path: str, root: str, timeout: float) -> None:
        with self.lock:
            deadline = time.monotonic() + timeout
            if self.proc is None or self.proc.poll() is not None:
                self._start()
                ready = self._reply(deadline)
                if ready != "LEGACY-READY":
                    raise LegacyReferenceError(f"legacy reference did not start: {ready}")
            self.proc.stdin.write(json.dumps([spec_path, inputs_path, root]) + "\n")
            self.proc.stdin.flush()
            reply = self._reply(deadline)
            if reply.startswith("LEGACY-ERROR "):
                tail = _tail(json.loads(reply[len("LEGACY-ERROR "):]))
                raise LegacyReferenceError(f"legacy reference failed:\n{tail}")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _tail(text: str, lines: int = 25) -> str:
    """The last ``lines`` lines of a failure's output (stderr or traceback), for the error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


#: the process's server; its subprocess starts at the first :func:`run_legacy` call
_SERVER = _LegacyServer()


def _workdir() -> str:
    global _WORKDIR
    if _WORKDIR is None:
        _WORKDIR = tempfile.mkdtemp(prefix="speechblocks-legacy-")
        atexit.register(shutil.rmtree, _WORKDIR, True)
    return _WORKDIR


def run_legacy(specs: list[LegacySpec], timeout: float = 1200.0) -> list[LegacyResult]:
    """Runs the specs not yet memoised in one legacy subprocess; returns results in order."""
    todo = {}
    for s in specs:
        k = s.key()
        if k not in _MEMO:
            todo[k] = s
    if todo:
        root = tempfile.mkdtemp(dir=_workdir())
        payload, arrays = [], {}
        for k, s in todo.items():
            payload.append({"id": k, "block": s.block, "config": s.config, "scope": s.scope, "training": s.training,
                            "seed": s.seed, "options": s.options, "dynamic_shapes": s.dynamic_shapes,
                            "input_names": sorted(s.inputs)})
            for name, a in s.inputs.items():
                arrays[f"{k}::{name}"] = np.asarray(a)
        spec_path = os.path.join(root, "specs.json")
        inputs_path = os.path.join(root, "inputs.npz")
        with open(spec_path, "w") as f:
            json.dump(payload, f, default=str)
        np.savez(inputs_path, **arrays)
        _SERVER.run(spec_path, inputs_path, root, timeout)
        for k, s in todo.items():
            out = os.path.join(root, k)
            with open(os.path.join(out, "meta.json")) as f:
                meta = json.load(f)
            with np.load(os.path.join(out, "outputs.npz")) as z:
                outputs = {name: z[name] for name in z.files}
            _MEMO[k] = LegacyResult(s, meta["checkpoint"], meta["block_scope"], outputs)
    return [_MEMO[s.key()] for s in specs]
