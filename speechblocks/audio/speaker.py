"""The GE2E speaker encoder's audio front-end (Real-Time-Voice-Cloning ``encoder/audio.py`` and
``encoder/inference.py``), framework-free.

A recording becomes the encoder's input in three steps, each as the encoder was trained:

* :func:`preprocess_speaker_wav`: mono at 16 kHz, the volume raised to -30 dBFS (never lowered), long silences
  cut out with WebRTC's voice activity detector (:func:`trim_long_silences`);
* :func:`speaker_mel`: the power mel spectrogram (not log), 25 ms windows every 10 ms, 40 channels;
* :func:`partial_slices`: where the waveform and its mel frames are cut into 1.6 s partial utterances.

``SpeakerEncoder.embed_wav`` (torch and Keras) chains them with the network. librosa, soundfile, soxr, webrtcvad
and scipy are imported inside the functions that use them (the ``audio`` extra); this module imports no framework.

Where the numbers may differ from the original: the original resampled with the librosa of its time (0.6-0.8,
``resampy``'s ``kaiser_best``); here soxr's ``HQ`` resampler does it (what ``librosa.resample`` of librosa 0.11 calls
by default), the length fixed to ``ceil(n * 16000 / sr)`` as librosa does. Everything after the resampling is
computed in float64 (the original: float32) and the waveform is returned as float32; the mel is computed in float64
and returned as float32 (the original: librosa's complex64 STFT). The int16 PCM handed to the detector is clipped to
the int16 range (the original's cast of out-of-range samples was undefined).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from numbers import Integral

import numpy as np

from speechblocks.speaker_encoder import partial_ranges

__all__ = ["SPEAKER_SAMPLE_RATE", "SPEAKER_N_MELS", "SPEAKER_HOP_LENGTH", "SPEAKER_N_FFT",
           "preprocess_speaker_wav", "normalize_volume", "trim_long_silences", "speaker_mel", "partial_slices",
           "embed_speaker_wav"]

#: the encoder's sampling rate (``params_data.sampling_rate``)
SPEAKER_SAMPLE_RATE = 16000
#: mel channels (``mel_n_channels``)
SPEAKER_N_MELS = 40
#: 25 ms analysis window in samples (``mel_window_length``)
SPEAKER_N_FFT = 400
#: 10 ms hop in samples (``mel_window_step``): samples per mel frame
SPEAKER_HOP_LENGTH = 160
_PARTIALS_N_FRAMES = 160  # 1.6 s
_AUDIO_NORM_TARGET_DBFS = -30.0
_VAD_WINDOW_SAMPLES = 30 * SPEAKER_SAMPLE_RATE // 1000  # 30 ms
_VAD_MOVING_AVERAGE_WIDTH = 8
_VAD_MAX_SILENCE_LENGTH = 6
_INT16_MAX = 2 ** 15 - 1


def _read_audio(path: str) -> tuple[np.ndarray, int]:
    """``(float32 mono waveform, native rate)`` of an audio file, as ``librosa.load(path, sr=None)``: channels
    averaged in float32."""
    import soundfile

    try:
        data, sr = soundfile.read(path, dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001 -- libsndfile's errors (format, truncation, ...): one clear line
        raise ValueError(f"preprocess_speaker_wav: file {path!r} is not audio soundfile can read "
                         f"({type(e).__name__}: {str(e).strip()})") from None
    wav = data[:, 0] if data.shape[1] == 1 else np.mean(data, axis=1, dtype=np.float32)
    return np.ascontiguousarray(wav), int(sr)


def _resample(wav: np.ndarray, source_sr: int, target_sr: int) -> np.ndarray:
    """soxr ``HQ``, the length fixed to ``ceil(n * target / source)`` (zeros appended or samples dropped) as
    ``librosa.resample`` does."""
    import soxr

    out = soxr.resample(wav, source_sr, target_sr, quality="HQ")
    n = int(np.ceil(len(wav) * float(target_sr) / source_sr))
    if len(out) < n:
        out = np.pad(out, (0, n - len(out)))
    return out[:n]


def normalize_volume(wav: np.ndarray, target_dbfs: float, increase_only: bool = False,
                     decrease_only: bool = False) -> np.ndarray:
    """Scales a waveform to a mean power of ``target_dbfs`` dB full scale (``10 log10 mean(wav^2)``).

    Args:
        wav: waveform ``(samples,)``, not silent.
        target_dbfs: target level in dBFS (the encoder: -30).
        increase_only: leave a louder waveform as it is.
        decrease_only: leave a quieter waveform as it is.

    Returns:
        the scaled waveform ``(samples,)`` in ``wav``'s dtype (``wav`` itself when left as it is).
    """
    if increase_only and decrease_only:
        raise ValueError("normalize_volume: `increase_only` and `decrease_only` cannot both be set.")
    level = 10.0 * np.log10(np.mean(np.square(wav, dtype=np.float64)))
    change = target_dbfs - level
    if (change < 0 and increase_only) or (change > 0 and decrease_only):
        return wav
    return (wav * 10.0 ** (change / 20.0)).astype(wav.dtype, copy=False)


def trim_long_silences(wav: np.ndarray) -> np.ndarray:
    """Shortens silences to at most ~6 detector windows, as the encoder was trained (16 kHz input).

    The waveform is cut to whole 30 ms windows (the tail that is not a whole window is dropped), converted to
    int16 PCM (``round(wav * 32767)``, clipped), and each window is classified by ``webrtcvad`` in mode 3. The
    flags are smoothed by a moving average of width 8 (``(8 - 1) // 2 = 3`` zeros before, ``8 // 2 = 4`` after),
    rounded half to even, dilated by ``scipy.ndimage.binary_dilation`` with ``ones(7)``; the windows kept are the
    samples returned.

    Args:
        wav: float waveform at 16 kHz ``(samples,)``.

    Returns:
        the voiced part ``(kept_samples,)`` in ``wav``'s dtype, ``kept_samples <= samples`` (a multiple of 480).
    """
    import webrtcvad
    from scipy.ndimage import binary_dilation

    n_windows = len(wav) // _VAD_WINDOW_SAMPLES
    wav = wav[:n_windows * _VAD_WINDOW_SAMPLES]
    pcm = np.clip(np.round(wav * _INT16_MAX), -_INT16_MAX - 1, _INT16_MAX).astype("<i2").tobytes()
    vad = webrtcvad.Vad(3)
    width = 2 * _VAD_WINDOW_SAMPLES  # bytes per window
    flags = np.array([vad.is_speech(pcm[i * width:(i + 1) * width], SPEAKER_SAMPLE_RATE) for i in range(n_windows)],
                     dtype=np.float64)
    w = _VAD_MOVING_AVERAGE_WIDTH
    padded = np.concatenate([np.zeros((w - 1) // 2), flags, np.zeros(w // 2)])
    smoothed = np.convolve(padded, np.ones(w), mode="valid")[:n_windows] / w
    voiced = np.round(smoothed).astype(bool)
    voiced = binary_dilation(voiced, np.ones(_VAD_MAX_SILENCE_LENGTH + 1))
    return wav[np.repeat(voiced, _VAD_WINDOW_SAMPLES)]


def _check_source_sr(source_sr) -> int | None:
    if source_sr is None:
        return None
    if isinstance(source_sr, bool) or not isinstance(source_sr, Integral) or int(source_sr) < 1:
        raise ValueError("preprocess_speaker_wav: argument `source_sr` must be a positive int (the waveform's "
                         f"sampling rate in Hz) or None; got {source_sr!r} ({type(source_sr).__name__}).")
    return int(source_sr)


def preprocess_speaker_wav(wav_or_path: str | os.PathLike | np.ndarray | Sequence[float],
                           source_sr: int | None = None) -> np.ndarray:
    """The GE2E encoder's preprocessing (RTVC ``encoder.audio.preprocess_wav``).

    A path is read with soundfile at its native rate (channels averaged; ``source_sr`` is then ignored, as in the
    original). The waveform is resampled to 16 kHz when ``source_sr`` differs (soxr ``HQ``; the original used the
    librosa resampler of its time), its volume raised to -30 dBFS (``normalize_volume(wav, -30,
    increase_only=True)``) and its long silences cut (:func:`trim_long_silences`).

    Args:
        wav_or_path: an audio file (wav, flac, ogg, ... -- what soundfile reads) or a float waveform ``(samples,)``.
        source_sr: the waveform's sampling rate; ``None``: already 16 kHz.

    Returns:
        float32 waveform at 16 kHz ``(kept_samples,)``, ``kept_samples`` a multiple of 480 (30 ms).

    Raises:
        FileNotFoundError: no such file.
        ValueError: one line naming the file or the argument: not audio, empty, silent (all zeros), shorter than
            one 25 ms mel window, NaN or inf samples, not 1-D, a ``source_sr`` that is no positive int, or nothing
            voiced left after the silences are cut.
    """
    source_sr = _check_source_sr(source_sr)
    if isinstance(wav_or_path, (str, os.PathLike)):
        path = os.fspath(wav_or_path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"preprocess_speaker_wav: file {path!r} does not exist.")
        if os.path.isdir(path):
            raise ValueError(f"preprocess_speaker_wav: {path!r} is a directory, not an audio file.")
        wav, source_sr = _read_audio(path)
        what = f"file {path!r}"
    else:
        try:
            wav = np.asarray(wav_or_path)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"preprocess_speaker_wav: argument `wav_or_path` is no array ({e}).") from None
        what = "argument `wav_or_path`"
        if wav.dtype.kind != "f" or wav.ndim != 1:
            raise ValueError(f"preprocess_speaker_wav: {what} must be a path or a 1-D float waveform (samples,); "
                             f"got shape {list(wav.shape)}, dtype {wav.dtype}.")
    if wav.size == 0:
        raise ValueError(f"preprocess_speaker_wav: {what} holds no samples (empty audio).")
    if not np.all(np.isfinite(wav)):
        raise ValueError(f"preprocess_speaker_wav: {what} holds NaN or inf samples.")
    if not np.any(wav):
        raise ValueError(f"preprocess_speaker_wav: {what} is silent (all samples are zero).")
    if source_sr is not None and source_sr != SPEAKER_SAMPLE_RATE:
        wav = _resample(wav.astype(np.float64), source_sr, SPEAKER_SAMPLE_RATE)
    if len(wav) < SPEAKER_N_FFT:
        raise ValueError(f"preprocess_speaker_wav: {what} is shorter than one 25 ms mel window ({len(wav)} samples "
                         f"at 16 kHz < {SPEAKER_N_FFT}).")
    wav = normalize_volume(wav.astype(np.float64), _AUDIO_NORM_TARGET_DBFS, increase_only=True)
    wav = trim_long_silences(wav)
    if wav.size == 0:
        raise ValueError(f"preprocess_speaker_wav: {what} holds no voiced 30 ms window (the voice activity "
                         "detector found no speech; nothing is left after the silences are cut).")
    return wav.astype(np.float32)


def _check_waveform(wav, what: str) -> np.ndarray:
    """A 1-D finite float waveform of at least one mel window, else one ``ValueError`` naming ``what``."""
    x = np.asarray(wav)
    if x.ndim != 1 or x.dtype.kind != "f":
        raise ValueError(f"{what} must be a 1-D float waveform (samples,); got shape {list(x.shape)}, "
                         f"dtype {x.dtype}.")
    if len(x) < SPEAKER_N_FFT:
        raise ValueError(f"{what} is shorter than one 25 ms mel window ({len(x)} samples < {SPEAKER_N_FFT}).")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} holds NaN or inf samples.")
    return x


def speaker_mel(wav: np.ndarray) -> np.ndarray:
    """The encoder's mel spectrogram (RTVC ``wav_to_mel_spectrogram``): power, **not** log.

    ``librosa.feature.melspectrogram(y=wav, sr=16000, n_fft=400, hop_length=160, n_mels=40)`` with the settings of
    the librosa (0.6-0.8) the encoder was trained with, passed explicitly: Hann window of 400 samples,
    ``center=True`` with ``pad_mode="reflect"`` (librosa >= 0.10 pads with zeros by default), ``power=2``, Slaney
    mel filters from 0 to 8 kHz. Computed in float64.

    Args:
        wav: float waveform at 16 kHz ``(samples,)``, ``samples >= 400``, finite.

    Returns:
        float32 ``(1 + samples // 160, 40)``.
    """
    import librosa

    x = _check_waveform(wav, "speaker_mel: argument `wav`")
    mel = librosa.feature.melspectrogram(y=x.astype(np.float64), sr=SPEAKER_SAMPLE_RATE, n_fft=SPEAKER_N_FFT,
                                         hop_length=SPEAKER_HOP_LENGTH, win_length=SPEAKER_N_FFT, window="hann",
                                         center=True, pad_mode="reflect", power=2.0, n_mels=SPEAKER_N_MELS,
                                         fmin=0.0, fmax=SPEAKER_SAMPLE_RATE / 2, htk=False, norm="slaney")
    return np.ascontiguousarray(mel.T, dtype=np.float32)


def partial_slices(n_samples: int, partial_utterance_n_frames: int = _PARTIALS_N_FRAMES,
                   min_pad_coverage: float = 0.75, overlap: float = 0.5) -> tuple[list[slice], list[slice]]:
    """Where a 16 kHz waveform and its mel frames are cut into partial utterances (RTVC
    ``compute_partial_slices``).

    With ``n_frames = ceil((n_samples + 1) / 160)`` and ``step = max(round(partial_utterance_n_frames * (1 -
    overlap)), 1)``, mel windows ``[i, i + partial_utterance_n_frames)`` start at ``i = 0, step, ...`` while ``i <=
    n_frames - partial_utterance_n_frames + step``; the waveform slices are the same times 160 samples. The last
    window is dropped when the waveform covers less than ``min_pad_coverage`` of its samples, unless it is the
    only one. Slices may end past the waveform: pad the waveform with zeros to ``wav_slices[-1].stop`` before
    its mel is computed (``embed_wav`` does).

    Example: 25_600 samples (1.6 s, 161 frames) -> mel ``[slice(0, 160)]`` (the window starting at frame 80
    covers 12_800 / 25_600 samples: dropped); 32_000 samples -> ``[slice(0, 160), slice(80, 240)]`` (19_200 /
    25_600 = 75 %: kept), wav ``[slice(0, 25_600), slice(12_800, 38_400)]``.

    Args:
        n_samples: waveform length at 16 kHz (>= 1).
        partial_utterance_n_frames: frames of a partial utterance (1.6 s).
        min_pad_coverage: minimum covered fraction of the last partial in (0, 1].
        overlap: overlap of consecutive partials in [0, 1).

    Returns:
        ``(wav_slices, mel_slices)``: lists of ``slice`` of equal length (>= 1), samples and frames.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 1:
        raise ValueError(f"partial_slices: argument `n_samples` must be an int >= 1; got {n_samples!r}.")
    hop = SPEAKER_HOP_LENGTH
    n_frames = -(-(int(n_samples) + 1) // hop)
    windows = partial_ranges(n_frames, int(n_samples), hop, int(partial_utterance_n_frames), float(overlap),
                             float(min_pad_coverage))
    return [slice(a * hop, b * hop) for a, b in windows], [slice(a, b) for a, b in windows]


def embed_speaker_wav(embed_frames: Callable[[np.ndarray], np.ndarray],
                      wav_or_path: str | os.PathLike | np.ndarray, source_sr: int | None = None,
                      using_partials: bool = True, return_partials: bool = False, preprocess: bool = True,
                      partial_utterance_n_frames: int = _PARTIALS_N_FRAMES, min_pad_coverage: float = 0.75,
                      overlap: float = 0.5):
    """A recording's speaker embedding (RTVC ``embed_utterance(preprocess_wav(...))``), given the network.

    The one pipeline behind ``SpeakerEncoder.embed_wav`` of both frameworks: :func:`preprocess_speaker_wav`;
    with ``using_partials``, :func:`partial_slices` of the waveform, the **waveform** padded with zeros to the
    last slice's end (when that end reaches its length), :func:`speaker_mel` of the padded waveform, its mel
    windows embedded in one batch, and the mean of the partial embeddings divided by its L2 norm (float32, as
    the original); without, the whole mel is embedded at once.

    Args:
        embed_frames: the network: float32 mel batch ``(batch, frames, 40)`` -> embeddings ``(batch, dim)``.
        wav_or_path: an audio file or a float waveform ``(samples,)``.
        source_sr: the waveform's sampling rate (``None``: 16 kHz); ignored for a file.
        using_partials: embed 1.6 s partials and average them (the original's default), else the whole mel.
        return_partials: also return the partial embeddings and the waveform slices.
        preprocess: run :func:`preprocess_speaker_wav` (``False``: ``wav_or_path`` is a waveform already
            preprocessed, at 16 kHz).
        partial_utterance_n_frames: frames of a partial utterance.
        min_pad_coverage: as :func:`partial_slices`.
        overlap: as :func:`partial_slices`.

    Returns:
        float32 numpy embedding ``(dim,)``; with ``return_partials``, ``(embedding, partials (n_partials, dim),
        wav_slices)`` (``(embedding, None, None)`` without ``using_partials``), the slices indexing the
        preprocessed 16 kHz waveform.
    """
    if preprocess:
        wav = preprocess_speaker_wav(wav_or_path, source_sr)
    else:
        sr = _check_source_sr(source_sr)
        if isinstance(wav_or_path, (str, os.PathLike)) or sr not in (None, SPEAKER_SAMPLE_RATE):
            raise ValueError("embed_wav: with preprocess=False, argument `wav_or_path` must be a waveform already "
                             f"preprocessed at {SPEAKER_SAMPLE_RATE} Hz; got {wav_or_path!r} at {sr!r} Hz."
                             [:300])
        wav = _check_waveform(wav_or_path, "embed_wav: argument `wav_or_path`")
    if not using_partials:
        embed = np.asarray(embed_frames(speaker_mel(wav)[None]), dtype=np.float32)[0]
        return (embed, None, None) if return_partials else embed
    wav_slices, mel_slices = partial_slices(len(wav), partial_utterance_n_frames, min_pad_coverage, overlap)
    end = wav_slices[-1].stop
    if end >= len(wav):
        wav = np.pad(wav, (0, end - len(wav)))
    mel = speaker_mel(wav)
    partials = np.asarray(embed_frames(np.stack([mel[s] for s in mel_slices])), dtype=np.float32)
    raw = np.mean(partials, axis=0)
    embed = raw / np.linalg.norm(raw, 2)
    return (embed, partials, wav_slices) if return_partials else embed
