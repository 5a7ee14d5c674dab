"""The ``speechblocks`` console script: ``parity``, ``inspect``, ``migrate``, ``synthesize``, ``mel``, ``griffin-lim``,
``embed``, ``preprocess``, ``train``, ``gta``.

Conventions of every subcommand:

* exit status 0 on success, 1 when a parity run has a FAIL row, 2 for a usage or input error (a missing or
  unreadable file, bad text, a wrong speaker embedding ...), 3 for an unexpected internal error (a bug), 4 when
  ``parity --checkpoint --skip-legacy`` ran without TensorFlow: the torch side's own checks passed, but no
  comparison with Keras (or TF1) was made, so parity is not established;
* errors are one line on stderr (``speechblocks <command>: error: ...``), without a traceback unless ``--debug``;
* a TF1 checkpoint is validated, then read in numpy, no TensorFlow needed (truncated, corrupted, hostile files: exit 2,
  one line naming the file and the problem); variables holding NaN/inf are refused (exit 2) unless ``--allow-nonfinite``
  (``inspect``, ``migrate``: then a warning line); float16/float64 variables are cast to float32 (a warning line);
* TensorFlow's, absl's and oneDNN's start-up lines are silenced at the file-descriptor level while the frameworks
  load (``--verbose`` lets them through); the command's own progress goes to stderr, its results to stdout.

This module imports no framework at module level: ``speechblocks --help`` answers at once.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import warnings

import numpy as np

from . import audio_commands, synthesis
from .errors import UsageError
from .tf1_checkpoint_file import CheckpointDtypeWarning, NonFiniteWeightsWarning
from .tf1_checkpoint_reader import ALLOW_NONFINITE_HELP

__all__ = ["main", "build_parser", "UsageError"]

PROG = "speechblocks"


# -- quiet framework start-up ----------------------------------------------------------------------
_VERBOSE = False


@contextlib.contextmanager
def _silenced_stderr():
    """Sends file descriptor 2 to a temporary file while the block runs (C++ logging writes there directly, before
    any Python logging is configured); what was written is shown again if the block raises."""
    if _VERBOSE:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def load_tensorflow():
    """Imports TensorFlow (and Keras) quietly; returns the module. Also quietens its Python-level logging."""
    if not _VERBOSE:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        with _silenced_stderr():
            import tensorflow as tf

            tf.constant(0.0).numpy()  # device initialisation logs once, here
            import keras  # noqa: F401
    except ImportError:
        raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]'") from None
    if not _VERBOSE:
        import logging
        import warnings

        tf.get_logger().setLevel(logging.ERROR)
        try:
            from absl import logging as absl_logging

            absl_logging.set_verbosity(absl_logging.ERROR)
        except ImportError:  # pragma: no cover
            pass
        warnings.filterwarnings("ignore", module=r"(keras|tensorflow|tf_keras)(\.|$)")
    return tf


def load_torch():
    """Imports torch quietly; returns the module."""
    try:
        with _silenced_stderr():
            import torch
    except ImportError:
        raise UsageError("this needs PyTorch: pip install 'speechblocks[torch]'") from None
    return torch


def _say(command: str, line: str) -> None:
    print(f"{PROG} {command}: {line}", file=sys.stderr, flush=True)


# -- parity ----------------------------------------------------------------------------------------
#: ``parity --checkpoint --skip-legacy`` without TensorFlow: the torch side's checks passed, no comparison was made
EXIT_PARITY_NOT_ESTABLISHED = 4


def _cmd_parity(args) -> int:
    if args.checkpoint:
        return _parity_checkpoint(args)
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

    if args.block:
        raise UsageError("--block selects cases of the built-in suite; with --checkpoint every block of the "
                         "checkpoint's model is compared")
    _precheck_checkpoint(args.checkpoint)  # a missing or damaged checkpoint: refused before TensorFlow loads
    keras = _tensorflow_for_parity(args.skip_legacy)
    load_torch()
    try:
        rows = run_checkpoint_parity(args.checkpoint, _hparams_arg(args.hparams), overrides=_overrides(args.set),
                                     use_ema=args.use_ema, steps=args.steps, skip_legacy=args.skip_legacy,
                                     skip_keras=not keras, progress=lambda line: _say("parity", line))
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
        _say("parity", note)
    else:
        print(note)
    return EXIT_PARITY_NOT_ESTABLISHED


def _tensorflow_for_parity(skip_legacy: bool) -> bool:
    """Loads TensorFlow for ``parity --checkpoint``; False when it cannot be imported and ``--skip-legacy`` lets the
    torch side run alone."""
    try:
        load_tensorflow()
    except UsageError:
        if not skip_legacy:
            raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]' (with --skip-legacy the torch "
                             "side's own checks run without it, but no comparison is made)") from None
        return False
    return True


# -- inspect / migrate -----------------------------------------------------------------------------
def _precheck_checkpoint(path) -> None:
    """A missing or damaged checkpoint is refused before any framework is imported (the index and the shard sizes are
    checked with numpy alone: the error comes in a fraction of a second, not after TensorFlow's ~8 s start-up)."""
    from .tf1_checkpoint_file import open_checkpoint_files

    open_checkpoint_files(path)


def _cmd_inspect(args) -> int:
    from .migration.cli import format_inventory
    from .migration.inventory import inspect_checkpoint

    _precheck_checkpoint(args.checkpoint)  # the checkpoint is read in numpy: no framework is loaded
    print(format_inventory(inspect_checkpoint(args.checkpoint, use_ema=args.use_ema,
                                              allow_nonfinite=args.allow_nonfinite)))
    return 0


def _cmd_migrate(args) -> int:
    from .migration.migrate import migrate_checkpoint

    _precheck_checkpoint(args.checkpoint)
    if args.to == "torch":  # the checkpoint is read in numpy: only the target framework is loaded
        load_torch()
    else:
        load_tensorflow()
    report = migrate_checkpoint(args.checkpoint, args.to, args.out, use_ema=args.use_ema, strict=not args.no_strict,
                                dry_run=args.dry_run, progress=lambda line: _say("migrate", line),
                                hparams=_hparams_arg(args.hparams), overrides=_overrides(args.set),
                                allow_nonfinite=args.allow_nonfinite)
    print(report)
    return 0


# -- hparams arguments -----------------------------------------------------------------------------
def _hparams_arg(value):
    """``--hparams``: a preset name, or a JSON file of original hparam names."""
    if value is None:
        return None
    from .tacotron2_hparams import TACOTRON2_PRESETS

    if value in TACOTRON2_PRESETS:
        return value
    if not os.path.isfile(value):
        raise UsageError(f"--hparams {value!r} is neither a preset ({', '.join(TACOTRON2_PRESETS)}) nor a JSON file")
    import json

    try:
        with open(value) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"--hparams {value!r}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--hparams {value!r}: the JSON must be an object of hparam names")
    return data


