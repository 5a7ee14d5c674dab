"""The wheel: built from the checkout, it holds the library and no test module, installs, and its console
script answers ``--help`` from the installed copy (not from the checkout)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_wheel_installs_without_tests_and_runs(tmp_path):
    # built from a copy: setuptools leaves build/ behind, and a stale build/ would leak old files into a wheel
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "demo-output",
                                                             "__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("speechblocks-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"speechblocks/cli.py", "tf_layers/tacotron2.py", "torch_layers/tacotron2.py",
            "parity_tests/checkpoint_parity.py", "speechblocks/audio/griffin_lim.py",
            "speechblocks/native/decoder_step.c", "speechblocks/native/decoder_batch.c",
            "speechblocks/native/encoder_scan.c", "speechblocks/native/vector_maths.h",
            "speechblocks/native/vector_tiles.h", "speechblocks/native/common.h",
            "speechblocks/native/stop_rule.h"} <= set(names)
    assert [n for n in names if os.path.basename(n).startswith(("test_", "_pytest", "conftest"))] == []
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run([str(target / "bin" / "speechblocks"), "--help"], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert run.returncode == 0 and "migrate" in run.stdout and "griffin-lim" in run.stdout, run.stderr[-2000:]
    where = subprocess.run([sys.executable, "-c", "import speechblocks; print(speechblocks.__file__)"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(target)), where.stdout
