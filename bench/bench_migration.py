"""Full-size TF1 Tacotron-2 checkpoint migration: time and peak memory (issue #5).

A Rayhane-mamah/Tacotron-2 default-size checkpoint with Adam slots (one ``AdamOptimizer`` step run by the
legacy reference) is migrated by ``speechblocks migrate`` in fresh subprocesses, to Keras and to torch.

Method:
* time: wall time of each ``migrate`` subprocess (imports included) and the in-process migration time it
  reports; the ratio is against reading every variable of the same checkpoint (Adam slots included) with
  ``tf.train.load_checkpoint`` in this process -- the unavoidable I/O floor.
* memory: each command runs under a small Python wrapper that prints
  ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (peak RSS of its one child). The baseline is the same
  wrapper around a child that only imports what that migration imports (Keras: tensorflow, h5py and
  the tf_layers blocks; torch: tensorflow, torch and the torch_layers blocks); "migration peak" = migrate's peak RSS
  minus that baseline, compared with the checkpoint's size on disk (target: < 3x).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from bench.results import record

#: the rows of bench/results.json this bench records
ROWS = ("keras time", "torch time", "keras peak rss", "torch peak rss")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WRAPPER = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n"
            "t = time.perf_counter() - t\n"
            "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, t)\n")

# what each migration imports, and nothing else: the Keras path never imports torch
_CLASSES = ("('EncoderConvolutions', 'EncoderRNN', 'Prenet', 'DecoderRNN', 'FrameProjection', 'StopProjection', "
            "'Postnet', 'CBHG')")
_BASELINE = {
    "keras": f"import tensorflow, h5py, tf_layers, speechblocks.migration; [getattr(tf_layers, n) for n in {_CLASSES}]",
    "torch": (f"import tensorflow, torch, speechblocks.migration, torch_layers, torch_layers.migrated; "
              f"[getattr(torch_layers, n) for n in {_CLASSES}]"),
}


def _measure(argv: list[str]) -> tuple[int, float, float]:
    """``(exit code, peak RSS in MiB, wall seconds)`` of ``argv`` run as the wrapper's only child."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], capture_output=True, text=True, env=env, cwd=_ROOT,
                          check=True)
    rc, kib, seconds = proc.stdout.split()
    return int(rc), int(kib) / 1024.0, float(seconds)


def main() -> None:
    from parity_tests.demo import legacy_model_spec
    from parity_tests.reference import run_legacy

    (legacy,) = run_legacy([legacy_model_spec("rayhane")])
    ckpt = legacy.checkpoint
    files = [os.path.join(os.path.dirname(ckpt), f) for f in os.listdir(os.path.dirname(ckpt))
             if f.startswith("model.ckpt")]
    disk = sum(os.path.getsize(f) for f in files) / 2**20
    print(f"checkpoint: Rayhane default sizes with Adam slots, {disk:.0f} MiB on disk")

    import tensorflow as tf

    t0 = time.perf_counter()
    reader = tf.train.load_checkpoint(ckpt)
    for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)
    t_read = time.perf_counter() - t0

    print(f"floor: reading every variable in-process: {t_read:.2f} s")
    with tempfile.TemporaryDirectory(prefix="speechblocks-bench-") as d:
        for to, out in (("keras", "m.weights.h5"), ("torch", "m.pt")):
            rc, base_rss, base_s = _measure([sys.executable, "-c", _BASELINE[to]])
            assert rc == 0, "baseline import failed"
            print(f"baseline --to {to}: importing what the migration imports: peak RSS {base_rss:.0f} MiB, "
                  f"{base_s:.1f} s")
            argv = [sys.executable, "-m", "speechblocks.cli", "migrate", ckpt, "--to", to, os.path.join(d, out)]
            rc, rss, seconds = _measure(argv)
            assert rc == 0, f"migrate --to {to} failed"
            t1 = time.perf_counter()
            from speechblocks.migration import migrate_checkpoint

            migrate_checkpoint(ckpt, to, os.path.join(d, "inproc_" + out))
            t_in = time.perf_counter() - t1
            peak = rss - base_rss
            print(f"migrate --to {to}: subprocess {seconds:.1f} s wall (target < 30 s: "
                  f"{'OK' if seconds < 30 else 'OVER'}); in-process {t_in:.1f} s = {t_in / t_read:.1f}x the read floor")
            print(f"migrate --to {to}: peak RSS {rss:.0f} MiB - baseline {base_rss:.0f} MiB = {peak:.0f} MiB = "
                  f"{peak / disk:.2f}x the checkpoint on disk (target < 3x: {'OK' if peak < 3 * disk else 'OVER'})")
            name = "Keras" if to == "keras" else to
            setup = f"migration of a full-size Rayhane checkpoint with Adam slots ({disk:.0f} MiB)"
            record("migration", f"{to} time", seconds, unit=" s", fmt=".1f", target="< 30", setup=setup,
                   what=f"{name}, seconds (`speechblocks migrate` in a subprocess)")
            record("migration", f"{to} peak rss", peak / disk, unit="x the checkpoint", target="< 3", setup=setup,
                   what=f"{name}, peak RSS added, in checkpoint sizes", fmt=".2f")


if __name__ == "__main__":
    main()
