"""Fuzzing the TF1 checkpoint reader (issue #13): 400 seeded mutations of a small real checkpoint -- truncation at a
random offset and 1-3 flipped random bytes, of the ``.index`` and of the ``.data`` file, 100 of each -- read with
``read_tf1_checkpoint`` in one subprocess with a deadline. Every case must give either the identical weights or a
clean one-line ``CheckpointError`` naming the checkpoint; never another exception, different numbers, a crash of
the process (TensorFlow's C++ reader aborts on some corrupted entries) or a hang.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import numpy as np

from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables

SEED, CASES = 13, 400
DEADLINE_S = 600


def test_mutated_checkpoints_give_identical_weights_or_one_clean_error(tmp_path):
    _, variables = small_variables("rtvc", seed=13)
    prefix = save_model_checkpoint(tmp_path, variables)
    reference = os.path.join(tmp_path, "reference.npz")
    np.savez(reference, **variables)
    proc = subprocess.run([sys.executable, "-m", "tests.helpers.fuzz_checkpoint_runner", prefix, reference, str(SEED),
                           str(CASES)], capture_output=True, text=True, timeout=DEADLINE_S,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TF_CPP_MIN_LOG_LEVEL": "3"})
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    last = records[-1] if records else None
    assert proc.returncode == 0, (f"the reader process died (status {proc.returncode}) after case "
                                  f"{last and last['case']}: {proc.stderr[-2000:]}")
    assert len(records) == CASES

    bad = [r for r in records if r["result"] not in ("same", "error")]
    assert not bad, bad[:5]
    for r in records:
        if r["result"] == "error":
            assert "\n" not in r["message"] and prefix in r["message"], r
    outcomes = collections.Counter((r["kind"], r["result"]) for r in records)
    print(f"fuzz: {CASES} cases, outcomes {dict(outcomes)}")
    # every byte of this data file belongs to a variable that is read: a flip or a cut is always caught
    assert outcomes[("flip data", "error")] == outcomes[("truncate data", "error")] == CASES // 4
    # a cut index loses its footer; a flipped index fails a block checksum, the footer magic or a handle --
    # except flips in the footer's zero padding, which no reader looks at (then the weights are identical)
    assert outcomes[("truncate index", "error")] == CASES // 4
    assert outcomes[("flip index", "error")] + outcomes[("flip index", "same")] == CASES // 4
    assert outcomes[("flip index", "error")] > CASES // 8
