"""Errors of the user's making that every layer of the package may raise (no framework, no command line here).

The family: :class:`InputError` is the user's input being wrong (a file missing, unreadable, damaged or of the
wrong kind; a value out of range; a text outside the symbol table; hparams the weights contradict);
:class:`UsageError` is the part of it that names how a command was used (options that exclude each other, a
missing option, an option out of range) and the name most modules raise. Both are ``ValueError``s, so a library
caller that catches ``ValueError`` keeps working. The command line answers either with one line and exit status 2
(``speechblocks/commands/__init__.py``); any other exception reaching it, a ``ValueError`` included, is a bug:
exit status 3.

The errors about a file the user hands in are of this family wherever they are raised: a damaged or hostile TF1
checkpoint (``CheckpointError``), migrated file (``MigratedFileError``) or state dict (``StateDictError``), weights
that do not fit (``TF1WeightsError``), hparams the weights contradict (``HParamsMismatchError``), a checkpoint that
holds no Tacotron blocks or whose hparams cannot be inferred (``migration.schema``). A library function's argument
check stays a plain ``ValueError``: a command turns the ones its user's values cause into an :class:`InputError`
where it hands them to the library (:func:`as_input_error`), so an unexpected ``ValueError`` elsewhere stays a bug.
"""
from __future__ import annotations

__all__ = ["InputError", "UsageError", "as_input_error"]


class InputError(ValueError):
    """The user's input is wrong (a file, a value, a text): the command line answers with exit status 2 and one
    line naming the input and the problem."""


class UsageError(InputError):
    """A mistake in how a command was used (arguments, options, input files): an :class:`InputError`."""


def as_input_error(error: ValueError) -> InputError:
    """``error`` (a library ``ValueError`` the user's input caused) as an :class:`InputError`: the same message,
    and the same ``problems`` list and ``details()`` where the error has them (``--debug`` prints every item);
    ``error`` itself is the new one's ``__cause__``. An :class:`InputError` is returned as it is."""
    if isinstance(error, InputError):
        return error
    converted = InputError(str(error))
    for name in ("problems", "details"):
        if hasattr(error, name):
            setattr(converted, name, getattr(error, name))
    converted.__cause__ = error
    return converted
