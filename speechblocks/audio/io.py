"""Waveforms in and out, and the originals' waveform steps: rescale, silence trimming, pre-emphasis.

Deviations from the originals, on purpose:

* :func:`load_wav` reads with soundfile (wav, flac, ogg) and resamples with soxr (``"HQ"``, librosa >= 0.10's
  ``res_type="soxr_hq"``, and librosa's output length ``ceil(samples * (sample_rate / file rate))``); the originals'
  ``librosa.load`` resampled with resampy ``kaiser_best``. Files already
  at ``sample_rate`` are read unchanged. Several channels are averaged (``librosa.to_mono``).
* :func:`trim_silence` is written out in numpy as ``librosa.effects.trim`` of librosa 0.6-0.8 computed it: the
  frame RMS pads the signal with ``pad_mode="reflect"``; librosa >= 0.9 pads with zeros, which can move the
  first or last kept frame when the recording starts or ends loud.
* :func:`save_wav` writes the original's peak-normalised int16 (scipy ``wavfile``) without scaling the caller's
  array in place, atomically (a temporary file renamed over the target), and refuses NaN/inf.

scipy.signal / scipy.io are imported inside the functions (scipy.signal alone takes seconds to import).
``rescale`` is not applied by :func:`load_wav` (the originals' ``load_wav`` does not either): the per-utterance
order of each preset is :func:`speechblocks.audio.recording_features`'s.
"""
from __future__ import annotations

import os

import numpy as np

from ..atomic_files import atomic_path
from .params import as_audio_hparams

__all__ = ["load_wav", "save_wav", "rescale", "trim_silence", "preemphasis", "inv_preemphasis"]


def _waveform(wav, name: str, min_length: int = 1) -> np.ndarray:
    """``wav`` as a 1-D floating array, refusing other shapes, NaN/inf and fewer than ``min_length`` samples."""
    w = np.asarray(wav)
    if w.dtype.kind not in "fiu" or w.ndim != 1:
        raise ValueError(f"{name} must be a 1-D float array of samples (samples,); got shape {w.shape} of "
                         f"dtype {w.dtype}.")
    if w.dtype.kind != "f":
        w = w.astype(np.float64)
    if w.size < min_length:
        what = "holds no samples" if w.size == 0 else f"holds {w.size} samples, fewer than {min_length}"
        raise ValueError(f"{name} {what}.")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} holds NaN or inf samples.")
    return w


def load_wav(path, hparams="rtvc") -> np.ndarray:
    """Reads an audio file as the originals' ``load_wav`` (``librosa.load(path, sr=sample_rate)``).

    Args:
        path: a wav, flac or ogg file (anything libsndfile reads).
        hparams: a preset name, a mapping of original hparam names or an :class:`AudioHParams`.

    Returns:
        np.ndarray: float32 ``(samples,)`` in [-1, 1] at ``hparams.sample_rate`` (mono: channels averaged;
        resampled by soxr when the file's rate differs). Not rescaled.

    Raises:
        ValueError: naming the file when it does not exist, is not audio, holds no samples or NaN/inf.
    """
    hp = as_audio_hparams(hparams)
    import soundfile

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ValueError(f"load_wav: no such audio file: {p!r}.")
    try:
        data, sr = soundfile.read(p, dtype="float32", always_2d=True)
    except Exception as e:  # libsndfile's error for anything it cannot decode
        raise ValueError(f"load_wav: {p!r} is not a readable audio file ({e}).") from None
    wav = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    if wav.size == 0:
        raise ValueError(f"load_wav: {p!r} holds no samples.")
    if sr != hp.sample_rate:
        import soxr

        # librosa's length rule (fix=True), 0.5 to today, to the letter: the float ratio first (14000 samples at
        # 20 kHz -> 22 kHz: 14000 * 1.1 = 15400.000000000002, 15401 samples, not 15400)
        n_out = int(np.ceil(wav.size * (float(hp.sample_rate) / sr)))
        wav = soxr.resample(wav, sr, hp.sample_rate, quality="HQ")[:n_out]
        wav = np.pad(wav, (0, n_out - wav.size))
    wav = np.ascontiguousarray(wav, dtype=np.float32)
    if not np.all(np.isfinite(wav)):
        raise ValueError(f"load_wav: {p!r} holds NaN or inf samples.")
    return wav


