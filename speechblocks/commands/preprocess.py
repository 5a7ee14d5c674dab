"""``speechblocks preprocess``: a speech corpus to training data, as the original preprocessors."""
from __future__ import annotations

import os
import sys

from .. import audio_commands
from ..errors import UsageError
from ._common import load_torch, progress_bar, say, torch_device, user_input
from ._options import assignment, device_option, existing_file, hparams_value, overrides, require

NAME = "preprocess"
HELP = "a speech corpus to training data, as the original preprocessors"
DESCRIPTION = ("Turns a corpus into the original training data: OUT/mels/mel-<id>.npy [frames, num_mels], "
               "OUT/audio/audio-<id>.npy, with rtvc OUT/embeds/embed-<id>.npy (GE2E) and with rayhane "
               "OUT/linear/linear-<id>.npy, and OUT/train.txt (audio|mel|embed-or-linear|samples|frames|text), "
               "written last. Each utterance is processed in the preset's original order (rescale, silence "
               "trimming, pre-emphasis, spectrograms) and dropped by the original filters (rtvc's "
               "utterance_min_duration; max_mel_frames when clip_mels_length). Every metadata line, audio header "
               "and text is checked before any audio is processed: a bad one stops the run (one line naming the "
               "file, exit status 2, nothing written) unless --skip-bad. The Tacotron-1 presets keithito and mimic2 "
               "write their original layout instead: OUT/ljspeech-spec-NNNNN.npy [frames, num_freq], "
               "OUT/ljspeech-mel-NNNNN.npy [frames, num_mels] and OUT/train.txt (spec|mel|frames|text).")
EXAMPLES = """examples:
  speechblocks preprocess LJSpeech-1.1 training_data --hparams rayhane
  speechblocks preprocess my_voice/ training_data --hparams rtvc --encoder encoder.pt --workers 8
  speechblocks preprocess LJSpeech-1.1 training_data --hparams rtvc --skip-existing --skip-bad
  speechblocks preprocess LJSpeech-1.1 training --hparams keithito --workers 8"""


def add_arguments(p) -> None:
    p.add_argument("dataset", metavar="DATASET",
                   help="an LJSpeech corpus when it holds metadata.csv (id|text|normalized text; audio in "
                        "wavs/<id>.wav; the normalized text is used), else a directory of x.wav + x.txt pairs")
    p.add_argument("out", metavar="OUT", help="the output directory (created)")
    p.add_argument("--hparams", metavar="rtvc|rayhane|keithito|mimic2|FILE.json", type=hparams_value,
                   help="required: the preset (its audio hparams, its outputs; keithito and mimic2: the Tacotron-1 "
                        "layout), or a JSON file of original hparam names")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", type=assignment,
                   help="override one audio hparam by its original name, VALUE as JSON (repeatable), e.g. "
                        "--set trim_silence=false --set max_mel_frames=1000")
    p.add_argument("--encoder", metavar="ENCODER.pt",
                   help="rtvc: GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                        "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    p.add_argument("--cleaners", default="english_cleaners",
                   help="comma-separated cleaners the texts must survive (default english_cleaners, the presets')")
    p.add_argument("--workers", type=int, metavar="N", help="worker processes (default: min(CPUs, 4))")
    p.add_argument("--skip-existing", action="store_true",
                   help="reuse an utterance whose output files exist (its train.txt line is still written)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip bad utterances (missing or unreadable audio, text outside the symbol table, bad "
                        "metadata lines), one line each on stderr, counted in the summary")
    device_option(p, "rtvc: the GE2E speaker encoder (auto takes a GPU only with --workers 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")


def run(args) -> int:
    from .. import preprocess
    from ..audio.params import AUDIO_HPARAM_NAMES

    if args.hparams is None:
        raise UsageError("--hparams is required: rtvc (mels, audio, GE2E embeddings), rayhane (mels, audio, "
                         "linear spectrograms), keithito or mimic2 (Tacotron-1: linear and mel spectrograms)")
    settings = overrides(args.set)
    unknown = sorted(set(settings) - AUDIO_HPARAM_NAMES)
    if unknown:
        raise UsageError(f"--set {', '.join(unknown)}: not an audio hparam (preprocessing reads only those: "
                         f"{', '.join(sorted(AUDIO_HPARAM_NAMES))})")
    with user_input():  # the preset and the audio --set values
        hp = audio_commands.audio_hparams_for(args.hparams, settings)
    workers = args.workers if args.workers is not None else min(os.cpu_count() or 1, 4)
    cleaners = [c.strip() for c in args.cleaners.split(",") if c.strip()]
    if hp.preset == "rtvc" and args.encoder is not None:
        require(existing_file("--encoder")(args.encoder))
    device = None
    if hp.preset == "rtvc":
        load_torch()
        # auto: the GPU only where the encoder runs in one process (a forked worker cannot use the parent's CUDA)
        device = torch_device("cpu" if args.device == "auto" and workers > 1 else args.device)
    bar = progress_bar(NAME) if sys.stderr.isatty() and not args.quiet else None
    try:
        summary = preprocess.preprocess(args.dataset, args.out, hp, encoder=args.encoder, workers=workers,
                                        skip_existing=args.skip_existing, skip_bad=args.skip_bad,
                                        cleaners=cleaners, progress=bar, report=lambda line: say(NAME, line),
                                        device=device)
    finally:
        if bar is not None:
            bar(None, None)
    print(summary.line())
    return 0
