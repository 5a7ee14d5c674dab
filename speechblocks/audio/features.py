"""One recording's features in each preset's original per-utterance order (for ``speechblocks mel`` and
``speechblocks preprocess``).

* RTVC (``synthesizer/preprocess.py``): ``load_wav``; ``rescale`` (``wav / max|wav| * rescaling_max``) when
  ``rescale``; then ``melspectrogram(wav)``, which pre-emphasises inside. The saved audio is that rescaled
  ``wav``. Not reproduced: RTVC's LibriSpeech-specific steps before the spectrogram (splitting on the alignment
  files' silences and the logmmse noise reduction); its preset has ``trim_silence=False`` (the original never
  trims), and a ``trim_silence`` set to True trims after the rescale.
* Rayhane (``datasets/preprocessor.py``): ``load_wav``; ``trim_silence`` when set; ``preem_wav =
  preemphasis(wav)`` when ``preemphasize``; when ``rescale`` both ``wav`` and ``preem_wav`` are rescaled to
  ``rescaling_max`` separately; the spectrograms are of ``preem_wav``. The saved audio is ``wav`` (without the
  original's WaveNet-only padding to a multiple of ``hop_size``).

The length filters of the preprocessors (``utterance_min_duration``, ``max_mel_frames`` with
``clip_mels_length``) are the caller's.
"""
from __future__ import annotations

import os

import numpy as np

from .io import _waveform, load_wav, preemphasis, rescale, trim_silence
from .params import as_audio_hparams
from .spectrogram import spectrograms

__all__ = ["recording_features"]


def recording_features(path_or_wav, hparams="rtvc", *, linear: bool = True) -> dict:
    """A recording's waveform, mel and linear spectrograms exactly as the preset's original preprocessor
    computes them (see the module docstring for each order).

    Args:
        path_or_wav: an audio file (read by :func:`load_wav`) or a ``(samples,)`` float waveform already at
            ``sample_rate`` (what ``load_wav`` returns).
        hparams: preset name, mapping or :class:`AudioHParams`.
        linear: also compute the linear spectrogram (RTVC's preprocessor does not save one).

    Returns:
        dict: ``"wav"`` float32 ``(samples,)`` (the audio the preprocessor saves), ``"mel"`` float32
        ``(frames, num_mels)``, and with ``linear`` ``"linear"`` float32 ``(frames, num_freq)``.

    Raises:
        ValueError: naming the file (or ``wav``) when it is not audio, empty, silent, holds NaN/inf, or is
            shorter than one analysis window (``win_size`` samples) after trimming.
    """
    hp = as_audio_hparams(hparams)
    if isinstance(path_or_wav, (str, bytes, os.PathLike)):
        name = f"recording_features: {os.fsdecode(path_or_wav)!r}"
        wav = load_wav(path_or_wav, hp)
    else:
        name = "recording_features: `wav`"
        wav = _waveform(path_or_wav, name).astype(np.float32, copy=False)
    if not np.any(wav):
        raise ValueError(f"{name} is silent (every sample is 0).")
    if hp.preemphasis_in_spectrogram:
        if hp.rescale:
            wav = rescale(wav, hp.rescaling_max).astype(np.float32)
        if hp.trim_silence:
            wav = trim_silence(wav, hp)
        spec_input = wav
    else:
        if hp.trim_silence:
            wav = trim_silence(wav, hp)
        if wav.size < hp.win_size:
            raise ValueError(f"{name} holds {wav.size} samples after trim_silence, fewer than one analysis "
                             f"window (win_size = {hp.win_size}).")
        spec_input = preemphasis(wav, hp.preemphasis) if hp.preemphasize else wav
        if hp.rescale:
            wav = rescale(wav, hp.rescaling_max).astype(np.float32)
            spec_input = rescale(spec_input, hp.rescaling_max)
    if wav.size < hp.win_size:
        raise ValueError(f"{name} holds {wav.size} samples{' after trim_silence' if hp.trim_silence else ''}, "
                         f"fewer than one analysis window (win_size = {hp.win_size}).")
    out = {"wav": np.ascontiguousarray(wav, dtype=np.float32)}
    out.update(spectrograms(spec_input, hp, linear=linear, name=name))
    return out
