"""``speechblocks parity``: the cross-framework suite, or the comparison on the user's own checkpoint."""
from __future__ import annotations

from ..errors import UsageError
from ._common import load_tensorflow, load_torch, precheck_checkpoint, say, torch_device, user_input
from ._options import device_option, hparams_options, overrides

NAME = "parity"
HELP = "prove Keras, torch and the TF1 graph compute the same numbers"
DESCRIPTION = ("Runs the TF1 legacy reference, the Keras and the torch implementations on the same inputs and prints "
               "one row per output: max |difference|, tolerance, PASS/FAIL. Exit status 1 on any FAIL.")
EXAMPLES = """examples:
  speechblocks parity                              # the whole suite: every block and the whole model
  speechblocks parity --block tacotron2 --json     # one case module, as JSON
  speechblocks parity --checkpoint logs-pretrained/taco_pretrained       # your own checkpoint's weights
  speechblocks parity --checkpoint model.ckpt-278000 --hparams rayhane --steps 30
  speechblocks parity --checkpoint logs-pretrained/taco_pretrained --skip-legacy --device cuda   # torch on a GPU"""

#: ``parity --checkpoint --skip-legacy`` without TensorFlow: the torch side's checks passed, no comparison was made
EXIT_PARITY_NOT_ESTABLISHED = 4


def add_arguments(p) -> None:
    p.add_argument("--block", action="append", help="only this case module or block (repeatable)")
    p.add_argument("--checkpoint", metavar="CKPT",
                   help="compare on the real weights of this TF1 checkpoint: a Tacotron-2's every block and whole "
                        "model, a keithito/mimic2 Tacotron-1's whole model (teacher-forced, free-running, training "
                        "loss)")
    hparams_options(p, "with --checkpoint, what the shapes cannot tell")
    p.add_argument("--use-ema", action="store_true", help="with --checkpoint: use the EMA shadows")
    p.add_argument("--steps", type=int, default=20, help="with --checkpoint: free-running decoder steps (20)")
    p.add_argument("--skip-legacy", action="store_true",
                   help="with --checkpoint: Keras vs torch only (no TF1 reference, no tf_keras needed); where "
                        "TensorFlow cannot be imported, the torch side's own checks only (exit status 4 when they "
                        "pass: no comparison was made)")
    device_option(p, "with --checkpoint, the torch side (float32; on CUDA with TF32 off). Keras keeps "
                     "TensorFlow's placement")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")


def run(args) -> int:
    if args.checkpoint:
        return _parity_checkpoint(args)
    if args.device.startswith("cuda"):
        raise UsageError(f"--device {args.device}: the built-in suite runs on the CPU; --device is for the torch side "
                         "of --checkpoint")
    load_tensorflow()
    load_torch()
    from parity_tests.cases import discover, run_all

    modules = discover()
    if args.block:
        wanted = {b.lower() for b in args.block}
        modules = [m for m in modules if m.__name__.rsplit(".", 1)[-1].lower() in wanted
                   or getattr(m, "BLOCK", "").lower() in wanted]
        if not modules:
            raise UsageError(f"no case module matches {args.block}")
    rows = run_all(modules)
    _print_rows(rows, args.json)
    return 0 if all(r.passed for r in rows) else 1


def _print_rows(rows, as_json: bool) -> None:
    from parity_tests.report import format_table

    if as_json:
        from parity_tests.checkpoint_parity import rows_to_json

        print(rows_to_json(rows))
    else:
        print(format_table(rows))
        failed = sum(not r.passed for r in rows)
        print(f"{len(rows)} rows, {len(rows) - failed} PASS, {failed} FAIL")


def _parity_checkpoint(args) -> int:
    from parity_tests.checkpoint_parity import LegacyReferenceUnavailable, run_checkpoint_parity

    from ..synthesis_tacotron1 import source_family
    from ..tacotron1_schema import check_preset_family

    if args.block:
        raise UsageError("--block selects cases of the built-in suite; with --checkpoint every block of the "
                         "checkpoint's model is compared")
    precheck_checkpoint(args.checkpoint)  # a missing or damaged checkpoint: refused before TensorFlow loads
    tacotron1 = source_family(args.checkpoint, "tf1") == "tacotron1"
    if tacotron1 and args.device.startswith("cuda"):
        raise UsageError("--device: a Tacotron-1 (keithito, mimic2) checkpoint's parity runs on the CPU (drop it)")
    device = None if tacotron1 else torch_device(args.device)  # cuda without CUDA: one line, before TensorFlow
    if isinstance(args.hparams, str):
        with user_input():  # a preset of the other family: one line
            check_preset_family(args.hparams, "tacotron1" if tacotron1 else "tacotron2",
                                f"checkpoint {args.checkpoint!r}")
    # Keras: TensorFlow's own placement; --device cpu hides the GPUs from it as well
    keras = _tensorflow_for_parity(args.skip_legacy, "cpu" if args.device == "cpu" else "auto")
    if tacotron1 and not keras:
        raise UsageError("a Tacotron-1 checkpoint's parity needs TensorFlow (Keras is one side of every row): pip "
                         "install 'speechblocks[tf]'")
    load_torch()
    if tacotron1:
        return _parity_tacotron1(args)
    try:
        with user_input():  # its ValueErrors are the checkpoint's and the arguments' (run_checkpoint_parity, Raises)
            rows = run_checkpoint_parity(args.checkpoint, args.hparams, overrides=overrides(args.set),
                                         use_ema=args.use_ema, steps=args.steps, skip_legacy=args.skip_legacy,
                                         skip_keras=not keras, device=device, progress=lambda line: say(NAME, line))
    except LegacyReferenceUnavailable as e:
        raise UsageError(str(e)) from None
    _print_rows(rows, args.json)
    if not all(r.passed for r in rows):
        return 1
    if keras:
        return 0
    note = ("parity not established: the Keras<->torch comparison needs TensorFlow, which cannot be imported here "
            f"(pip install 'speechblocks[tf]'); only the torch side's own checks ran (exit status "
            f"{EXIT_PARITY_NOT_ESTABLISHED})")
    if args.json:
        say(NAME, note)
    else:
        print(note)
    return EXIT_PARITY_NOT_ESTABLISHED


def _parity_tacotron1(args) -> int:
    """``parity --checkpoint`` of a keithito/tacotron or mimic2 checkpoint."""
    from parity_tests.checkpoint_parity import LegacyReferenceUnavailable
    from parity_tests.checkpoint_parity_tacotron1 import run_tacotron1_checkpoint_parity

    if args.use_ema:
        raise UsageError("--use-ema: keithito/tacotron and mimic2 keep no EMA shadows")
    try:
        with user_input():
            rows = run_tacotron1_checkpoint_parity(args.checkpoint, args.hparams, overrides=overrides(args.set),
                                                   steps=args.steps, skip_legacy=args.skip_legacy,
                                                   progress=lambda line: say(NAME, line))
    except LegacyReferenceUnavailable as e:
        raise UsageError(str(e)) from None
    _print_rows(rows, args.json)
    return 0 if all(r.passed for r in rows) else 1


def _tensorflow_for_parity(skip_legacy: bool, device: str = "auto") -> bool:
    """Loads TensorFlow for ``parity --checkpoint`` (``device``: ``cpu`` hides the GPUs from it); False when it cannot
    be imported and ``--skip-legacy`` lets the torch side run alone."""
    try:
        load_tensorflow(device)
    except UsageError:
        if not skip_legacy:
            raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]' (with --skip-legacy the torch "
                             "side's own checks run without it, but no comparison is made)") from None
        return False
    return True
