"""``python -m bench [--runs N] [--no-write] [name ...]``: runs every ``bench/bench_*.py`` (its ``main()``), prints its
lines, and merges what each records (``bench.results.record``) into ``bench/results.json``.

Each benchmark runs in its own process, ``--runs`` times (default 1; the page's figures are 3 runs); the load average
is read before each process starts and kept with its runs. A row is replaced by its new measurement (its runs of this
invocation), every other row kept. ``--no-write`` prints only; ``--results PATH`` writes another file.
"""
from __future__ import annotations

import argparse
import json
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
import time

from bench import results

# framework start-up chatter on stderr (absl/TF C++ logging, Kineto profiler markers), not benchmark output
_NOISE = re.compile(r"^(USDT:|[IWE]\d{4} |WARNING: All log messages before absl|To enable the following instructions)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="run the benchmarks whose module name contains one of these")
    parser.add_argument("--runs", type=int, default=1, help="processes per benchmark (default 1)")
    parser.add_argument("--results", default=results.RESULTS, help="the results file (default bench/results.json)")
    parser.add_argument("--no-write", action="store_true", help="record nothing")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    if args.names:
        names = [n for n in names if any(a in n for a in args.names)]
    info = results.machine()
    load = results.load_average()
    print(f"machine: {info['platform']}, {info['cpu']}, {info['cores']} cores "
          f"({' '.join(info['flags']) or 'no flags of interest'}), Python {info['python']}; "
          f"load average at start: {' '.join(f'{x:.2f}' for x in load or [])}")
    failed = 0
    fd, pending = tempfile.mkstemp(prefix="bench-pending-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KINETO_LOG_LEVEL="5")
    if not args.no_write:
        env[results.PENDING_ENV] = pending
    try:
        for run in range(1, args.runs + 1):
            for name in names:
                t0 = time.perf_counter()
                load = results.load_average()
                print(f"\n== {name}" + (f" (run {run} of {args.runs})" if args.runs > 1 else "") +
                      f" == load {' '.join(f'{x:.2f}' for x in load or [])}", flush=True)
                # each benchmark in its own process: TensorFlow's and torch's thread pools from one benchmark must
                # not compete with the next one's measurements
                proc = subprocess.run([sys.executable, "-c", f"import bench.{name} as m; m.main()"],
                                      env=dict(env, **{results.LOAD_ENV: json.dumps(load)}),
                                      stderr=subprocess.PIPE, text=True)
                noise = [line for line in proc.stderr.splitlines() if line.strip() and not _NOISE.match(line)]
                if noise:
                    print("\n".join(noise), file=sys.stderr)
                if proc.returncode != 0:  # a failing benchmark must not hide the others
                    failed += 1
                    print(f"{name} FAILED (exit {proc.returncode})")
                print(f"({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
        records = results.read_pending(pending)
        if records and not args.no_write:
            results.merge(records, args.results, info)
            ids = sorted({r["id"] for r in records})
            print(f"\n{len(ids)} rows of {args.results} replaced by this run ({len(records)} records); "
                  f"render the page: python -m bench.render")
    finally:
        os.unlink(pending)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
