"""The options and argument types every command shares: ``--verbose``/``--debug``, ``--hparams``/``--set``, the
Griffin-Lim options, and the argparse types that check a value where it is read (counts, existing files, a
checkpoint, a preprocessed folder, ``NAME=VALUE``).

A value a type refuses is kept as :class:`Refused` (not raised: argparse would turn the error into its usage
message); the command line raises the first one it finds after parsing as a
:class:`~speechblocks.errors.UsageError`: one line, exit status 2, as every other input error. A value that is not
a number at all is still argparse's own error (usage, exit status 2).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os

from ..errors import UsageError

__all__ = ["Refused", "refused", "require", "count", "existing_file", "existing_checkpoint", "preprocessed_folder",
           "hparams_value", "assignment", "overrides", "common_options", "hparams_options", "griffin_lim_options",
           "device_value", "precision_value", "device_option", "precision_option"]


@dataclasses.dataclass(frozen=True)
class Refused:
    """A command-line value an argument type refused, with the line that says why."""

    message: str


def refused(args: argparse.Namespace) -> str | None:
    """The message of the first :class:`Refused` value among the parsed arguments (lists included), or None."""
    for value in vars(args).values():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, Refused):
                return item.message
    return None


def require(value):
    """``value`` itself, or the :class:`~speechblocks.errors.UsageError` of a :class:`Refused` one (for a check a
    command makes after parsing, with a type of this module)."""
    if isinstance(value, Refused):
        raise UsageError(value.message)
    return value


def _named(parse, name: str):
    parse.__name__ = name  # argparse's "invalid int value: 'x'" names the type by its __name__
    return parse


def count(option: str, minimum: int = 1):
    """An integer ``>= minimum`` (``--steps``, ``--batch-size``, ``--max-iters``, ``--replicas``)."""
    def parse(text: str):
        value = int(text)
        return value if value >= minimum else Refused(f"{option} must be >= {minimum}; got {value}")

    return _named(parse, "int")


def existing_file(option: str | None = None):
    """A path that must be a file (``--speaker-wav``, ``--encoder``, the recordings of ``mel`` and ``embed``)."""
    def parse(text: str):
        if os.path.isfile(text):
            return text
        return Refused(f"{option + ' ' if option else ''}{text!r} does not exist")

    return _named(parse, "file")


def existing_checkpoint(option: str):
    """A path that must exist, as a file or folder or as a TF1 checkpoint prefix (``PREFIX.index``)."""
    def parse(text: str):
        if os.path.exists(text) or os.path.exists(text + ".index"):
            return text
        return Refused(f"{option} {text!r} does not exist")

    return _named(parse, "path")


def preprocessed_folder(name: str):
    """A folder of ``speechblocks preprocess`` (it holds ``train.txt``)."""
    def parse(text: str):
        if os.path.isfile(os.path.join(text, "train.txt")):
            return text
        return Refused(f"{name} {text!r} holds no train.txt (run `speechblocks preprocess` first)")

    return _named(parse, "folder")


def hparams_value(text: str):
    """``--hparams``: a preset name, or a JSON file of original hparam names (read into a dict)."""
    from ..tacotron1_hparams import TACOTRON1_PRESETS
    from ..tacotron2_hparams import TACOTRON2_PRESETS

    presets = [*TACOTRON2_PRESETS, *TACOTRON1_PRESETS]
    if text in presets:
        return text
    if not os.path.isfile(text):
        return Refused(f"--hparams {text!r} is neither a preset ({', '.join(presets)}) nor a JSON file")
    try:
        with open(text) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return Refused(f"--hparams {text!r}: not readable JSON ({e})")
    if not isinstance(data, dict):
        return Refused(f"--hparams {text!r}: the JSON must be an object of hparam names")
    return data


def assignment(pair: str):
    """``--set NAME=VALUE``: ``(NAME, VALUE)``, VALUE read as JSON (numbers, true/false, null, lists), else as a
    string (``True``/``False``/``None`` as Python spells them, too)."""
    name, sep, raw = pair.partition("=")
    if not sep or not name.strip():
        return Refused(f"--set {pair!r}: expected NAME=VALUE, e.g. --set tacotron_dropout_rate=0")
    raw = raw.strip()
    lowered = {"True": "true", "False": "false", "None": "null"}.get(raw, raw)
    try:
        value = json.loads(lowered)
    except ValueError:
        value = raw
    return name.strip(), value


def overrides(pairs) -> dict:
    """The ``--set`` assignments as ``{name: value}`` (a later one wins)."""
    return dict(pairs or ())


def common_options() -> argparse.ArgumentParser:
    """``--verbose`` and ``--debug``: the parent of the top-level parser and of every command's."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="let TensorFlow's and absl's start-up lines through to stderr")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error")
    return p


def hparams_options(p: argparse.ArgumentParser, what: str) -> None:
    """``--hparams`` and ``--set`` of a command whose model hparams the user may give (``what``: what they tell)."""
    p.add_argument("--hparams", metavar="rtvc|rayhane|keithito|mimic2|FILE.json", type=hparams_value,
                   help=f"{what}: a preset, or a JSON file of original hparam names (sizes must agree with "
                        "the weights)")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", type=assignment,
                   help="override one hparam by its original name, VALUE as JSON (repeatable), "
                        "e.g. --set tacotron_dropout_rate=0 --set stop_at_any=false")


def griffin_lim_options(p: argparse.ArgumentParser) -> None:
    """``synthesize --wav``'s Griffin-Lim options."""
    from ..audio_commands import GL_FRAMEWORKS

    p.add_argument("--griffin-lim", choices=GL_FRAMEWORKS, default="torch",
                   help="with --wav: where Griffin-Lim runs (default torch, the fast path)")
    p.add_argument("--griffin-lim-iters", type=int, metavar="N", help="with --wav: iterations (default: the hparam)")


def device_value(text: str):
    """``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (:func:`speechblocks.devices.parse_device`)."""
    from ..devices import parse_device

    try:
        return parse_device(text)
    except ValueError as e:
        return Refused(str(e))


def precision_value(choices: tuple[str, ...]):
    """``--precision``: one of ``choices`` (:data:`speechblocks.devices.PRECISIONS`)."""
    from ..devices import check_precision

    def parse(text: str):
        try:
            return check_precision(text, choices)
        except ValueError as e:
            return Refused(str(e))

    return _named(parse, "precision")


def device_option(p: argparse.ArgumentParser, what: str = "the torch model") -> None:
    """``--device auto|cpu|cuda|cuda:N`` of a command that runs a torch model (resolved by
    :func:`speechblocks.commands._common.torch_device`)."""
    p.add_argument("--device", type=device_value, default="auto", metavar="auto|cpu|cuda|cuda:N",
                   help=f"where {what} runs: auto (default: CUDA when torch sees a GPU, else the CPU; under torchrun "
                        "cuda:LOCAL_RANK), cpu, cuda, cuda:N; with --framework keras, cpu hides the GPUs from "
                        "TensorFlow")


def precision_option(p: argparse.ArgumentParser, choices: tuple[str, ...], what: str, default: str | None = "fp32",
                     default_text: str = "fp32, the original") -> None:
    """``--precision`` (``fp32`` the default, the original's)."""
    p.add_argument("--precision", type=precision_value(choices), default=default, metavar="|".join(choices),
                   help=f"{what} (default {default_text})")
