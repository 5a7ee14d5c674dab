"""``speechblocks train``: Tacotron-2 trained on a preprocessed folder, as the original ``train.py``; a
keithito/mimic2 Tacotron-1 (``--from`` one, or an existing Tacotron-1 RUN) fine-tuned by
:mod:`speechblocks.training.tacotron1`."""
from __future__ import annotations

import os

from ..devices import PRECISIONS
from ..errors import UsageError
from ..tacotron1_hparams import TACOTRON1_PRESETS
from ..tacotron1_schema import check_preset_family
from ._common import load_tensorflow, load_torch, say, trainer_class, user_input
from ._options import (count, device_option, existing_checkpoint, hparams_options, overrides, precision_option,
                       preprocessed_folder)

NAME = "train"
HELP = "train Tacotron-2 (or fine-tune a keithito/mimic2 Tacotron-1) on a preprocessed folder, as the originals"
DESCRIPTION = ("Trains (or resumes, or with --from fine-tunes) a Tacotron-2 on DATA (train.txt + mels/ + embeds/ of "
               "`speechblocks preprocess`) with the original optimizer (Adam, the decayed learning rate, global-norm "
               "clipping), loss and test split. Every tacotron_checkpoint_interval steps a checkpoint in "
               "RUN/checkpoints (the model as `speechblocks migrate` writes it + a .state.npz sidecar: optimizer, "
               "step, data order); every tacotron_eval_interval steps the test loss, plots and a Griffin-Lim wav; "
               "scalars in RUN/events (TensorBoard). An existing RUN resumes exactly. SIGINT/SIGTERM: the step ends, "
               "a checkpoint is written, exit 130/143. A NaN loss stops (exit 1) naming the step and the batch's "
               "utterances. With --from a keithito/tacotron or mimic2 model (TF1 checkpoint or migrated file): "
               "fine-tunes it with keithito's recipe on DATA of `speechblocks preprocess --hparams keithito|mimic2` "
               "(train.txt + spectrogram .npy files; loss mel + linear L1, Adam, clip 1.0, the original learning "
               "rate at the global step, which a TF1 checkpoint continues with its Adam slots); --steps is "
               "required; a checkpoint every --checkpoint-interval steps and at the end.")
EXAMPLES = """examples:
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc --framework torch --hparams rtvc
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc        # resume from the last checkpoint
  speechblocks train data runs/ft --from taco_pretrained --framework keras --steps 5000 --batch-size 16
  speechblocks train data runs/small --set tacotron_checkpoint_interval=500 --set tacotron_eval_interval=500
  torchrun --nproc-per-node 2 -m speechblocks.cli train data runs/ddp --framework torch   # 2 processes (gloo)
  speechblocks train data runs/mirrored --framework keras --strategy mirrored --replicas 2
  speechblocks train ljs runs/keithito --from tacotron-20180906/model.ckpt --steps 2000 --framework torch
  speechblocks train ljs runs/keithito --steps 1000      # resume the Tacotron-1 run
  speechblocks train data runs/gpu --device cuda --precision bf16      # one GPU, bfloat16 autocast
  torchrun --nproc-per-node 4 -m speechblocks.cli train data runs/ddp4 --device cuda   # 4 GPUs (NCCL)"""


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
    p.add_argument("--checkpoint-interval", type=count("--checkpoint-interval"), metavar="N",
                   help="Tacotron-1 (keithito/mimic2 --from): a checkpoint every N global steps (default 1000, "
                        "keithito's --checkpoint_interval); Tacotron-2 uses --set tacotron_checkpoint_interval=N")
    device_option(p, "the torch model trains (Tacotron-2)")
    precision_option(p, PRECISIONS, "Tacotron-2: fp32, bf16 (torch autocast / Keras mixed_bfloat16) or fp16 (torch "
                     "autocast + dynamic loss scaling); weights, Adam slots, checkpoints and losses stay float32",
                     default=None, default_text="the run's, else fp32, the original")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _tacotron1_kind(args) -> tuple[bool, str | None]:
    """``(is Tacotron-1, kind of --from)``: an existing Tacotron-1 RUN, or a keithito/mimic2 --from (a TF1
    checkpoint or a migrated Tacotron-1 file)."""
    from ..synthesis import source_kind
    from ..synthesis_tacotron1 import source_family
    from ..training.tacotron1 import read_tacotron1_run

    source = getattr(args, "from")
    if source is not None:
        try:
            kind, _ = source_kind(source, args.framework)
        except UsageError:
            return False, None  # the Tacotron-2 path reports it as before
        if kind == "torch":
            load_torch()  # a migrated torch file's model entry says its family
        if source_family(source, kind) == "tacotron1":
            return True, kind
        if isinstance(args.hparams, str) and args.hparams in TACOTRON1_PRESETS:
            check_preset_family(args.hparams, "tacotron2", f"--from {source!r}")
        return False, kind
    if read_tacotron1_run(os.path.abspath(args.run)) is not None:
        return True, None
    return isinstance(args.hparams, str) and args.hparams in TACOTRON1_PRESETS, None


