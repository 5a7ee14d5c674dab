"""``speechblocks preprocess``: a speech corpus -> the training data of the original synthesizers.

For each utterance, in the order of the preset's original preprocessor (RTVC ``synthesizer/preprocess.py``,
Rayhane ``datasets/preprocessor.py``):

* the features of :func:`speechblocks.audio.recording_features` (load, rescale, ``trim_silence`` when set,
  pre-emphasis, the spectrograms);
* the originals' filters, which drop an utterance (none clips): RTVC's ``utterance_min_duration`` (fewer than
  ``utterance_min_duration * sample_rate`` samples), then ``mel_frames > max_mel_frames`` when
  ``clip_mels_length``; an utterance shorter than one analysis window (``win_size`` samples, after the trim) is
  dropped as too short too (the spectrogram of less than a window is not defined here);
* the files: ``mels/mel-<id>.npy`` ``(frames, num_mels)`` float32 and ``audio/audio-<id>.npy`` float32 as the
  original saved them -- RTVC the rescaled waveform; Rayhane the rescaled (trimmed) waveform zero-padded on the
  right and cut to ``mel_frames * hop_size`` samples (its preset's ``input_type="raw"``, ``use_lws=False``,
  ``wavenet_pad_sides=1``) -- plus RTVC's ``embeds/embed-<id>.npy`` (the GE2E embedding of the saved waveform, as
  the original ``create_embeddings``: ``embed_utterance(preprocess_wav(wav))``) or Rayhane's
  ``linear/linear-<id>.npy`` ``(frames, num_freq)``;
* one line of ``train.txt`` in the original format: RTVC ``audio|mel|embed|samples|frames|text``, Rayhane
  ``audio|mel|linear|samples|frames|text``, where ``text`` is the transcript as given (LJSpeech's normalized
  column, as Rayhane's ``parts[2]``), cleaned later by the feeder with the preset's cleaners; here it is only
  checked, strictly, that the cleaned text maps onto the symbol table.

Everything cheap is checked first (the layout, every metadata line, that each audio file exists and its header is
readable and not empty, every text); a problem is a :class:`~speechblocks.errors.UsageError` of one line naming
the file (and line) before anything is written, unless ``skip_bad``. Every array is written to a temporary name
and renamed; ``train.txt`` last. A problem found while decoding (a file whose samples are unreadable, silent, or
without speech for the encoder) stops the run without ``skip_bad`` and removes what the run wrote.

The Tacotron-1 presets (:func:`preprocess_tacotron1`, ``--hparams keithito|mimic2``) write the layout of
keithito/tacotron's ``datasets/ljspeech.py`` (mimic2's is the same), all in ``OUT`` itself:

* ``ljspeech-spec-%05d.npy``: the linear spectrogram, ``(frames, num_freq)`` float32;
* ``ljspeech-mel-%05d.npy``: the mel spectrogram, ``(frames, num_mels)`` float32;
* ``train.txt``: one line ``spec_file|mel_file|n_frames|text`` per utterance (``text`` as given: LJSpeech's
  normalized column, cleaned later by the feeder), written last.

The index counts the corpus's utterances from 1 in corpus order (metadata.csv order; file-name order for a directory
of ``x.wav`` + ``x.txt``), as the original counts metadata lines (with ``skip_bad``, over the utterances that pass
the checks). Each utterance: :func:`speechblocks.audio.load_wav` at the preset's rate (the original's
``librosa.load(path, sr=sample_rate)``; see that function for the resampler), ``trim_silence`` only when set
(mimic2's M-AILABS reader does; neither LJSpeech reader does), then both spectrograms of the same waveform (keithito
pre-emphasises inside them). Nothing is filtered by length; an utterance shorter than one analysis window
(``win_size`` samples) is dropped as too short. The checks, the atomic writes and the clean-up on failure are the
same as above.

Application layer (it loads the GE2E encoder through :mod:`speechblocks.audio_commands`, which imports torch);
the numpy steps are the framework-free :mod:`speechblocks.audio`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence

import numpy as np

from .atomic_files import atomic_path
from .errors import UsageError

__all__ = ["REASONS", "Utterance", "Summary", "read_corpus", "preprocess", "preprocess_tacotron1", "train_line",
           "write_train_txt", "TACOTRON1_FILES"]

#: why an utterance was left out of ``train.txt`` (the keys of :attr:`Summary.dropped`)
REASONS = ("too short", "too long", "bad text", "unreadable", "bad line")

_METADATA = "metadata.csv"


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One utterance of the corpus.

    Args:
        id: the basename of its outputs (``mel-<id>.npy`` ...).
        wav: path of its audio file.
        text: the transcript written to ``train.txt``.
        where: where it was read (``metadata.csv line 3`` or the ``.txt`` file), for messages.
    """

    id: str
    wav: str
    text: str
    where: str


