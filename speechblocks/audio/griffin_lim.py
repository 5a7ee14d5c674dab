"""The originals' Griffin-Lim and spectrogram inversion: the numpy reference of the framework twins.

``griffin_lim`` is the originals' ``_griffin_lim`` loop (after librosa issue #434), computed in float64 with
this package's :func:`~speechblocks.audio.stft` / :func:`~speechblocks.audio.istft` (librosa 0.6-0.8's, with
the preset's pad mode), returned as float32. The initial phases are the original's draw
``exp(2j * pi * rand(num_freq, frames))``; ``angles=`` injects them, ``seed=`` draws them with
``np.random.default_rng(seed).random`` (the original used the global ``np.random.rand``), so a run equals the
original's given the same draw.
"""
from __future__ import annotations

import numpy as np

from .io import inv_preemphasis
from .params import AudioHParams, as_audio_hparams
from .spectrogram import db_to_amp, denormalize, inv_mel_basis, istft, stft

__all__ = ["griffin_lim", "inv_mel_spectrogram", "inv_linear_spectrogram"]


def _spectrogram_input(x, hp: AudioHParams, channels: int, what: str, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "fiu" or a.ndim != 2 or a.shape[1] != channels or a.shape[0] < 1:
        raise ValueError(f"{name} must be a float array of shape (frames, {channels}) ({what}); got shape "
                         f"{a.shape} of dtype {a.dtype}.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or inf values; Griffin-Lim needs finite {what}.")
    return a.astype(np.float64)


def _initial_angles(angles, seed, shape: tuple) -> np.ndarray:
    if angles is not None:
        a = np.asarray(angles)
        if a.shape != shape:
            raise ValueError(f"griffin_lim: `angles` must have shape (1 + n_fft // 2, frames) = {shape}; "
                             f"got {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise ValueError("griffin_lim: `angles` holds NaN or inf values.")
        return a.astype(np.complex128)
    rand = np.random.default_rng(seed).random(shape) if seed is not None else np.random.rand(*shape)
    return np.exp(2j * np.pi * rand)


def _iterations(n_iter, hp: AudioHParams) -> int:
    if n_iter is None:
        return hp.griffin_lim_iters
    if isinstance(n_iter, bool) or not hasattr(n_iter, "__index__") or int(n_iter) < 0:
        raise ValueError(f"griffin_lim: `n_iter` must be an integer >= 0; got {n_iter!r}.")
    return int(n_iter)


def _griffin_lim(S: np.ndarray, hp: AudioHParams, n_iter, angles, seed) -> np.ndarray:
    """``S``: float64 ``(num_freq, frames)`` magnitudes."""
    s_complex = np.abs(S).astype(np.complex128)
    a = _initial_angles(angles, seed, S.shape)
    y = istft(s_complex * a, hp)
    for _ in range(_iterations(n_iter, hp)):
        a = np.exp(1j * np.angle(stft(y, hp)))
        y = istft(s_complex * a, hp)
    return y


def griffin_lim(magnitudes, hparams="rtvc", n_iter: int | None = None, angles=None,
                seed: int | None = None) -> np.ndarray:
    """The originals' ``_griffin_lim``: phase reconstruction of a linear magnitude spectrogram.

    ``y = istft(S * angles)``; ``n_iter`` times ``angles = exp(1j * angle(stft(y)))``, ``y = istft(S * angles)``.

    Args:
        magnitudes: ``(frames, num_freq)`` linear magnitudes (already raised to ``power`` if wanted).
        hparams: preset name, mapping or :class:`AudioHParams` (STFT sizes, pad mode, ``griffin_lim_iters``).
        n_iter: iterations; default ``griffin_lim_iters``.
        angles: initial complex unit phases ``(1 + n_fft // 2, frames)`` as the original draws them
            (``np.exp(2j * np.pi * np.random.rand(num_freq, frames))``); default a fresh draw.
        seed: with ``angles=None``, draws them with ``np.random.default_rng(seed)`` (reproducible).

    Returns:
        np.ndarray: float32 ``(hop_size * (frames - 1),)`` waveform.

    Raises:
        ValueError: naming ``magnitudes`` (shape ``(frames, num_freq)`` expected, or NaN/inf) or ``angles``.
    """
    hp = as_audio_hparams(hparams)
    S = _spectrogram_input(magnitudes, hp, hp.num_freq, "magnitudes", "griffin_lim: `magnitudes`")
    return _griffin_lim(S.T, hp, n_iter, angles, seed).astype(np.float32)


def _invert(linear_amp: np.ndarray, hp: AudioHParams, n_iter, angles, seed) -> np.ndarray:
    """``linear_amp`` float64 ``(num_freq, frames)`` -> float32 waveform (power, Griffin-Lim, inverse
    pre-emphasis)."""
    y = _griffin_lim(linear_amp ** hp.power, hp, n_iter, angles, seed)
    if hp.preemphasize:
        y = inv_preemphasis(y, hp.preemphasis)
    if not np.all(np.isfinite(y)):  # cannot happen for finite input; never hand back a NaN waveform
        raise ValueError("griffin_lim: the reconstruction is not finite.")
    return y.astype(np.float32)


def _to_amplitude(x: np.ndarray, hp: AudioHParams) -> np.ndarray:
    D = denormalize(x, hp) if hp.signal_normalization else x
    return db_to_amp(D + hp.ref_level_db) ** (1 / hp.magnitude_power)


def inv_mel_spectrogram(mel, hparams="rtvc", n_iter: int | None = None, angles=None,
                        seed: int | None = None) -> np.ndarray:
    """The originals' ``inv_mel_spectrogram`` (Griffin-Lim branch): a mel spectrogram back to a waveform.

    ``denormalize`` (when ``signal_normalization``), ``db_to_amp(D + ref_level_db) ** (1 / magnitude_power)``
    (RTVC: power 1.0), ``max(1e-10, inv_mel_basis @ mel)``, ``** power``, Griffin-Lim, then
    ``inv_preemphasis`` when ``preemphasize``.

    Args:
        mel: ``(frames, num_mels)`` as :func:`melspectrogram` returns it (or the model predicts it).
        hparams: preset name, mapping or :class:`AudioHParams`.
        n_iter, angles, seed: as :func:`griffin_lim`.

    Returns:
        np.ndarray: float32 ``(hop_size * (frames - 1),)`` waveform.

    Raises:
        ValueError: naming ``mel`` when it is not ``(frames, num_mels)`` or holds NaN/inf.
    """
    hp = as_audio_hparams(hparams)
    m = _spectrogram_input(mel, hp, hp.num_mels, "mel spectrogram", "inv_mel_spectrogram: `mel`")
    S = np.maximum(1e-10, inv_mel_basis(hp) @ _to_amplitude(m.T, hp))
    return _invert(S, hp, n_iter, angles, seed)


def inv_linear_spectrogram(linear, hparams="rtvc", n_iter: int | None = None, angles=None,
                           seed: int | None = None) -> np.ndarray:
    """The originals' ``inv_linear_spectrogram`` (Griffin-Lim branch), as :func:`inv_mel_spectrogram` without
    the mel step.

    Args:
        linear: ``(frames, num_freq)`` as :func:`linearspectrogram` returns it.
        hparams: preset name, mapping or :class:`AudioHParams`.
        n_iter, angles, seed: as :func:`griffin_lim`.

    Returns:
        np.ndarray: float32 ``(hop_size * (frames - 1),)`` waveform.

    Raises:
        ValueError: naming ``linear`` when it is not ``(frames, num_freq)`` or holds NaN/inf.
    """
    hp = as_audio_hparams(hparams)
    s = _spectrogram_input(linear, hp, hp.num_freq, "linear spectrogram", "inv_linear_spectrogram: `linear`")
    return _invert(_to_amplitude(s.T, hp), hp, n_iter, angles, seed)
