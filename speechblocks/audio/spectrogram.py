"""The originals' STFT, mel basis, dB scale and normalisation, and the mel / linear spectrograms.

The STFT is librosa 0.6-0.8's, written out in numpy: ``center=True`` (the signal padded by ``n_fft // 2`` on
both sides with ``hparams.stft_pad_mode``: ``"reflect"`` for RTVC, which relied on that librosa default,
``"constant"`` for Rayhane, which passes it), a periodic Hann window of ``win_size`` samples zero-padded (centred)
to ``n_fft``, ``hop_size`` between frames, ``1 + n_fft // 2`` bins. The inverse is ``librosa.istft`` with the
same window and hop and ``length=None`` (window-sum-square normalised, ``n_fft // 2`` samples cut at both ends).

The spectrograms (every function takes a preset name, a mapping of original names or an :class:`AudioHParams`):

* RTVC: ``S = amp_to_db(mel_basis @ |stft(preemphasis(wav))|) - ref_level_db`` -- the amplitude (its
  ``magnitude_power`` is 1.0), pre-emphasis applied inside (``preemphasis_in_spectrogram=True``).
* Rayhane: ``S = amp_to_db(mel_basis @ |stft(wav)| ** magnitude_power) - ref_level_db`` (power 2.0), no
  pre-emphasis inside: Rayhane's preprocessor hands in the pre-emphasised, rescaled waveform
  (``preemphasis_in_spectrogram=False``). :func:`speechblocks.audio.recording_features` runs each preset's whole
  order from a file.
* then ``normalize(S)`` when ``signal_normalization``.

The originals return ``(channels, frames)`` and their preprocessors save the transpose; these functions return
``(frames, channels)`` float32 directly. scipy (fft, signal) and librosa (the mel basis) are imported inside the
functions.
"""
from __future__ import annotations

import functools

import numpy as np

from .io import _waveform, preemphasis
from .params import AudioHParams, as_audio_hparams

__all__ = ["stft", "istft", "mel_basis", "inv_mel_basis", "amp_to_db", "db_to_amp", "normalize", "denormalize",
           "melspectrogram", "linearspectrogram"]

_BLOCK_FRAMES = 4096  # frames per FFT block in the spectrograms (bounds the complex intermediate)
_TINY32 = float(np.finfo(np.float32).tiny)  # librosa's util.tiny of its float32 window sum


@functools.lru_cache(maxsize=16)
def _window(win_size: int, n_fft: int) -> np.ndarray:
    """Periodic Hann of ``win_size`` zero-padded (centred, left pad ``(n_fft - win_size) // 2``) to ``n_fft``."""
    from scipy.signal import get_window

    w = np.zeros(n_fft)
    left = (n_fft - win_size) // 2
    w[left:left + win_size] = get_window("hann", win_size, fftbins=True)
    w.setflags(write=False)
    return w