def _overrides(pairs) -> dict:
    """``--set NAME=VALUE``: VALUE read as JSON (numbers, true/false, null, lists), else as a string."""
    import json

    out = {}
    for pair in pairs or ():
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set {pair!r}: expected NAME=VALUE, e.g. --set tacotron_dropout_rate=0")
        raw = raw.strip()
        lowered = {"True": "true", "False": "false", "None": "null"}.get(raw, raw)
        try:
            value = json.loads(lowered)
        except ValueError:
            value = raw
        out[name.strip()] = value
    return out


# -- synthesize ------------------------------------------------------------------------------------
def _cmd_synthesize(args) -> int:
    texts = synthesis.read_texts(args.text, args.text_file)
    cleaners = tuple(c.strip() for c in args.cleaners.split(",") if c.strip())
    sequences = synthesis.encode_texts(texts, cleaners)
    outputs = synthesis.output_paths(args.out, len(texts))
    plots = synthesis.plot_paths(args.plot, len(texts), outputs) if args.plot else None
    if plots is not None:
        synthesis.require_matplotlib()
    if args.speaker_embedding and args.speaker_wav:
        raise UsageError("give --speaker-embedding or --speaker-wav, not both")
    embedding = synthesis.read_speaker_embedding(args.speaker_embedding, len(texts))
    wav_paths = audio_commands.wav_output_paths(args.wav, outputs) if args.wav else None
    if args.speaker_wav and not os.path.isfile(args.speaker_wav):
        raise UsageError(f"--speaker-wav {args.speaker_wav!r} does not exist")
    kind, framework = synthesis.source_kind(args.source, args.framework)
    if framework == "keras":
        load_tensorflow()
    if framework == "torch" or args.speaker_wav or (wav_paths and args.griffin_lim == "torch"):
        load_torch()
    overrides = _overrides(args.set)
    model = synthesis.load_model(args.source, kind, framework, _hparams_arg(args.hparams), overrides, args.seed)
    if args.speaker_wav:
        encoder = audio_commands.load_speaker_encoder(args.encoder)
        (ref,) = audio_commands.embed_wavs(encoder, [args.speaker_wav])
        embedding = np.repeat(ref[None], len(texts), axis=0)
        _say("synthesize", f"speaker embedding of {args.speaker_wav} ({ref.shape[0]} values)")
    embeddings = synthesis.check_speaker_embedding(model, embedding, args.speaker_embedding or args.speaker_wav,
                                                   len(texts))
    audio_hp = audio_commands.model_audio_hparams(model, overrides) if wav_paths else None
    if args.max_iters is not None and args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1; got {args.max_iters}")
    show = synthesis.TerminalProgress(sys.stderr, args.max_iters or model.hparams.max_iters) \
        if sys.stderr.isatty() and not args.quiet else None
    results = synthesis.synthesize(model, framework, sequences, embeddings, args.max_iters, args.seed, show, texts)
    if show is not None:
        show.close()
    wavs = None
    if wav_paths:
        tell = (lambda line: _say("synthesize", line)) if sys.stderr.isatty() and not args.quiet else None
        wavs = audio_commands.griffin_lim_wavs([r.mel for r in results], audio_hp, args.griffin_lim,
                                               args.griffin_lim_iters, args.seed, progress=tell)
    synthesis.write_outputs(results, outputs, plots)
    if wavs is not None:
        audio_commands.write_wavs(wavs, wav_paths, audio_hp.sample_rate)
    for path, res in zip(outputs, results):
        stop = f"stop at step {res.steps}" if res.stopped else f"no stop after {res.steps} steps (max_iters)"
        print(f"{path}: {res.mel.shape[0]} frames x {res.mel.shape[1]} mels ({stop}): {res.cleaned!r}")
    for p in plots or ():
        print(f"{p}: alignment and mel spectrogram")
    for p, w in zip(wav_paths or (), wavs or ()):
        print(f"{p}: {w.shape[0] / audio_hp.sample_rate:.2f} s at {audio_hp.sample_rate} Hz (Griffin-Lim, "
              f"{args.griffin_lim})")
    return 0


