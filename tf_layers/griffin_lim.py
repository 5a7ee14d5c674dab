"""TensorFlow Griffin-Lim and spectrogram inversion: batched twins of :mod:`speechblocks.audio`'s numpy
reference (and of :mod:`torch_layers.griffin_lim`).

``tf.signal.stft`` frames without centring and applies a ``frame_length`` window zero-padded at the end;
``tf.signal.inverse_stft`` normalises differently. So the STFT here is written with ``tf.signal.frame`` /
``rfft`` to equal librosa 0.6-0.8's as the originals called it: ``center=True`` (``n_fft // 2`` samples of
padding on both sides, ``"reflect"`` as numpy's ``np.pad`` -- repeated reflection for short signals -- or
``"constant"``), a periodic Hann window of ``win_size`` samples zero-padded (centred) to ``n_fft``,
``1 + n_fft // 2`` bins. The inverse is ``librosa.istft`` with ``length=None``: ``irfft``, window,
``tf.signal.overlap_and_add``, divided by the window's sum of squares where it exceeds float32's ``tiny``,
``n_fft // 2`` samples cut at both ends. The window envelope is computed once per call.

Everything runs eagerly and inside ``tf.function`` (unknown batch and frames; the iterations are a
``tf.while_loop``). Bad input raises ``ValueError`` naming the argument; inside a ``tf.function`` the checks
that need values (NaN/inf, and shapes unknown at trace time) raise ``tf.errors.InvalidArgumentError`` at run
time with the same message -- never a NaN waveform.
"""
from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

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
    if n_fft % 2:
        raise ValueError(f"{fn}: `n_fft` must be even (the inverse infers it from 1 + n_fft // 2 bins); "
                         f"got {n_fft}.")
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"{fn}: `pad_mode` must be one of {list(_PAD_MODES)}; got {pad_mode!r}.")


def _reflect_index(n, pad: int):
    """Indices of ``np.pad(x, pad, mode="reflect")`` into ``x`` of (dynamic) length ``n``."""
    period = tf.maximum(2 * (n - 1), 1)
    idx = tf.abs(tf.range(-pad, n + pad)) % period
    return tf.where(idx >= n, period - idx, idx)


def _pad(y, pad: int, pad_mode: str, index=None):
    """``np.pad(y, pad, mode=pad_mode)`` along the last axis of ``(batch, samples)``."""
    if pad_mode == "constant":
        return tf.pad(y, [[0, 0], [pad, pad]])
    if index is None:
        index = _reflect_index(tf.shape(y)[1], pad)
    return tf.gather(y, index, axis=1)


