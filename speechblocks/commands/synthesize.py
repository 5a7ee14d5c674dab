"""``speechblocks synthesize``: text to mel spectrograms (and wavs) with a migrated model or a TF1 checkpoint."""
from __future__ import annotations

import sys

import numpy as np

from .. import audio_commands, synthesis
from ..devices import INFERENCE_PRECISIONS
from ..errors import UsageError
from ..synthesis_tacotron1 import source_family
from ._common import load_tensorflow, load_torch, say, torch_device, user_input, write_and_report
from ._options import (count, device_option, existing_file, griffin_lim_options, hparams_options, overrides,
                       precision_option)
from ._synthesize_tacotron1 import run_tacotron1

NAME = "synthesize"
HELP = "text to mel spectrogram with a migrated model or a TF1 checkpoint"
DESCRIPTION = ("Cleans the text and maps it to the original symbols, decodes with the model and writes each "
               "sentence's mel outputs [frames, num_mels] as .npy. Tacotron-2 (RTVC, Rayhane): several sentences in "
               "one padded batch; like the original, the pre-net dropout stays on at inference (--set "
               "tacotron_dropout_rate=0 for deterministic output; --seed fixes it otherwise). Tacotron-1 (keithito, "
               "mimic2): each sentence alone, no dropout, --wav from the linear output (Griffin-Lim, the "
               "original's end-point trimming).")
EXAMPLES = """examples:
  speechblocks synthesize tacotron2.pt --text "Hello world." --speaker-embedding speaker.npy --out hello.npy
  speechblocks synthesize taco_pretrained --framework keras --text-file lines.txt --speaker-embedding spk.npy \\
      --out mels/ --plot mels/alignment.png
  speechblocks synthesize tacotron2.weights.h5 --text "It costs $3.50." --set tacotron_dropout_rate=0 \\
      --max-iters 400 --out costs.npy
  speechblocks synthesize tacotron2.pt --text "Hello world." --speaker-wav me.wav --out hello.npy --wav
  speechblocks synthesize tacotron-20180906/model.ckpt --text "Turn left on {HH AW1 S T AH0 N} Street." \
      --out houston.npy --wav --plot houston.png
  speechblocks synthesize tacotron2.pt --text-file lines.txt --speaker-embedding spk.npy --out mels/ \
      --device cuda --precision bf16"""


