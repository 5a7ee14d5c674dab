"""``speechblocks evaluate``: what a model says, scored: a recogniser's error rates, mel-cepstral distortion against
recordings, GE2E speaker similarity, alignment health, beside the same scores of the recordings' own Griffin-Lim
resynthesis (the ceiling). :mod:`speechblocks.evaluation.pipeline` does the work."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from .. import audio_commands, synthesis
from ..atomic_files import write_all
from ..errors import UsageError
from ..evaluation import pipeline
from ..evaluation.recognition import Recognizer, require_recognizer
from ..synthesis_tacotron1 import encode_tacotron1_texts, load_tacotron1, source_family
from ._common import load_tensorflow, load_torch, progress, torch_device, user_input
from ._options import device_option, existing_file, griffin_lim_options, hparams_options, overrides
from ._synthesize_tacotron1 import split_settings

NAME = "evaluate"
HELP = "score a model's speech: word error rate, MCD, speaker similarity, alignment"
DESCRIPTION = ("Speaks every sentence of --text-file with the model (Griffin-Lim with the preset's settings) and "
               "scores it: the word and character error rates of what pocketsphinx's English model hears (both "
               "sides normalised by the model's own cleaners), the mel-cepstral distortion against the reference "
               "recording of the sentence (--reference-dir; ESPnet's definition, c0 left out, exact DTW), the GE2E "
               "cosine similarity to --speaker-wav (or to each reference), the alignment's focus and monotonicity, "
               "the share of sentences that stop before max_iters and the real-time factor. With references, the "
               "same scores of their own Griffin-Lim resynthesis (the ceiling a Griffin-Lim model can reach) and of "
               "the recordings themselves are printed beside the model's. Needs the eval extra (pocketsphinx, "
               "jiwer). Writes nothing but --json and --plot.")
EXAMPLES = """examples:
  speechblocks evaluate run/checkpoints/tacotron2-2100.pt --text-file held_out.txt --reference-dir held_out_wavs/
  speechblocks evaluate tacotron2.pt --text-file lines.txt --speaker-wav me.wav --json scores.json --plot worst.png
  speechblocks evaluate tacotron-20180906/model.ckpt --text-file metadata.csv --reference-dir LJSpeech-1.1/wavs
  speechblocks evaluate tacotron2.pt --text-file lines.txt --reference-dir held_out/ --device cuda