@dataclasses.dataclass
class Summary:
    """What a run kept and dropped.

    Args:
        kept: utterances written to ``train.txt``.
        reused: of these, the ones whose outputs existed (``skip_existing``).
        samples: total of the ``samples`` column.
        frames: total of the ``frames`` column.
        dropped: count per reason of :data:`REASONS`.
        sample_rate: the hparams' rate (for :attr:`hours`).
        train_txt: the path of ``train.txt``.
    """

    kept: int = 0
    reused: int = 0
    samples: int = 0
    frames: int = 0
    dropped: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    sample_rate: int = 1
    train_txt: str = ""

    @property
    def hours(self) -> float:
        """Hours of audio kept (the ``samples`` column over ``sample_rate``, as the original's summary)."""
        return self.samples / self.sample_rate / 3600

    def line(self) -> str:
        """The one-line summary the command prints."""
        dropped = sum(self.dropped.values())
        reasons = ", ".join(f"{n} {r}" for r, n in self.dropped.items() if n)
        reused = f", {self.reused} of them reused" if self.reused else ""
        return (f"{self.train_txt}: {self.kept} utterances kept{reused} ({self.hours:.3f} hours of audio, "
                f"{self.frames} mel frames), {dropped} dropped{': ' + reasons if reasons else ''}")


