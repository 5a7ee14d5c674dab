"""``python -m bench [name ...]``: runs every ``bench/bench_*.py`` (its ``main()``) and prints its lines."""
from __future__ import annotations

import os
import pkgutil
import platform
import re
import subprocess
import sys
import time

# framework start-up chatter on stderr (absl/TF C++ logging, Kineto profiler markers), not benchmark output
_NOISE = re.compile(r"^(USDT:|[IWE]\d{4} |WARNING: All log messages before absl|To enable the following instructions)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    failed = 0
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KINETO_LOG_LEVEL="5")
    for name in names:
        t0 = time.perf_counter()
        print(f"\n== {name} ==", flush=True)
        # each benchmark in its own process: TensorFlow's and torch's thread pools from one benchmark must
        # not compete with the next one's measurements
        proc = subprocess.run([sys.executable, "-c", f"import bench.{name} as m; m.main()"], env=env,
                              stderr=subprocess.PIPE, text=True)
        noise = [line for line in proc.stderr.splitlines() if line.strip() and not _NOISE.match(line)]
        if noise:
            print("\n".join(noise), file=sys.stderr)
        if proc.returncode != 0:  # a failing benchmark must not hide the others
            failed += 1
            print(f"{name} FAILED (exit {proc.returncode})")
        print(f"({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
