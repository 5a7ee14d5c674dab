"""``speechblocks inspect``: the model and blocks a TF1 checkpoint holds, read in numpy (no framework)."""
from __future__ import annotations

from ..tf1_checkpoint_reader import ALLOW_NONFINITE_HELP
from ._common import precheck_checkpoint, user_input

NAME = "inspect"
HELP = "show the model and blocks a TF1 checkpoint holds"
DESCRIPTION = ("Lists the Tacotron-2 model a TF1 checkpoint holds (preset, r, speaker embedding, symbols, parameters "
               "per part), its blocks with their inferred configs, and what is skipped.")
EXAMPLES = """examples:
  speechblocks inspect synthesizer/saved_models/logs-pretrained/taco_pretrained
  speechblocks inspect model.ckpt-278000 --use-ema"""


def add_arguments(p) -> None:
    p.add_argument("checkpoint", help="checkpoint prefix, its .index file, or its directory")
    p.add_argument("--use-ema", action="store_true", help="report ExponentialMovingAverage shadows as the weights")
    p.add_argument("--allow-nonfinite", action="store_true", help=ALLOW_NONFINITE_HELP)


def run(args) -> int:
    from ..migration.cli import format_inventory
    from ..migration.inventory import inspect_checkpoint

    precheck_checkpoint(args.checkpoint)  # the checkpoint is read in numpy: no framework is loaded
    with user_input():
        inventory = inspect_checkpoint(args.checkpoint, use_ema=args.use_ema, allow_nonfinite=args.allow_nonfinite)
    print(format_inventory(inventory))
    return 0