def run(args) -> int:
    from ..training import run as training

    tacotron1, kind = _tacotron1_kind(args)
    if tacotron1:
        return run_tacotron1(args, kind)
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
    options.precision = args.precision or (info or {}).get("precision") or "fp32"
    backend = trainer_class(framework, args.strategy, args.replicas, args.device, options.precision)
    options.announce = f"{_where(backend)}, precision {options.precision}"
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


def _where(backend) -> str:
    """Where the trainers of ``backend`` run, for the first progress line."""
    device = getattr(backend, "default_device", None)
    if device is not None:
        return f"device {device}"
    import tensorflow as tf

    gpus = tf.config.get_visible_devices("GPU")
    return f"TensorFlow on {len(gpus)} GPU(s)" if gpus else "TensorFlow on the CPU"


def _tacotron1_refusals(args) -> None:
    if os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1", "0"):
        raise UsageError("Tacotron-1 fine-tuning runs in one process (not under torchrun)")
    for option, value in (("--strategy", args.strategy), ("--replicas", args.replicas),
                          ("--guided-attention", args.guided_attention),
                          ("--guided-attention-sigma", args.guided_attention_sigma)):
        if value is not None:
            raise UsageError(f"{option} is for Tacotron-2; Tacotron-1 fine-tuning follows keithito's recipe")
    if args.steps is None:
        raise UsageError("Tacotron-1 fine-tuning needs --steps N (the originals train until stopped)")
    if args.device.startswith("cuda") or args.precision not in (None, "fp32"):
        raise UsageError("Tacotron-1 fine-tuning runs on the CPU in float32 (its Adam update is numpy's, keithito's "
                         "recipe): drop --device/--precision")
    if isinstance(args.hparams, str):
        check_preset_family(args.hparams, "tacotron1", f"--from {getattr(args, 'from')!r}")


def run_tacotron1(args, kind: str | None) -> int:
    """``speechblocks train`` of a keithito/mimic2 model (:mod:`speechblocks.training.tacotron1`)."""
    from ..training.run import TrainingDivergedError
    from ..training.tacotron1 import Tacotron1TrainOptions, read_tacotron1_run, train_tacotron1

    _tacotron1_refusals(args)
    record = read_tacotron1_run(os.path.abspath(args.run))
    framework = args.framework or (record or {}).get("framework") or (kind if kind in ("keras", "torch") else "torch")
    settings = overrides(args.set)
    batch_size = args.batch_size or settings.pop("batch_size", None)
    if framework == "torch":
        load_torch()
        from torch_layers.tacotron1_trainer import Tacotron1Trainer
    else:
        load_tensorflow()
        from tf_layers.tacotron1_trainer import Tacotron1Trainer
    options = Tacotron1TrainOptions(args.data, args.run, getattr(args, "from"), kind, args.steps, args.hparams,
                                    settings, batch_size, args.seed, args.checkpoint_interval,
                                    progress=not args.quiet)
    try:
        with user_input():  # the data, the hparams, the checkpoints
            result = train_tacotron1(Tacotron1Trainer, options)
    except TrainingDivergedError as e:
        say(NAME, f"error: {e}")
        return 1
    if result.signal is not None:
        say(NAME, f"stopped by signal {result.signal} at step {result.global_step}; checkpoint {result.checkpoint}")
        return 128 + int(result.signal)
    print(f"{args.run}: step {result.global_step}, checkpoint {result.checkpoint}")
    return 0
