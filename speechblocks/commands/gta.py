"""``speechblocks gta``: ground-truth-aligned mels of a preprocessed folder, for vocoder training."""
from __future__ import annotations

import os

from ._common import progress, trainer_class, user_input
from ._options import count, device_option, hparams_options, overrides, preprocessed_folder

NAME = "gta"
HELP = "ground-truth-aligned mels of a preprocessed folder, for vocoder training"
DESCRIPTION = ("Runs the model teacher forced in inference mode (the original synthesize.py --GTA; max_iters caps the "
               "steps) over every utterance of DATA/train.txt, in batches of tacotron_synthesis_batch_size, and "
               "writes OUT/gta/mel-<id>.npy (each utterance's own frames), OUT/map.txt (Rayhane's GTA map: "
               "wav|mel|gta mel|speaker|text) and OUT/synthesized.txt (RTVC's: the train.txt lines).")
EXAMPLES = """examples:
  speechblocks gta datasets/SV2TTS/synthesizer runs/rtvc/checkpoints/tacotron2-00020000.pt gta_out
  speechblocks gta data runs/rtvc gta_out --batch-size 16        # a RUN folder: its last checkpoint
  speechblocks gta data taco_pretrained gta_out --framework keras --max-iters 1000
  speechblocks gta data runs/rtvc gta_out --device cuda --batch-size 64"""


def add_arguments(p) -> None:
    p.add_argument("data", metavar="DATA", type=preprocessed_folder("DATA"),
                   help="a preprocessed folder holding train.txt")
    p.add_argument("model", metavar="MODEL", help="a migrated file (.pt / .weights.h5), a TF1 checkpoint, or a RUN")
    p.add_argument("out", metavar="OUT", help="the output folder")
    p.add_argument("--framework", choices=("torch", "keras"),
                   help="default: keras for a .weights.h5 file, torch otherwise")
    hparams_options(p, "what the weights cannot tell")
    p.add_argument("--batch-size", type=count("--batch-size"), help="tacotron_synthesis_batch_size")
    p.add_argument("--max-iters", type=count("--max-iters"), help="decoder step cap (default: the hparam max_iters)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pre-net dropout (default 0)")
    device_option(p, "the torch model")
    p.add_argument("--quiet", action="store_true", help="no progress line on a terminal")


def run(args) -> int:
    from ..training import gta

    model = gta.resolve_model(args.model)
    framework = args.framework or ("keras" if model.endswith(".weights.h5") else "torch")
    backend = trainer_class(framework, device=args.device)
    with user_input():  # run_gta reads the model, the hparams and DATA's files, then decodes
        paths = gta.run_gta(backend, args.data, model, args.out, args.hparams, overrides(args.set), args.max_iters,
                            args.batch_size, args.seed, progress=progress(NAME, args.quiet))
    print(f"{len(paths)} GTA mel spectrograms in {os.path.join(args.out, 'gta')}; {os.path.join(args.out, 'map.txt')}")
    return 0
