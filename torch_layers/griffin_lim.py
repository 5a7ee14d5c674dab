"""Torch Griffin-Lim and spectrogram inversion: batched twins of :mod:`speechblocks.audio`'s numpy reference.

The STFT is librosa 0.6-0.8's as the originals called it: ``center=True`` (``n_fft // 2`` samples of padding
on both sides, ``"reflect"`` as numpy's ``np.pad`` -- repeated reflection for short signals -- or
``"constant"``), a periodic Hann window of ``win_size`` samples zero-padded (centred) to ``n_fft``,
``1 + n_fft // 2`` bins. The inverse is ``librosa.istft`` with ``length=None``: overlap-add of the windowed
inverse FFTs, divided by the window's sum of squares where it exceeds float32's ``tiny``, ``n_fft // 2``
samples cut at both ends. The window envelope is computed once per call, the frames of the whole batch go
through one ``rfft`` / ``irfft``.

The phase update ``exp(1j * angle(X))`` is ``torch.sgn(X) = X / |X|`` (an exact zero bin gets phase 1, as
``np.angle(0) = 0``).
"""
from __future__ import annotations

import math
from typing import Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from speechblocks.audio import AudioHParams, audio_hparams, inv_mel_basis

__all__ = ["griffin_lim", "inv_mel_spectrogram", "inv_linear_spectrogram", "inv_preemphasis", "stft", "istft"]

_TINY32 = float(np.finfo(np.float32).tiny)  # librosa's util.tiny of its float32 window sum
_PAD_MODES = ("reflect", "constant")


def _hann(win_size: int, n_fft: int) -> np.ndarray:
    """float64 periodic Hann of ``win_size`` zero-padded, centred (left pad ``(n_fft - win_size) // 2``)."""
    w = np.zeros(n_fft)
    left = (n_fft - win_size) // 2
    w[left:left + win_size] = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(win_size) / win_size)
    return w