# -- train / gta -----------------------------------------------------------------------------------------
def _trainer_class(framework: str, strategy: str | None = None, replicas: int | None = None):
    """The framework's trainer (``torch_layers`` / ``tf_layers`` ``Tacotron2Trainer``), loaded quietly; with
    ``strategy="mirrored"`` the Keras trainer class of :meth:`~tf_layers.Tacotron2Trainer.mirrored`."""
    if framework == "torch":
        load_torch()
        from torch_layers.tacotron2_trainer import Tacotron2Trainer
        return Tacotron2Trainer
    mirrored = None
    if strategy == "mirrored":  # the logical devices are set before TensorFlow initialises its devices
        try:
            with _silenced_stderr():
                from tf_layers._distribute import mirrored_strategy

                mirrored = mirrored_strategy(replicas)
        except ImportError:
            raise UsageError("this needs TensorFlow: pip install 'speechblocks[tf]'") from None
    load_tensorflow()
    from tf_layers.tacotron2_trainer import Tacotron2Trainer
    return Tacotron2Trainer if mirrored is None else Tacotron2Trainer.mirrored(strategy=mirrored)


def _cmd_train(args) -> int:
    from .training import run

    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1; got {args.steps}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size must be >= 1; got {args.batch_size}")
    if not os.path.isfile(os.path.join(args.data, "train.txt")):
        raise UsageError(f"DATA {args.data!r} holds no train.txt (run `speechblocks preprocess` first)")
    source = getattr(args, "from")
    if source is not None and not os.path.exists(source) and not os.path.exists(source + ".index"):
        raise UsageError(f"--from {source!r} does not exist")
    info = run._read_run(os.path.abspath(args.run))  # checked before a framework loads
    framework = args.framework or (info or {}).get("framework") or "torch"
    if info is not None and info.get("framework") != framework:
        raise UsageError(f"RUN {args.run!r} was trained with --framework {info.get('framework')}, not {framework}")
    launched = os.environ.get("WORLD_SIZE", "1")
    if args.strategy is not None and framework != "keras":
        raise UsageError(f"--strategy {args.strategy} is for --framework keras (torch trains data-parallel under "
                         f"torchrun --nproc-per-node N)")
    if args.replicas is not None and args.strategy is None:
        raise UsageError("--replicas goes with --strategy mirrored")
    if args.replicas is not None and args.replicas < 1:
        raise UsageError(f"--replicas must be >= 1; got {args.replicas}")
    if framework == "keras" and launched.strip() not in ("", "1", "0"):
        raise UsageError(f"torchrun started {launched} processes (WORLD_SIZE), but --framework keras trains in one "
                         f"process: use --strategy mirrored, or --framework torch under torchrun")
    options = run.TrainOptions(args.data, args.run, _hparams_arg(args.hparams), _overrides(args.set), source,
                               args.steps, args.batch_size, args.seed, progress=not args.quiet,
                               guided_attention=args.guided_attention,
                               guided_attention_sigma=args.guided_attention_sigma)
    run._guided_attention(options, info)  # its bad values refused before a framework loads
    backend = _trainer_class(framework, args.strategy, args.replicas)
    try:
        result = run.train(backend, options)
    except run.TrainingDivergedError as e:
        _say("train", f"error: {e}")
        return 1
    first = os.environ.get("RANK", "0") == "0"  # one line for a torchrun launch too: rank 0's
    if result.signal is not None:
        if first:
            _say("train", f"stopped by signal {result.signal} at step {result.global_step}; checkpoint "
                          f"{result.checkpoint}")
        return 128 + int(result.signal)
    if first:
        print(f"{args.run}: step {result.global_step}, checkpoint {result.checkpoint}")
    return 0


def _cmd_gta(args) -> int:
    from .training import gta

    if not os.path.isfile(os.path.join(args.data, "train.txt")):
        raise UsageError(f"DATA {args.data!r} holds no train.txt (run `speechblocks preprocess` first)")
    model = gta.resolve_model(args.model)
    if args.max_iters is not None and args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1; got {args.max_iters}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size must be >= 1; got {args.batch_size}")
    framework = args.framework or ("keras" if model.endswith(".weights.h5") else "torch")
    paths = gta.run_gta(_trainer_class(framework), args.data, model, args.out, _hparams_arg(args.hparams),
                        _overrides(args.set), args.max_iters, args.batch_size, args.seed,
                        progress=_progress("gta", args.quiet))
    print(f"{len(paths)} GTA mel spectrograms in {os.path.join(args.out, 'gta')}; {os.path.join(args.out, 'map.txt')}")
    return 0


# -- audio: mel, griffin-lim, embed ------------------------------------------------------------------
def _progress(command: str, quiet: bool = False):
    return (lambda line: _say(command, line)) if sys.stderr.isatty() and not quiet else None


