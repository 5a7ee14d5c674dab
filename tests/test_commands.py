"""The command registry (``speechblocks/commands/``) and the exit statuses of the command line.

The parser is assembled from the registry (one module a command: a new command is one module and one line); an
input problem is exit status 2 and one line, a bug (an unexpected ``ValueError`` included) exit status 3 and one
line pointing at ``--debug``; the boundary between the two is where a command hands the user's input to the library
(``with user_input():``). No framework is loaded here: ``griffin-lim --framework numpy`` on a tiny spectrogram.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import types

import numpy as np
import pytest

from speechblocks import audio_commands, cli, commands
from speechblocks.commands import _common
from speechblocks.errors import InputError, UsageError, as_input_error
from speechblocks.migration.migrated_file import MigratedFileError
from speechblocks.migration.schema import NoTacotronBlocksError
from speechblocks.state_dict import StateDictError
from speechblocks.tacotron2_schema import HParamsMismatchError
from speechblocks.tf1_checkpoint_file import CheckpointError
from speechblocks.tf1_exchange import TF1WeightsError

COMMANDS_DIR = os.path.dirname(commands.__file__)


def _run(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _subcommands(parser: argparse.ArgumentParser) -> dict:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


# -- the registry --------------------------------------------------------------------------------------------------
def test_the_parser_has_exactly_the_registry_commands_each_with_examples():
    names = [c.NAME for c in commands.COMMANDS]
    assert len(set(names)) == len(names)
    modules = sorted(f[:-3] for f in os.listdir(COMMANDS_DIR) if f.endswith(".py") and not f.startswith("_"))
    assert sorted(c.__name__.rsplit(".", 1)[1] for c in commands.COMMANDS) == modules  # every module registered
    choices = _subcommands(cli.build_parser())
    assert list(choices) == names
    for command in commands.COMMANDS:
        parser = choices[command.NAME]
        assert parser.description == command.DESCRIPTION
        assert parser.epilog == command.EXAMPLES and parser.epilog.startswith("examples:\n")
        assert f"speechblocks {command.NAME} " in parser.epilog
        help_text = parser.format_help()
        assert "--verbose" in help_text and "--debug" in help_text
        assert parser.get_default("func") is command.run


def test_a_new_module_in_the_registry_is_a_new_subcommand(monkeypatch, capsys):
    calls = []
    fake = types.ModuleType("speechblocks.commands.echo")
    fake.NAME, fake.HELP, fake.DESCRIPTION = "echo", "say a number back", "Prints N."
    fake.EXAMPLES = "examples:\n  speechblocks echo --n 3"
    fake.add_arguments = lambda p: p.add_argument("--n", type=int, required=True)

    def run(args):
        calls.append(args.n)
        print(args.n)
        return 5

    fake.run = run
    monkeypatch.setattr(commands, "COMMANDS", commands.COMMANDS + (fake,))  # the one edit
    assert list(_subcommands(cli.build_parser()))[-1] == "echo"
    rc, out, err = _run(["echo", "--n", "3"], capsys)
    assert (rc, out, err, calls) == (5, "3\n", "", [3])
    with pytest.raises(SystemExit):
        cli.main(["echo", "--help"])
    assert "speechblocks echo --n 3" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "say a number back" in capsys.readouterr().out


def test_no_command_imports_another_modules_private_names():
    """A command module imports public names only, except from its own package's shared modules (``_common``,
    ``_options``); ``cli.py`` likewise."""
    paths = [os.path.join(COMMANDS_DIR, f) for f in os.listdir(COMMANDS_DIR) if f.endswith(".py")]
    bad = []
    for path in paths + [cli.__file__]:
        tree = ast.parse(open(path, encoding="utf-8").read())
        own = path.startswith(COMMANDS_DIR)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                inside = (node.level == 1 and own) or (node.module or "").startswith("commands") or \
                    (node.module or "").startswith("speechblocks.commands")
                bad += [(path, a.name) for a in node.names if a.name.startswith("_") and not inside]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id not in ("self", "argparse"):
                    bad.append((path, f"{node.value.id}.{node.attr}"))
    assert bad == []


# -- exit statuses -------------------------------------------------------------------------------------------------
@pytest.fixture
def spectrogram(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.zeros((4, 80), np.float32) - 2.0)
    return str(path)


def _griffin_lim(spectrogram, tmp_path, *extra):
    return ["griffin-lim", spectrogram, "--framework", "numpy", "--griffin-lim-iters", "1",
            "--out", str(tmp_path / "o.wav"), *extra]


def test_griffin_lim_runs_without_a_framework(spectrogram, tmp_path, capsys):
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path), capsys)
    assert rc == 0, err
    assert out.startswith(f"{tmp_path / 'o.wav'}: ") and os.path.isfile(tmp_path / "o.wav")


def test_an_unexpected_value_error_is_a_bug_exit_3(spectrogram, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("griffin_lim: `n_iter` must be an integer; got 1.")

    monkeypatch.setattr(audio_commands, "griffin_lim_wavs", broken)  # past the inputs: a library call on checked ones
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path), capsys)
    assert rc == 3 and out == ""
    assert err.strip().splitlines() == ["speechblocks griffin-lim: internal error: ValueError: griffin_lim: `n_iter` "
                                        "must be an integer; got 1. (run with --debug for the traceback)"]
    with pytest.raises(ValueError, match="n_iter") as info:  # --debug: the exception itself
        cli.main(_griffin_lim(spectrogram, tmp_path, "--debug"))
    assert not isinstance(info.value, InputError)
    assert not os.path.exists(tmp_path / "o.wav")


def test_the_same_value_error_from_the_users_input_is_exit_2(spectrogram, tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("audio: hparam `num_mels` must be an integer >= 1; got 0.")

    monkeypatch.setattr(audio_commands, "audio_hparams_for", refuse)  # the --hparams/--set values meet the library
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path), capsys)
    assert (rc, out) == (2, "")
    assert err.strip().splitlines() == ["speechblocks griffin-lim: error: audio: hparam `num_mels` must be an "
                                        "integer >= 1; got 0."]


def test_a_bad_set_value_is_exit_2_through_the_real_library(spectrogram, tmp_path, capsys):
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path, "--set", "num_mels=-1"), capsys)
    assert rc == 2 and err.strip() == ("speechblocks griffin-lim: error: audio: hparam `num_mels` must be an integer "
                                       ">= 1; got -1.")


def test_an_input_error_raised_in_a_command_is_exit_2(spectrogram, tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise InputError("'m.npy' holds a spectrogram too loud to invert\nsecond item")

    monkeypatch.setattr(audio_commands, "griffin_lim_wavs", refuse)
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path), capsys)
    assert (rc, out) == (2, "")
    assert err.strip().splitlines() == ["speechblocks griffin-lim: error: 'm.npy' holds a spectrogram too loud to "
                                        "invert second item"]


def test_values_the_argument_types_refuse_are_one_line_exit_2(tmp_path, capsys):
    for argv, line in (
            (["gta", str(tmp_path), "m.pt", "o", "--quiet"],
             f"speechblocks gta: error: DATA {str(tmp_path)!r} holds no train.txt (run `speechblocks preprocess` "
             "first)"),
            (["mel", str(tmp_path / "none.wav"), "--out", "x.npy"],
             f"speechblocks mel: error: {str(tmp_path / 'none.wav')!r} does not exist"),
            (["mel", __file__, "--set", "trim_silence", "--out", "x.npy"],
             "speechblocks mel: error: --set 'trim_silence': expected NAME=VALUE, e.g. --set tacotron_dropout_rate=0"),
            (["mel", __file__, "--hparams", "nope", "--out", "x.npy"],
             "speechblocks mel: error: --hparams 'nope' is neither a preset (rtvc, rayhane, keithito, mimic2) nor a "
             "JSON file"),
            (["synthesize", "m.pt", "--text", "Hi.", "--max-iters", "0", "--out", "x.npy"],
             "speechblocks synthesize: error: --max-iters must be >= 1; got 0")):
        rc, out, err = _run(argv, capsys)
        assert (rc, out, err.strip()) == (2, "", line), argv
    with pytest.raises(SystemExit) as e:  # not a number at all: argparse's own message, as before
        cli.main(["synthesize", "m.pt", "--max-iters", "many", "--out", "x.npy"])
    assert e.value.code == 2 and "argument --max-iters: invalid int value: 'many'" in capsys.readouterr().err


def test_user_input_converts_value_errors_and_keeps_os_errors():
    class Listing(ValueError):
        problems = ["a", "b"]

        def details(self):
            return "two problems:\n  - a\n  - b"

    with pytest.raises(InputError) as info, _common.user_input():
        raise Listing("two problems")
    e = info.value
    assert str(e) == "two problems" and e.problems == ["a", "b"] and "  - b" in e.details()
    assert isinstance(e.__cause__, Listing)
    usage = UsageError("given as it is")
    with pytest.raises(UsageError) as info, _common.user_input():
        raise usage
    assert info.value is usage and as_input_error(usage) is usage and isinstance(usage, InputError)
    with pytest.raises(FileNotFoundError), _common.user_input():  # the command line answers it with 2 as it is
        raise FileNotFoundError("no such file")
    with pytest.raises(RuntimeError), _common.user_input():
        raise RuntimeError("not an input's")


# -- doctor --------------------------------------------------------------------------------------------------------
def test_doctor_prints_the_report_as_text_or_json(capsys, monkeypatch):
    from speechblocks import diagnostics

    found = diagnostics.report(frameworks=False)  # the frameworks' child processes are test_diagnostics.py's
    monkeypatch.setattr(diagnostics, "report", lambda: found)
    rc, out, err = _run(["doctor", "--json"], capsys)
    assert (rc, err) == (0, "") and out == json.dumps(found, indent=2) + "\n"
    assert json.loads(out)["python"]["executable"] == found["python"]["executable"]
    rc, out, err = _run(["doctor"], capsys)
    assert (rc, err) == (0, "") and out == diagnostics.format_report(found) + "\n"
    assert "frameworks:\n  (not probed)" in out


_FILE_ERRORS = {
    "checkpoint": lambda: CheckpointError("'x.ckpt': damaged index"),
    "migrated": lambda: MigratedFileError("'m.npz': no hparams"),
    "state-dict": lambda: StateDictError("'e.pt'", ["missing lstm.weight_ih_l0"]),
    "tf1-weights": lambda: TF1WeightsError("Postnet", ["missing kernel"]),
    "hparams": lambda: HParamsMismatchError("'x.ckpt'", "num_mels", ["a"]),
    "no-blocks": lambda: NoTacotronBlocksError("'x.ckpt': none"),
}


@pytest.mark.parametrize("error", list(_FILE_ERRORS.values()), ids=list(_FILE_ERRORS))
def test_a_users_damaged_file_is_exit_2_wherever_it_is_found(error, spectrogram, tmp_path, capsys, monkeypatch):
    """The file errors are InputErrors: found past the command's own input checks (here inside the Griffin-Lim
    step), they are still the user's input, answered with one line and exit 2 -- not an internal error."""
    def refuse(*args, **kwargs):
        raise error()

    monkeypatch.setattr(audio_commands, "griffin_lim_wavs", refuse)
    rc, out, err = _run(_griffin_lim(spectrogram, tmp_path), capsys)
    assert (rc, out) == (2, "")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("speechblocks griffin-lim: error: ") and "internal" not in lines[0]
