"""Main-process client of the TF1 legacy reference: runs specs in one subprocess, memoised.

The library and the test process always use Keras 3; only the subprocess sets ``TF_USE_LEGACY_KERAS=1``.
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

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
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run([sys.executable, "-m", "parity_tests.legacy.runner", spec_path, inputs_path, root],
                              env=env, cwd=_ROOT, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-25:])
            raise LegacyReferenceError(f"legacy reference failed (exit {proc.returncode}):\n{tail}")
        for k, s in todo.items():
            out = os.path.join(root, k)
            with open(os.path.join(out, "meta.json")) as f:
                meta = json.load(f)
            with np.load(os.path.join(out, "outputs.npz")) as z:
                outputs = {name: z[name] for name in z.files}
            _MEMO[k] = LegacyResult(s, meta["checkpoint"], meta["block_scope"], outputs)
    return [_MEMO[s.key()] for s in specs]
