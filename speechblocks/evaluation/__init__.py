"""Hearing what a model says: a recogniser's word and character error rates, mel-cepstral distortion against
recordings, GE2E speaker similarity and alignment health (``speechblocks evaluate``).

Framework-free at import: :mod:`.mcd` and :mod:`.alignment` are numpy; :mod:`.recognition` imports pocketsphinx and
jiwer (the ``eval`` extra) when a recogniser is made; :mod:`.pipeline` imports a framework only where a model runs.
"""
from .alignment import alignment_scores
from .mcd import MCD_CONSTANT, MCDResult, dtw_path, mel_cepstral_distortion, mel_cepstrum, mel_cepstrum_settings
from .recognition import ErrorRates, Recognizer, error_rates, require_recognizer, words

__all__ = ["alignment_scores", "MCD_CONSTANT", "MCDResult", "dtw_path", "mel_cepstral_distortion", "mel_cepstrum",
           "mel_cepstrum_settings", "ErrorRates", "Recognizer", "error_rates", "require_recognizer", "words"]