def _frames(x: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """Read-only ``(frames, n_fft)`` view of ``x`` framed every ``hop`` samples."""
    n = 1 + (x.size - n_fft) // hop
    return np.lib.stride_tricks.as_strided(x, (n, n_fft), (hop * x.strides[0], x.strides[0]), writeable=False)


def _padded(wav: np.ndarray, hp: AudioHParams) -> np.ndarray:
    return np.pad(wav, hp.n_fft // 2, mode=hp.stft_pad_mode)


def stft(wav, hparams="rtvc") -> np.ndarray:
    """The originals' ``_stft`` (``librosa.stft`` of librosa 0.6-0.8 with the preset's pad mode).

    Args:
        wav: ``(samples,)`` float waveform (float32 is transformed in single precision, else in double).
        hparams: preset name, mapping or :class:`AudioHParams` (``n_fft``, ``hop_size``, ``win_size``,
            ``stft_pad_mode``).

    Returns:
        np.ndarray: complex ``(num_freq, frames)`` with ``frames = 1 + len(wav) // hop_size``.
    """
    import scipy.fft

    hp = as_audio_hparams(hparams)
    w = _waveform(wav, "stft: `wav`")
    dtype = np.float32 if w.dtype == np.float32 else np.float64
    frames = _frames(_padded(w.astype(dtype, copy=False), hp), hp.n_fft, hp.hop_size)
    return scipy.fft.rfft(frames * _window(hp.win_size, hp.n_fft).astype(dtype), axis=1).T


def _overlap_add(frames: np.ndarray, hop: int) -> np.ndarray:
    """Sum of ``(T, n_fft)`` frames placed every ``hop`` samples: ``(n_fft + hop * (T - 1),)``."""
    n_frames, n_fft = frames.shape
    chunks = -(-n_fft // hop)
    padded = np.zeros((n_frames, chunks * hop), dtype=frames.dtype)
    padded[:, :n_fft] = frames
    out = np.zeros((n_frames + chunks - 1, hop), dtype=frames.dtype)
    for j in range(chunks):
        out[j:j + n_frames] += padded[:, j * hop:(j + 1) * hop]
    return out.reshape(-1)[:n_fft + hop * (n_frames - 1)]


def istft(spec, hparams="rtvc") -> np.ndarray:
    """The originals' ``_istft`` (``librosa.istft(spec, hop_length=hop_size, win_length=win_size)``).

    Args:
        spec: complex ``(num_freq, frames)``.
        hparams: preset name, mapping or :class:`AudioHParams`.

    Returns:
        np.ndarray: ``(hop_size * (frames - 1),)`` waveform, float64 (float32 for a complex64 ``spec``).

    Raises:
        ValueError: naming ``spec`` when it is not ``(num_freq, frames)``.
    """
    import scipy.fft

    hp = as_audio_hparams(hparams)
    s = np.asarray(spec)
    if s.ndim != 2 or s.shape[0] != hp.num_freq or s.shape[1] < 1:
        raise ValueError(f"istft: `spec` must have shape (num_freq, frames) = ({hp.num_freq}, frames); "
                         f"got {s.shape}.")
    dtype = np.float32 if s.dtype == np.complex64 else np.float64
    window = _window(hp.win_size, hp.n_fft).astype(dtype)
    frames = scipy.fft.irfft(s.T, n=hp.n_fft, axis=1) * window
    y = _overlap_add(frames, hp.hop_size)
    wss = _overlap_add(np.broadcast_to(window * window, frames.shape), hp.hop_size)
    nonzero = wss > _TINY32
    y[nonzero] /= wss[nonzero]
    half = hp.n_fft // 2
    return y[half:y.size - half]


def _mel_key(hp: AudioHParams) -> tuple:
    return (hp.sample_rate, hp.n_fft, hp.num_mels, hp.fmin, hp.fmax)


@functools.lru_cache(maxsize=16)
def _mel_basis(sample_rate: int, n_fft: int, num_mels: int, fmin: float, fmax: float) -> np.ndarray:
    import librosa

    basis = librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=num_mels, fmin=fmin, fmax=fmax)
    basis.setflags(write=False)
    return basis


@functools.lru_cache(maxsize=16)
def _inv_mel_basis(*key) -> np.ndarray:
    inv = np.linalg.pinv(_mel_basis(*key))
    inv.setflags(write=False)
    return inv


def mel_basis(hparams="rtvc") -> np.ndarray:
    """The originals' mel filterbank: ``librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax)`` (Slaney mel scale and
    area normalisation, float32), cached per value and read-only.

    Args:
        hparams: preset name, mapping or :class:`AudioHParams`.

    Returns:
        np.ndarray: float32 ``(num_mels, num_freq)``.

    Raises:
        ValueError: naming ``fmax`` when it exceeds ``sample_rate // 2`` (the originals' assertion).
    """
    return _mel_basis(*_mel_key(as_audio_hparams(hparams)))


def inv_mel_basis(hparams="rtvc") -> np.ndarray:
    """``np.linalg.pinv(mel_basis(hparams))`` as the originals' ``_mel_to_linear`` (float32, cached, read-only).

    Returns:
        np.ndarray: float32 ``(num_freq, num_mels)``.
    """
    return _inv_mel_basis(*_mel_key(as_audio_hparams(hparams)))


def amp_to_db(x, hparams="rtvc") -> np.ndarray:
    """``20 log10(max(10 ** (min_level_db / 20), x))`` as the originals' ``_amp_to_db`` (any shape)."""
    hp = as_audio_hparams(hparams)
    min_level = np.exp(hp.min_level_db / 20 * np.log(10))
    return 20 * np.log10(np.maximum(min_level, x))


def db_to_amp(x) -> np.ndarray:
    """``10 ** (x / 20)`` as the originals' ``_db_to_amp`` (``np.power(10.0, x * 0.05)``, any shape)."""
    return np.power(10.0, np.asarray(x) * 0.05)


def normalize(S, hparams="rtvc") -> np.ndarray:
    """The originals' ``_normalize``: dB (``[min_level_db, 0]``) to ``[-max_abs_value, max_abs_value]``
    (``symmetric_mels``) or ``[0, max_abs_value]``, clipped when ``allow_clipping_in_normalization``.

    Args:
        S: dB values relative to ``ref_level_db``, any shape.
        hparams: preset name, mapping or :class:`AudioHParams`.

    Raises:
        ValueError: without clipping, when ``S`` leaves ``[min_level_db, 0]`` (the original's assertion).
    """
    hp = as_audio_hparams(hparams)
    S = np.asarray(S)
    m, lo = hp.max_abs_value, hp.min_level_db
    if hp.allow_clipping_in_normalization:
        if hp.symmetric_mels:
            return np.clip((2 * m) * ((S - lo) / (-lo)) - m, -m, m)
        return np.clip(m * ((S - lo) / (-lo)), 0, m)
    if not (S.max() <= 0 and S.min() - lo >= 0):
        raise ValueError(f"normalize: without `allow_clipping_in_normalization` the dB values must lie in "
                         f"[min_level_db, 0] = [{lo}, 0]; got [{S.min()}, {S.max()}].")
    if hp.symmetric_mels:
        return (2 * m) * ((S - lo) / (-lo)) - m
    return m * ((S - lo) / (-lo))


def denormalize(D, hparams="rtvc") -> np.ndarray:
    """The originals' ``_denormalize``, the inverse of :func:`normalize` (``D`` clipped to the normalised range
    first when ``allow_clipping_in_normalization``); any shape."""
    hp = as_audio_hparams(hparams)
    D = np.asarray(D)
    m, lo = hp.max_abs_value, hp.min_level_db
    if hp.allow_clipping_in_normalization:
        if hp.symmetric_mels:
            return ((np.clip(D, -m, m) + m) * -lo / (2 * m)) + lo
        return (np.clip(D, 0, m) * -lo / m) + lo
    if hp.symmetric_mels:
        return ((D + m) * -lo / (2 * m)) + lo
    return (D * -lo / m) + lo


def _check_input(wav, hp: AudioHParams, name: str) -> np.ndarray:
    w = _waveform(wav, name, min_length=hp.win_size)
    if not np.any(w):
        raise ValueError(f"{name} is silent (every sample is 0).")
    return w


def _finish(S: np.ndarray, hp: AudioHParams) -> np.ndarray:
    S = amp_to_db(S, hp) - hp.ref_level_db
    if hp.signal_normalization:
        S = normalize(S, hp)
    return np.ascontiguousarray(S, dtype=np.float32)


def spectrograms(wav, hparams="rtvc", *, mel: bool = True, linear: bool = True, name: str = "`wav`") -> dict:
    """Mel and linear spectrograms of one waveform from one STFT (what :func:`melspectrogram` and
    :func:`linearspectrogram` return), computed in blocks of frames to bound memory.

    Args:
        wav: ``(samples,)`` float waveform at ``sample_rate``, at least ``win_size`` samples, not all zero. RTVC
            (``preemphasis_in_spectrogram``): the plain waveform; Rayhane: the pre-emphasised one.
        hparams: preset name, mapping or :class:`AudioHParams`.
        mel, linear: which to compute.
        name: how error messages name the input (e.g. a file path).

    Returns:
        dict: ``"mel"`` float32 ``(frames, num_mels)`` and/or ``"linear"`` float32 ``(frames, num_freq)``,
        ``frames = 1 + len(wav) // hop_size``.

    Raises:
        ValueError: naming the input when it is not 1-D, holds NaN/inf, is shorter than ``win_size`` or silent.
    """
    import scipy.fft

    hp = as_audio_hparams(hparams)
    w = _check_input(wav, hp, name)
    if hp.preemphasis_in_spectrogram and hp.preemphasize:
        w = preemphasis(w, hp.preemphasis)
    frames = _frames(_padded(w.astype(np.float64, copy=False), hp), hp.n_fft, hp.hop_size)
    window = _window(hp.win_size, hp.n_fft)
    basis_t = mel_basis(hp).T if mel else None
    mels, linears = [], []
    for start in range(0, frames.shape[0], _BLOCK_FRAMES):
        spec = scipy.fft.rfft(frames[start:start + _BLOCK_FRAMES] * window, axis=1)
        if hp.magnitude_power == 2.0:
            mag = spec.real * spec.real + spec.imag * spec.imag
        else:
            mag = np.abs(spec)
            if hp.magnitude_power != 1.0:
                mag **= hp.magnitude_power
        if mel:
            mels.append(_finish(mag @ basis_t, hp))
        if linear:
            linears.append(_finish(mag, hp))
    out = {}
    if mel:
        out["mel"] = np.concatenate(mels)
    if linear:
        out["linear"] = np.concatenate(linears)
    return out


def melspectrogram(wav, hparams="rtvc") -> np.ndarray:
    """The originals' ``melspectrogram``, transposed.

    Args:
        wav: ``(samples,)`` float waveform at ``sample_rate``, at least ``win_size`` samples, not all zero. With
            RTVC's hparams the plain waveform (pre-emphasised here); with Rayhane's the waveform as its
            preprocessor hands it in, already pre-emphasised and rescaled (see :func:`recording_features`).
        hparams: preset name, mapping or :class:`AudioHParams`.

    Returns:
        np.ndarray: float32 ``(frames, num_mels)``, ``frames = 1 + len(wav) // hop_size`` (the original returns
        ``(num_mels, frames)``).

    Raises:
        ValueError: naming ``wav`` when it is not 1-D, holds NaN/inf, is shorter than ``win_size`` or silent.
    """
    return spectrograms(wav, hparams, linear=False, name="melspectrogram: `wav`")["mel"]


def linearspectrogram(wav, hparams="rtvc") -> np.ndarray:
    """The originals' ``linearspectrogram``, transposed (input as :func:`melspectrogram`).

    Returns:
        np.ndarray: float32 ``(frames, num_freq)`` (the original returns ``(num_freq, frames)``).
    """
    return spectrograms(wav, hparams, mel=False, name="linearspectrogram: `wav`")["linear"]
