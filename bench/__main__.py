"""``python -m bench [name ...]``: runs every ``bench/bench_*.py`` (its ``main()``) and prints its lines."""
from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        print(f"\n== {name} ==", flush=True)
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as e:  # a failing benchmark must not hide the others
            failed += 1
            print(f"{name} FAILED: {type(e).__name__}: {e}")
        print(f"({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
