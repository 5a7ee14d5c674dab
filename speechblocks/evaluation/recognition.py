"""What a recogniser hears: pocketsphinx's English model on a waveform, and the word and character error rates of
what it heard against the sentence (jiwer's alignment), both sides normalised alike.

pocketsphinx (its wheel ships the US-English acoustic model, dictionary and language model) and jiwer are the
``eval`` extra: :func:`require_recognizer` says in one line what is missing.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..errors import UsageError

__all__ = ["RECOGNIZER_RATE", "require_recognizer", "Recognizer", "words", "ErrorRates", "error_rates"]

#: the rate of pocketsphinx's English acoustic model
RECOGNIZER_RATE = 16000
_INSTALL = "pip install 'speechblocks[eval]' (pocketsphinx, jiwer)"


def require_recognizer() -> str:
    """Checks that the recogniser and the error-rate alignment import; returns pocketsphinx's version.

    Raises:
        UsageError: one line naming the package that is missing and how to install it.
    """
    missing = []
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        missing.append("pocketsphinx")
    try:
        import jiwer  # noqa: F401
    except ImportError:
        missing.append("jiwer")
    if missing:
        raise UsageError(f"the recogniser is not installed ({' and '.join(missing)} missing): {_INSTALL}")
    import importlib.metadata

    try:
        return importlib.metadata.version("pocketsphinx")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover -- imported but not installed as a package
        return "unknown"


def words(text: str, cleaners=("english_cleaners",)) -> str:
    """``text`` as the words the error rates compare: the model's own cleaners (numbers and abbreviations spelled
    out, lower case), ARPAbet groups ``{HH AH0}`` left out, every character other than a letter, a digit or an
    apostrophe a space, single spaces.

    Args:
        text: a sentence, or what the recogniser heard.
        cleaners: the cleaner names of the model's front-end.

    Returns:
        str: the words joined by single spaces (``""`` when none).
    """
    from ..text import clean_text

    cleaned = clean_text(re.sub(r"\{[^}]*\}", " ", text), tuple(cleaners)).lower()
    return " ".join(re.sub(r"[^a-z0-9']+", " ", cleaned).replace(" '", " ").replace("' ", " ").split())


class Recognizer:
    """pocketsphinx's default US-English model, one decoder reused: its features are reset before every utterance,
    so each result equals a fresh decoder's (the cepstral mean otherwise carries over from the previous one).

    Args:
        None.

    Raises:
        UsageError: pocketsphinx or jiwer missing (:func:`require_recognizer`).
    """

    def __init__(self) -> None:
        self.version = require_recognizer()
        from pocketsphinx import Decoder

        self._decoder = Decoder(samprate=RECOGNIZER_RATE, logfn="/dev/null")

    def __call__(self, wav: np.ndarray, sample_rate: int) -> str:
        """What the recogniser hears in ``wav``.

        Args:
            wav: ``(samples,)`` float waveform; resampled to 16 kHz (soxr) and peak-normalised to int16 as
                :func:`speechblocks.audio.save_wav` writes it.
            sample_rate: its rate in Hz.

        Returns:
            str: the words heard, lower case (``""`` for none).
        """
        w = np.asarray(wav, np.float64)
        if sample_rate != RECOGNIZER_RATE:
            import soxr

            w = soxr.resample(w, sample_rate, RECOGNIZER_RATE, quality="HQ")
        peak = float(np.max(np.abs(w))) if w.size else 0.0
        pcm = (w * (32767.0 / max(0.01, peak))).astype(np.int16)
        d = self._decoder
        d.reinit_feat()
        d.start_utt()
        d.process_raw(pcm.tobytes(), full_utt=True)
        d.end_utt()
        hyp = d.hyp()
        return hyp.hypstr.strip() if hyp is not None else ""


@dataclasses.dataclass(frozen=True)
class ErrorRates:
    """Word and character error rates of several sentences together (errors summed over reference lengths summed).

    Attributes:
        wer: word errors / reference words.
        cer: character errors / reference characters (spaces included).
        word_errors: substitutions + deletions + insertions of words.
        reference_words: words of the references.
        char_errors: the same for characters.
        reference_chars: characters of the references.
    """

    wer: float
    cer: float
    word_errors: int
    reference_words: int
    char_errors: int
    reference_chars: int


def error_rates(references: list[str], hypotheses: list[str]) -> ErrorRates:
    """The error rates of ``hypotheses`` against ``references`` (both already :func:`words`), aligned by jiwer.

    Args:
        references: the sentences' words, each non-empty.
        hypotheses: what was heard, one per reference (may be empty).

    Returns:
        ErrorRates: corpus-level rates (one sentence: its own).

    Raises:
        ValueError: the lists differ in length, or a reference is empty.
    """
    import jiwer

    if len(references) != len(hypotheses) or not references:
        raise ValueError(f"error_rates: {len(references)} references and {len(hypotheses)} hypotheses; need the "
                         "same non-zero number.")
    if any(not r.strip() for r in references):
        raise ValueError("error_rates: a reference has no words.")
    hyps = [h if h.strip() else "" for h in hypotheses]
    w = jiwer.process_words(references, hyps)
    c = jiwer.process_characters(references, hyps)
    n_words = w.hits + w.substitutions + w.deletions  # the references' lengths as jiwer split them
    n_chars = c.hits + c.substitutions + c.deletions
    word_errors = w.substitutions + w.deletions + w.insertions
    char_errors = c.substitutions + c.deletions + c.insertions
    return ErrorRates(word_errors / n_words, char_errors / n_chars, int(word_errors), int(n_words), int(char_errors),
                      int(n_chars))
