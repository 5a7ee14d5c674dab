"""Synthetic recordings for the audio tests: voiced (harmonic) and unvoiced (noise) segments between silences,
and flite speech when flite is installed."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np


def synthetic_speech(sample_rate: int, seconds: float = 1.0, seed: int = 0, lead: float = 0.15,
                     tail: float = 0.2) -> np.ndarray:
    """float32 ``(samples,)``: a ``lead`` fraction of near-silence, a voiced stretch (f0 gliding 110 -> 150 Hz, 12
    harmonics with a 1/k roll-off), a short pause, an unvoiced stretch (band-passed noise), a ``tail``
    fraction of near-silence. Peak about 0.5; the silences hold faint noise (-80 dB) so nothing is exactly zero."""
    g = np.random.default_rng(seed)
    n = int(seconds * sample_rate)
    n_lead, n_tail = int(lead * n), int(tail * n)
    body = n - n_lead - n_tail
    n_voiced, n_pause = int(body * 0.55), int(body * 0.1)
    n_unvoiced = body - n_voiced - n_pause
    t = np.arange(n_voiced) / sample_rate
    f0 = 110 + 40 * t / max(t[-1], 1e-9)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 13)) * np.hanning(n_voiced)
    noise = g.standard_normal(n_unvoiced)
    spectrum = np.fft.rfft(noise)
    freqs = np.fft.rfftfreq(n_unvoiced, 1 / sample_rate)
    spectrum[(freqs < 2000) | (freqs > 6000)] = 0
    unvoiced = np.fft.irfft(spectrum, n_unvoiced) * np.hanning(n_unvoiced)
    x = np.concatenate([np.zeros(n_lead), voiced / np.abs(voiced).max() * 0.5, np.zeros(n_pause),
                        unvoiced / np.abs(unvoiced).max() * 0.3, np.zeros(n_tail)])
    x += 1e-4 * g.standard_normal(x.size)
    return x.astype(np.float32)


def flite_wav(path, text: str = "The quick brown fox jumps over the lazy dog.") -> bool:
    """Writes flite's ``slt`` voice saying ``text`` to ``path``; False when flite is not installed."""
    if shutil.which("flite") is None:
        return False
    subprocess.run(["flite", "-voice", "slt", "-t", text, "-o", str(path)], check=True, capture_output=True)
    return True