def _stft(y, window, n_fft: int, hop: int, pad_mode: str, index=None):
    """``(batch, samples)`` -> complex ``(batch, frames, num_freq)``."""
    frames = tf.signal.frame(_pad(y, n_fft // 2, pad_mode, index), n_fft, hop)
    return tf.signal.rfft(frames * window, fft_length=[n_fft])


def _envelope(window, n_frames, hop: int):
    """The window's sum of squares over ``n_frames`` frames, trimmed as the output, with 1 where librosa
    leaves the samples undivided (sum <= float32 tiny)."""
    n_fft = window.shape[0]
    wss = tf.signal.overlap_and_add(tf.tile((window * window)[tf.newaxis], [n_frames, 1]), hop)
    wss = tf.where(wss > _TINY32, wss, tf.ones_like(wss))
    half = n_fft // 2
    return wss[half:tf.shape(wss)[0] - half]


def _istft(spec, window, envelope, n_fft: int, hop: int):
    """complex ``(batch, frames, num_freq)`` -> ``(batch, hop * (frames - 1))``."""
    y = tf.signal.overlap_and_add(tf.signal.irfft(spec, fft_length=[n_fft]) * window, hop)
    half = n_fft // 2
    return y[:, half:tf.shape(y)[1] - half] / envelope


def _real_dtype(x) -> tf.DType:
    return tf.float64 if x.dtype in (tf.float64, tf.complex128) else tf.float32


def stft(wav, *, n_fft: int, hop_size: int, win_size: int, pad_mode: str = "reflect"):
    """librosa 0.6-0.8's ``stft(wav, n_fft, hop_length=hop_size, win_length=win_size, pad_mode=pad_mode)``.

    Args:
        wav: ``(batch, samples)`` or ``(samples,)`` float waveform.
        n_fft, hop_size, win_size: FFT size (even), hop and Hann window length (``win_size <= n_fft``).
        pad_mode: ``"reflect"`` (RTVC: librosa's old default) or ``"constant"`` (Rayhane).

    Returns:
        tf.Tensor: complex ``(batch, 1 + n_fft // 2, frames)`` (or ``(1 + n_fft // 2, frames)``),
        ``frames = 1 + samples // hop_size`` -- librosa's layout.
    """
    _check_sizes("stft", n_fft, hop_size, win_size, pad_mode)
    wav = tf.convert_to_tensor(wav)
    if not wav.dtype.is_floating or wav.shape.rank not in (1, 2):
        raise ValueError(f"stft: `wav` must be a float tensor of shape (batch, samples) or (samples,); got "
                         f"{wav.shape} of dtype {wav.dtype.name}.")
    dtype = _real_dtype(wav)
    y = tf.cast(wav if wav.shape.rank == 2 else wav[tf.newaxis], dtype)
    window = tf.constant(_hann(win_size, n_fft), dtype)
    out = tf.transpose(_stft(y, window, n_fft, hop_size, pad_mode), [0, 2, 1])
    return out if wav.shape.rank == 2 else out[0]


def istft(spec, *, n_fft: int, hop_size: int, win_size: int):
    """``librosa.istft(spec, hop_length=hop_size, win_length=win_size)``.

    Args:
        spec: complex ``(batch, 1 + n_fft // 2, frames)`` or ``(1 + n_fft // 2, frames)``.
        n_fft, hop_size, win_size: as :func:`stft`.

    Returns:
        tf.Tensor: ``(batch, hop_size * (frames - 1))`` (or unbatched), float64 for complex128 else float32.
    """
    _check_sizes("istft", n_fft, hop_size, win_size, "constant")
    spec = tf.convert_to_tensor(spec)
    num_freq = 1 + n_fft // 2
    if not spec.dtype.is_complex or spec.shape.rank not in (2, 3) or spec.shape[-2] not in (None, num_freq):
        raise ValueError(f"istft: `spec` must be a complex tensor of shape (batch, {num_freq}, frames) or "
                         f"({num_freq}, frames); got {spec.shape} of dtype {spec.dtype.name}.")
    s = tf.transpose(spec if spec.shape.rank == 3 else spec[tf.newaxis], [0, 2, 1])
    window = tf.constant(_hann(win_size, n_fft), _real_dtype(spec))
    y = _istft(s, window, _envelope(window, tf.shape(s)[1], hop_size), n_fft, hop_size)
    return y if spec.shape.rank == 3 else y[0]


def inv_preemphasis(wav, k: float):
    """Inverse pre-emphasis ``y[n] = x[n] + k y[n-1]`` (``scipy.signal.lfilter([1], [1, -k], wav)``) along the
    last axis of ``(batch, samples)`` or ``(samples,)``.

    An exact parallel scan of the first-order recurrence (no loop over samples): ``ceil(log2(samples))`` steps
    ``y[n] += k ** d * y[n - d]`` for ``d = 1, 2, 4, ...`` in a ``tf.while_loop``; after the step with ``d``
    each ``y[n]`` holds ``sum_{j < 2d} k ** j x[n - j]``. Every coefficient is ``<= 1`` (``0 <= k < 1``), so
    the rounding stays at a few float32 ulps of ``sum_j k ** j |x[n - j]|`` (pairwise summation).

    Returns:
        tf.Tensor: same shape and dtype as ``wav``.
    """
    wav = tf.convert_to_tensor(wav)
    if not wav.dtype.is_floating or wav.shape.rank not in (1, 2):
        raise ValueError(f"inv_preemphasis: `wav` must be a float tensor of shape (batch, samples) or "
                         f"(samples,); got {wav.shape} of dtype {wav.dtype.name}.")
    k = float(k)
    if not (0.0 <= k < 1.0):
        raise ValueError(f"inv_preemphasis: `k` must lie in [0, 1); got {k!r}.")
    y0 = wav if wav.shape.rank == 2 else wav[tf.newaxis]
    n = tf.shape(y0)[1]
    log_k = math.log(k) if k > 0 else -math.inf

    def body(d, y):
        c = tf.cast(tf.exp(log_k * tf.cast(d, tf.float64)), y.dtype)  # k ** d, 0 for k == 0
        shifted = tf.pad(y[:, :n - d], [[0, 0], [d, 0]])
        return d * 2, tf.ensure_shape(y + c * shifted, y0.shape)

    _, y = tf.while_loop(lambda d, y: d < n, body, (tf.constant(1), y0))
    return y if wav.shape.rank == 2 else y[0]


def _check_spectrogram(x, fn: str, name: str, channels: int):
    """``(x, batched)``: a finite float ``(batch, frames, channels)`` tensor (the batch axis added to
    ``(frames, channels)``) and whether the input had it."""
    doc = f"(batch, frames, {channels}) or (frames, {channels})"
    try:
        x = tf.convert_to_tensor(x)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{fn}: argument `{name}` must be a float tensor of shape {doc}; got {x!r}.") from e
    if not x.dtype.is_floating:
        raise ValueError(f"{fn}: argument `{name}` must be a float tensor of shape {doc}; got dtype "
                         f"{x.dtype.name}.")
    shape = x.shape
    frames = shape[-2] if shape.rank in (2, 3) else None
    if shape.rank not in (2, 3) or shape[-1] not in (None, channels) or (frames is not None and frames < 2):
        raise ValueError(f"{fn}: argument `{name}` must have shape {doc} with at least 2 frames; got shape "
                         f"{shape}.")
    if x.dtype not in (tf.float32, tf.float64):
        x = tf.cast(x, tf.float32)
    batched = shape.rank == 3
    x = x if batched else x[tf.newaxis]
    message = f"{fn}: argument `{name}` holds NaN or inf values; Griffin-Lim needs finite input."
    if tf.executing_eagerly():
        if not bool(tf.reduce_all(tf.math.is_finite(x))):
            raise ValueError(message)
        return x, batched
    checks = [tf.debugging.assert_greater_equal(tf.shape(x)[1], 2, message=f"{fn}: argument `{name}` must "
                                                f"have shape {doc} with at least 2 frames.")]
    if shape[-1] is None:
        checks.append(tf.debugging.assert_equal(tf.shape(x)[2], channels,
                                                message=f"{fn}: argument `{name}` must have shape {doc}."))
    with tf.control_dependencies(checks):
        return tf.debugging.assert_all_finite(x, message), batched


def _check_n_iter(n_iter, fn: str) -> int:
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or int(n_iter) < 0:
        raise ValueError(f"{fn}: `n_iter` must be an integer >= 0; got {n_iter!r}.")
    return int(n_iter)


def _initial_angles(angles, seed, S, num_freq: int, fn: str):
    """Initial phases ``(batch, frames, num_freq)`` (complex) from the original's layout
    ``(.., num_freq, frames)``."""
    dims = tf.shape(S)
    batch, frames = dims[0], dims[1]
    cdtype = tf.complex128 if S.dtype == tf.float64 else tf.complex64
    if angles is None:
        shape = tf.stack([batch, num_freq, frames])
        if seed is None:
            rand = tf.random.uniform(shape, dtype=S.dtype)
        else:
            rand = tf.random.stateless_uniform(shape, seed=[int(seed), 0], dtype=S.dtype)
        phi = (2.0 * math.pi) * rand
        return tf.transpose(tf.complex(tf.cos(phi), tf.sin(phi)), [0, 2, 1])
    try:
        a = tf.convert_to_tensor(angles)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{fn}: `angles` must be a complex tensor of shape "
                         f"(batch, num_freq, frames).") from e
    expect = (S.shape[0], num_freq, S.shape[1])
    known = tuple("?" if d is None else d for d in expect)
    doc = f"(batch, num_freq, frames) = {known} or (num_freq, frames)"
    static_ok = a.shape.rank in (2, 3) and all(
        want is None or got is None or want == got for got, want in zip(a.shape[::-1], expect[::-1]))
    if not static_ok or not (a.dtype.is_complex or a.dtype.is_floating):
        raise ValueError(f"{fn}: `angles` must be a complex tensor of shape {doc}; got {a.shape} of dtype "
                         f"{a.dtype.name}.")
    a = tf.cast(a, cdtype)
    finite = tf.reduce_all(tf.math.is_finite(tf.math.real(a)) & tf.math.is_finite(tf.math.imag(a)))
    if tf.executing_eagerly():
        if not bool(finite):
            raise ValueError(f"{fn}: `angles` holds NaN or inf values.")
    want = tf.stack([batch, num_freq, frames])[3 - a.shape.rank:]
    checks = [tf.debugging.assert_equal(tf.shape(a), want, message=f"{fn}: `angles` must have shape {doc}."),
              tf.debugging.Assert(finite, [f"{fn}: `angles` holds NaN or inf values."])]
    with tf.control_dependencies(checks):
        a = tf.identity(a)
    return tf.transpose(tf.broadcast_to(a, tf.stack([batch, num_freq, frames])), [0, 2, 1])


def _griffin_lim(S, n_fft: int, hop: int, win_size: int, n_iter: int, angles, seed, pad_mode: str, fn: str):
    """``S``: finite float ``(batch, frames, num_freq)`` -> ``(batch, hop * (frames - 1))``."""
    S = tf.abs(S)
    a = _initial_angles(angles, seed, S, 1 + n_fft // 2, fn)
    window = tf.constant(_hann(win_size, n_fft), S.dtype)
    envelope = _envelope(window, tf.shape(S)[1], hop)
    y0 = _istft(tf.cast(S, a.dtype) * a, window, envelope, n_fft, hop)
    index = _reflect_index(tf.shape(y0)[1], n_fft // 2) if pad_mode == "reflect" else None

    def body(i, y):
        X = _stft(y, window, n_fft, hop, pad_mode, index)
        # S * exp(1j * angle(X)) = S * X / |X| in real arithmetic (twice as fast as complex sign/where on
        # CPU); an exact zero bin gets phase 1 (np.angle(0) = 0). |X| is the overflow-safe hypot.
        mag = tf.abs(X)
        live = mag > 0
        scale = S / tf.where(live, mag, tf.ones_like(mag))
        spec = tf.complex(tf.where(live, tf.math.real(X) * scale, S), tf.math.imag(X) * scale)
        return i + 1, tf.ensure_shape(_istft(spec, window, envelope, n_fft, hop), y0.shape)

    _, y = tf.while_loop(lambda i, y: i < n_iter, body, (tf.constant(0), y0))
    return y


def griffin_lim(magnitudes, *, n_fft: int, hop_size: int, win_size: int, n_iter: int = 60, angles=None,
                seed: int | None = None, pad_mode: str = "reflect"):
    """The originals' ``_griffin_lim`` (after librosa issue #434), batched.

    ``y = istft(S * angles)``; ``n_iter`` times ``angles = exp(1j * angle(stft(y)))``,
    ``y = istft(S * angles)``, with librosa 0.6-0.8's STFT (see the module docstring). Equals
    :func:`speechblocks.audio.griffin_lim` and :func:`torch_layers.griffin_lim.griffin_lim` given the same
    ``angles`` (float64: to ~1e-13 of the peak; float32: to 5e-5 of the peak after 60 iterations).

    Args:
        magnitudes: ``(batch, frames, 1 + n_fft // 2)`` or ``(frames, 1 + n_fft // 2)`` linear magnitudes
            (already raised to ``power`` if wanted; ``abs`` is taken as the original), finite, at least 2
            frames. float32 or float64 (computed in that precision; float16/bfloat16 in float32).
        n_fft: FFT size (even).
        hop_size: hop between frames.
        win_size: Hann window length, ``<= n_fft`` (zero-padded, centred, to ``n_fft``).
        n_iter: Griffin-Lim iterations, a Python integer ``>= 0``.
        angles: initial complex phases in the original's layout, ``(batch, 1 + n_fft // 2, frames)`` or
            ``(1 + n_fft // 2, frames)`` (shared by the batch); default ``exp(2j * pi * uniform)``.
        seed: with ``angles=None``, draws them with ``tf.random.stateless_uniform(seed=[seed, 0])``
            (reproducible); ``None``: ``tf.random.uniform``.
        pad_mode: STFT centre padding: ``"reflect"`` (RTVC) or ``"constant"`` (Rayhane).

    Returns:
        tf.Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input), in the
        magnitudes' float dtype.

    Raises:
        ValueError: naming ``magnitudes`` (dtype, shape ``(batch, frames, 1 + n_fft // 2)``, NaN/inf),
            ``angles`` (shape, NaN/inf), ``n_iter`` (< 0), the sizes or ``pad_mode``. Inside ``tf.function``
            the value checks raise ``tf.errors.InvalidArgumentError`` with the same message at run time.
    """
    fn = "griffin_lim"
    _check_sizes(fn, n_fft, hop_size, win_size, pad_mode)
    n_iter = _check_n_iter(n_iter, fn)
    S, batched = _check_spectrogram(magnitudes, fn, "magnitudes", 1 + n_fft // 2)
    y = _griffin_lim(S, n_fft, hop_size, win_size, n_iter, angles, seed, pad_mode, fn)
    return y if batched else y[0]


def _hparams(hparams) -> AudioHParams:
    return hparams if isinstance(hparams, AudioHParams) else audio_hparams(hparams)


def _to_amplitude(x, hp: AudioHParams):
    """The originals' ``_denormalize`` (when ``signal_normalization``), ``_db_to_amp(D + ref_level_db)`` and
    Rayhane's ``** (1 / magnitude_power)``."""
    if hp.signal_normalization:
        m, lo = hp.max_abs_value, hp.min_level_db
        if hp.allow_clipping_in_normalization:
            x = tf.clip_by_value(x, -m, m) if hp.symmetric_mels else tf.clip_by_value(x, 0.0, m)
        x = ((x + m) * -lo / (2 * m)) + lo if hp.symmetric_mels else (x * -lo / m) + lo
    amp = tf.pow(tf.constant(10.0, x.dtype), (x + hp.ref_level_db) * 0.05)
    return amp if hp.magnitude_power == 1.0 else amp ** (1.0 / hp.magnitude_power)


def _invert(linear_amp, hp: AudioHParams, n_iter, angles, seed, fn: str):
    n = hp.griffin_lim_iters if n_iter is None else _check_n_iter(n_iter, fn)
    y = _griffin_lim(linear_amp ** hp.power, hp.n_fft, hp.hop_size, hp.win_size, n, angles, seed,
                     hp.stft_pad_mode, fn)
    return inv_preemphasis(y, hp.preemphasis) if hp.preemphasize else y


def inv_mel_spectrogram(mel, hparams="rtvc", n_iter: int | None = None, angles=None, seed: int | None = None):
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
        seed: with ``angles=None``, a stateless draw of the initial phases.

    Returns:
        tf.Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input), in the
        mel's float dtype.

    Raises:
        ValueError: naming ``mel`` (shape ``(batch, frames, num_mels)``, NaN/inf), ``angles`` or ``n_iter``.
    """
    fn = "inv_mel_spectrogram"
    hp = _hparams(hparams)
    m, batched = _check_spectrogram(mel, fn, "mel", hp.num_mels)
    basis_t = tf.constant(np.asarray(inv_mel_basis(hp)).T, m.dtype)
    S = tf.maximum(tf.linalg.matmul(_to_amplitude(m, hp), basis_t), tf.constant(1e-10, m.dtype))
    y = _invert(S, hp, n_iter, angles, seed, fn)
    return y if batched else y[0]


def inv_linear_spectrogram(linear, hparams="rtvc", n_iter: int | None = None, angles=None,
                           seed: int | None = None):
    """The originals' ``inv_linear_spectrogram`` (Griffin-Lim branch), batched: :func:`inv_mel_spectrogram`
    without the mel step. Twin of :func:`speechblocks.audio.inv_linear_spectrogram`.

    Args:
        linear: ``(batch, frames, num_freq)`` or ``(frames, num_freq)`` float linear spectrogram as
            :func:`speechblocks.audio.linearspectrogram` returns it, finite.
        hparams: preset name, mapping of original names or :class:`speechblocks.audio.AudioHParams`.
        n_iter, angles, seed: as :func:`inv_mel_spectrogram`.

    Returns:
        tf.Tensor: ``(batch, hop_size * (frames - 1))`` waveform (``(samples,)`` for unbatched input).

    Raises:
        ValueError: naming ``linear`` (shape ``(batch, frames, num_freq)``, NaN/inf), ``angles`` or
            ``n_iter``.
    """
    fn = "inv_linear_spectrogram"
    hp = _hparams(hparams)
    s, batched = _check_spectrogram(linear, fn, "linear", hp.num_freq)
    y = _invert(_to_amplitude(s, hp), hp, n_iter, angles, seed, fn)
    return y if batched else y[0]
