"""The ``parity`` pytest fixture from the installed package (entry point ``pytest11``), used by a test file outside
the package: a fresh pytest in a temporary directory (no conftest, no ini of this repository) runs a user's test
file of two torch models -- one twin that agrees, one whose batch norm epsilon differs -- and fails the second with
the parity table and the first-divergence line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

USER_TESTS = '''
import copy

import numpy as np
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(4, 6)
        self.norm = torch.nn.BatchNorm1d(6, eps=1e-3)
        self.out = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.norm(self.inp(x))))


def models():
    torch.manual_seed(0)
    ref = Net().eval()
    with torch.no_grad():
        ref.norm.running_var.uniform_(0.5, 1.5)
    return ref, copy.deepcopy(ref)


X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def test_twin_agrees(parity):
    ref, twin = models()
    report = parity.assert_close(ref, twin, X, atol=1e-6)
    assert report.ok and report.rows[0].comparison == "torch<->torch"


def test_broken_twin(parity):
    ref, twin = models()
    twin.norm.eps = 1e-5  # the port kept torch's default
    parity.assert_close(ref, twin, X, atol=1e-6)
'''


def test_the_fixture_works_in_a_users_own_suite(tmp_path):
    (tmp_path / "test_user_port.py").write_text(textwrap.dedent(USER_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir: nothing of this repository's configuration
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user_port.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "FAILED test_user_port.py::test_broken_twin" in out, out
    assert "parity: 1 of 1 outputs differ beyond the tolerance" in out, out
    assert "Net    torch<->torch  output" in out, out  # the table row
    assert "first divergence: norm (call 1 of 1): inputs agree (max |Δ| 0.000e+00 <= 1e-06)" in out, out