def _cmd_mel(args) -> int:
    from . import audio

    hp = audio_commands.audio_hparams_for(_hparams_arg(args.hparams), _overrides(args.set))
    for p in args.wav:
        if not os.path.isfile(p):
            raise UsageError(f"{p!r} does not exist")
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.wav]
    outputs = synthesis.output_files(args.out, stems)
    key = "linear" if args.linear else "mel"
    tell = _progress("mel", args.quiet)
    feats = []
    for i, p in enumerate(args.wav):
        if tell:
            tell(f"{i + 1}/{len(args.wav)}: {os.path.basename(p)}")
        feats.append(audio.recording_features(p, hp)[key])
    audio_commands.write_arrays(feats, outputs)
    for p, f in zip(outputs, feats):
        print(f"{p}: {f.shape[0]} frames x {f.shape[1]} {'linear bins' if args.linear else 'mels'}")
    return 0


def _cmd_griffin_lim(args) -> int:
    hp = audio_commands.audio_hparams_for(_hparams_arg(args.hparams), _overrides(args.set))
    channels, what = (hp.num_freq, "linear spectrogram") if args.linear else (hp.num_mels, "mel spectrogram")
    specs = [audio_commands.read_spectrogram(p, channels, what) for p in args.spectrogram]
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.spectrogram]
    outputs = synthesis.output_files(args.out, stems, ".wav")
    if args.framework == "torch":
        load_torch()
    elif args.framework == "keras":
        load_tensorflow()
    wavs = audio_commands.griffin_lim_wavs(specs, hp, args.framework, args.griffin_lim_iters, args.seed,
                                           linear=args.linear, progress=_progress("griffin-lim", args.quiet))
    audio_commands.write_wavs(wavs, outputs, hp.sample_rate)
    for p, w in zip(outputs, wavs):
        print(f"{p}: {w.shape[0] / hp.sample_rate:.2f} s at {hp.sample_rate} Hz")
    return 0


def _cmd_embed(args) -> int:
    if args.encoder is None and len(args.wav) > 1 and args.wav[0].endswith((".pt", ".pth", ".ckpt")):
        args.encoder, args.wav = args.wav[0], args.wav[1:]  # `speechblocks embed ENCODER.pt REF.wav ...`
    for p in args.wav:
        if not os.path.isfile(p):
            raise UsageError(f"{p!r} does not exist")
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.wav]
    outputs = synthesis.output_files(args.out, stems)
    if args.framework == "torch":
        load_torch()
    else:
        load_tensorflow()
    encoder = audio_commands.load_speaker_encoder(args.encoder, args.framework)
    embeds = audio_commands.embed_wavs(encoder, args.wav, _progress("embed", args.quiet))
    audio_commands.write_arrays(embeds, outputs)
    for p, e in zip(outputs, embeds):
        print(f"{p}: speaker embedding ({e.shape[0]} values, L2 norm {float(np.linalg.norm(e)):.3f})")
    return 0


def _cmd_preprocess(args) -> int:
    from . import preprocess

    if args.hparams is None:
        raise UsageError("--hparams is required: rtvc (mels, audio, GE2E embeddings) or rayhane (mels, audio, "
                         "linear spectrograms)")
    from .audio.params import AUDIO_HPARAM_NAMES

    overrides = _overrides(args.set)
    unknown = sorted(set(overrides) - AUDIO_HPARAM_NAMES)
    if unknown:
        raise UsageError(f"--set {', '.join(unknown)}: not an audio hparam (preprocessing reads only those: "
                         f"{', '.join(sorted(AUDIO_HPARAM_NAMES))})")
    hp = audio_commands.audio_hparams_for(_hparams_arg(args.hparams), overrides)
    workers = args.workers if args.workers is not None else min(os.cpu_count() or 1, 4)
    cleaners = [c.strip() for c in args.cleaners.split(",") if c.strip()]
    if hp.preset == "rtvc" and args.encoder is not None and not os.path.isfile(args.encoder):
        raise UsageError(f"--encoder {args.encoder!r} does not exist")
    if hp.preset == "rtvc":
        load_torch()
    bar = _progress_bar("preprocess") if sys.stderr.isatty() and not args.quiet else None
    try:
        summary = preprocess.preprocess(args.dataset, args.out, hp, encoder=args.encoder, workers=workers,
                                        skip_existing=args.skip_existing, skip_bad=args.skip_bad,
                                        cleaners=cleaners, progress=bar,
                                        report=lambda line: _say("preprocess", line))
    finally:
        if bar is not None:
            bar(None, None)
    print(summary.line())
    return 0


def _progress_bar(command: str):
    """A one-line progress bar on stderr: ``bar(done, total)``; ``bar(None, None)`` ends the line."""
    shown = [False]

    def bar(done, total) -> None:
        if done is None:
            if shown[0]:
                sys.stderr.write("\n")
                sys.stderr.flush()
            return
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r{PROG} {command}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()
        shown[0] = True

    return bar


