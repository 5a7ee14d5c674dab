"""``speechblocks synthesize`` of a Tacotron-1 source (keithito/tacotron, MycroftAI/mimic2): the command's
Tacotron-1 branch (:mod:`speechblocks.synthesis_tacotron1` does the work)."""
from __future__ import annotations

from ..errors import UsageError
from ..synthesis_tacotron1 import encode_tacotron1_texts, load_tacotron1, synthesize_tacotron1
from ._common import load_tensorflow, load_torch, say, user_input, write_and_report
from ._options import overrides

NAME = "synthesize"


def split_settings(settings: dict) -> tuple[dict, dict]:
    """``--set`` of a Tacotron-1 model as ``(model hparams, audio hparams)`` (``synthesize``, ``evaluate``); a name
    that is neither is a usage error."""
    from ..audio.params import AUDIO_HPARAM_NAMES
    from ..tacotron1_hparams import TACOTRON1_HPARAM_NAMES

    unknown = sorted(k for k in settings if k not in TACOTRON1_HPARAM_NAMES and k not in AUDIO_HPARAM_NAMES)
    if unknown:
        raise UsageError(f"--set {unknown[0]}: not an hparam of a Tacotron-1 model or of its audio (known: the "
                         "names of keithito's and mimic2's hparams.py)")
    return ({k: v for k, v in settings.items() if k in TACOTRON1_HPARAM_NAMES},
            {k: v for k, v in settings.items() if k in AUDIO_HPARAM_NAMES})


def _wavs(results, hp, audio_settings: dict, n_iter, seed) -> tuple[list, int]:
    from ..audio import audio_hparams
    from ..audio.tacotron1 import tacotron1_wav

    with user_input():  # the audio --set values
        audio_hp = audio_hparams(hp.variant, **audio_settings)
    return [tacotron1_wav(r.linear, audio_hp, n_iter=n_iter, seed=seed) for r in results], audio_hp.sample_rate


def run_tacotron1(args, texts, outputs, plots, wav_paths, kind: str, framework: str) -> int:
    """The Tacotron-1 branch of ``synthesize``: each sentence alone, mel ``.npy`` (and ``--plot``, ``--wav``)."""
    if args.speaker_embedding or args.speaker_wav:
        raise UsageError("a Tacotron-1 model (keithito/tacotron, mimic2) has no speaker embedding: drop "
                         "--speaker-embedding / --speaker-wav")
    (load_tensorflow if framework == "keras" else load_torch)()
    model_settings, audio_settings = split_settings(overrides(args.set))
    with user_input():  # the model file, the hparams and the --set values
        model = load_tacotron1(args.source, kind, framework, args.hparams, model_settings)
    cleaners = tuple(c.strip() for c in args.cleaners.split(",") if c.strip())
    encoded = encode_tacotron1_texts(texts, model.hparams, cleaners)
    say(NAME, f"Tacotron1 ({model.hparams.variant}, layout {model.layout}) in {framework}: {len(texts)} "
              f"sentence(s), one at a time")
    results = synthesize_tacotron1(model, encoded, args.max_iters, texts)
    wavs, sample_rate = (_wavs(results, model.hparams, audio_settings, args.griffin_lim_iters, args.seed)
                         if wav_paths else (None, None))
    write_and_report(results, outputs, plots, wavs, wav_paths, sample_rate,
                               "Griffin-Lim of the linear output, end point trimmed")
    return 0
