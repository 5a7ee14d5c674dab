"""Fuzz test of the migrated-file readers (issue #13): a few hundred seeded mutations -- truncation at random
offsets, random byte flips -- of small real ``speechblocks migrate`` files, both formats, blocks and whole models.

Every case must end in a clean error (``MigratedFileError``: one line naming the file) or in weights identical to
the unmutated file's; never a crash, a hang, a framework trace or silently different weights. The reads run in one
subprocess (``tests/helpers/fuzz_reader.py``) under a deadline, so that a crash in h5py / HDF5 / torch's C++ reader
cannot kill the pytest worker and a hang ends the test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from tests.helpers.migrated_files import cached_migrated_files

TRUNCATIONS_PER_FILE = 25
FLIPS_PER_FILE = 50
DEADLINE_SECONDS = 600
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mutations(data: bytes, rng: np.random.Generator):
    """``(name, bytes)``: truncations at random offsets (and the first bytes), then 1 to 4 flipped bytes at random
    offsets (half of them inside the first 4 KiB, where the headers and the metadata are)."""
    n = len(data)
    cuts = [0, 4, 8] + sorted(int(c) for c in rng.integers(9, n, TRUNCATIONS_PER_FILE - 3))
    for c in cuts:
        yield f"cut{c}", data[:c]
    for j in range(FLIPS_PER_FILE):
        b = bytearray(data)
        hi = min(n, 4096) if j % 2 else n
        for pos in rng.integers(0, hi, int(rng.integers(1, 5))):
            b[int(pos)] ^= int(rng.integers(1, 256))
        yield f"flip{j}", bytes(b)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    files = cached_migrated_files()
    d = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(13)
    sources = {k: files[k] for k in ("model.pt", "blocks.pt", "model.h5", "blocks.h5")}
    cases = []
    for kind, src in sources.items():
        with open(src, "rb") as f:
            data = f.read()
        for name, mutated in _mutations(data, rng):
            path = str(d / f"{kind.split('.')[0]}-{name}{'.weights.h5' if kind.endswith('h5') else '.pt'}")
            with open(path, "wb") as f:
                f.write(mutated)
            cases.append({"kind": kind, "path": path, "name": name})
    manifest = d / "manifest.json"
    manifest.write_text(json.dumps({"sources": sources, "cases": cases}))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.helpers.fuzz_reader", str(manifest)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=DEADLINE_SECONDS)
        stdout, rc, hung = proc.stdout, proc.returncode, False
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        stdout, rc, hung = out.decode() if isinstance(out, bytes) else out, None, True
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    started = [x["start"] for x in lines if "start" in x]
    done = {x["i"]: x for x in lines if "i" in x}
    last = cases[started[-1]] if started else None
    assert not hung, f"the readers hung (deadline {DEADLINE_SECONDS} s) on case {last}"
    assert rc == 0 and len(done) == len(cases), (
        f"the reader process died (exit status {rc}) on case {last}: {proc.stderr[-2000:]}")
    return cases, done


def test_a_few_hundred_cases_ran(results):
    cases, done = results
    assert len(cases) == len(done) == 4 * (TRUNCATIONS_PER_FILE + FLIPS_PER_FILE)
    counts = Counter((c["kind"], done[i]["outcome"]) for i, c in enumerate(cases))
    print("fuzz outcomes:", dict(sorted(counts.items())))
    # the mutations do reach past the file-kind check: errors of many kinds, some harmless flips read identically
    messages = {done[i]["message"].split(": ", 1)[-1][:40] for i in done if done[i]["outcome"] == "error"}
    assert len(messages) >= 5, messages


def test_every_case_is_a_clean_error_or_identical(results):
    cases, done = results
    bad = []
    for i, case in enumerate(cases):
        r = done[i]
        if r["outcome"] == "identical":
            continue
        if r["outcome"] == "DIFFERENT":
            bad.append(f"{case['name']} of {case['kind']}: read without error but the weights differ")
        elif not r["documented"] or "\n" in r["message"] or repr(case["path"]) not in r["message"]:
            bad.append(f"{case['name']} of {case['kind']}: {r['type']}: {r['message'][:300]!r}")
    assert not bad, f"{len(bad)} of {len(cases)} cases:\n" + "\n".join(bad[:20])
