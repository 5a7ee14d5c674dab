"""``speechblocks train``: Tacotron-2 trained on a preprocessed folder, as the original ``train.py``."""
from __future__ import annotations

import os

from ..errors import UsageError
from ._common import say, trainer_class, user_input
from ._options import count, existing_checkpoint, hparams_options, overrides, preprocessed_folder

NAME = "train"
HELP = "train Tacotron-2 on a preprocessed folder, as the original train.py"
DESCRIPTION = ("Trains (or resumes, or with --from fine-tunes) a Tacotron-2 on DATA (train.txt + mels/ + embeds/ of "
               "`speechblocks preprocess`) with the original optimizer (Adam, the decayed learning rate, global-norm "
               "clipping), loss and test split. Every tacotron_checkpoint_interval steps a checkpoint in "
               "RUN/checkpoints (the model as `speechblocks migrate` writes it + a .state.npz sidecar: optimizer, "
               "step, data order); every tacotron_eval_interval steps the test loss, plots and a Griffin-Lim wav; "
               "scalars in RUN/events (TensorBoard). An existing RUN resumes exactly. SIGINT/SIGTERM: the step ends, "
               "a checkpoint is written, exit 130/143. A NaN loss stops (exit 1) naming the step and the batch's "
               "utterances.")
EXAMPLES = """examples:
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc --framework torch --hparams rtvc
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc        # resume from the last checkpoint
  speechblocks train data runs/ft --from taco_pretrained --framework keras --steps 5000 --batch-size 16
  speechblocks train data runs/small --set tacotron_checkpoint_interval=500 --set tacotron_eval_interval=500
  torchrun --nproc-per-node 2 -m speechblocks.cli train data runs/ddp --framework torch   # 2 processes (gloo)
  speechblocks train data runs/mirrored --framework keras --strategy mirrored --replicas 2"""


def add_arguments(p) -> None:
    p.add_argument("data", metavar="DATA", type=preprocessed_folder("DATA"),
                   help="a preprocessed folder holding train.txt")
    p.add_argument("run", metavar="RUN", help="the run folder (created; an existing run is resumed)")
    p.add_argument("--from", metavar="TF1_CKPT|MIGRATED", default=None, type=existing_checkpoint("--from"),
                   help="fine-tune these weights (a TF1 checkpoint continues its global_step and Adam slots)")
    p.add_argument("--framework", choices=("torch", "keras"),
                   help="default: the run's when resuming, else torch")
    hparams_options(p, "the model and training recipe (default: rtvc, or the --from model's preset)")
    p.add_argument("--steps", type=count("--steps"), help="steps to train now (default: up to tacotron_train_steps)")
    p.add_argument("--batch-size", type=count("--batch-size"), help="tacotron_batch_size")
    p.add_argument("--seed", type=int, help="seed of data order and dropout (default: tacotron_random_seed)")
    p.add_argument("--strategy", choices=("mirrored",),
                   help="keras: data-parallel over the GPUs or, without one, --replicas logical CPU devices "
                        "(tf.distribute.MirroredStrategy); torch: run under torchrun --nproc-per-node N instead")
    p.add_argument("--replicas", type=count("--replicas"),
                   help="with --strategy mirrored: the number of replicas (default: every GPU, or 2 logical CPU "
                        "devices)")
    p.add_argument("--guided-attention", type=float, metavar="WEIGHT",
                   help="add the guided-attention loss (Tachibana et al.; not in the original recipe, off by "
                        "default) with this weight, e.g. 1.0; kept on resume, 0 turns it off")
    p.add_argument("--guided-attention-sigma", type=float, metavar="SIGMA",
                   help="width of its diagonal band (default 0.4)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args) -> int:
    from ..training import run as training

    source = getattr(args, "from")
    info = training.read_run(os.path.abspath(args.run))  # checked before a framework loads
    framework = args.framework or (info or {}).get("framework") or "torch"
    if info is not None and info.get("framework") != framework:
        raise UsageError(f"RUN {args.run!r} was trained with --framework {info.get('framework')}, not {framework}")
    launched = os.environ.get("WORLD_SIZE", "1")
    if args.strategy is not None and framework != "keras":
        raise UsageError(f"--strategy {args.strategy} is for --framework keras (torch trains data-parallel under "
                         f"torchrun --nproc-per-node N)")
    if args.replicas is not None and args.strategy is None:
        raise UsageError("--replicas goes with --strategy mirrored")
    if framework == "keras" and launched.strip() not in ("", "1", "0"):
        raise UsageError(f"torchrun started {launched} processes (WORLD_SIZE), but --framework keras trains in one "
                         f"process: use --strategy mirrored, or --framework torch under torchrun")
    options = training.TrainOptions(args.data, args.run, args.hparams, overrides(args.set), source, args.steps,
                                    args.batch_size, args.seed, progress=not args.quiet,
                                    guided_attention=args.guided_attention,
                                    guided_attention_sigma=args.guided_attention_sigma)
    training.guided_attention(options, info)  # its bad values refused before a framework loads
    backend = trainer_class(framework, args.strategy, args.replicas)
    try:
        with user_input():  # train's documented ValueErrors: the data, the hparams, the checkpoints
            result = training.train(backend, options)
    except training.TrainingDivergedError as e:
        say(NAME, f"error: {e}")
        return 1
    first = os.environ.get("RANK", "0") == "0"  # one line for a torchrun launch too: rank 0's
    if result.signal is not None:
        if first:
            say(NAME, f"stopped by signal {result.signal} at step {result.global_step}; checkpoint "
                      f"{result.checkpoint}")
        return 128 + int(result.signal)
    if first:
        print(f"{args.run}: step {result.global_step}, checkpoint {result.checkpoint}")
    return 0