# -- parser ----------------------------------------------------------------------------------------
_EXAMPLES = {
    "parity": """examples:
  speechblocks parity                              # the whole suite: every block and the whole model
  speechblocks parity --block tacotron2 --json     # one case module, as JSON
  speechblocks parity --checkpoint logs-pretrained/taco_pretrained       # your own checkpoint's weights
  speechblocks parity --checkpoint model.ckpt-278000 --hparams rayhane --steps 30""",
    "inspect": """examples:
  speechblocks inspect synthesizer/saved_models/logs-pretrained/taco_pretrained
  speechblocks inspect model.ckpt-278000 --use-ema""",
    "migrate": """examples:
  speechblocks migrate taco_pretrained --to keras tacotron2.weights.h5
  speechblocks migrate model.ckpt-278000 --to torch tacotron2.pt --hparams rayhane --set max_iters=1000
  speechblocks migrate model.ckpt-278000 --to torch tacotron2.pt --dry-run""",
    "synthesize": """examples:
  speechblocks synthesize tacotron2.pt --text "Hello world." --speaker-embedding speaker.npy --out hello.npy
  speechblocks synthesize taco_pretrained --framework keras --text-file lines.txt --speaker-embedding spk.npy \\
      --out mels/ --plot mels/alignment.png
  speechblocks synthesize tacotron2.weights.h5 --text "It costs $3.50." --set tacotron_dropout_rate=0 \\
      --max-iters 400 --out costs.npy
  speechblocks synthesize tacotron2.pt --text "Hello world." --speaker-wav me.wav --out hello.npy --wav""",
    "mel": """examples:
  speechblocks mel recording.wav --hparams rtvc --out recording.npy
  speechblocks mel wavs/*.wav --hparams rayhane --set trim_silence=false --out mels/""",
    "griffin-lim": """examples:
  speechblocks griffin-lim hello.npy --hparams rtvc --out hello.wav
  speechblocks griffin-lim mels/*.npy --hparams rayhane --griffin-lim-iters 30 --out wavs/""",
    "train": """examples:
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc --framework torch --hparams rtvc
  speechblocks train datasets/SV2TTS/synthesizer runs/rtvc        # resume from the last checkpoint
  speechblocks train data runs/ft --from taco_pretrained --framework keras --steps 5000 --batch-size 16
  speechblocks train data runs/small --set tacotron_checkpoint_interval=500 --set tacotron_eval_interval=500
  torchrun --nproc-per-node 2 -m speechblocks.cli train data runs/ddp --framework torch   # 2 processes (gloo)
  speechblocks train data runs/mirrored --framework keras --strategy mirrored --replicas 2""",
    "gta": """examples:
  speechblocks gta datasets/SV2TTS/synthesizer runs/rtvc/checkpoints/tacotron2-00020000.pt gta_out
  speechblocks gta data runs/rtvc gta_out --batch-size 16        # a RUN folder: its last checkpoint
  speechblocks gta data taco_pretrained gta_out --framework keras --max-iters 1000""",
    "embed": """examples:
  speechblocks embed encoder.pt me.wav --out me.npy    # or --encoder encoder.pt
  speechblocks embed refs/*.wav --out embeds/           # resemblyzer's weights fetched by make install""",
    "preprocess": """examples:
  speechblocks preprocess LJSpeech-1.1 training_data --hparams rayhane
  speechblocks preprocess my_voice/ training_data --hparams rtvc --encoder encoder.pt --workers 8
  speechblocks preprocess LJSpeech-1.1 training_data --hparams rtvc --skip-existing --skip-bad""",
}


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="let TensorFlow's and absl's start-up lines through to stderr")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error")
    return p


