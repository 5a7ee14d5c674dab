"""The original synthesizer audio front-end in numpy (RTVC's ``synthesizer/audio.py``, Rayhane's
``datasets/audio.py`` + ``preprocessor.py``): waveforms in and out, mel / linear spectrograms, Griffin-Lim.

Framework-free; librosa (mel filterbank), soundfile (reading) and soxr (resampling) are imported inside the
functions that need them, so ``import speechblocks.audio`` stays light. Every function takes the hparams as a
preset name (``"rtvc"``, ``"rayhane"``), a mapping of the originals' names or an :class:`AudioHParams`
(:func:`audio_hparams`). Spectrograms are ``(frames, channels)`` float32 (the originals' transpose).
"""
from .features import recording_features
from .griffin_lim import griffin_lim, inv_linear_spectrogram, inv_mel_spectrogram
from .io import inv_preemphasis, load_wav, preemphasis, rescale, save_wav, trim_silence
from .params import AUDIO_HPARAM_NAMES, AudioHParams, audio_hparams
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

__all__ = ["AUDIO_HPARAM_NAMES", "AudioHParams", "amp_to_db", "audio_hparams", "db_to_amp", "denormalize",
           "griffin_lim", "inv_linear_spectrogram", "inv_mel_basis", "inv_mel_spectrogram", "inv_preemphasis",
           "istft", "linearspectrogram", "load_wav", "mel_basis", "melspectrogram", "normalize", "preemphasis",
           "recording_features", "rescale", "save_wav", "spectrograms", "stft", "trim_silence"]
