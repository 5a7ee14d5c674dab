"""The ``speechblocks`` console script: :func:`main` and :func:`build_parser`, assembled from the commands of
``speechblocks/commands/`` (one module each: ``parity``, ``inspect``, ``migrate``, ``synthesize``, ``mel``,
``griffin-lim``, ``embed``, ``preprocess``, ``train``, ``gta``, ``evaluate``, ``doctor``).

The conventions every command keeps (exit statuses 0/1/2/3/4, one-line errors, ``--debug``, quiet start-up, the
checkpoint checks) are written in the package docstring of :mod:`speechblocks.commands`; the errors of the user's
making in :mod:`speechblocks.errors`.

This module imports no framework at module level: ``speechblocks --help`` answers at once.
"""
from __future__ import annotations

import argparse
import sys

from . import commands
from .commands import _common
from .commands._common import load_tensorflow, load_torch, say, trainer_class
from .commands._options import common_options, refused
from .errors import InputError, UsageError

__all__ = ["main", "build_parser", "load_tensorflow", "load_torch", "trainer_class", "UsageError", "InputError"]

PROG = _common.PROG
#: the old private name ``bench/bench_training.py`` and ``tests/test_training_data_parallel.py`` still import
_trainer_class = trainer_class


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: one subcommand per module of :data:`speechblocks.commands.COMMANDS`, each with its
    description, options and examples (its ``--help`` epilog)."""
    p = argparse.ArgumentParser(
        prog=PROG, parents=[common_options()], formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keras and PyTorch twins of the TF1 Tacotron-2: parity, checkpoint migration, synthesis.",
        epilog="exit status: 0 ok, 1 parity FAIL, 2 usage or input error, 3 internal error, 4 parity not "
               "established (--checkpoint --skip-legacy without TensorFlow: only the torch side's checks ran).\n"
               "run 'speechblocks COMMAND --help' for a command's options and examples.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands.COMMANDS:
        parser = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION,
                                epilog=command.EXAMPLES, parents=[common_options()],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(parser)
        parser.set_defaults(func=command.run)
    return p


def main(argv=None) -> int:
    """Runs the ``speechblocks`` command line; returns the exit status (``speechblocks.commands``: 0 ok, 1 parity
    FAIL, 2 the user's input (:class:`~speechblocks.errors.InputError`, ``OSError``), 3 a bug, 4 parity not
    established)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _common.set_verbose(getattr(args, "verbose", False))
    debug = bool(getattr(args, "debug", False))
    try:
        problem = refused(args)  # a value an argument type refused
        if problem is not None:
            raise UsageError(problem)
        with _common.checkpoint_warnings_as_lines(args.command):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        say(args.command, "interrupted")
        return 130
    except (InputError, OSError) as e:  # the user's input: one line, status 2
        if debug:
            details = getattr(e, "details", None)
            if callable(details):  # a multi-item error: every item, then the traceback
                print(details(), file=sys.stderr)
            raise
        say(args.command, f"error: {_common.one_line(e)}")
        return 2
    except Exception as e:  # a bug, an unexpected ValueError included: one line, status 3, the traceback with --debug
        if debug:
            raise
        say(args.command, f"internal error: {type(e).__name__}: {_common.one_line(e)} (run with --debug for the "
                          "traceback)")
        return 3


if __name__ == "__main__":
    sys.exit(main())
