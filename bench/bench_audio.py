"""Audio front-end timing (numpy): ``melspectrogram`` over one hour of synthetic speech as a real-time factor,
against the originals' ``melspectrogram`` re-written as they ran it (``librosa.stft`` with the preset's pad
mode, the cached ``librosa.filters.mel`` basis, ``_amp_to_db``, ``_normalize``; the preprocessor's
``.astype(float32)`` and transpose), for both presets; and numpy Griffin-Lim, 60 iterations of a 5 s utterance at
RTVC sizes, against the originals' ``_griffin_lim`` loop over ``librosa.stft`` / ``librosa.istft``.

The hour is 360 utterances of 10 s (as a preprocessor meets them), each computed by both sides in turn so machine
noise hits both alike; both outputs are checked equal first. ``BENCH_AUDIO_SECONDS`` shortens the hour (e.g.
``BENCH_AUDIO_SECONDS=60`` for a smoke run).
"""
from __future__ import annotations

import os
import time

import numpy as np
from scipy.signal import lfilter

from ._timing import compare_times
from .results import record

#: the rows of bench/results.json this bench records
ROWS = ("griffin-lim numpy", "melspectrogram rtvc", "melspectrogram rayhane")
UTTERANCE_SECONDS = 10.0


def _utterance(sample_rate: int, seconds: float, seed: int = 0) -> np.ndarray:
    """float32 speech-like signal: gliding harmonic (voiced) stretches, noise (unvoiced) bursts, pauses."""
    g = np.random.default_rng(seed)
    n = int(seconds * sample_rate)
    t = np.arange(n) / sample_rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 16))
    envelope = (np.sin(2 * np.pi * 1.3 * t) > -0.3).astype(float)  # syllables and pauses
    noise = g.standard_normal(n) * (np.sin(2 * np.pi * 0.45 * t) > 0.8)
    x = 0.3 * voiced * envelope + 0.2 * noise + 1e-4 * g.standard_normal(n)
    return (x / np.abs(x).max() * 0.9).astype(np.float32)


class _OriginalMel:
    """The originals' ``melspectrogram`` with librosa as they called it (mel basis built once, as their global)."""

    def __init__(self, hp):
        import librosa

        self.hp = hp
        self.librosa = librosa
        self.basis = librosa.filters.mel(sr=hp.sample_rate, n_fft=hp.n_fft, n_mels=hp.num_mels, fmin=hp.fmin,
                                         fmax=hp.fmax)

    def __call__(self, wav: np.ndarray) -> np.ndarray:
        hp = self.hp
        if hp.preemphasis_in_spectrogram and hp.preemphasize:
            wav = lfilter([1, -hp.preemphasis], [1], wav)
        D = self.librosa.stft(y=wav, n_fft=hp.n_fft, hop_length=hp.hop_size, win_length=hp.win_size,
                              pad_mode=hp.stft_pad_mode)
        S = np.dot(self.basis, np.abs(D) ** hp.magnitude_power)
        S = 20 * np.log10(np.maximum(np.exp(hp.min_level_db / 20 * np.log(10)), S)) - hp.ref_level_db
        m, lo = hp.max_abs_value, hp.min_level_db
        S = np.clip((2 * m) * ((S - lo) / (-lo)) - m, -m, m)  # both presets: symmetric, clipped
        return S.astype(np.float32).T


def _mel_lines(preset: str, total_seconds: float) -> list[str]:
    from speechblocks.audio import audio_hparams, melspectrogram

    hp = audio_hparams(preset)
    original = _OriginalMel(hp)
    wav = _utterance(hp.sample_rate, UTTERANCE_SECONDS)
    if not hp.preemphasis_in_spectrogram:  # Rayhane's preprocessor hands in the pre-emphasised signal
        wav = lfilter([1, -hp.preemphasis], [1], wav)
        wav = wav / np.abs(wav).max() * hp.rescaling_max
    ours, ref = melspectrogram(wav, hp), original(wav)
    np.testing.assert_allclose(ours, ref, atol=1e-4)
    n_utt = max(1, round(total_seconds / UTTERANCE_SECONDS))
    spent = {"speechblocks": 0.0, "original": 0.0}
    runs = {"speechblocks": lambda: melspectrogram(wav, hp), "original": lambda: original(wav)}
    for _ in range(n_utt):  # alternating per utterance
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            spent[name] += time.perf_counter() - t0
    audio = n_utt * UTTERANCE_SECONDS
    rtf = {k: v / audio for k, v in spent.items()}
    record_mel(preset, spent, audio)
    return [f"melspectrogram {preset} ({n_utt} x {UTTERANCE_SECONDS:.0f} s = {audio / 60:.1f} min of audio, "
            f"frames x {hp.num_mels}): speechblocks {spent['speechblocks']:.2f} s (RTF {rtf['speechblocks']:.2e}), "
            f"original with librosa {spent['original']:.2f} s (RTF {rtf['original']:.2e}); "
            f"ratio {spent['speechblocks'] / spent['original']:.2f}x of the original's time"]