class _Bad(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


# -- the corpus ------------------------------------------------------------------------------------------------------
def _check_id(uid: str) -> str | None:
    if not uid:
        return "empty id"
    if uid in (".", "..") or "/" in uid or os.sep in uid or "\0" in uid:
        return f"id {uid!r} cannot name a file"
    return None


def _check_audio(path: str, where: str) -> None:
    import soundfile

    if not os.path.isfile(path):
        raise _Bad("unreadable", f"{path}{where}: no such audio file")
    try:
        info = soundfile.info(path)
    except Exception as e:  # noqa: BLE001 -- libsndfile's error for anything it cannot read
        raise _Bad("unreadable", f"{path}{where}: not a readable audio file ({_one_line(e)})") from None
    if info.frames <= 0:
        raise _Bad("unreadable", f"{path}{where}: holds no samples (empty audio)")


def _check_text(u: Utterance, cleaners: Sequence[str]) -> None:
    from .text import text_to_sequence

    try:
        text_to_sequence(u.text, cleaners, strict=True)
    except ValueError as e:
        raise _Bad("bad text", f"{u.where}: the text of {u.id!r}: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _ljspeech(dataset: str) -> tuple[list, list]:
    path = os.path.join(dataset, _METADATA)
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    out, bad, seen = [], [], {}
    for n, raw in enumerate(lines, 1):
        line = raw.strip()  # the original: line.strip().split('|')
        if not line:
            continue
        where = f"{path} line {n}"
        parts = line.split("|")
        if len(parts) != 3:
            bad.append(("bad line", f"{where}: expected 3 fields id|text|normalized text, got {len(parts)}"))
            continue
        uid = parts[0].strip()
        problem = _check_id(uid)
        if problem is None and uid in seen:
            problem = f"id {uid!r} already on line {seen[uid]}"
        if problem is not None:
            bad.append(("bad line", f"{where}: {problem}"))
            continue
        seen[uid] = n
        out.append(Utterance(uid, os.path.join(dataset, "wavs", uid + ".wav"), parts[2].strip(), where))
    return out, bad


def _pairs(dataset: str) -> tuple[list, list]:
    files = {n for n in os.listdir(dataset) if os.path.isfile(os.path.join(dataset, n))}
    stems = sorted({n[:-4] for n in files if n.endswith((".wav", ".txt"))})
    out, bad = [], []
    for stem in stems:
        wav, txt = os.path.join(dataset, stem + ".wav"), os.path.join(dataset, stem + ".txt")
        if stem + ".wav" not in files:
            bad.append(("unreadable", f"{txt}: no audio file {stem}.wav beside it"))
            continue
        if stem + ".txt" not in files:
            bad.append(("bad text", f"{wav}: no transcript {stem}.txt beside it"))
            continue
        try:
            with open(txt, encoding="utf-8-sig") as f:
                text = " ".join(f.read().split())
        except UnicodeDecodeError as e:
            bad.append(("bad text", f"{txt}: not UTF-8 text ({e.reason} at byte {e.start})"))
            continue
        out.append(Utterance(stem, wav, text, txt))
    return out, bad


def detect_layout(dataset: str) -> str:
    """``"ljspeech"`` when ``dataset`` holds ``metadata.csv``, ``"pairs"`` when it holds ``x.wav`` / ``x.txt``
    files; else :class:`UsageError`."""
    if not os.path.isdir(dataset):
        raise UsageError(f"{dataset}: no such directory")
    if os.path.isfile(os.path.join(dataset, _METADATA)):
        return "ljspeech"
    if any(n.endswith((".wav", ".txt")) for n in os.listdir(dataset)):
        return "pairs"
    raise UsageError(f"{dataset}: neither an LJSpeech corpus (metadata.csv and wavs/) nor a directory of "
                     f"x.wav + x.txt pairs")


def read_corpus(dataset: str | os.PathLike, cleaners: Sequence[str] = ("english_cleaners",)
                ) -> tuple[list[Utterance], list[tuple[str, str]]]:
    """Reads and checks a corpus without decoding any audio.

    ``DATASET/metadata.csv`` makes it an LJSpeech corpus (lines ``id|text|normalized text``; the audio
    ``DATASET/wavs/<id>.wav``; the normalized text kept, as Rayhane's preprocessor); otherwise each ``x.wav``
    directly in ``DATASET`` needs its transcript ``x.txt`` (UTF-8; whitespace runs become one space) and the
    utterances are taken in file-name order.

    Args:
        dataset: the corpus directory.
        cleaners: the cleaners the texts must survive (strict: every cleaned character in the symbol table).

    Returns:
        ``(utterances, problems)``: the good utterances in corpus order, and ``(reason, one line)`` per bad one
        (a metadata line with other than 3 fields or a bad or repeated id, a missing transcript, a missing,
        unreadable or empty audio file, a text outside the symbol table).

    Raises:
        UsageError: ``dataset`` is no directory, neither layout, or its ``metadata.csv`` is not UTF-8.
    """
    from .text import get_cleaner

    dataset = os.fspath(dataset)
    for name in cleaners:
        try:
            get_cleaner(name)
        except ValueError as e:
            raise UsageError(_one_line(e)) from None
    layout = detect_layout(dataset)
    found, bad = _ljspeech(dataset) if layout == "ljspeech" else _pairs(dataset)
    good = []
    for u in found:
        try:
            _check_audio(u.wav, "" if layout == "pairs" else f" ({u.where})")
            _check_text(u, cleaners)
        except _Bad as e:
            bad.append((e.reason, str(e)))
            continue
        good.append(u)
    return good, bad


# -- one utterance ---------------------------------------------------------------------------------------------------
_STATE: dict = {}


def _names(uid: str, rtvc: bool) -> dict:
    third = ("embeds", f"embed-{uid}.npy") if rtvc else ("linear", f"linear-{uid}.npy")
    return {"audio": ("audio", f"audio-{uid}.npy"), "mel": ("mels", f"mel-{uid}.npy"), "third": third}


def train_line(fields: Sequence) -> str:
    """A ``train.txt`` line (without the newline): the fields joined by ``|``, as the original."""
    return "|".join(str(x) for x in fields)


def _save(path: str, array: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp, open(tmp, "wb") as f:
        np.save(f, array, allow_pickle=False)


def _existing(u: Utterance, paths: dict, hp, rtvc: bool) -> tuple[int, int] | None:
    """``(samples, frames)`` when every output of ``u`` exists with consistent shapes, else None."""
    try:
        arrays = {k: np.load(p, mmap_mode="r", allow_pickle=False) for k, p in paths.items()}
    except (OSError, ValueError):
        return None
    audio, mel, third = arrays["audio"], arrays["mel"], arrays["third"]
    frames = mel.shape[0] if mel.ndim == 2 else -1
    ok = (audio.ndim == 1 and audio.size > 0 and mel.ndim == 2 and mel.shape[1] == hp.num_mels and frames > 0
          and not (hp.clip_mels_length and frames > hp.max_mel_frames)
          and (third.ndim == 1 if rtvc else third.shape == (frames, hp.num_freq)))
    return (int(audio.shape[0]), int(frames)) if ok else None


def _features(u: Utterance, hp) -> dict:
    from . import audio

    try:
        wav = audio.load_wav(u.wav, hp)
    except ValueError as e:
        raise _Bad("unreadable", _one_line(e)) from None
    if not np.any(wav):
        raise _Bad("unreadable", f"{u.wav}: silent (every sample is 0)")
    umd = hp.utterance_min_duration
    if not hp.trim_silence:  # the length filters before any spectrogram, as RTVC
        if umd is not None and wav.size < umd * hp.sample_rate:
            raise _Bad("too short", f"{u.wav}: {wav.size / hp.sample_rate:.2f} s < utterance_min_duration {umd} s")
        if wav.size < hp.win_size:
            raise _Bad("too short", f"{u.wav}: {wav.size} samples, fewer than one window (win_size {hp.win_size})")
    try:
        feats = audio.recording_features(wav, hp, linear=hp.preset != "rtvc")
    except ValueError as e:
        if hp.trim_silence and "analysis window" in str(e):  # nothing else fails on a finite, non-silent wav
            raise _Bad("too short", f"{u.wav}: fewer than one window (win_size {hp.win_size}) after "
                                    "trim_silence") from None
        raise _Bad("unreadable", _one_line(e)) from None
    if umd is not None and feats["wav"].size < umd * hp.sample_rate:
        raise _Bad("too short", f"{u.wav}: {feats['wav'].size / hp.sample_rate:.2f} s after trim_silence < "
                                f"utterance_min_duration {umd} s")
    return feats


def _process(u: Utterance) -> tuple:
    """``("ok", fields, reused, written)`` or ``("drop", reason, message)`` for one utterance (in a worker)."""
    hp, out, rtvc = _STATE["hp"], _STATE["out"], _STATE["rtvc"]
    names = _names(u.id, rtvc)
    paths = {k: os.path.join(out, d, f) for k, (d, f) in names.items()}
    files = tuple(f for _, f in names.values())
    if _STATE["skip_existing"]:
        have = _existing(u, paths, hp, rtvc)
        if have is not None:
            return ("ok", (*files, *have, u.text), True, [])
    try:
        feats = _features(u, hp)
        frames = feats["mel"].shape[0]
        if hp.clip_mels_length and frames > hp.max_mel_frames:
            raise _Bad("too long", f"{u.wav}: {frames} mel frames > max_mel_frames {hp.max_mel_frames}")
        wav = feats["wav"]
        if rtvc:
            try:  # create_embeddings: embed_utterance(preprocess_wav(np.load(audio-<id>.npy)))
                third = np.asarray(_encoder().embed_wav(wav, source_sr=hp.sample_rate), np.float32)
            except ValueError as e:
                raise _Bad("unreadable", f"{u.wav}: the speaker encoder: {_one_line(e)}") from None
        else:
            hop = hp.hop_size
            pad = (wav.size // hop + 1) * hop - wav.size  # librosa_pad_lr, wavenet_pad_sides=1
            wav = np.pad(wav, (0, pad))[: frames * hop].astype(np.float32)
            third = feats["linear"]
    except _Bad as e:
        return ("drop", e.reason, str(e))
    written = []
    for key, array in (("audio", wav), ("mel", feats["mel"]), ("third", third)):
        _save(paths[key], np.ascontiguousarray(array, np.float32))
        written.append(paths[key])
    return ("ok", (*files, int(wav.size), int(frames), u.text), False, written)


def _encoder():
    if _STATE.get("encoder") is None:
        from .audio_commands import load_speaker_encoder

        _STATE["encoder"] = load_speaker_encoder(_STATE["encoder_path"], device=_STATE.get("encoder_device"))
    return _STATE["encoder"]


def _init_worker(state: dict, workers: int) -> None:
    same = (_STATE.get("encoder_path"), _STATE.get("encoder_device")) == (state["encoder_path"],
                                                                         state.get("encoder_device"))
    encoder = _STATE.get("encoder") if same else None
    _STATE.clear()
    _STATE.update(state, encoder=encoder)  # a forked worker keeps the parent's loaded encoder
    if "torch" in sys.modules and workers > 1:
        _torch_threads(1)


def _torch_threads(n: int | None) -> int | None:
    """Sets torch's intra-op threads (when torch is loaded) and returns the previous count. The encoder's LSTM on
    a few 1.6 s partials runs faster on one thread than on several (measured: 2-3x less CPU on 2 cores), so each
    utterance stream uses one; ``workers`` gives the parallelism."""
    if n is None or "torch" not in sys.modules:
        return None
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    return old


# -- the run ---------------------------------------------------------------------------------------------------------
def _remove(paths: list[str]) -> None:
    for p in paths:
        if os.path.exists(p):
            os.remove(p)


def preprocess(dataset: str | os.PathLike, out: str | os.PathLike, hparams="rtvc", *,
               encoder: str | None = None, workers: int = 1, skip_existing: bool = False, skip_bad: bool = False,
               cleaners: Sequence[str] = ("english_cleaners",), progress: Callable[[int, int], None] | None = None,
               report: Callable[[str], None] | None = None, device=None) -> Summary:
    """Preprocesses a corpus into ``out`` as the preset's original preprocessor (see the module docstring).

    Args:
        dataset: an LJSpeech corpus or a directory of ``x.wav`` + ``x.txt`` (see :func:`read_corpus`).
        out: the output directory (created with its parents).
        hparams: preset name, mapping or :class:`~speechblocks.audio.AudioHParams`; its ``preset`` picks the
            outputs (``"rtvc"``: embeddings; ``"rayhane"``: linear spectrograms; ``"keithito"``, ``"mimic2"``:
            the Tacotron-1 layout of :func:`preprocess_tacotron1`).
        encoder: RTVC: the GE2E weights (RTVC ``encoder.pt`` or resemblyzer ``pretrained.pt``); ``None``: the
            default of :func:`speechblocks.audio_commands.default_encoder_path`.
        workers: worker processes (1: in this process).
        skip_existing: an utterance whose outputs all exist (with consistent shapes) is not recomputed; its
            line is written from the files' shapes.
        skip_bad: skip bad utterances (each reported through ``report``, counted in the summary) instead of
            failing.
        cleaners: the cleaners the texts must survive.
        progress: called with ``(done, total)`` after each utterance.
        report: called with one line per skipped bad utterance.
        device: RTVC: where the GE2E encoder runs (a ``torch.device``; default the CPU). A GPU only with
            ``workers=1`` (a forked worker cannot use its parent's CUDA context).

    Returns:
        Summary: the counts; ``out/train.txt`` is written last.

    Raises:
        UsageError: one line naming the first bad input (file and line) when not ``skip_bad``; nothing is
            written (a problem found while decoding removes what the run wrote).
    """
    from .audio.params import as_audio_hparams

    hp = as_audio_hparams(hparams)
    rtvc = hp.preset == "rtvc"
    dataset, out = os.fspath(dataset), os.fspath(out)
    _check_arguments(out, workers)
    if hp.preset in _TACOTRON1_PRESETS and encoder is None:
        return preprocess_tacotron1(dataset, out, hp, workers=workers, skip_existing=skip_existing,
                                    skip_bad=skip_bad, cleaners=cleaners, progress=progress, report=report)
    if not rtvc and encoder is not None:
        raise UsageError("--encoder: only the RTVC preset has speaker embeddings")
    utterances, summary = _start(dataset, out, hp, skip_bad, cleaners, report)
    if device is not None and str(device).startswith("cuda") and workers > 1:
        raise UsageError(f"--device {device}: the GE2E encoder runs on a GPU in one process: give --workers 1 (or "
                         f"--device cpu)")
    state = {"hp": hp, "out": out, "rtvc": rtvc, "skip_existing": skip_existing, "encoder_path": encoder,
             "encoder_device": None if device is None else str(device)}
    _init_worker(state, 1)
    if rtvc:
        _encoder()  # a bad --encoder fails here, before anything is written
    dirs = [out] + [os.path.join(out, d) for d, _ in _names("x", rtvc).values()]
    results = _collect(utterances, state, workers, _process, dirs, summary.train_txt, skip_bad, progress, report)
    lines = []
    for result in results:
        if result[0] == "drop":
            summary.dropped[result[1]] += 1
            continue
        fields = result[1]
        lines.append(train_line(fields) + "\n")
        summary.kept += 1
        summary.reused += bool(result[2])
        summary.samples += fields[3]
        summary.frames += fields[4]
    write_train_txt(summary.train_txt, lines)
    return summary


def write_train_txt(path: str, lines: Sequence[str]) -> None:
    """Writes ``train.txt`` atomically (a temporary file renamed over ``path``)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)


def _check_arguments(out: str, workers) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"--workers must be a positive integer; got {workers!r}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"{out}: exists and is not a directory")


def _start(dataset: str, out: str, hp, skip_bad: bool, cleaners: Sequence[str],
           report: Callable[[str], None] | None) -> tuple[list[Utterance], Summary]:
    """The corpus (:func:`read_corpus`) and its bad utterances: a :class:`UsageError` naming the first without
    ``skip_bad``, else each counted and reported."""
    utterances, bad = read_corpus(dataset, cleaners)
    summary = Summary(sample_rate=hp.sample_rate, train_txt=os.path.join(out, "train.txt"))
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more bad utterances; --skip-bad skips them)" if len(bad) > 1 else ""
        raise UsageError(bad[0][1] + more)
    for reason, line in bad:
        summary.dropped[reason] += 1
        if report is not None:
            report(f"skipped ({reason}): {line}")
    return utterances, summary


def _collect(utterances: list[Utterance], state: dict, workers: int, process: Callable[[Utterance], tuple],
             dirs: list[str], train_txt: str, skip_bad: bool, progress: Callable[[int, int], None] | None,
             report: Callable[[str], None] | None) -> list[tuple]:
    """Creates ``dirs``, removes a stale ``train_txt`` and runs ``process`` on every utterance (results in
    corpus order: ``("ok", fields, reused, written)`` or ``("drop", reason, message)``). A drop other than too
    short / too long stops the run without ``skip_bad``; any failure removes the files written and the
    directories created."""
    created = [d for d in dirs if not os.path.isdir(d)]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    if os.path.exists(train_txt):  # never a train.txt that claims files this run may rewrite
        os.remove(train_txt)
    results: list = [None] * len(utterances)
    written: list[str] = []

    def take(i: int, result: tuple) -> None:
        results[i] = result
        if result[0] == "ok":
            written.extend(result[3])
        elif result[1] not in ("too short", "too long"):
            if not skip_bad:
                raise UsageError(result[2] + " (--skip-bad skips it; this run's files were removed)")
            if report is not None:
                report(f"skipped ({result[1]}): {result[2]}")
        if progress is not None:
            progress(sum(r is not None for r in results), len(utterances))

    try:
        _run(utterances, state, workers, take, written, process)
    except BaseException:
        _remove(written)
        for d in reversed(created):
            with contextlib.suppress(OSError):  # only when empty
                os.rmdir(d)
        raise
    return results


def _warm_up(hp) -> None:
    """Imports the audio stack (scipy.signal, librosa: seconds of CPU) and builds the mel basis once, so forked
    workers inherit them instead of each paying for them."""
    from . import audio

    noise = np.random.default_rng(0).standard_normal(4 * hp.n_fft).astype(np.float32)
    try:
        audio.recording_features(noise, hp, linear=False)
    except ValueError:  # an odd hparam set; the workers will say what is wrong
        pass


def _run(utterances: list[Utterance], state: dict, workers: int, take: Callable[[int, tuple], None],
         written: list[str], process: Callable[[Utterance], tuple] = _process) -> None:
    """Calls ``take(index, process(utterance))`` per utterance as they finish (in this process when
    ``workers == 1``). When ``take`` raises, the pending utterances are cancelled, the running ones finish, and
    the files they wrote join ``written`` before the error goes on."""
    if workers == 1 or len(utterances) <= 1:
        old = _torch_threads(1)
        try:
            for i, u in enumerate(utterances):
                take(i, process(u))
        finally:
            _torch_threads(old)
        return
    _warm_up(state["hp"])
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method),
                               initializer=_init_worker, initargs=(state, workers))
    futures = {}
    try:
        futures = {pool.submit(process, u): i for i, u in enumerate(utterances)}
        for future in as_completed(futures):
            take(futures[future], future.result())
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is None:
                result = future.result()
                if result[0] == "ok":
                    written.extend(result[3])
        raise
    pool.shutdown(wait=True)


# -- the Tacotron-1 family -------------------------------------------------------------------------------------------
_TACOTRON1_PRESETS = ("keithito", "mimic2")
#: the original's file names (``% index``)
TACOTRON1_FILES = ("ljspeech-spec-%05d.npy", "ljspeech-mel-%05d.npy")


def _existing_tacotron1(paths: tuple[str, str], hp) -> int | None:
    """The frame count when both outputs exist with consistent shapes, else None."""
    try:
        spec, mel = (np.load(p, mmap_mode="r", allow_pickle=False) for p in paths)
    except (OSError, ValueError):
        return None
    frames = spec.shape[0] if spec.ndim == 2 else 0
    ok = frames > 0 and spec.shape == (frames, hp.num_freq) and mel.shape == (frames, hp.num_mels)
    return int(frames) if ok else None


def _process_tacotron1(u: Utterance) -> tuple:
    """``("ok", fields, reused, written)`` or ``("drop", reason, message)`` for one utterance (in a worker);
    ``u.id`` is its index."""
    hp, out = _STATE["hp"], _STATE["out"]
    files = tuple(name % int(u.id) for name in TACOTRON1_FILES)
    paths = tuple(os.path.join(out, f) for f in files)
    if _STATE["skip_existing"]:
        frames = _existing_tacotron1(paths, hp)
        if frames is not None:
            return ("ok", (*files, frames, u.text), True, [])
    try:
        feats = _features(u, hp)
    except _Bad as e:
        return ("drop", e.reason, str(e))
    written = []
    for path, key in zip(paths, ("linear", "mel")):
        _save(path, np.ascontiguousarray(feats[key], np.float32))
        written.append(path)
    return ("ok", (*files, int(feats["mel"].shape[0]), u.text), False, written)


def preprocess_tacotron1(dataset: str | os.PathLike, out: str | os.PathLike, hparams="keithito", *,
                         workers: int = 1, skip_existing: bool = False, skip_bad: bool = False,
                         cleaners: Sequence[str] = ("english_cleaners",),
                         progress: Callable[[int, int], None] | None = None,
                         report: Callable[[str], None] | None = None) -> Summary:
    """Preprocesses a corpus into ``out`` in the Tacotron-1 family's layout (see the module docstring).

    Args:
        dataset: an LJSpeech corpus or a directory of ``x.wav`` + ``x.txt`` (see
            :func:`speechblocks.preprocess.read_corpus`).
        out: the output directory (created with its parents).
        hparams: ``"keithito"``, ``"mimic2"``, a mapping of original names or an
            :class:`~speechblocks.audio.AudioHParams`.
        workers: worker processes (1: in this process).
        skip_existing: an utterance whose two files exist with consistent shapes is not recomputed.
        skip_bad: skip bad utterances (each reported through ``report``) instead of failing.
        cleaners: the cleaners the texts must survive.
        progress: called with ``(done, total)`` after each utterance.
        report: called with one line per skipped bad utterance.

    Returns:
        Summary: the counts (``samples`` is ``frames * hop_size``: the original's hours come from the frames);
        ``out/train.txt`` is written last.

    Raises:
        UsageError: one line naming the first bad input (file and line) when not ``skip_bad``; nothing is
            written (a problem found while decoding removes what the run wrote).
    """
    from .audio.params import as_audio_hparams

    try:
        hp = as_audio_hparams(hparams)
    except ValueError as e:
        raise UsageError(_one_line(e)) from None
    dataset, out = os.fspath(dataset), os.fspath(out)
    _check_arguments(out, workers)
    utterances, summary = _start(dataset, out, hp, skip_bad, cleaners, report)
    numbered = [Utterance(str(i), u.wav, u.text, u.where) for i, u in enumerate(utterances, 1)]
    state = {"hp": hp, "out": out, "rtvc": False, "skip_existing": skip_existing, "encoder_path": None}
    _init_worker(state, 1)
    results = _collect(numbered, state, workers, _process_tacotron1, [out], summary.train_txt, skip_bad, progress,
                           report)
    lines = []
    for result in results:
        if result[0] == "drop":
            summary.dropped[result[1]] += 1
            continue
        lines.append(train_line(result[1]) + "\n")
        summary.kept += 1
        summary.reused += bool(result[2])
        summary.frames += result[1][2]
        summary.samples += result[1][2] * hp.hop_size  # hours from frames, as the original's write_metadata
    write_train_txt(summary.train_txt, lines)
    return summary