--text-file: one sentence a line; a line NAME|text (or LJSpeech's NAME|text|normalized) names its reference
NAME.wav (.flac, .ogg) in --reference-dir, else sentence i's reference is 000.wav, 001.wav, ..."""


def add_arguments(p) -> None:
    p.add_argument("source", metavar="CKPT_OR_MIGRATED",
                   help="a file of `speechblocks migrate` or `train` (.pt / .weights.h5) or a TF1 checkpoint")
    p.add_argument("--text-file", required=True, help="UTF-8, one sentence (or NAME|sentence) per non-empty line")
    p.add_argument("--reference-dir", metavar="DIR",
                   help="recordings of the sentences (NAME.wav / .flac / .ogg): MCD, the ceiling, similarity targets")
    p.add_argument("--speaker-wav", metavar="REF.wav", type=existing_file("--speaker-wav"),
                   help="the target voice: similarity to it (default: to each sentence's reference); RTVC models "
                        "are conditioned on it (default: on each sentence's reference)")
    p.add_argument("--encoder", metavar="ENCODER.pt",
                   help="GE2E weights (default: $SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    p.add_argument("--framework", choices=("keras", "torch"),
                   help="default: torch for a .pt file, keras for a .weights.h5 file or a TF1 checkpoint")
    p.add_argument("--max-iters", type=int, metavar="N", help="decoder step cap (default: the hparam max_iters)")
    hparams_options(p, "what the weights cannot tell")
    p.add_argument("--cleaners", help="comma-separated cleaner names (default: the model's own: english_cleaners "
                                      "for Tacotron-2, the hparams' for Tacotron-1)")
    p.add_argument("--seed", type=int, default=0, help="pre-net dropout and Griffin-Lim phases (default 0)")
    griffin_lim_options(p)
    device_option(p, "the torch model's synthesis, torch's Griffin-Lim and the GE2E encoder (float32)")
    p.add_argument("--json", metavar="PATH", help="also write every score as JSON (schema speechblocks.evaluate/1)")
    p.add_argument("--plot", metavar="PNG", help="draw the worst sentence's alignment (needs matplotlib)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on a terminal")


def _output(path: str | None, option: str) -> str | None:
    if path is None:
        return None
    if os.path.isdir(path):
        raise UsageError(f"{option} {path!r} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path!r}: directory {parent!r} does not exist")
    return path


def run(args) -> int:
    version = require_recognizer()  # first: nothing else is worth doing without it
    if args.max_iters is not None and args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1; got {args.max_iters}")
    sentences = pipeline.read_sentences(args.text_file)
    texts = [s.text for s in sentences]
    json_path, plot_path = _output(args.json, "--json"), _output(args.plot, "--plot")
    if plot_path is not None:
        synthesis.require_matplotlib()
    ref_paths = pipeline.find_references(args.reference_dir, sentences) if args.reference_dir else None
    tell = progress(NAME, args.quiet)
    kind, framework = synthesis.source_kind(args.source, args.framework)
    if kind == "torch":
        load_torch()
    family = source_family(args.source, kind)
    settings = overrides(args.set)
    cleaners = tuple(c.strip() for c in args.cleaners.split(",") if c.strip()) if args.cleaners else None
    if family == "tacotron2":
        cleaners = cleaners or ("english_cleaners",)
        encoded = synthesis.encode_texts(texts, cleaners)  # characters outside the table: before the model loads
    if family == "tacotron1" and args.device.startswith("cuda"):
        raise UsageError("--device: Tacotron-1 (keithito, mimic2) synthesizes on the CPU in float32 (drop it)")
    if framework == "keras":
        load_tensorflow(args.device)  # --device cpu hides the GPUs from TensorFlow
    else:
        load_torch()
    device = None
    if args.griffin_lim == "torch" or framework == "torch" or args.speaker_wav or ref_paths:
        # the torch model, torch's Griffin-Lim and the GE2E encoder on --device (with --framework keras or a
        # Tacotron-1: the CPU unless --device names a GPU); cuda without CUDA: one line, before any model loads
        device = torch_device(args.device if framework == "torch" and family == "tacotron2" or args.device != "auto"
                              else "cpu")
    with user_input():  # the model file, the hparams, the --set values
        if family == "tacotron1":
            model_settings, audio_settings = split_settings(settings)
            model = load_tacotron1(args.source, kind, framework, args.hparams, model_settings)
            from ..audio import audio_hparams

            audio_hp = audio_hparams(model.hparams.variant, **audio_settings)
        else:
            model = synthesis.load_model(args.source, kind, framework, args.hparams, settings, args.seed,
                                         device=device if framework == "torch" else None)
            audio_hp = audio_commands.model_audio_hparams(model, settings)
    if family == "tacotron1":
        cleaners = cleaners or tuple(c.strip() for c in model.hparams.cleaners.split(",") if c.strip())
        encoded = encode_tacotron1_texts(texts, model.hparams, cleaners)
    sr = int(audio_hp.sample_rate)
    references = [pipeline.load_reference(p, audio_hp) for p in ref_paths] if ref_paths else None
    speaker_size = getattr(model.hparams, "speaker_embedding_size", None) if family == "tacotron2" else None
    encoder = embed = target = None
    if args.speaker_wav or references is not None or speaker_size:
        if speaker_size and not (args.speaker_wav or references is not None):
            raise UsageError(f"this model has a speaker embedding (speaker_embedding_size={speaker_size}): give "
                             "--speaker-wav REF.wav or --reference-dir DIR (each sentence spoken in its "
                             "reference's voice)")
        with user_input():  # the encoder's weights, the recordings
            encoder = audio_commands.load_speaker_encoder(args.encoder, framework,
                                                          device=device if framework == "torch" else None)
            if args.speaker_wav:
                (target,) = audio_commands.embed_wavs(encoder, [args.speaker_wav])
            ref_embeddings = [np.asarray(encoder.embed_wav(w, source_sr=sr), np.float32)
                              for w in references] if references is not None else None

        def embed(wav, rate):
            return np.asarray(encoder.embed_wav(wav, source_sr=rate), np.float32)

    embeddings = None
    if speaker_size:
        embeddings = (np.repeat(target[None], len(texts), 0) if target is not None
                      else np.stack(ref_embeddings))
        if embeddings.shape[1] != speaker_size:
            raise UsageError(f"the GE2E encoder gives {embeddings.shape[1]} values; this model needs "
                             f"speaker_embedding_size={speaker_size}")
    recognizer = Recognizer()
    if tell:
        tell(f"speaking {len(texts)} sentence(s) with the model")
    spoken, seconds = pipeline.synthesize_wavs(model, family, framework, encoded, embeddings, audio_hp,
                                               max_iters=args.max_iters, seed=args.seed, griffin_lim=args.griffin_lim,
                                               n_iter=args.griffin_lim_iters, device=device)
    resynthesized = None
    if references is not None:
        if tell:
            tell("resynthesizing the references (Griffin-Lim of their own features)")
        resynthesized = pipeline.resynthesize(references, family, audio_hp, seed=args.seed,
                                              griffin_lim=args.griffin_lim, n_iter=args.griffin_lim_iters,
                                              device=device)
    report = pipeline.score(sentences, cleaners, spoken, sr, recognizer, references=references,
                            resynthesized=resynthesized, embed=embed, speaker_embedding=target,
                            synthesis_seconds=seconds, progress=tell)
    settings_out = {
        "source": os.fspath(args.source), "family": family, "framework": framework, "sample_rate": sr,
        "cleaners": list(cleaners), "max_iters": args.max_iters, "seed": args.seed,
        "griffin_lim": "numpy (linear, end point trimmed)" if family == "tacotron1" else args.griffin_lim,
        "griffin_lim_iters": args.griffin_lim_iters or audio_hp.griffin_lim_iters,
        "recognizer": f"pocketsphinx {version} (en-us)", "reference_dir": args.reference_dir,
        "speaker_wav": args.speaker_wav, "similarity_target": ("speaker_wav" if target is not None else
                                                               "references" if references is not None else None),
        "mcd": pipeline.mcd_settings(sr), "device": None if device is None else str(device)}
    jobs = []
    if json_path is not None:
        doc = pipeline.report_json(report, settings_out)

        def write_json(tmp, doc=doc):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")

        jobs.append((json_path, write_json))
    worst = pipeline.worst_sentence(report)
    if plot_path is not None:
        jobs.append((plot_path, lambda tmp: pipeline.plot_alignment(tmp, report["sentences"][worst],
                                                                    spoken[worst].alignment)))
    write_all(jobs)
    print(pipeline.format_report(report))
    if json_path is not None:
        print(f"{json_path}: every score as JSON ({pipeline.SCHEMA})")
    if plot_path is not None:
        print(f"{plot_path}: alignment of sentence {worst + 1}, the worst (highest WER, then lowest focus)")
    sys.stdout.flush()
    return 0
