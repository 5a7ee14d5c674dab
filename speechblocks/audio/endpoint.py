"""The Tacotron-1 synthesizers' end-of-speech cut (keithito/tacotron and mimic2 ``util/audio.find_endpoint``).

The waveform is scanned in windows of ``w = int(sample_rate * min_silence_sec)`` samples every ``h = int(w / 4)``
samples, starting at sample ``h``: the first window ``wav[x:x + w]`` whose **signed** maximum (the original takes
``np.max(wav[...])``, not of ``|wav|``) stays below ``10 ** (threshold_db / 20)`` ends the speech at ``x + h``.
Only windows that end before the last sample are looked at (``x < len(wav) - w``); without such a window the whole
length is kept.
"""
from __future__ import annotations

import numpy as np

from .io import _waveform
from .params import as_audio_hparams
from .spectrogram import db_to_amp

__all__ = ["find_endpoint"]


def find_endpoint(wav, hparams="keithito", threshold_db: float = -40, min_silence_sec: float = 0.8) -> int:
    """Where the original synthesizers cut a synthesized waveform: ``wav[:find_endpoint(wav, hp)]``.

    Args:
        wav: ``(samples,)`` float waveform (as Griffin-Lim returns it; keithito after ``inv_preemphasis``).
        hparams: preset name, mapping or :class:`~speechblocks.audio.AudioHParams` (only ``sample_rate`` is read).
        threshold_db: the silence level in dB of full scale (-40: an amplitude of 0.01).
        min_silence_sec: the length of silence that ends the speech.

    Returns:
        int: the end sample, ``len(wav)`` when no window is silent.

    Raises:
        ValueError: naming ``wav`` when it is not 1-D or holds NaN/inf; naming ``min_silence_sec`` when its
            hop ``int(int(sample_rate * min_silence_sec) / 4)`` is under one sample; naming ``threshold_db``
            when it is not finite.
    """
    hp = as_audio_hparams(hparams)
    w = _waveform(wav, "find_endpoint: `wav`", min_length=0)
    if not np.isfinite(threshold_db):
        raise ValueError(f"find_endpoint: `threshold_db` must be a finite number; got {threshold_db!r}.")
    window = int(hp.sample_rate * min_silence_sec) if np.isfinite(min_silence_sec) else 0
    hop = int(window / 4)
    if hop < 1:
        raise ValueError(f"find_endpoint: `min_silence_sec` must give a window of at least 4 samples at "
                         f"{hp.sample_rate} Hz; got {min_silence_sec!r}.")
    threshold = db_to_amp(threshold_db)
    for x in range(hop, w.size - window, hop):
        if np.max(w[x:x + window]) < threshold:
            return x + hop
    return int(w.size)
