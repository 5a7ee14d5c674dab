"""Mel-cepstral distortion (MCD) between two waveforms, with an exact DTW frame alignment, in numpy.

The definition follows ESPnet's MCD evaluation (``evaluate_mcd.py``: SPTK mel-cepstra of Hamming-windowed frames
of ``n_fft = 1024`` samples every ``n_shift = 256``, no padding; the all-pass constant and order of each sample
rate from its table; DTW on the mel-cepstra; ``10 / ln 10 * sqrt(2 * sum of squared differences)`` averaged over
the aligned frame pairs), with three documented differences:

* **the mel-cepstrum** is SPTK's frequency warping (``freqt``) of the FFT cepstrum of each frame's log periodogram
  (``log(|FFT(frame * hamming)|^2 + 1e-6)``, the ``1e-6`` of ESPnet's ``eps``), as pysptk's ``sp2mc`` computes it,
  not SPTK's iterative mel-cepstral analysis (``mcep``: the same warped cepstrum of order ``M``, fitted by
  Newton-Raphson, seconds per utterance and a compiled extension);
* **c0 is left out** (coefficients ``c1 .. cM`` only), in the alignment and in the distance: c0 is the frame's
  log energy, which Griffin-Lim's arbitrary gain and the peak normalisation of a written wav change without
  changing what is said or how it sounds; ESPnet keeps it;
* **the DTW is exact** (the full dynamic programme, steps (1, 0), (0, 1), (1, 1), Euclidean frame cost), where
  ESPnet runs ``fastdtw`` (an approximation of it).

Both waveforms are peak-normalised first (as :func:`speechblocks.audio.save_wav` writes them), so the ``1e-6``
floor sits at the same level under both.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = ["MCD_CONSTANT", "N_FFT", "N_SHIFT", "MelCepstrumSettings", "mel_cepstrum_settings", "all_pass_constant",
           "mel_cepstrum", "dtw_path", "mel_cepstral_distortion", "MCDResult"]

#: ``10 / ln(10) * sqrt(2)``: the dB factor of the Euclidean distance between two mel-cepstra
MCD_CONSTANT = 10.0 / math.log(10.0) * math.sqrt(2.0)
#: ESPnet's frame length and shift (samples), at every rate
N_FFT = 1024
N_SHIFT = 256
#: the periodogram floor (ESPnet's ``eps=1e-6`` of ``pysptk.mcep``)
EPS = 1e-6
#: ESPnet's ``_get_best_mcep_params``: sample rate -> (order M, all-pass constant alpha)
_ESPNET_PARAMS = {8000: (13, 0.41), 16000: (23, 0.42), 22050: (34, 0.45), 24000: (34, 0.46), 32000: (36, 0.49),
                  44100: (39, 0.53), 48000: (39, 0.55)}


@dataclasses.dataclass(frozen=True)
class MelCepstrumSettings:
    """What the mel-cepstra of one sample rate are made with.

    Attributes:
        sample_rate: Hz.
        order: ``M``: coefficients ``c0 .. cM`` are computed, ``c1 .. cM`` compared.
        alpha: the all-pass (frequency-warping) constant.
        n_fft: frame (and FFT) length in samples.
        n_shift: frame shift in samples.
    """

    sample_rate: int
    order: int
    alpha: float
    n_fft: int = N_FFT
    n_shift: int = N_SHIFT


@functools.lru_cache(maxsize=8)
def all_pass_constant(sample_rate: int) -> float:
    """The all-pass constant whose frequency warping best fits the mel scale at ``sample_rate`` (SPTK's rule, as
    pysptk's ``mcepalpha``: the alpha in ``[0, 1)`` in steps of 0.001 whose warped frequency axis is nearest, in
    RMS over 1000 points, to ``1000 / ln 2 * ln(1 + f / 1000)`` normalised to 1 at Nyquist).

    Args:
        sample_rate: Hz, positive.

    Returns:
        float: alpha (0.41 at 16 kHz, 0.455 at 22.05 kHz).
    """
    n = 1000
    f = (sample_rate / 2.0) / n * np.arange(n)
    mel = np.log1p(f / 1000.0)
    mel /= mel[-1]
    omega = np.pi / n * np.arange(n)
    alphas = np.arange(0.0, 1.0, 0.001)[:, None]
    warped = np.arctan2((1 - alphas ** 2) * np.sin(omega), (1 + alphas ** 2) * np.cos(omega) - 2 * alphas)
    warped = np.where(warped < 0, warped + np.pi, warped)
    warped /= warped[:, -1:]
    return float(alphas[np.argmin(np.sqrt(np.mean((warped - mel) ** 2, axis=1))), 0])


def mel_cepstrum_settings(sample_rate: int) -> MelCepstrumSettings:
    """ESPnet's order and all-pass constant for ``sample_rate`` (8, 16, 22.05, 24, 32, 44.1, 48 kHz); another rate
    takes the order of the highest listed rate below it and :func:`all_pass_constant`.

    Args:
        sample_rate: Hz, at least 8000.

    Returns:
        MelCepstrumSettings: the settings, with ESPnet's ``n_fft`` 1024 and ``n_shift`` 256.

    Raises:
        ValueError: naming ``sample_rate`` when it is below 8000 Hz or not an integer.
    """
    if isinstance(sample_rate, bool) or not hasattr(sample_rate, "__index__") or int(sample_rate) < 8000:
        raise ValueError(f"mel_cepstrum_settings: `sample_rate` must be an integer >= 8000 Hz; got {sample_rate!r}.")
    sr = int(sample_rate)
    if sr in _ESPNET_PARAMS:
        order, alpha = _ESPNET_PARAMS[sr]
    else:
        order = _ESPNET_PARAMS[max(r for r in _ESPNET_PARAMS if r < sr)][0]
        alpha = all_pass_constant(sr)
    return MelCepstrumSettings(sr, order, alpha)


@functools.lru_cache(maxsize=8)
def _freqt_matrix(m1: int, m2: int, alpha: float) -> np.ndarray:
    """SPTK's ``freqt`` (cepstrum of order ``m1`` -> warped cepstrum of order ``m2``) as the ``(m1 + 1, m2 + 1)``
    matrix of this linear map: the recursion run on every unit vector at once."""
    b = 1.0 - alpha * alpha
    c = np.eye(m1 + 1)
    g = np.zeros((m1 + 1, m2 + 1))
    for i in range(m1, -1, -1):
        d = g.copy()
        g[:, 0] = c[:, i] + alpha * d[:, 0]
        if m2 >= 1:
            g[:, 1] = b * d[:, 0] + alpha * d[:, 1]
        for j in range(2, m2 + 1):
            g[:, j] = d[:, j - 1] + alpha * (d[:, j] - g[:, j - 1])
    return g


def _peak_normalised(wav, name: str) -> np.ndarray:
    w = np.asarray(wav, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"{name} must be a 1-D waveform (samples,); got shape {w.shape}.")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} holds NaN or inf samples.")
    peak = float(np.max(np.abs(w))) if w.size else 0.0
    if peak == 0.0:
        raise ValueError(f"{name} is silent (every sample is 0).")
    return w * (32767.0 / 32768.0 / peak)


def mel_cepstrum(wav, settings: MelCepstrumSettings, name: str = "`wav`") -> np.ndarray:
    """The mel-cepstra ``c0 .. cM`` of every frame of ``wav`` (see the module docstring).

    Args:
        wav: ``(samples,)`` waveform at ``settings.sample_rate``, at least ``n_fft`` samples; peak-normalised here.
        settings: :func:`mel_cepstrum_settings` of its rate.
        name: how an error names ``wav``.

    Returns:
        np.ndarray: float64 ``(frames, order + 1)``, ``frames = (samples - n_fft) // n_shift + 1``.

    Raises:
        ValueError: naming ``wav`` when it is not 1-D, holds NaN/inf, is silent or shorter than one frame.
    """
    w = _peak_normalised(wav, name)
    n_fft, shift = settings.n_fft, settings.n_shift
    if w.size < n_fft:
        raise ValueError(f"{name} holds {w.size} samples, fewer than one MCD frame ({n_fft} samples, "
                         f"{n_fft / settings.sample_rate * 1000:.0f} ms).")
    n_frames = (w.size - n_fft) // shift + 1
    frames = np.lib.stride_tricks.sliding_window_view(w, n_fft)[::shift][:n_frames] * np.hamming(n_fft)
    log_power = np.log(np.abs(np.fft.rfft(frames, axis=1)) ** 2 + EPS)
    cepstrum = np.fft.irfft(log_power, n=n_fft, axis=1)[:, : n_fft // 2 + 1]
    cepstrum[:, 0] /= 2.0
    return cepstrum @ _freqt_matrix(n_fft // 2, settings.order, float(settings.alpha))


def dtw_path(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The exact dynamic-time-warping alignment of two sequences of vectors under the Euclidean frame cost, steps
    (1, 0), (0, 1) and (1, 1), from ``(0, 0)`` to the last frames of both.

    Each row of the accumulated cost is one vectorised pass: ``D[i, j] = C[i, j] + min(D[i-1, j-1], D[i-1, j],
    D[i, j-1])`` is ``S[j] + min over k <= j of (min(D[i-1, k-1], D[i-1, k]) - S[k-1])`` with ``S`` the prefix sums
    of row ``i`` of ``C``: a running minimum.

    Args:
        a: ``(n, d)``.
        b: ``(m, d)``.

    Returns:
        ``(ia, ib, cost)``: the aligned frame indices (both of the path's length, non-decreasing, steps of 0 or 1)
        and the path's summed frame cost.

    Raises:
        ValueError: when either is empty or their widths differ.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ValueError(f"dtw_path: `a` and `b` must be non-empty (frames, d) arrays of one width; got {a.shape} "
                         f"and {b.shape}.")
    squared = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2.0 * (a @ b.T)
    cost = np.sqrt(np.maximum(squared, 0.0))
    n, m = cost.shape
    acc = np.empty((n, m))
    acc[0] = np.cumsum(cost[0])
    for i in range(1, n):
        above = acc[i - 1]
        from_before = np.minimum(above, np.concatenate(([np.inf], above[:-1])))  # min(D[i-1, k], D[i-1, k-1])
        s = np.cumsum(cost[i])
        s_before = np.concatenate(([0.0], s[:-1]))
        acc[i] = s + np.minimum.accumulate(from_before - s_before)
    ia, ib = [n - 1], [m - 1]
    i, j = n - 1, m - 1
    while i > 0 or j > 0:
        if i == 0:
            j -= 1
        elif j == 0:
            i -= 1
        else:
            steps = (acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
            k = int(np.argmin(steps))  # the diagonal first on a tie
            i, j = (i - 1, j - 1) if k == 0 else (i - 1, j) if k == 1 else (i, j - 1)
        ia.append(i)
        ib.append(j)
    return np.asarray(ia[::-1]), np.asarray(ib[::-1]), float(acc[-1, -1])


@dataclasses.dataclass(frozen=True)
class MCDResult:
    """One MCD.

    Attributes:
        mcd: dB, the mean over the aligned frame pairs.
        frames: the frames of the two waveforms ``(synthesized, reference)``.
        path_length: aligned frame pairs.
    """

    mcd: float
    frames: tuple[int, int]
    path_length: int


def mel_cepstral_distortion(synthesized, reference, sample_rate: int) -> MCDResult:
    """The MCD of ``synthesized`` against ``reference`` (the module docstring gives the definition).

    Args:
        synthesized: ``(samples,)`` waveform at ``sample_rate``.
        reference: ``(samples,)`` waveform at ``sample_rate``.
        sample_rate: Hz (chooses the order and all-pass constant: :func:`mel_cepstrum_settings`).

    Returns:
        MCDResult: 0.0 for two equal waveforms (or one a scaled copy of the other).

    Raises:
        ValueError: naming the waveform that is silent, too short, not 1-D or not finite.
    """
    settings = mel_cepstrum_settings(sample_rate)
    a = mel_cepstrum(synthesized, settings, "the synthesized waveform")[:, 1:]
    b = mel_cepstrum(reference, settings, "the reference waveform")[:, 1:]
    ia, ib, _ = dtw_path(a, b)
    distances = np.sqrt(np.sum((a[ia] - b[ib]) ** 2, axis=1))
    return MCDResult(float(MCD_CONSTANT * np.mean(distances)), (len(a), len(b)), int(len(ia)))
