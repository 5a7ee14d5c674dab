"""The ``speechblocks`` console script: ``parity``, ``inspect``, ``migrate``."""
from __future__ import annotations

import argparse
import os
import sys


def _cmd_parity(args) -> int:
    from .cases import discover, run_all
    from .report import format_table

    modules = discover()
    if args.block:
        wanted = {b.lower() for b in args.block}
        modules = [m for m in modules if m.__name__.rsplit(".", 1)[-1].lower() in wanted
                   or getattr(m, "BLOCK", "").lower() in wanted]
        if not modules:
            print(f"speechblocks parity: no case module matches {args.block}", file=sys.stderr)
            return 2
    rows = run_all(modules)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _cmd_inspect(args) -> int:
    from tf_layers.migration.cli import inspect_main

    return inspect_main(args)


def _cmd_migrate(args) -> int:
    from tf_layers.migration.cli import migrate_main

    return migrate_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="speechblocks", description="Keras/PyTorch twins of TF1 Tacotron-2 blocks.")
    sub = p.add_subparsers(dest="command", required=True)

    pp = sub.add_parser("parity", help="run the cross-framework parity suite and print the table")
    pp.add_argument("--block", action="append", help="only this block (case module name or block name); repeatable")
    pp.set_defaults(func=_cmd_parity)

    pi = sub.add_parser("inspect", help="list the Tacotron-2 blocks a TF1 checkpoint holds")
    pi.add_argument("checkpoint")
    pi.add_argument("--use-ema", action="store_true", help="report ExponentialMovingAverage shadows as the weights")
    pi.set_defaults(func=_cmd_inspect)

    pm = sub.add_parser("migrate", help="migrate a TF1 Tacotron-2 checkpoint to Keras or PyTorch")
    pm.add_argument("checkpoint")
    pm.add_argument("--to", choices=("keras", "torch"), required=True)
    pm.add_argument("out")
    pm.add_argument("--dry-run", action="store_true")
    pm.add_argument("--use-ema", action="store_true")
    pm.add_argument("--no-strict", action="store_true")
    pm.set_defaults(func=_cmd_migrate)
    return p


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ start-up chatter is not our output
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