def record_mel(preset: str, spent: dict, audio: float) -> None:
    """``spent``: seconds of ``speechblocks`` and ``original`` over ``audio`` seconds of audio; the row is seconds per
    hour of audio (the hour itself unless ``BENCH_AUDIO_SECONDS`` shortened it)."""
    ours, theirs = spent["speechblocks"], spent["original"]
    n = round(audio / UTTERANCE_SECONDS)
    timed = f"{n} × {UTTERANCE_SECONDS:.0f} s" + ("" if round(audio) == 3600 else ", scaled to the hour")
    record("audio", f"melspectrogram {preset}", ours * 3600 / audio, unit=" s", fmt=".2f",
           label=f"`melspectrogram` of 1 hour, {'RTVC' if preset == 'rtvc' else 'Rayhane'}",
           what=f"`melspectrogram` of 1 hour of audio ({timed}), {'RTVC' if preset == 'rtvc' else 'Rayhane'}: "
           "seconds for the hour, each utterance alternating with the originals' librosa code",
           notes=f"RTF {ours / audio:.1e}; {ours / theirs:.2f}× the original's librosa code's time.")


def record_griffin_lim(t: dict) -> None:
    """The row from the medians (``speechblocks``, ``original``: seconds of 60 iterations)."""
    record("audio", "griffin-lim numpy", t["speechblocks"] / t["original"], unit="x", fmt=".2f",
           seconds=t["speechblocks"], baseline=t["original"], label="numpy Griffin-Lim vs the original loop",
           what="numpy Griffin-Lim (the reference), 60 iterations of 5 s at RTVC sizes, vs the originals' loop over "
           "librosa, same sizes: time over the original's (median of 5, interleaved)")


def _griffin_lim_lines() -> list[str]:
    import librosa

    from speechblocks.audio import audio_hparams, griffin_lim

    hp = audio_hparams("rtvc")
    wav = _utterance(hp.sample_rate, 5.0, seed=1)
    S = np.abs(librosa.stft(wav.astype(np.float64), n_fft=hp.n_fft, hop_length=hp.hop_size,
                            win_length=hp.win_size, pad_mode=hp.stft_pad_mode))
    angles = np.exp(2j * np.pi * np.random.default_rng(0).random(S.shape))

    def original():
        s_complex = S.astype(complex)
        y = librosa.istft(s_complex * angles, hop_length=hp.hop_size, win_length=hp.win_size)
        for _ in range(60):
            a = np.exp(1j * np.angle(librosa.stft(y, n_fft=hp.n_fft, hop_length=hp.hop_size,
                                                  win_length=hp.win_size, pad_mode=hp.stft_pad_mode)))
            y = librosa.istft(s_complex * a, hop_length=hp.hop_size, win_length=hp.win_size)
        return y

    def ours():
        return griffin_lim(S.T, hp, n_iter=60, angles=angles)

    np.testing.assert_allclose(ours(), original(), atol=1e-5)
    t = compare_times({"speechblocks": ours, "original": original}, repeats=5, warmup=1)
    record_griffin_lim(t)
    return [f"griffin_lim rtvc, 60 iterations, 5 s ({S.shape[1]} frames x {hp.num_freq} bins): speechblocks "
            f"{t['speechblocks']:.3f} s, original loop with librosa {t['original']:.3f} s; ratio "
            f"{t['speechblocks'] / t['original']:.2f}x"]


def main() -> None:
    total = float(os.environ.get("BENCH_AUDIO_SECONDS", "3600"))
    for preset in ("rtvc", "rayhane"):
        for line in _mel_lines(preset, total):
            print(line, flush=True)
    for line in _griffin_lim_lines():
        print(line, flush=True)


if __name__ == "__main__":
    main()