def add_arguments(p) -> None:
    p.add_argument("source", metavar="CKPT_OR_MIGRATED",
                   help="a file of `speechblocks migrate` (.weights.h5 / .pt) or a TF1 checkpoint")
    p.add_argument("--text", action="append", help="a sentence (repeatable)")
    p.add_argument("--text-file", help="a UTF-8 file, one sentence per non-empty line")
    p.add_argument("--speaker-embedding", metavar="EMB.npy",
                   help="RTVC models: the speaker embedding, shape [E] (every sentence) or [sentences, E]")
    p.add_argument("--framework", choices=("keras", "torch"),
                   help="default: torch for a .pt file, keras for a .weights.h5 file or a TF1 checkpoint")
    p.add_argument("--max-iters", type=count("--max-iters"), help="decoder step cap (default: the hparam max_iters)")
    hparams_options(p, "what the weights cannot tell")
    p.add_argument("--cleaners", default="english_cleaners",
                   help="comma-separated: basic_cleaners, transliteration_cleaners, english_cleaners (default)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the pre-net dropout (default 0)")
    p.add_argument("--out", required=True,
                   help="one sentence: the .npy file; several: a directory of 000.npy, 001.npy, ...")
    p.add_argument("--plot", metavar="PNG", help="also draw alignment and mel (needs matplotlib); several "
                                                 "sentences: PNG gets _000, _001, ... before its extension")
    p.add_argument("--speaker-wav", metavar="REF.wav", type=existing_file("--speaker-wav"),
                   help="RTVC models: a recording of the voice instead of --speaker-embedding (GE2E embedding, "
                        "the original preprocessing)")
    p.add_argument("--encoder", metavar="ENCODER.pt",
                   help="with --speaker-wav: GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                        "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    p.add_argument("--wav", nargs="?", const=True, metavar="WAV",
                   help="also write audio (Griffin-Lim with the model's audio hparams): beside each .npy, or this "
                        ".wav file (one sentence) / directory (several)")
    griffin_lim_options(p)
    device_option(p, "the torch model (and torch's Griffin-Lim, the GE2E encoder)")
    precision_option(p, INFERENCE_PRECISIONS, "Tacotron-2: fp32 or bf16 (torch autocast / Keras mixed_bfloat16; "
                     "its error against fp32: docs/gpu.md)")
    p.add_argument("--quiet", action="store_true", help="no progress line on a terminal")


def run(args) -> int:
    texts = synthesis.read_texts(args.text, args.text_file)
    outputs = synthesis.output_paths(args.out, len(texts))
    plots = synthesis.plot_paths(args.plot, len(texts), outputs) if args.plot else None
    if plots is not None:
        synthesis.require_matplotlib()
    if args.speaker_embedding and args.speaker_wav:
        raise UsageError("give --speaker-embedding or --speaker-wav, not both")
    embedding = synthesis.read_speaker_embedding(args.speaker_embedding, len(texts))
    wav_paths = audio_commands.wav_output_paths(args.wav, outputs) if args.wav else None
    kind, framework = synthesis.source_kind(args.source, args.framework)
    if kind == "torch":
        load_torch()  # a migrated torch file's model entry says its family
    if source_family(args.source, kind) == "tacotron1":
        if args.device.startswith("cuda") or args.precision != "fp32":
            raise UsageError("--device/--precision: Tacotron-1 (keithito, mimic2) synthesizes on the CPU in float32 "
                             "(drop them)")
        return run_tacotron1(args, texts, outputs, plots, wav_paths, kind, framework)
    cleaners = tuple(c.strip() for c in args.cleaners.split(",") if c.strip())
    sequences = synthesis.encode_texts(texts, cleaners)
    device = None
    if framework == "keras":
        load_tensorflow(args.device)
    if framework == "torch" or args.speaker_wav or (wav_paths and args.griffin_lim == "torch"):
        # the torch model, torch's Griffin-Lim and the GE2E encoder on --device (with --framework keras: the CPU
        # unless --device names a GPU)
        device = torch_device(args.device if framework == "torch" or args.device != "auto" else "cpu")
    settings = overrides(args.set)
    with user_input():  # the model file, the hparams and the --set values
        model = synthesis.load_model(args.source, kind, framework, args.hparams, settings, args.seed,
                                     device=device if framework == "torch" else None, precision=args.precision)
    if sys.stderr.isatty() and not args.quiet:  # the progress line's first words: where, and which loop
        where = f"device {device}" if framework == "torch" else _keras_where()
        say(NAME, f"{where}, precision {args.precision}, "
                  f"{synthesis.decoder_loop_line(model, framework, len(texts), args.precision)}")
    if args.speaker_wav:
        with user_input():  # the encoder's weights file, the recording
            encoder = audio_commands.load_speaker_encoder(args.encoder, device=device)
            (ref,) = audio_commands.embed_wavs(encoder, [args.speaker_wav])
        embedding = np.repeat(ref[None], len(texts), axis=0)
        say(NAME, f"speaker embedding of {args.speaker_wav} ({ref.shape[0]} values)")
    embeddings = synthesis.check_speaker_embedding(model, embedding, args.speaker_embedding or args.speaker_wav,
                                                   len(texts))
    if wav_paths:
        with user_input():  # the audio --set values
            audio_hp = audio_commands.model_audio_hparams(model, settings)
    else:
        audio_hp = None
    show = synthesis.TerminalProgress(sys.stderr, args.max_iters or model.hparams.max_iters) \
        if sys.stderr.isatty() and not args.quiet else None
    results = synthesis.synthesize(model, framework, sequences, embeddings, args.max_iters, args.seed, show, texts,
                                   precision=args.precision)
    if show is not None:
        show.close()
    wavs = None
    if wav_paths:
        tell = (lambda line: say(NAME, line)) if sys.stderr.isatty() and not args.quiet else None
        wavs = audio_commands.griffin_lim_wavs([r.mel for r in results], audio_hp, args.griffin_lim,
                                               args.griffin_lim_iters, args.seed, progress=tell,
                                               device=device if args.griffin_lim == "torch" else None)
    write_and_report(results, outputs, plots, wavs, wav_paths, audio_hp.sample_rate if wav_paths else None,
                               f"Griffin-Lim, {args.griffin_lim}")
    return 0


def _keras_where() -> str:
    import tensorflow as tf

    gpus = tf.config.get_visible_devices("GPU")
    return f"TensorFlow on {len(gpus)} GPU(s)" if gpus else "TensorFlow on the CPU"
