"""The ``speechblocks`` console script's commands: one module each, this package's registry lists them.

A command is a module of this package with

* ``NAME`` (the subcommand), ``HELP`` (its line in ``speechblocks --help``), ``DESCRIPTION`` (its ``--help``
  text) and ``EXAMPLES`` (its ``--help`` epilog, starting ``examples:``);
* ``add_arguments(parser)``: its options (the shared ones and the argument types are in ``_options.py``);
* ``run(args) -> int``: the exit status.

:data:`COMMANDS` lists them in the order ``speechblocks --help`` shows them; ``speechblocks.cli.build_parser``
assembles the top-level parser from it. A new command is one new module plus one line here. What commands share
at run time (quiet framework loading, ``say``, progress, the user-input boundary) is in ``_common.py``; no command
reaches into another module's private names.

Conventions of every command:

* exit status 0 on success, 1 when a parity run has a FAIL row (or ``train``'s loss diverged), 2 for a usage or
  input error (a missing or unreadable file, bad text, a wrong speaker embedding, an option out of range ...:
  :class:`~speechblocks.errors.InputError`, its :class:`~speechblocks.errors.UsageError`, or an ``OSError``), 3 for
  an unexpected internal error (a bug: any other exception, a ``ValueError`` included), 4 when
  ``parity --checkpoint --skip-legacy`` ran without TensorFlow: the torch side's own checks passed, but no
  comparison with Keras (or TF1) was made, so parity is not established; 128 + N when ``train`` stopped on
  signal N (130 for an interrupt);
* a library ``ValueError`` the user's files or values cause is turned into an ``InputError`` where the command hands
  them to the library (``with user_input():`` around reading a checkpoint, a model file, a recording, resolving
  hparams); outside such a block a ``ValueError`` is a bug;
* errors are one line on stderr (``speechblocks <command>: error: ...``, a bug's ``... internal error: ... (run with
  --debug for the traceback)``), without a traceback unless ``--debug`` (which also lists every item of a
  multi-item error);
* a TF1 checkpoint is validated, then read in numpy, no TensorFlow needed (truncated, corrupted, hostile files: exit 2,
  one line naming the file and the problem); variables holding NaN/inf are refused (exit 2) unless ``--allow-nonfinite``
  (``inspect``, ``migrate``: then a warning line); float16/float64 variables are cast to float32 (a warning line);
* TensorFlow's, absl's and oneDNN's start-up lines are silenced at the file-descriptor level while the frameworks
  load (``--verbose`` lets them through); the command's own progress goes to stderr, its results to stdout.

No module of this package imports a framework at module level: ``speechblocks --help`` answers at once.
"""
from __future__ import annotations

from . import doctor, embed, evaluate, griffin_lim, gta, inspect, mel, migrate, parity, preprocess, synthesize, train

__all__ = ["COMMANDS"]

#: the commands, in the order of ``speechblocks --help``
COMMANDS = (parity, inspect, migrate, synthesize, mel, griffin_lim, embed, preprocess, train, gta, evaluate, doctor)
