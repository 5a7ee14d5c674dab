"""The original audio front-ends in numpy: the synthesizer's (RTVC's ``synthesizer/audio.py``, Rayhane's
``datasets/audio.py`` + ``preprocessor.py``: waveforms in and out, mel / linear spectrograms, Griffin-Lim) and the
GE2E speaker encoder's (:mod:`.speaker`: a recording -> the waveform and mel the encoder was trained on).

Framework-free; librosa (mel filterbank), soundfile (reading), soxr (resampling) and webrtcvad (voice activity)
are imported inside the functions that need them, so ``import speechblocks.audio`` stays light. Every synthesizer
function takes the hparams as a preset name (``"rtvc"``, ``"rayhane"``; the Tacotron-1 family's ``"keithito"``,
``"mimic2"``, whose wav path is :func:`tacotron1_wav`), a mapping of the originals' names or an
:class:`AudioHParams` (:func:`audio_hparams`). Spectrograms are ``(frames, channels)`` float32 (the originals'
transpose).
"""
from .endpoint import find_endpoint
from .features import recording_features
from .griffin_lim import griffin_lim, inv_linear_spectrogram, inv_mel_spectrogram
from .io import inv_preemphasis, load_wav, preemphasis, rescale, save_wav, trim_silence
from .params import AUDIO_HPARAM_NAMES, AudioHParams, audio_hparams
from .speaker import (
    SPEAKER_HOP_LENGTH,
    SPEAKER_N_FFT,
    SPEAKER_N_MELS,
    SPEAKER_SAMPLE_RATE,
    embed_speaker_wav,
    normalize_volume,
    partial_slices,
    preprocess_speaker_wav,
    speaker_mel,
    trim_long_silences,
)
from .spectrogram import (
    amp_to_db,
    db_to_amp,
    denormalize,
    inv_mel_basis,
    istft,
    linearspectrogram,
    mel_basis,
    melspectrogram,
    normalize,
    spectrograms,
    stft,
)
from .tacotron1 import tacotron1_wav

__all__ = ["AUDIO_HPARAM_NAMES", "AudioHParams", "amp_to_db", "audio_hparams", "db_to_amp", "denormalize",
           "find_endpoint", "griffin_lim", "inv_linear_spectrogram", "inv_mel_basis", "inv_mel_spectrogram",
           "inv_preemphasis", "istft", "linearspectrogram", "load_wav", "mel_basis", "melspectrogram", "normalize",
           "preemphasis", "recording_features", "rescale", "save_wav", "spectrograms", "stft", "tacotron1_wav",
           "trim_silence", "SPEAKER_HOP_LENGTH", "SPEAKER_N_FFT", "SPEAKER_N_MELS", "SPEAKER_SAMPLE_RATE",
           "embed_speaker_wav", "normalize_volume", "partial_slices", "preprocess_speaker_wav", "speaker_mel",
           "trim_long_silences"]
