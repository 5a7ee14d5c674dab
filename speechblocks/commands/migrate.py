"""``speechblocks migrate``: a TF1 checkpoint to a Keras ``.weights.h5`` or a torch ``.pt`` file."""
from __future__ import annotations

from ..tf1_checkpoint_reader import ALLOW_NONFINITE_HELP
from ._common import load_tensorflow, load_torch, precheck_checkpoint, say, user_input
from ._options import hparams_options, overrides

NAME = "migrate"
HELP = "migrate a TF1 Tacotron-2 checkpoint to Keras or PyTorch"
DESCRIPTION = ("Writes the checkpoint's whole Tacotron-2 (or, for a checkpoint of some blocks, each block) to a Keras "
               ".weights.h5 or torch .pt file, atomically; the checkpoint is only read. Rebuild with "
               "Tacotron2.from_migrated(OUT) or load_migrated(OUT).")
EXAMPLES = """examples:
  speechblocks migrate taco_pretrained --to keras tacotron2.weights.h5
  speechblocks migrate model.ckpt-278000 --to torch tacotron2.pt --hparams rayhane --set max_iters=1000
  speechblocks migrate model.ckpt-278000 --to torch tacotron2.pt --dry-run"""


def add_arguments(p) -> None:
    p.add_argument("checkpoint", help="checkpoint prefix, its .index file, or its directory")
    p.add_argument("--to", choices=("keras", "torch"), required=True)
    p.add_argument("out", help="output file (.weights.h5 for keras, .pt for torch)")
    hparams_options(p, "whole model only, what the shapes cannot tell (stored in the file)")
    p.add_argument("--dry-run", action="store_true", help="build and load everything, write nothing")
    p.add_argument("--use-ema", action="store_true", help="take the weights from the EMA shadows")
    p.add_argument("--no-strict", action="store_true", help="skip blocks with missing or mis-shaped variables")
    p.add_argument("--allow-nonfinite", action="store_true", help=ALLOW_NONFINITE_HELP)


def run(args) -> int:
    from ..migration.migrate import migrate_checkpoint

    precheck_checkpoint(args.checkpoint)
    if args.to == "torch":  # the checkpoint is read in numpy: only the target framework is loaded
        load_torch()
    else:
        load_tensorflow()
    with user_input():  # the checkpoint, the hparams and the --set values read into the target's model
        report = migrate_checkpoint(args.checkpoint, args.to, args.out, use_ema=args.use_ema,
                                    strict=not args.no_strict, dry_run=args.dry_run,
                                    progress=lambda line: say(NAME, line), hparams=args.hparams,
                                    overrides=overrides(args.set), allow_nonfinite=args.allow_nonfinite)
    print(report)
    return 0