def _check_sizes(fn: str, n_fft, hop_size, win_size, pad_mode) -> None:
    for name, v in (("n_fft", n_fft), ("hop_size", hop_size), ("win_size", win_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{fn}: `{name}` must be an integer >= 1; got {v!r}.")
    if win_size > n_fft:
        raise ValueError(f"{fn}: `win_size` ({win_size}) must not exceed `n_fft` ({n_fft}).")
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"{fn}: `pad_mode` must be one of {list(_PAD_MODES)}; got {pad_mode!r}.")


def _real_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype in (torch.float64, torch.complex128) else torch.float32


def _pad(y: torch.Tensor, pad: int, pad_mode: str) -> torch.Tensor:
    """``np.pad(y, pad, mode=pad_mode)`` along the last axis (numpy's reflect repeats when the pad is
    longer than ``y``)."""
    n = y.shape[-1]
    if pad_mode == "constant":
        return F.pad(y, (pad, pad))
    if pad < n:
        return F.pad(y, (pad, pad), mode="reflect")
    period = max(2 * (n - 1), 1)
    idx = torch.arange(-pad, n + pad, device=y.device).abs() % period
    idx = torch.where(idx >= n, period - idx, idx)
    return y.index_select(-1, idx)


def _stft(y: torch.Tensor, window: torch.Tensor, n_fft: int, hop: int, pad_mode: str) -> torch.Tensor:
    """``(batch, samples)`` -> complex ``(batch, frames, num_freq)``."""
    frames = _pad(y, n_fft // 2, pad_mode).unfold(-1, n_fft, hop)
    return torch.fft.rfft(frames * window, dim=-1)


def _overlap_add(frames: torch.Tensor, hop: int) -> torch.Tensor:
    """``(batch, T, n_fft)`` placed every ``hop`` samples and summed: ``(batch, n_fft + hop * (T - 1))``.

    ``ceil(n_fft / hop)`` strided additions of whole ``(batch, T, hop)`` slabs (far faster than ``F.fold`` on
    CPU).
    """
    batch, n_frames, n_fft = frames.shape
    chunks = -(-n_fft // hop)
    if chunks * hop != n_fft:
        frames = F.pad(frames, (0, chunks * hop - n_fft))
    slabs = frames.reshape(batch, n_frames, chunks, hop)
    out = frames.new_zeros(batch, n_frames + chunks - 1, hop)
    for j in range(chunks):
        out[:, j:j + n_frames] += slabs[:, :, j]
    return out.reshape(batch, -1)[:, :n_fft + hop * (n_frames - 1)]


def _envelope(window: torch.Tensor, n_frames: int, hop: int) -> torch.Tensor:
    """The window's sum of squares over ``n_frames`` frames, trimmed as the output, with 1 where librosa
    leaves the samples undivided (sum <= float32 tiny)."""
    n_fft = window.shape[0]
    wss = _overlap_add((window * window).expand(1, n_frames, n_fft), hop)[0]
    wss = torch.where(wss > _TINY32, wss, torch.ones_like(wss))
    half = n_fft // 2
    return wss[half:wss.shape[0] - half]


def _istft(spec: torch.Tensor, window: torch.Tensor, envelope: torch.Tensor, n_fft: int,
           hop: int) -> torch.Tensor:
    """complex ``(batch, frames, num_freq)`` -> ``(batch, hop * (frames - 1))`` (even ``n_fft``)."""
    y = _overlap_add(torch.fft.irfft(spec, n=n_fft, dim=-1) * window, hop)
    half = n_fft // 2
    return y[:, half:y.shape[1] - half] / envelope


def stft(wav: torch.Tensor, *, n_fft: int, hop_size: int, win_size: int,
         pad_mode: str = "reflect") -> torch.Tensor:
    """librosa 0.6-0.8's ``stft(wav, n_fft, hop_length=hop_size, win_length=win_size, pad_mode=pad_mode)``.

    Args:
        wav: ``(batch, samples)`` or ``(samples,)`` float waveform.
        n_fft, hop_size, win_size: FFT size, hop and Hann window length (``win_size <= n_fft``).
        pad_mode: ``"reflect"`` (RTVC: librosa's old default) or ``"constant"`` (Rayhane).

    Returns:
        Tensor: complex ``(batch, 1 + n_fft // 2, frames)`` (or ``(1 + n_fft // 2, frames)``),
        ``frames = 1 + samples // hop_size`` -- librosa's layout.
    """
    _check_sizes("stft", n_fft, hop_size, win_size, pad_mode)
    if not isinstance(wav, torch.Tensor) or not wav.is_floating_point() or wav.dim() not in (1, 2):
        raise ValueError(f"stft: `wav` must be a float tensor of shape (batch, samples) or (samples,); got "
                         f"{getattr(wav, 'shape', type(wav).__name__)}.")
    y = wav if wav.dim() == 2 else wav.unsqueeze(0)
    window = torch.as_tensor(_hann(win_size, n_fft), dtype=_real_dtype(y), device=y.device)
    out = _stft(y.to(window.dtype), window, n_fft, hop_size, pad_mode).transpose(1, 2)
    return out if wav.dim() == 2 else out[0]


def istft(spec: torch.Tensor, *, n_fft: int, hop_size: int, win_size: int) -> torch.Tensor:
    """``librosa.istft(spec, hop_length=hop_size, win_length=win_size)`` (``n_fft = 2 * (num_freq - 1)``).

    Args:
        spec: complex ``(batch, 1 + n_fft // 2, frames)`` or ``(1 + n_fft // 2, frames)``.
        n_fft, hop_size, win_size: as :func:`stft` (``n_fft`` even).

    Returns:
        Tensor: ``(batch, hop_size * (frames - 1))`` (or unbatched), float64 for complex128 else float32.
    """
    _check_sizes("istft", n_fft, hop_size, win_size, "constant")
    num_freq = 1 + n_fft // 2
    if (not isinstance(spec, torch.Tensor) or not spec.is_complex() or spec.dim() not in (2, 3)
            or spec.shape[-2] != num_freq or n_fft % 2):
        raise ValueError(f"istft: `spec` must be a complex tensor of shape (batch, {num_freq}, frames) or "
                         f"({num_freq}, frames) with an even n_fft; got {getattr(spec, 'shape', spec)!r}.")
    s = spec if spec.dim() == 3 else spec.unsqueeze(0)
    window = torch.as_tensor(_hann(win_size, n_fft), dtype=_real_dtype(s), device=s.device)
    y = _istft(s.transpose(1, 2), window, _envelope(window, s.shape[2], hop_size), n_fft, hop_size)
    return y if spec.dim() == 3 else y[0]


def inv_preemphasis(wav: torch.Tensor, k: float) -> torch.Tensor:
    """Inverse pre-emphasis ``y[n] = x[n] + k y[n-1]`` (``scipy.signal.lfilter([1], [1, -k], wav)``) along the
    last axis.

    An exact parallel scan of the first-order recurrence (no loop over samples): ``ceil(log2(samples))`` steps
    ``y[n] += k ** d * y[n - d]`` for ``d = 1, 2, 4, ...``; after the step with ``d`` each ``y[n]`` holds
    ``sum_{j < 2d} k ** j x[n - j]``. Every coefficient is ``<= 1`` (``0 <= k < 1``), so the rounding stays at
    a few float32 ulps of ``sum_j k ** j |x[n - j]|`` (pairwise summation), below sequential filtering's.

    Args:
        wav: ``(..., samples)`` float waveform.
        k: the pre-emphasis coefficient (``preemphasis``, ``0 <= k < 1``).

    Returns:
        Tensor: same shape and dtype as ``wav``.
    """
    if not isinstance(wav, torch.Tensor) or not wav.is_floating_point() or wav.dim() < 1:
        raise ValueError(f"inv_preemphasis: `wav` must be a float tensor of shape (..., samples); got "
                         f"{getattr(wav, 'shape', type(wav).__name__)}.")
    k = float(k)
    if not (0.0 <= k < 1.0):
        raise ValueError(f"inv_preemphasis: `k` must lie in [0, 1); got {k!r}.")
    y = wav
    n = y.shape[-1]
    d = 1
    while d < n:
        c = k ** d
        if c == 0.0:
            break
        y = y + c * F.pad(y[..., :n - d], (d, 0))
        d *= 2
    return y


def _check_spectrogram(x, fn: str, name: str, channels: int) -> torch.Tensor:
    """A finite float ``(batch, frames, channels)`` view (adds the batch axis to ``(frames, channels)``)."""
    doc = f"(batch, frames, {channels}) or (frames, {channels})"
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"{fn}: argument `{name}` must be a float tensor of shape {doc}; got "
                         f"{getattr(x, 'dtype', type(x).__name__)}.")
    if x.dim() not in (2, 3) or x.shape[-1] != channels or x.shape[-2] < 2:
        raise ValueError(f"{fn}: argument `{name}` must have shape {doc} with at least 2 frames; got shape "
                         f"{list(x.shape)}.")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{fn}: argument `{name}` holds NaN or inf values; Griffin-Lim needs finite input.")
    x = x if x.dim() == 3 else x.unsqueeze(0)
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _check_n_iter(n_iter, fn: str) -> int:
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or int(n_iter) < 0:
        raise ValueError(f"{fn}: `n_iter` must be an integer >= 0; got {n_iter!r}.")
    return int(n_iter)


def _initial_angles(angles, generator, shape: tuple, dtype: torch.dtype, device, fn: str) -> torch.Tensor:
    """Initial phases ``(batch, frames, num_freq)`` (complex) from the original's layout
    ``(.., num_freq, frames)``."""
    batch, frames, num_freq = shape
    if angles is None:
        rand = torch.rand((batch, num_freq, frames), generator=generator, dtype=dtype, device=device)
        a = torch.polar(torch.ones_like(rand), (2.0 * math.pi) * rand)
    else:
        if not isinstance(angles, torch.Tensor):
            angles = torch.as_tensor(np.asarray(angles))
        ok = (angles.dim() == 2 and tuple(angles.shape) == (num_freq, frames)) or (
            angles.dim() == 3 and tuple(angles.shape) == (batch, num_freq, frames))
        if not ok or not (angles.is_complex() or angles.is_floating_point()):
            raise ValueError(f"{fn}: `angles` must be a complex tensor of shape (batch, num_freq, frames) = "
                             f"({batch}, {num_freq}, {frames}) or ({num_freq}, {frames}); got "
                             f"{list(angles.shape)} of dtype {angles.dtype}.")
        if not bool(torch.isfinite(torch.view_as_real(angles) if angles.is_complex() else angles).all()):
            raise ValueError(f"{fn}: `angles` holds NaN or inf values.")
        cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        a = angles.to(device=device, dtype=cdtype).expand(batch, num_freq, frames)
    return a.transpose(1, 2)


def _griffin_lim(S: torch.Tensor, n_fft: int, hop: int, win_size: int, n_iter: int, angles, generator,
                 pad_mode: str, fn: str) -> torch.Tensor:
    """``S``: finite float ``(batch, frames, num_freq)`` -> ``(batch, hop * (frames - 1))``."""
    S = S.abs()
    a = _initial_angles(angles, generator, tuple(S.shape), S.dtype, S.device, fn)
    window = torch.as_tensor(_hann(win_size, n_fft), dtype=S.dtype, device=S.device)
    envelope = _envelope(window, S.shape[1], hop)
    S_complex = S.to(a.dtype)
    y = _istft(S_complex * a, window, envelope, n_fft, hop)
    for _ in range(n_iter):
        phase = torch.sgn(_stft(y, window, n_fft, hop, pad_mode))  # X / |X|, 0 where X == 0
        # S * exp(1j * angle(X)); an exact zero bin gets phase 1 (np.angle(0) = 0)
        spec = torch.where(phase == 0, S_complex, phase * S)
        y = _istft(spec, window, envelope, n_fft, hop)
    return y


def griffin_lim(magnitudes: torch.Tensor, *, n_fft: int, hop_size: int, win_size: int, n_iter: int = 60,
                angles: Optional[torch.Tensor] = None, generator: Optional[torch.Generator] = None,
                pad_mode: str = "reflect") -> torch.Tensor:
    """The originals' ``_griffin_lim`` (after librosa issue #434), batched.

    ``y = istft(S * angles)``; ``n_iter`` times ``angles = exp(1j * angle(stft(y)))``,
    ``y = istft(S * angles)``, with librosa 0.6-0.8's STFT (see the module docstring). Equals
    :func:`speechblocks.audio.griffin_lim` given the same ``angles`` (float64: to ~1e-13 of the peak; float32:
    to 5e-5 of the peak after 60 iterations, measured in ``tests/helpers/griffin_lim_cases.py``).

    Args:
        magnitudes: ``(batch, frames, 1 + n_fft // 2)`` or ``(frames, 1 + n_fft // 2)`` linear magnitudes
            (already raised to ``power`` if wanted; ``abs`` is taken as the original), finite, at least 2
            frames. float32 or float64 (computed in that precision; float16/bfloat16 in float32).
        n_fft: FFT size (even).
        hop_size: hop between frames.
        win_size: Hann window length, ``<= n_fft`` (zero-padded, centred, to ``n_fft``).
        n_iter: Griffin-Lim iterations, ``>= 0``.
        angles: initial complex phases in the original's layout, ``(batch, 1 + n_fft // 2, frames)`` or
            ``(1 + n_fft // 2, frames)`` (shared by the batch); default ``exp(2j * pi * rand)`` drawn with
            ``torch.rand(..., generator=generator)``.
        generator: random generator for the initial phases (with ``angles=None``).
        pad_mode: STFT centre padding: ``"reflect"`` (RTVC) or ``"constant"`` (Rayhane).

    Returns:
        Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input), in the
        magnitudes' float dtype.

    Raises:
        ValueError: naming ``magnitudes`` (dtype, shape ``(batch, frames, 1 + n_fft // 2)``, NaN/inf),
            ``angles`` (shape, NaN/inf), ``n_iter`` (< 0), the sizes or ``pad_mode``.
    """
    fn = "griffin_lim"
    _check_sizes(fn, n_fft, hop_size, win_size, pad_mode)
    if n_fft % 2:
        raise ValueError(f"{fn}: `n_fft` must be even (istft infers it from 1 + n_fft // 2 bins); "
                         f"got {n_fft}.")
    n_iter = _check_n_iter(n_iter, fn)
    S = _check_spectrogram(magnitudes, fn, "magnitudes", 1 + n_fft // 2)
    y = _griffin_lim(S, n_fft, hop_size, win_size, n_iter, angles, generator, pad_mode, fn)
    return y if magnitudes.dim() == 3 else y[0]


def _hparams(hparams) -> AudioHParams:
    return hparams if isinstance(hparams, AudioHParams) else audio_hparams(hparams)


def _to_amplitude(x: torch.Tensor, hp: AudioHParams) -> torch.Tensor:
    """The originals' ``_denormalize`` (when ``signal_normalization``), ``_db_to_amp(D + ref_level_db)`` and
    Rayhane's ``** (1 / magnitude_power)``."""
    if hp.signal_normalization:
        m, lo = hp.max_abs_value, hp.min_level_db
        if hp.allow_clipping_in_normalization:
            x = x.clamp(-m, m) if hp.symmetric_mels else x.clamp(0.0, m)
        x = ((x + m) * -lo / (2 * m)) + lo if hp.symmetric_mels else (x * -lo / m) + lo
    amp = torch.pow(10.0, (x + hp.ref_level_db) * 0.05)
    return amp if hp.magnitude_power == 1.0 else amp ** (1.0 / hp.magnitude_power)


def _invert(linear_amp: torch.Tensor, hp: AudioHParams, n_iter, angles, generator, fn: str) -> torch.Tensor:
    n = hp.griffin_lim_iters if n_iter is None else _check_n_iter(n_iter, fn)
    y = _griffin_lim(linear_amp ** hp.power, hp.n_fft, hp.hop_size, hp.win_size, n, angles, generator,
                     hp.stft_pad_mode, fn)
    return inv_preemphasis(y, hp.preemphasis) if hp.preemphasize else y


def inv_mel_spectrogram(mel: torch.Tensor, hparams: Union[str, dict, AudioHParams] = "rtvc",
                        n_iter: Optional[int] = None, angles: Optional[torch.Tensor] = None,
                        generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The originals' ``inv_mel_spectrogram`` (Griffin-Lim branch), batched: a mel spectrogram to a waveform.

    ``denormalize`` (when ``signal_normalization``), ``10 ** ((D + ref_level_db) * 0.05) ** (1 /
    magnitude_power)`` (RTVC: power 1), ``max(1e-10, mel @ inv_mel_basis.T)``, ``** power``,
    :func:`griffin_lim` with the preset's sizes and pad mode, then :func:`inv_preemphasis` when
    ``preemphasize``. Twin of :func:`speechblocks.audio.inv_mel_spectrogram` (same ``inv_mel_basis``).

    Args:
        mel: ``(batch, frames, num_mels)`` or ``(frames, num_mels)`` float mel spectrogram as
            :func:`speechblocks.audio.melspectrogram` returns it (or the model predicts it), finite.
        hparams: preset name (``"rtvc"``, ``"rayhane"``), mapping of original names or
            :class:`speechblocks.audio.AudioHParams`.
        n_iter: Griffin-Lim iterations; default ``griffin_lim_iters``.
        angles: initial phases ``(batch, num_freq, frames)`` or ``(num_freq, frames)``, as
            :func:`griffin_lim`.
        generator: random generator for the initial phases (with ``angles=None``).

    Returns:
        Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input), in the
        mel's float dtype.

    Raises:
        ValueError: naming ``mel`` (shape ``(batch, frames, num_mels)``, NaN/inf), ``angles`` or ``n_iter``.
    """
    fn = "inv_mel_spectrogram"
    hp = _hparams(hparams)
    m = _check_spectrogram(mel, fn, "mel", hp.num_mels)
    basis = torch.tensor(np.array(inv_mel_basis(hp)), dtype=m.dtype, device=m.device)
    S = torch.clamp_min(torch.matmul(_to_amplitude(m, hp), basis.T), 1e-10)
    y = _invert(S, hp, n_iter, angles, generator, fn)
    return y if mel.dim() == 3 else y[0]


def inv_linear_spectrogram(linear: torch.Tensor, hparams: Union[str, dict, AudioHParams] = "rtvc",
                           n_iter: Optional[int] = None, angles: Optional[torch.Tensor] = None,
                           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The originals' ``inv_linear_spectrogram`` (Griffin-Lim branch), batched: :func:`inv_mel_spectrogram`
    without the mel step. Twin of :func:`speechblocks.audio.inv_linear_spectrogram`.

    Args:
        linear: ``(batch, frames, num_freq)`` or ``(frames, num_freq)`` float linear spectrogram as
            :func:`speechblocks.audio.linearspectrogram` returns it, finite.
        hparams: preset name, mapping of original names or :class:`speechblocks.audio.AudioHParams`.
        n_iter, angles, generator: as :func:`inv_mel_spectrogram`.

    Returns:
        Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input).

    Raises:
        ValueError: naming ``linear`` (shape ``(batch, frames, num_freq)``, NaN/inf), ``angles`` or
            ``n_iter``.
    """
    fn = "inv_linear_spectrogram"
    hp = _hparams(hparams)
    s = _check_spectrogram(linear, fn, "linear", hp.num_freq)
    y = _invert(_to_amplitude(s, hp), hp, n_iter, angles, generator, fn)
    return y if linear.dim() == 3 else y[0]
