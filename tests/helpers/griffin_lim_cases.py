"""Shared cases of the torch and TensorFlow Griffin-Lim tests: small spectrograms of synthetic speech for both
presets, the originals' loop with librosa called directly, and the float32 tolerance (measured, see below)."""
from __future__ import annotations

import functools

import librosa
import numpy as np

from speechblocks.audio import audio_hparams, linearspectrogram, melspectrogram, preemphasis, rescale
from tests.helpers.audio_signals import synthetic_speech

PRESETS = ["rtvc", "rayhane"]

#: float32 against the float64 computation, 60 iterations, as a fraction of the waveform's peak.
#: Measured on 0.3 s of synthetic speech, 4 seeds x 2 presets (torch and TF alike): the error grows with the
#: iterations (~3e-7 after the first inverse STFT, ~2e-6 after 5, ~5e-6 after 30) -- each iteration adds the
#: rounding of one FFT pair (~1e-7 relative x log2(n_fft)), and the phase of a weak bin is sensitive to it --
#: up to 1.0e-5 of the peak after 60 for Griffin-Lim, 1.0e-5 for inv_mel / inv_linear (pre-emphasis
#: inverted), 1.7e-5 between the two float32 twins. Bound: 5e-5 (3x the worst seen).
FLOAT32_PEAK_TOL = 5e-5
#: float64 twins against the original loop in float64 (measured ~4e-14 of the peak after 60 iterations).
FLOAT64_PEAK_TOL = 1e-9
#: against speechblocks.audio (float64 computation returned as float32): its float32 rounding (measured 5e-8).
REFERENCE_PEAK_TOL = 2e-7


@functools.lru_cache(maxsize=8)
def case(preset: str, seed: int = 0, seconds: float = 0.3):
    """``(hp, wav, S (num_freq, frames) float64 magnitudes, angles (num_freq, frames), mel, linear)``."""
    hp = audio_hparams(preset)
    x = synthetic_speech(hp.sample_rate, seconds, seed=seed)
    if not hp.preemphasis_in_spectrogram:  # as Rayhane's preprocessor: pre-emphasised, rescaled
        x = rescale(preemphasis(x, hp.preemphasis), hp.rescaling_max).astype(np.float32)
    S = np.abs(stft(x.astype(np.float64), hp))
    angles = np.exp(2j * np.pi * np.random.default_rng(seed).random(S.shape))
    return hp, x, S, angles, melspectrogram(x, hp), linearspectrogram(x, hp)


def stft(y: np.ndarray, hp) -> np.ndarray:
    return librosa.stft(y, n_fft=hp.n_fft, hop_length=hp.hop_size, win_length=hp.win_size,
                        pad_mode=hp.stft_pad_mode)


def istft(spec: np.ndarray, hp) -> np.ndarray:
    return librosa.istft(spec, hop_length=hp.hop_size, win_length=hp.win_size)


def original_griffin_lim(S: np.ndarray, hp, n_iter: int, angles: np.ndarray) -> np.ndarray:
    """The originals' ``_griffin_lim`` with librosa called as they called it (the preset's pad mode),
    float64."""
    s_complex = np.abs(S).astype(complex)
    y = istft(s_complex * angles, hp)
    for _ in range(n_iter):
        y = istft(s_complex * np.exp(1j * np.angle(stft(y, hp))), hp)
    return y


def sizes(hp) -> dict:
    """The STFT keywords of the framework ``griffin_lim``."""
    return dict(n_fft=hp.n_fft, hop_size=hp.hop_size, win_size=hp.win_size, pad_mode=hp.stft_pad_mode)


#: (n_fft, hop, win, pad_mode) of the STFT checks: both presets' sizes (Rayhane's win_size < n_fft) in both
# pad : modes, and a small odd-sized window
STFT_SIZES = [(800, 200, 800, "reflect"), (800, 200, 800, "constant"), (2048, 275, 1100, "constant"),
              (2048, 275, 1100, "reflect"), (64, 16, 41, "reflect")]
