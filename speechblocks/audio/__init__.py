"""Audio in, audio out (DESIGN §9): the GE2E speaker encoder's front-end (:mod:`.speaker`)."""
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

__all__ = ["SPEAKER_HOP_LENGTH", "SPEAKER_N_FFT", "SPEAKER_N_MELS", "SPEAKER_SAMPLE_RATE", "embed_speaker_wav",
           "normalize_volume", "partial_slices", "preprocess_speaker_wav", "speaker_mel", "trim_long_silences"]
