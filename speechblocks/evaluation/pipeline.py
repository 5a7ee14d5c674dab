"""``speechblocks evaluate``: the steps between a model and its scores, each usable on its own.

:func:`read_sentences` and :func:`find_references` check the inputs before anything is computed;
:func:`load_reference` reads a recording at the model's rate (silent or too short: an error naming it);
:func:`synthesize_wavs` speaks every sentence with the model (Tacotron-2: one batch, Griffin-Lim of the mel
outputs; Tacotron-1: each sentence alone, Griffin-Lim of the linear outputs, end point trimmed);
:func:`resynthesize` is the ceiling (a recording's own features back through the same Griffin-Lim);
:func:`score` hears and measures every waveform; :func:`format_report`, :func:`report_json` and
:func:`plot_alignment` present the result. Frameworks are imported only by the functions that need them.
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from ..errors import InputError, UsageError
from .alignment import alignment_scores
from .mcd import N_FFT, mel_cepstral_distortion, mel_cepstrum_settings
from .recognition import error_rates, words

__all__ = ["SCHEMA", "REFERENCE_EXTENSIONS", "SILENCE_DBFS", "Sentence", "Spoken", "read_sentences",
           "find_references", "load_reference", "synthesize_wavs", "resynthesize", "score", "format_report",
           "report_json", "worst_sentence", "plot_alignment"]

#: the ``--json`` file's ``schema`` value
SCHEMA = "speechblocks.evaluate/1"
#: the recordings ``--reference-dir`` is searched for, in this order
REFERENCE_EXTENSIONS = (".wav", ".flac", ".ogg")
#: a reference whose peak is below this level (dB full scale) is silent
SILENCE_DBFS = -60.0
#: the three kinds of waveform scored: the model's speech, the references' Griffin-Lim resynthesis (the ceiling), the
#: references themselves
SYSTEMS = ("model", "resynthesis", "recording")


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One line of ``--text-file``.

    Attributes:
        index: its number, from 0, among the non-empty lines.
        name: the stem of its reference recording: the ``NAME`` of a ``NAME|text`` line, else the index as
            ``synthesize`` names its outputs (``000``, ``001``, ...).
        text: the sentence.
    """

    index: int
    name: str
    text: str


@dataclasses.dataclass
class Spoken:
    """The model's speech of one sentence.

    Attributes:
        wav: float32 ``(samples,)`` at the model's rate (Griffin-Lim).
        alignment: ``(T_in, steps)`` attention alignments.
        steps: decoder steps run.
        stopped: its stop rule fired (else ``max_iters`` cut it).
        cleaned: what the ids spell.
    """

    wav: np.ndarray
    alignment: np.ndarray
    steps: int
    stopped: bool
    cleaned: str