def _sub(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog=_EXAMPLES[name], parents=[_common()],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _hparams_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--hparams", metavar="rtvc|rayhane|FILE.json",
                   help=f"{what}: a preset, or a JSON file of original hparam names (sizes must agree with "
                        "the weights)")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override one hparam by its original name, VALUE as JSON (repeatable), "
                        "e.g. --set tacotron_dropout_rate=0 --set stop_at_any=false")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, parents=[_common()], formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keras and PyTorch twins of the TF1 Tacotron-2: parity, checkpoint migration, synthesis.",
        epilog="exit status: 0 ok, 1 parity FAIL, 2 usage or input error, 3 internal error, 4 parity not "
               "established (--checkpoint --skip-legacy without TensorFlow: only the torch side's checks ran).\n"
               "run 'speechblocks COMMAND --help' for a command's options and examples.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    pp = _sub(sub, "parity", "prove Keras, torch and the TF1 graph compute the same numbers",
              "Runs the TF1 legacy reference, the Keras and the torch implementations on the same inputs and prints "
              "one row per output: max |difference|, tolerance, PASS/FAIL. Exit status 1 on any FAIL.")
    pp.add_argument("--block", action="append", help="only this case module or block (repeatable)")
    pp.add_argument("--checkpoint", metavar="CKPT",
                    help="compare on the real weights of this TF1 Tacotron-2 checkpoint: every block and the whole "
                         "model, teacher-forced and free-running")
    _hparams_options(pp, "with --checkpoint, what the shapes cannot tell")
    pp.add_argument("--use-ema", action="store_true", help="with --checkpoint: use the EMA shadows")
    pp.add_argument("--steps", type=int, default=20, help="with --checkpoint: free-running decoder steps (20)")
    pp.add_argument("--skip-legacy", action="store_true",
                    help="with --checkpoint: Keras vs torch only (no TF1 reference, no tf_keras needed); where "
                         "TensorFlow cannot be imported, the torch side's own checks only (exit status 4 when they "
                         "pass: no comparison was made)")
    pp.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    pp.set_defaults(func=_cmd_parity)

    pi = _sub(sub, "inspect", "show the model and blocks a TF1 checkpoint holds",
              "Lists the Tacotron-2 model a TF1 checkpoint holds (preset, r, speaker embedding, symbols, parameters "
              "per part), its blocks with their inferred configs, and what is skipped.")
    pi.add_argument("checkpoint", help="checkpoint prefix, its .index file, or its directory")
    pi.add_argument("--use-ema", action="store_true", help="report ExponentialMovingAverage shadows as the weights")
    pi.add_argument("--allow-nonfinite", action="store_true", help=ALLOW_NONFINITE_HELP)
    pi.set_defaults(func=_cmd_inspect)

    pm = _sub(sub, "migrate", "migrate a TF1 Tacotron-2 checkpoint to Keras or PyTorch",
              "Writes the checkpoint's whole Tacotron-2 (or, for a checkpoint of some blocks, each block) to a Keras "
              ".weights.h5 or torch .pt file, atomically; the checkpoint is only read. Rebuild with "
              "Tacotron2.from_migrated(OUT) or load_migrated(OUT).")
    pm.add_argument("checkpoint", help="checkpoint prefix, its .index file, or its directory")
    pm.add_argument("--to", choices=("keras", "torch"), required=True)
    pm.add_argument("out", help="output file (.weights.h5 for keras, .pt for torch)")
    _hparams_options(pm, "whole model only, what the shapes cannot tell (stored in the file)")
    pm.add_argument("--dry-run", action="store_true", help="build and load everything, write nothing")
    pm.add_argument("--use-ema", action="store_true", help="take the weights from the EMA shadows")
    pm.add_argument("--no-strict", action="store_true", help="skip blocks with missing or mis-shaped variables")
    pm.add_argument("--allow-nonfinite", action="store_true", help=ALLOW_NONFINITE_HELP)
    pm.set_defaults(func=_cmd_migrate)

    ps = _sub(sub, "synthesize", "text to mel spectrogram with a migrated model or a TF1 checkpoint",
              "Cleans the text and maps it to the original 66 symbols, decodes with the model (several sentences "
              "in one padded batch) and writes each sentence's mel outputs [frames, num_mels] as .npy. Like the "
              "original, the pre-net dropout stays on at inference (--set tacotron_dropout_rate=0 for "
              "deterministic output; --seed fixes it otherwise).")
    ps.add_argument("source", metavar="CKPT_OR_MIGRATED",
                    help="a file of `speechblocks migrate` (.weights.h5 / .pt) or a TF1 checkpoint")
    ps.add_argument("--text", action="append", help="a sentence (repeatable)")
    ps.add_argument("--text-file", help="a UTF-8 file, one sentence per non-empty line")
    ps.add_argument("--speaker-embedding", metavar="EMB.npy",
                    help="RTVC models: the speaker embedding, shape [E] (every sentence) or [sentences, E]")
    ps.add_argument("--framework", choices=("keras", "torch"),
                    help="default: torch for a .pt file, keras for a .weights.h5 file or a TF1 checkpoint")
    ps.add_argument("--max-iters", type=int, help="decoder step cap (default: the hparam max_iters)")
    _hparams_options(ps, "what the weights cannot tell")
    ps.add_argument("--cleaners", default="english_cleaners",
                    help="comma-separated: basic_cleaners, transliteration_cleaners, english_cleaners (default)")
    ps.add_argument("--seed", type=int, default=0, help="random seed of the pre-net dropout (default 0)")
    ps.add_argument("--out", required=True,
                    help="one sentence: the .npy file; several: a directory of 000.npy, 001.npy, ...")
    ps.add_argument("--plot", metavar="PNG", help="also draw alignment and mel (needs matplotlib); several "
                                                  "sentences: PNG gets _000, _001, ... before its extension")
    ps.add_argument("--speaker-wav", metavar="REF.wav",
                    help="RTVC models: a recording of the voice instead of --speaker-embedding (GE2E embedding, "
                         "the original preprocessing)")
    ps.add_argument("--encoder", metavar="ENCODER.pt",
                    help="with --speaker-wav: GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                         "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    ps.add_argument("--wav", nargs="?", const=True, metavar="WAV",
                    help="also write audio (Griffin-Lim with the model's audio hparams): beside each .npy, or this "
                         ".wav file (one sentence) / directory (several)")
    _griffin_lim_options(ps)
    ps.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    ps.set_defaults(func=_cmd_synthesize)

    pl = _sub(sub, "mel", "a recording's mel (or linear) spectrogram, as the original preprocessing made it",
              "Loads each recording (resampled to the preset's sample_rate), applies the preset's preprocessing "
              "order (rescale, silence trimming, pre-emphasis) and writes its spectrogram [frames, num_mels] as "
              ".npy: the features the model was trained on.")
    pl.add_argument("wav", nargs="+", help="audio files (wav, flac, ogg)")
    _hparams_options(pl, "the audio hparams")
    pl.add_argument("--linear", action="store_true", help="the linear spectrogram [frames, num_freq] instead")
    pl.add_argument("--out", required=True, help="one file: the .npy; several: a directory of <name>.npy")
    pl.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    pl.set_defaults(func=_cmd_mel)

    pg = _sub(sub, "griffin-lim", "a mel (or linear) spectrogram back to a wav",
              "Inverts each [frames, num_mels] .npy spectrogram with Griffin-Lim as the original did (denormalise, "
              "dB to amplitude, mel pseudo-inverse, power, Griffin-Lim, inverse pre-emphasis) and writes a 16-bit "
              "wav, peak-normalised as the original.")
    pg.add_argument("spectrogram", nargs="+", metavar="SPEC.npy")
    _hparams_options(pg, "the audio hparams")
    pg.add_argument("--linear", action="store_true", help="the inputs are linear spectrograms [frames, num_freq]")
    pg.add_argument("--framework", choices=audio_commands.GL_FRAMEWORKS, default="torch",
                    help="where Griffin-Lim runs: torch (default, fast), keras (TensorFlow) or numpy (the original "
                         "loop)")
    pg.add_argument("--griffin-lim-iters", type=int, metavar="N", help="iterations (default: the hparam, 60)")
    pg.add_argument("--seed", type=int, default=0, help="seed of the initial phases (default 0)")
    pg.add_argument("--out", required=True, help="one file: the .wav; several: a directory of <name>.wav")
    pg.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    pg.set_defaults(func=_cmd_griffin_lim)

    pe = _sub(sub, "embed", "the GE2E speaker embedding of recordings",
              "The speaker embedding of each recording as the RTVC encoder computes it (16 kHz, volume "
              "normalisation, long silences trimmed, partial windows of 1.6 s averaged, L2-normalised), written "
              "as a .npy of shape [256].")
    pe.add_argument("wav", nargs="+", metavar="[ENCODER.pt] WAV",
                    help="audio files (wav, flac, ogg), optionally after the encoder's weights file")
    pe.add_argument("--encoder", metavar="ENCODER.pt",
                    help="GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                         "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    pe.add_argument("--framework", choices=("torch", "keras"), default="torch")
    pe.add_argument("--out", required=True, help="one file: the .npy; several: a directory of <name>.npy")
    pe.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    pe.set_defaults(func=_cmd_embed)

    pr = _sub(sub, "preprocess", "a speech corpus to training data, as the original preprocessors",
              "Turns a corpus into the original training data: OUT/mels/mel-<id>.npy [frames, num_mels], "
              "OUT/audio/audio-<id>.npy, with rtvc OUT/embeds/embed-<id>.npy (GE2E) and with rayhane "
              "OUT/linear/linear-<id>.npy, and OUT/train.txt (audio|mel|embed-or-linear|samples|frames|text), "
              "written last. Each utterance is processed in the preset's original order (rescale, silence "
              "trimming, pre-emphasis, spectrograms) and dropped by the original filters (rtvc's "
              "utterance_min_duration; max_mel_frames when clip_mels_length). Every metadata line, audio header "
              "and text is checked before any audio is processed: a bad one stops the run (one line naming the "
              "file, exit status 2, nothing written) unless --skip-bad.")
    pr.add_argument("dataset", metavar="DATASET",
                    help="an LJSpeech corpus when it holds metadata.csv (id|text|normalized text; audio in "
                         "wavs/<id>.wav; the normalized text is used), else a directory of x.wav + x.txt pairs")
    pr.add_argument("out", metavar="OUT", help="the output directory (created)")
    pr.add_argument("--hparams", metavar="rtvc|rayhane|FILE.json",
                    help="required: the preset (its audio hparams, its outputs), or a JSON file of original hparam "
                         "names")
    pr.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help="override one audio hparam by its original name, VALUE as JSON (repeatable), e.g. "
                         "--set trim_silence=false --set max_mel_frames=1000")
    pr.add_argument("--encoder", metavar="ENCODER.pt",
                    help="rtvc: GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                         "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    pr.add_argument("--cleaners", default="english_cleaners",
                    help="comma-separated cleaners the texts must survive (default english_cleaners, the presets')")
    pr.add_argument("--workers", type=int, metavar="N", help="worker processes (default: min(CPUs, 4))")
    pr.add_argument("--skip-existing", action="store_true",
                    help="reuse an utterance whose output files exist (its train.txt line is still written)")
    pr.add_argument("--skip-bad", action="store_true",
                    help="skip bad utterances (missing or unreadable audio, text outside the symbol table, bad "
                         "metadata lines), one line each on stderr, counted in the summary")
    pr.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")
    pr.set_defaults(func=_cmd_preprocess)

    pt = _sub(sub, "train", "train Tacotron-2 on a preprocessed folder, as the original train.py",
              "Trains (or resumes, or with --from fine-tunes) a Tacotron-2 on DATA (train.txt + mels/ + embeds/ of "
              "`speechblocks preprocess`) with the original optimizer (Adam, the decayed learning rate, global-norm "
              "clipping), loss and test split. Every tacotron_checkpoint_interval steps a checkpoint in "
              "RUN/checkpoints (the model as `speechblocks migrate` writes it + a .state.npz sidecar: optimizer, step, "
              "data order); every tacotron_eval_interval steps the test loss, plots and a Griffin-Lim wav; scalars in "
              "RUN/events (TensorBoard). An existing RUN resumes exactly. SIGINT/SIGTERM: the step ends, a checkpoint "
              "is written, exit 130/143. A NaN loss stops (exit 1) naming the step and the batch's utterances.")
    pt.add_argument("data", metavar="DATA", help="a preprocessed folder holding train.txt")
    pt.add_argument("run", metavar="RUN", help="the run folder (created; an existing run is resumed)")
    pt.add_argument("--from", metavar="TF1_CKPT|MIGRATED", default=None,
                    help="fine-tune these weights (a TF1 checkpoint continues its global_step and Adam slots)")
    pt.add_argument("--framework", choices=("torch", "keras"),
                    help="default: the run's when resuming, else torch")
    _hparams_options(pt, "the model and training recipe (default: rtvc, or the --from model's preset)")
    pt.add_argument("--steps", type=int, help="steps to train now (default: up to tacotron_train_steps)")
    pt.add_argument("--batch-size", type=int, help="tacotron_batch_size")
    pt.add_argument("--seed", type=int, help="seed of data order and dropout (default: tacotron_random_seed)")
    pt.add_argument("--strategy", choices=("mirrored",),
                    help="keras: data-parallel over the GPUs or, without one, --replicas logical CPU devices "
                         "(tf.distribute.MirroredStrategy); torch: run under torchrun --nproc-per-node N instead")
    pt.add_argument("--replicas", type=int, help="with --strategy mirrored: the number of replicas (default: every "
                                                 "GPU, or 2 logical CPU devices)")
    pt.add_argument("--guided-attention", type=float, metavar="WEIGHT",
                    help="add the guided-attention loss (Tachibana et al.; not in the original recipe, off by "
                         "default) with this weight, e.g. 1.0; kept on resume, 0 turns it off")
    pt.add_argument("--guided-attention-sigma", type=float, metavar="SIGMA",
                    help="width of its diagonal band (default 0.4)")
    pt.add_argument("--quiet", action="store_true", help="no progress lines")
    pt.set_defaults(func=_cmd_train)

    pa = _sub(sub, "gta", "ground-truth-aligned mels of a preprocessed folder, for vocoder training",
              "Runs the model teacher forced in inference mode (the original synthesize.py --GTA; max_iters caps the "
              "steps) over every utterance of DATA/train.txt, in batches of tacotron_synthesis_batch_size, and "
              "writes OUT/gta/mel-<id>.npy (each utterance's own frames), OUT/map.txt (Rayhane's GTA map: "
              "wav|mel|gta mel|speaker|text) and OUT/synthesized.txt (RTVC's: the train.txt lines).")
    pa.add_argument("data", metavar="DATA", help="a preprocessed folder holding train.txt")
    pa.add_argument("model", metavar="MODEL", help="a migrated file (.pt / .weights.h5), a TF1 checkpoint, or a RUN")
    pa.add_argument("out", metavar="OUT", help="the output folder")
    pa.add_argument("--framework", choices=("torch", "keras"),
                    help="default: keras for a .weights.h5 file, torch otherwise")
    _hparams_options(pa, "what the weights cannot tell")
    pa.add_argument("--batch-size", type=int, help="tacotron_synthesis_batch_size")
    pa.add_argument("--max-iters", type=int, help="decoder step cap (default: the hparam max_iters)")
    pa.add_argument("--seed", type=int, default=0, help="seed of the pre-net dropout (default 0)")
    pa.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    pa.set_defaults(func=_cmd_gta)
    return p


def _griffin_lim_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--griffin-lim", choices=audio_commands.GL_FRAMEWORKS, default="torch",
                   help="with --wav: where Griffin-Lim runs (default torch, the fast path)")
    p.add_argument("--griffin-lim-iters", type=int, metavar="N", help="with --wav: iterations (default: the hparam)")


def _one_line(error: BaseException) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    if not lines:
        return type(error).__name__
    return lines[0] + ("" if len(lines) == 1 else " " + "; ".join(ln.lstrip("- ") for ln in lines[1:]))


@contextlib.contextmanager
def _checkpoint_warnings_as_lines(command: str):
    """The checkpoint readers' warnings (NaN/inf let through, dtypes cast) as one ``speechblocks CMD: warning: ...``
    line each on stderr; other warnings as Python shows them."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, (NonFiniteWeightsWarning, CheckpointDtypeWarning)):
                _say(command, f"warning: {message}")
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def main(argv=None) -> int:
    """Runs the ``speechblocks`` command line; returns the exit status."""
    global _VERBOSE
    parser = build_parser()
    args = parser.parse_args(argv)
    _VERBOSE = bool(getattr(args, "verbose", False))
    debug = bool(getattr(args, "debug", False))
    try:
        with _checkpoint_warnings_as_lines(args.command):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        _say(args.command, "interrupted")
        return 130
    except (UsageError, ValueError, OSError) as e:  # the user's input: one line, status 2
        if debug:
            details = getattr(e, "details", None)
            if callable(details):  # a multi-item error: every item, then the traceback
                print(details(), file=sys.stderr)
            raise
        _say(args.command, f"error: {_one_line(e)}")
        return 2
    except Exception as e:  # a bug: one line, status 3, the traceback with --debug
        if debug:
            raise
        _say(args.command, f"internal error: {type(e).__name__}: {_one_line(e)} (run with --debug for the traceback)")
        return 3


if __name__ == "__main__":
    sys.exit(main())