def save_wav(wav, path, sample_rate: int) -> None:
    """Writes a waveform as the originals' ``save_wav``: 16-bit PCM scaled by ``32767 / max(0.01, max|wav|)``.

    The int16 samples are ``(wav * 32767 / max(0.01, max|wav|)).astype(int16)`` (truncation, as the original;
    the scaling is computed in ``wav``'s float type). The caller's array is left unchanged (the original scaled it
    in place). The file is written to a temporary name in the same directory and renamed over ``path``: a
    failure leaves no half-written file.

    Args:
        wav: ``(samples,)`` float waveform.
        path: the output ``.wav`` file; its directory must exist.
        sample_rate: the rate written in the header.

    Raises:
        ValueError: naming ``path`` when its directory does not exist or ``wav`` is empty, not 1-D or holds
            NaN/inf; naming ``sample_rate`` when it is not a positive integer.
    """
    p = os.fspath(path)
    w = _waveform(wav, f"save_wav: the waveform for {p!r}")
    if isinstance(sample_rate, bool) or not hasattr(sample_rate, "__index__") or int(sample_rate) < 1:
        raise ValueError(f"save_wav: `sample_rate` must be a positive integer; got {sample_rate!r}.")
    directory = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(directory):
        raise ValueError(f"save_wav: the output directory of {p!r} does not exist.")
    from scipy.io import wavfile

    pcm = (w * (32767 / max(0.01, float(np.max(np.abs(w)))))).astype(np.int16)
    with atomic_path(p, suffix=".wav") as tmp, open(tmp, "wb") as f:
        wavfile.write(f, int(sample_rate), pcm)


def rescale(wav, rescaling_max: float) -> np.ndarray:
    """The originals' rescale: ``wav / max|wav| * rescaling_max`` (peak at ``rescaling_max``).

    Args:
        wav: ``(samples,)`` float waveform.
        rescaling_max: the peak after rescaling (``hparams.rescaling_max``).

    Returns:
        np.ndarray: ``(samples,)`` in ``wav``'s float type.

    Raises:
        ValueError: naming ``wav`` when it is empty, not 1-D, holds NaN/inf or is silent (all zeros: the
            original would divide by zero and return NaN).
    """
    w = _waveform(wav, "rescale: `wav`")
    peak = np.abs(w).max()
    if peak == 0:
        raise ValueError("rescale: `wav` is silent (every sample is 0); it cannot be rescaled.")
    return w / peak * rescaling_max


def _frame_power_db(wav: np.ndarray, frame_length: int, hop_length: int) -> np.ndarray:
    """``10 log10`` of the reflect-padded frame mean square, relative to its maximum (amin 1e-10)."""
    pad = frame_length // 2
    x = np.pad(wav.astype(np.float64), pad, mode="reflect")
    n_frames = 1 + (x.size - frame_length) // hop_length
    frames = np.lib.stride_tricks.as_strided(x, (n_frames, frame_length), (hop_length * x.strides[0],
                                                                          x.strides[0]), writeable=False)
    mse = np.mean(frames * frames, axis=1)
    db = 10.0 * np.log10(np.maximum(1e-10, mse))
    return db - 10.0 * np.log10(max(1e-10, float(mse.max())))


def trim_silence(wav, hparams="rayhane") -> np.ndarray:
    """Rayhane's ``trim_silence``: leading and trailing silence cut as ``librosa.effects.trim`` (0.6-0.8) did.

    Frames of ``trim_fft_size`` samples every ``trim_hop_size`` (centred, reflect padding); a frame is kept when
    its mean square is within ``trim_top_db`` dB of the loudest frame's; the result runs from the first kept
    frame's start ``i * hop`` to the last kept frame's end ``(j + 1) * hop`` (at most the signal's length).

    Args:
        wav: ``(samples,)`` float waveform.
        hparams: preset name, mapping or :class:`AudioHParams` (``trim_top_db``, ``trim_fft_size``,
            ``trim_hop_size``).

    Returns:
        np.ndarray: a view ``wav[start:end]``, ``(kept samples,)``.

    Raises:
        ValueError: naming ``wav`` when it is empty, not 1-D or holds NaN/inf.
    """
    hp = as_audio_hparams(hparams)
    w = _waveform(wav, "trim_silence: `wav`")
    non_silent = np.flatnonzero(_frame_power_db(w, hp.trim_fft_size, hp.trim_hop_size) > -hp.trim_top_db)
    if non_silent.size == 0:
        return w[0:0]
    start = int(non_silent[0]) * hp.trim_hop_size
    end = min(w.size, (int(non_silent[-1]) + 1) * hp.trim_hop_size)
    return w[start:end]


def preemphasis(wav, k: float) -> np.ndarray:
    """Pre-emphasis ``y[n] = x[n] - k x[n-1]`` (``scipy.signal.lfilter([1, -k], [1], wav)`` as the originals).

    Args:
        wav: ``(samples,)`` waveform.
        k: the coefficient (``hparams.preemphasis``, 0.97 in both presets).

    Returns:
        np.ndarray: float64 ``(samples,)`` (lfilter's type, as in the originals).
    """
    from scipy.signal import lfilter

    return lfilter([1.0, -k], [1.0], _waveform(wav, "preemphasis: `wav`"))


def inv_preemphasis(wav, k: float) -> np.ndarray:
    """Inverse pre-emphasis ``y[n] = x[n] + k y[n-1]`` (``lfilter([1], [1, -k], wav)`` as the originals).

    Args:
        wav: ``(samples,)`` waveform.
        k: the coefficient.

    Returns:
        np.ndarray: float64 ``(samples,)``.
    """
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -k], _waveform(wav, "inv_preemphasis: `wav`"))
