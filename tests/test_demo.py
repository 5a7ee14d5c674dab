"""``make demo``'s plumbing (``parity_tests/demo.py``, ``parity_tests/demo_tacotron1.py``) without running the
heavy parts: the ``--only`` choices, the closing timing figures (the Tacotron-1 section's main-thread time, its
waits, the background's wall and CPU seconds), and the section's own TF1 subprocess, which fills the same memo as
``parity_tests.reference.run_legacy``."""
from __future__ import annotations

import concurrent.futures
import importlib.util
import time

import numpy as np
import pytest

from parity_tests import demo, demo_tacotron1
from parity_tests.report import Row


def _row(passed=True):
    return Row("X", "A<->B", "out", 0.0 if passed else 1.0, 1e-4, passed, "")


def _finished_background(wall=(3.0, 4.0)):
    bg = demo_tacotron1.Background(concurrent.futures.Future(), concurrent.futures.Future(),
                                   {"checkpoint": wall[0], "legacy": wall[1]}, time.perf_counter())
    bg.checkpoint.set_result("/tmp/keithito/model.ckpt")
    bg.legacy.set_result(None)
    bg.finished, bg.thread_cpu, bg.legacy_cpu = bg.started + sum(wall), 0.3, 9.5
    return bg


def test_only_tacotron2_is_the_baseline(monkeypatch, capsys, tmp_path):
    """``--only tacotron2``: steps 1-7 alone, no background started, the timing without the section's lines."""
    monkeypatch.setenv("SPEECHBLOCKS_DEMO_OUT", str(tmp_path))
    monkeypatch.setattr(demo, "_tacotron2_part", lambda tmp, out_dir, t0: (0, [_row()]))
    monkeypatch.setattr(demo_tacotron1, "start_background", lambda tmp: pytest.fail("no background"))
    assert demo.main(["--only", "tacotron2"]) == 0
    out = capsys.readouterr().out
    assert "1 rows, 1 PASS, 0 FAIL" in out
    assert "Tacotron-2 part (steps 1-7), main thread:" in out
    assert "load average (1/5/15 min):" in out and "s CPU (this process" in out
    assert "Tacotron-1" not in out


def test_whole_demo_prints_the_section_increment(monkeypatch, capsys, tmp_path):
    """Both parts: the section's main-thread time (waits included) is printed as what it added to the wall clock,
    beside the background's span, wall and CPU seconds; a FAIL row makes the exit status 1."""
    monkeypatch.setenv("SPEECHBLOCKS_DEMO_OUT", str(tmp_path))
    bg = _finished_background()
    monkeypatch.setattr(demo, "_tacotron2_part", lambda tmp, out_dir, t0: (0, [_row()]))
    monkeypatch.setattr(demo_tacotron1, "start_background", lambda tmp: bg)

    def section(tmp, out_dir, background):
        assert background is bg
        bg.section.update(main=12.5, waited=1.5, cpu=11.0)
        return 0, [_row(), _row(False)]

    monkeypatch.setattr(demo_tacotron1, "tacotron1_section", section)
    assert demo.main([]) == 1
    out = capsys.readouterr().out
    assert "3 rows, 2 PASS, 1 FAIL" in out
    assert ("Tacotron-1 section, main thread (steps 8-12, waits included): 12.5 s wall, of it 1.5 s waiting for "
            "the background; 11.0 s CPU") in out
    assert "7.0 s wall (checkpoint 3.0 s, graphs 4.0 s); CPU 9.8 s (the thread 0.3 s, its TF1 subprocess 9.5 s)" in out
    assert "TACOTRON-1 SECTION ADDED 12.5 s TO THE WALL CLOCK" in out
    assert "python -m parity_tests.demo --only tacotron2" in out


def test_section_times_its_waits(monkeypatch, tmp_path):
    """``tacotron1_section`` records the main thread's whole time, its CPU and, apart, the waits on the futures."""
    bg = demo_tacotron1.Background(concurrent.futures.Future(), concurrent.futures.Future(), {}, time.perf_counter())

    def body(tmp, out_dir, background):
        for future, value in ((background.checkpoint, "ckpt"), (background.legacy, None)):
            concurrent.futures.ThreadPoolExecutor(1).submit(lambda f=future, v=value: (time.sleep(0.2),
                                                                                      f.set_result(v)))
            demo_tacotron1._wait(background, future)
        sum(float(i) for i in range(200_000))  # some CPU of the main thread's own
        return 0, [_row()]

    monkeypatch.setattr(demo_tacotron1, "_section", body)
    rc, rows = demo_tacotron1.tacotron1_section(str(tmp_path), str(tmp_path), bg)
    assert rc == 0 and len(rows) == 1
    assert 0.35 <= bg.section["waited"] <= bg.section["main"]
    assert 0.0 < bg.section["cpu"] < bg.section["main"]


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None
                    or importlib.util.find_spec("parity_tests.legacy.builders_tacotron1") is None,
                    reason="the TF1 legacy reference needs tf_keras and its Tacotron-1 builders")
def test_own_legacy_reference_fills_the_shared_memo():
    """The section's TF1 subprocess runs a spec as ``run_legacy`` does; ``run_legacy`` then finds it memoised
    (its own subprocess is not asked); the subprocess's CPU seconds are read while it runs."""
    from parity_tests import reference

    rng = np.random.default_rng(11)
    inputs = {"memory": rng.standard_normal((1, 4, 3)).astype(np.float32),
              "memory_lengths": np.array([4], np.int32),
              "queries": rng.standard_normal((1, 2, 5)).astype(np.float32)}
    spec = reference.LegacySpec("BahdanauAttention", {"units": 6}, inputs, scope="model/inference", seed=11)
    own = demo_tacotron1.OwnLegacyReference()
    try:
        (res,) = own([spec])
        assert own.cpu_seconds() > 0.0
    finally:
        own.close()
    assert res.outputs["alignments"].shape == (1, 4, 2) and res.outputs["contexts"].shape == (1, 2, 3)
    np.testing.assert_allclose(res.outputs["alignments"].sum(axis=1), 1.0, rtol=1e-6)
    server = reference._SERVER.proc
    assert reference.run_legacy([spec])[0] is res
    assert reference._SERVER.proc is server  # memoised: the shared subprocess was neither started nor asked