def read_sentences(path: str) -> list[Sentence]:
    """The sentences of ``--text-file``: one per non-empty line, either ``text`` or ``NAME|text`` (an LJSpeech
    ``metadata.csv`` line ``NAME|text|normalized text`` takes its last field).

    Args:
        path: a UTF-8 text file.

    Returns:
        list[Sentence]: in file order.

    Raises:
        UsageError: naming ``--text-file`` when it is missing, not UTF-8, holds no sentence, a line without text,
            or two lines of one name.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = [(n, line.strip()) for n, line in enumerate(f, 1) if line.strip()]
    except FileNotFoundError:
        raise UsageError(f"--text-file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--text-file {path!r} is not readable UTF-8 text ({type(e).__name__})") from None
    if not lines:
        raise UsageError(f"--text-file {path!r} holds no sentence")
    width = max(3, len(str(len(lines) - 1)))
    out, seen = [], {}
    for i, (line_no, line) in enumerate(lines):
        if "|" in line:
            fields = [x.strip() for x in line.split("|")]
            name, text = fields[0], fields[-1]
            if not name or not text or os.sep in name or name in (".", ".."):
                raise UsageError(f"--text-file {path!r} line {line_no}: expected NAME|text with a file name and a "
                                 f"sentence; got {line[:60]!r}")
        else:
            name, text = f"{i:0{width}d}", line
        if name in seen:
            raise UsageError(f"--text-file {path!r} line {line_no}: the name {name!r} of line {seen[name]} again")
        seen[name] = line_no
        out.append(Sentence(i, name, text))
    return out


def find_references(directory: str, sentences: list[Sentence]) -> list[str]:
    """The reference recording of every sentence: ``DIRECTORY/NAME.wav`` (or ``.flac``, ``.ogg``).

    Args:
        directory: ``--reference-dir``.
        sentences: :func:`read_sentences`.

    Returns:
        list[str]: one path per sentence.

    Raises:
        UsageError: naming the directory when it is not one, or the first sentence without a recording.
    """
    if not os.path.isdir(directory):
        raise UsageError(f"--reference-dir {directory!r} is not a directory")
    out = []
    for s in sentences:
        found = [os.path.join(directory, s.name + ext) for ext in REFERENCE_EXTENSIONS
                 if os.path.isfile(os.path.join(directory, s.name + ext))]
        if not found:
            raise UsageError(f"--reference-dir {directory!r} holds no recording of sentence {s.index + 1} "
                             f"({s.text[:40]!r}): expected {s.name}.wav (or .flac, .ogg)")
        out.append(found[0])
    return out


def load_reference(path: str, hparams) -> np.ndarray:
    """A reference recording at the model's rate, checked.

    Args:
        path: the recording.
        hparams: the model's audio hparams (its ``sample_rate``).

    Returns:
        np.ndarray: float32 ``(samples,)``.

    Raises:
        InputError: naming the file when it is not audio, silent (peak below :data:`SILENCE_DBFS`) or shorter than
            one MCD frame.
    """
    from ..audio import load_wav

    try:
        wav = load_wav(path, hparams)
    except ValueError as e:
        raise InputError(f"reference {path!r}: {e}") from None
    peak = float(np.max(np.abs(wav)))
    if peak <= 10 ** (SILENCE_DBFS / 20):
        level = "every sample is 0" if peak == 0 else f"peak {20 * np.log10(peak):.0f} dBFS"
        raise InputError(f"reference {path!r} is silent ({level}; below {SILENCE_DBFS:.0f} dBFS)")
    if wav.size < N_FFT:
        raise InputError(f"reference {path!r} is {wav.size} samples long, shorter than one MCD frame ({N_FFT})")
    return wav


def synthesize_wavs(model, family: str, framework: str, encoded, embeddings, audio_hp, *, max_iters=None,
                    seed: int = 0, griffin_lim: str = "torch", n_iter=None, device=None) -> tuple[list[Spoken], float]:
    """Speaks every sentence with the model and times it.

    Args:
        model: a loaded Tacotron-2 (``family="tacotron2"``) or Tacotron-1 (``"tacotron1"``).
        family: which.
        framework: ``"keras"`` or ``"torch"`` (Tacotron-2's synthesis seed).
        encoded: ``[(cleaned, ids)]`` per sentence (the family's own front-end).
        embeddings: Tacotron-2 RTVC: ``(sentences, E)`` speaker embeddings; else None.
        audio_hp: the model's audio hparams.
        max_iters: the decoder's step cap (default the hparam).
        seed: pre-net dropout (Tacotron-2) and Griffin-Lim phases (sentence ``i``: ``seed + i``).
        griffin_lim: where Tacotron-2's Griffin-Lim runs (``torch``, ``keras``, ``numpy``).
        n_iter: Griffin-Lim iterations (default the hparam).
        device: where torch's Griffin-Lim runs (a ``torch.device``; default the CPU; the initial phases are drawn
            on the CPU, so they are the same on every device). A torch model runs where its weights are.

    Returns:
        ``(spoken, seconds)``: per sentence its :class:`Spoken`, and the wall time of decoding plus Griffin-Lim.
    """
    from ..audio_commands import griffin_lim_wavs

    start = time.perf_counter()
    if family == "tacotron1":
        from ..audio.tacotron1 import tacotron1_wav
        from ..synthesis_tacotron1 import synthesize_tacotron1

        results = synthesize_tacotron1(model, encoded, max_iters)
        wavs = [tacotron1_wav(r.linear, audio_hp, n_iter=n_iter, seed=seed + i) for i, r in enumerate(results)]
    else:
        from ..synthesis import synthesize

        results = synthesize(model, framework, encoded, embeddings, max_iters, seed)
        wavs = griffin_lim_wavs([r.mel for r in results], audio_hp, griffin_lim, n_iter, seed,
                                device=device if griffin_lim == "torch" else None)
    seconds = time.perf_counter() - start
    spoken = [Spoken(np.asarray(w, np.float32), np.asarray(r.alignment, np.float32), int(r.steps), bool(r.stopped),
                     r.cleaned) for r, w in zip(results, wavs)]
    return spoken, seconds


def resynthesize(references: list[np.ndarray], family: str, audio_hp, *, seed: int = 0, griffin_lim: str = "torch",
                 n_iter=None, device=None) -> list[np.ndarray]:
    """The ceiling: each reference's own features (the preset's original order,
    :func:`speechblocks.audio.recording_features`) back through the Griffin-Lim the model's speech goes through
    (Tacotron-2: the mel; Tacotron-1: the linear spectrogram, end point trimmed).

    Args:
        references: waveforms at the model's rate (:func:`load_reference`).
        family: ``"tacotron2"`` or ``"tacotron1"``.
        audio_hp: the model's audio hparams.
        seed: Griffin-Lim phases (reference ``i``: ``seed + i``).
        griffin_lim: Tacotron-2's Griffin-Lim framework.
        n_iter: iterations (default the hparam).
        device: where torch's Griffin-Lim runs (a ``torch.device``; default the CPU).

    Returns:
        list[np.ndarray]: float32 waveforms at the model's rate.
    """
    from ..audio import recording_features
    from ..audio_commands import griffin_lim_wavs

    if family == "tacotron1":
        from ..audio.tacotron1 import tacotron1_wav

        return [np.asarray(tacotron1_wav(recording_features(w, audio_hp)["linear"], audio_hp, n_iter=n_iter,
                                         seed=seed + i), np.float32) for i, w in enumerate(references)]
    mels = [recording_features(w, audio_hp, linear=False)["mel"] for w in references]
    return [np.asarray(w, np.float32) for w in griffin_lim_wavs(mels, audio_hp, griffin_lim, n_iter, seed,
                                                                device=device if griffin_lim == "torch" else None)]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    cosine = np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return float(np.clip(cosine, -1.0, 1.0))  # float32 rounding can pass 1 by an ulp


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def score(sentences: list[Sentence], cleaners, spoken: list[Spoken], sample_rate: int, recognizer, *,
          references: list[np.ndarray] | None = None, resynthesized: list[np.ndarray] | None = None,
          embed=None, speaker_embedding: np.ndarray | None = None, synthesis_seconds: float | None = None,
          progress=None, ceiling: bool = True) -> dict:
    """Hears and measures every waveform: the report :func:`format_report` and :func:`report_json` present.

    Args:
        sentences: the sentences.
        cleaners: the model's cleaner names (both sides of the error rates are :func:`words` of them).
        spoken: the model's speech (:func:`synthesize_wavs`).
        sample_rate: the rate of every waveform.
        recognizer: ``recognizer(wav, sample_rate) -> str`` (:class:`~.recognition.Recognizer`).
        references: the recordings (then MCD, and the ``resynthesis`` and ``recording`` rows).
        resynthesized: their Griffin-Lim resynthesis (:func:`resynthesize`).
        embed: ``embed(wav, sample_rate) -> (E,)`` GE2E embedding; with ``speaker_embedding`` or ``references``,
            the speaker similarity.
        speaker_embedding: the target voice (``--speaker-wav``); None: each sentence's reference.
        synthesis_seconds: wall time of the model's decoding and Griffin-Lim (the real-time factor).
        progress: optional ``progress(line)``.
        ceiling: with ``references``, also score them and their resynthesis (the ``resynthesis`` and ``recording``
            rows); False: the model's row alone, its MCD and similarity still measured against the references (a
            training loop scoring each checkpoint against a ceiling it measured once).

    Returns:
        dict: ``{"sentences": [...], "total": {...}}`` (see :func:`report_json` for the fields).
    """
    systems = {"model": [s.wav for s in spoken]}
    if references is not None and ceiling:
        systems["resynthesis"] = resynthesized
        systems["recording"] = references
    targets = None
    if embed is not None:
        if speaker_embedding is not None:
            targets = [speaker_embedding] * len(sentences)
        elif references is not None:
            targets = [embed(w, sample_rate) for w in references]
    refs = [words(s.text, cleaners) for s in sentences]
    rows = []
    for i, s in enumerate(sentences):
        if progress is not None:
            progress(f"scoring sentence {i + 1}/{len(sentences)}")
        row = {"index": s.index, "name": s.name, "text": s.text, "words": refs[i]}
        if not refs[i]:
            raise InputError(f"sentence {i + 1} ({s.text[:40]!r}) has no words to recognise")
        for system, wavs in systems.items():
            wav = wavs[i]
            heard = words(recognizer(wav, sample_rate), cleaners)
            rates = error_rates([refs[i]], [heard])
            row.setdefault("reference_words", rates.reference_words)
            row.setdefault("reference_chars", rates.reference_chars)
            entry = {"heard": heard, "wer": rates.wer, "cer": rates.cer, "word_errors": rates.word_errors,
                     "char_errors": rates.char_errors, "seconds": wav.size / sample_rate}
            if references is not None and system != "recording":
                try:
                    entry["mcd"] = mel_cepstral_distortion(wav, references[i], sample_rate).mcd
                except ValueError as e:  # the model's speech shorter than one frame, or silent: no MCD
                    entry["mcd"], entry["mcd_note"] = None, str(e)
            if targets is not None and not (system == "recording" and speaker_embedding is None):
                try:
                    entry["similarity"] = _cosine(embed(wav, sample_rate), targets[i])
                except ValueError as e:  # the model's speech holds no speech the encoder keeps
                    entry["similarity"], entry["similarity_note"] = None, str(e)
            if system == "model":
                focus, mono = alignment_scores(spoken[i].alignment)
                entry.update(focus=focus, monotonicity=mono, steps=spoken[i].steps, stopped=spoken[i].stopped)
            row[system] = entry
        rows.append(row)
    n_words = sum(r["reference_words"] for r in rows)
    n_chars = sum(r["reference_chars"] for r in rows)
    total = {}
    for system in systems:
        entries = [r[system] for r in rows]
        seconds = float(sum(e["seconds"] for e in entries))
        t = {"wer": sum(e["word_errors"] for e in entries) / n_words,
             "cer": sum(e["char_errors"] for e in entries) / n_chars,
             "seconds": seconds}
        if references is not None and system != "recording":
            t["mcd"] = _mean(e["mcd"] for e in entries)
        if any("similarity" in e for e in entries):
            t["similarity"] = _mean(e.get("similarity") for e in entries)
        if system == "model":
            t.update(focus=_mean(e["focus"] for e in entries), monotonicity=_mean(e["monotonicity"] for e in entries),
                     stopped_share=sum(e["stopped"] for e in entries) / len(entries),
                     real_time_factor=(synthesis_seconds / seconds if synthesis_seconds is not None and seconds > 0
                                       else None))
        total[system] = t
    return {"sentences": rows, "total": total}


def _fmt(value, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


def format_report(report: dict) -> str:
    """The report as a table for a person: per sentence one row per scored waveform (the model's speech, the
    references' resynthesis, the references), then the totals.

    Args:
        report: :func:`score`'s result.

    Returns:
        str: the lines, without a final newline.
    """
    head = (f"{'sentence':<34} {'speech':<11} {'WER':>6} {'CER':>6} {'MCD dB':>7} {'similarity':>10} {'focus':>6} "
            f"{'monotonic':>9}  heard")
    lines = [head]

    def row(label: str, system: str, e: dict) -> str:
        mono = None if e.get("monotonicity") is None else 100 * e["monotonicity"]
        line = (f"{label:<34} {system:<11} {100 * e['wer']:5.1f}% {100 * e['cer']:5.1f}% "
                f"{_fmt(e.get('mcd'), '.2f', 7)} {_fmt(e.get('similarity'), '.3f', 10)} "
                f"{_fmt(e.get('focus'), '.3f', 6)} {_fmt(mono, '.0f', 8)}{'%' if mono is not None else ' '}")
        if "heard" in e:
            line += f"  {e['heard']!r}"
        return line

    for r in report["sentences"]:
        label = f"{r['index'] + 1} {r['words'][:30]!r}" if len(r["words"]) <= 30 else f"{r['index'] + 1} " \
                f"{r['words'][:27]!r}..."
        for k, system in enumerate(s for s in SYSTEMS if s in r):
            e = r[system]
            line = row(label if k == 0 else "", system, e)
            if system == "model":
                line += (f"  (stop at step {e['steps']})" if e["stopped"]
                         else f"  (no stop after {e['steps']} steps: max_iters)")
            lines.append(line)
    n = len(report["sentences"])
    total = report["total"]
    for k, system in enumerate(s for s in SYSTEMS if s in total):
        lines.append(row(f"total ({n} sentence{'s' if n != 1 else ''})" if k == 0 else "", system, total[system]))
    m = total["model"]
    stopped = round(m["stopped_share"] * n)
    tail = f"model: {stopped}/{n} sentences stopped before max_iters, {m['seconds']:.2f} s of speech"
    if m.get("real_time_factor") is not None:
        tail += f", real-time factor {m['real_time_factor']:.3f} (decoding + Griffin-Lim)"
    lines.append(tail)
    return "\n".join(lines)


def report_json(report: dict, settings: dict) -> dict:
    """The ``--json`` document.

    Args:
        report: :func:`score`'s result.
        settings: what produced it (model file, family, framework, sample rate, Griffin-Lim, recogniser, MCD
            settings).

    Returns:
        dict: ``{"schema": SCHEMA, "settings": ..., "sentences": [...], "total": {...}}``. Each sentence: ``index``,
        ``name``, ``text``, ``words`` (normalised) and per scored waveform (``model``, with references also
        ``resynthesis`` and ``recording``): ``heard``, ``wer``, ``cer``, ``word_errors``, ``char_errors``,
        ``seconds``, ``mcd`` (not for ``recording``), ``similarity`` (where a target voice exists), and for the
        model ``focus``, ``monotonicity``, ``steps``, ``stopped``. ``total``: per waveform ``wer``, ``cer`` (errors
        over all words / characters), ``seconds``, the mean ``mcd`` and ``similarity``; for the model the mean
        ``focus`` and ``monotonicity``, ``stopped_share`` and ``real_time_factor``.
    """
    return {"schema": SCHEMA, "settings": settings, "sentences": report["sentences"], "total": report["total"]}


def worst_sentence(report: dict) -> int:
    """The position of the worst sentence: the model's highest word error rate, then the lowest focus."""
    rows = report["sentences"]
    return max(range(len(rows)), key=lambda i: (rows[i]["model"]["wer"], -rows[i]["model"]["focus"]))


def plot_alignment(path: str, sentence: dict, alignment: np.ndarray) -> None:
    """Draws one sentence's alignment with its scores (matplotlib, Agg) into ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    m = sentence["model"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    im = ax.imshow(alignment, aspect="auto", origin="lower", interpolation="none")
    title = (f"sentence {sentence['index'] + 1}: {sentence['text'][:70]}\nWER {100 * m['wer']:.0f}%, focus "
             f"{m['focus']:.2f}, monotonic {100 * m['monotonicity']:.0f}%, "
             + (f"stop at step {m['steps']}" if m["stopped"] else f"no stop after {m['steps']} steps"))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("decoder step")
    ax.set_ylabel("input symbol")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format=os.path.splitext(path)[1].lstrip(".") or "png")
    plt.close(fig)


def mcd_settings(sample_rate: int) -> dict:
    """The MCD's settings at ``sample_rate``, for the ``--json`` ``settings``."""
    s = mel_cepstrum_settings(sample_rate)
    return {"order": s.order, "coefficients": f"c1..c{s.order}", "alpha": s.alpha, "n_fft": s.n_fft,
            "n_shift": s.n_shift, "window": "hamming", "dtw": "exact, Euclidean, steps (1,0) (0,1) (1,1)",
            "constant": "10/ln(10)*sqrt(2)"}
