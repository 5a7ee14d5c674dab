"""The GE2E encoder's front-end (``speechblocks.audio.speaker``) against the independent float64 reference of the
original pipeline (``tests/helpers/speaker_reference.py``); framework-free."""
import numpy as np
import pytest
import soundfile

from speechblocks.audio.speaker import (
    normalize_volume,
    partial_slices,
    preprocess_speaker_wav,
    speaker_mel,
    trim_long_silences,
)
from tests.helpers.speaker_reference import (
    flite_speech,
    reference_mel,
    reference_preprocess,
    reference_slices,
    synthetic_voice,
    write_synthetic,
)


def test_preprocess_equals_reference_and_trims_the_pauses(tmp_path):
    path = write_synthetic(tmp_path)  # 22.05 kHz: resampled
    ours, ref = preprocess_speaker_wav(path), reference_preprocess(path)
    assert ours.dtype == np.float32 and ours.ndim == 1 and len(ours) % 480 == 0
    assert len(ours) == len(ref)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-7)  # float64 inside, returned as float32
    at_16k = len(synthetic_voice()) * 16000 / 22050
    assert len(ours) < 0.6 * at_16k  # the detector cut the 3.8 s of pauses (to ~2.9 s of 5.9 s)
    assert len(ours) > 0.4 * at_16k  # and kept the 2.1 s of voice with its margins
    # an array with its rate is the same as the file
    np.testing.assert_array_equal(preprocess_speaker_wav(synthetic_voice(), source_sr=22050), ours)
    # a quiet input is raised to -30 dBFS before the detector; a loud one is left as it is
    loud = preprocess_speaker_wav(synthetic_voice(16000) * 8.0)
    assert 10 * np.log10(np.mean(loud.astype(np.float64) ** 2)) > -20


def test_preprocess_flite_speech_equals_reference(tmp_path):
    path = flite_speech(tmp_path)
    if path is None:
        pytest.skip("flite is not installed")
    ours, ref = preprocess_speaker_wav(path), reference_preprocess(path)
    assert len(ours) == len(ref)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-7)


def test_speaker_mel_equals_reference_by_hand():
    wav = reference_preprocess(synthetic_voice(16000))[:16000 + 77]
    ours, ref = speaker_mel(wav), reference_mel(wav)
    assert ours.dtype == np.float32 and ours.shape == (1 + len(wav) // 160, 40) == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-9 * ref.max())
    # reflect padding (the original's librosa), not librosa 0.11's zeros: the first frame sees mirrored samples
    import librosa

    zero_padded = librosa.feature.melspectrogram(y=wav, sr=16000, n_fft=400, hop_length=160, n_mels=40).T
    assert not np.allclose(zero_padded[0], ref[0], rtol=1e-3)


@pytest.mark.parametrize("n_samples", [1, 400, 12_800, 25_599, 25_600, 25_601, 31_999, 32_000, 38_400, 44_800,
                                       45_600, 160_000])
def test_partial_slices_equal_the_reference(n_samples):
    wav_slices, mel_slices = partial_slices(n_samples)
    ref_wav, ref_mel = reference_slices(n_samples)
    assert [(s.start, s.stop) for s in wav_slices] == ref_wav
    assert [(s.start, s.stop) for s in mel_slices] == ref_mel


def test_partial_slices_hand_derived():
    def frames(n, **kw):
        return [(s.start, s.stop) for s in partial_slices(n, **kw)[1]]

    assert frames(1) == [(0, 160)]  # shorter than one partial: the only window, padded
    assert frames(25_600) == [(0, 160)]  # exactly one partial: the next covers 12_800 / 25_600 = 50 %
    assert frames(31_999) == [(0, 160)]  # 19_199 / 25_600 < 75 %
    assert frames(32_000) == [(0, 160), (80, 240)]  # exactly 75 %: kept
    assert frames(44_800) == [(0, 160), (80, 240), (160, 320)]  # (240, 400) would cover 6_400 / 25_600
    # 7 frames of 4 without overlap: (4, 8) covers (1_000 - 640) / 640 = 56 % of its samples
    assert frames(1_000, partial_utterance_n_frames=4, overlap=0.0, min_pad_coverage=0.5) == [(0, 4), (4, 8)]
    assert frames(1_000, partial_utterance_n_frames=4, overlap=0.0, min_pad_coverage=0.6) == [(0, 4)]
    assert partial_slices(32_000)[0][1] == slice(12_800, 38_400)
    for bad in (dict(overlap=1.0), dict(min_pad_coverage=0.0)):
        with pytest.raises(ValueError):
            partial_slices(1_000, **bad)
    with pytest.raises(ValueError, match="n_samples"):
        partial_slices(0)


def test_normalize_volume_and_trim_long_silences():
    x = np.full(1000, 0.001)
    np.testing.assert_allclose(10 * np.log10(np.mean(normalize_volume(x, -30.0) ** 2)), -30.0)
    assert normalize_volume(np.full(10, 0.5), -30.0, increase_only=True)[0] == 0.5
    with pytest.raises(ValueError, match="increase_only"):
        normalize_volume(x, -30.0, increase_only=True, decrease_only=True)
    assert len(trim_long_silences(np.zeros(479))) == 0  # no whole 30 ms window
    assert len(trim_long_silences(np.zeros(16_000))) == 0  # nothing voiced


def _write(path, data, sr=16000):
    soundfile.write(path, np.asarray(data, dtype=np.float32), sr)
    return path


def test_bad_input_raises_one_value_error_naming_it(tmp_path):
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("this is no audio file\n")
    cases = [
        (not_audio, "notes.wav"),
        (_write(tmp_path / "empty.wav", []), "empty.wav"),
        (_write(tmp_path / "zeros.wav", np.zeros(16_000)), "zeros.wav"),
        (_write(tmp_path / "short.wav", 0.1 * np.ones(300)), "short.wav"),
        (_write(tmp_path / "hum.wav", 1e-3 * np.sin(np.arange(16_000) * 0.01)), "hum.wav"),  # nothing voiced
        (np.array([0.1, np.nan] * 8_000), "wav_or_path"),
        (np.zeros(16_000), "wav_or_path"),
        (np.zeros((2, 16_000)), "wav_or_path"),
        (np.arange(16_000), "wav_or_path"),  # integers: no float waveform
    ]
    for bad, name in cases:
        with pytest.raises(ValueError, match=name):
            preprocess_speaker_wav(bad)
    for sr in ("16000", 16000.0, True, 0):
        with pytest.raises(ValueError, match="source_sr"):
            preprocess_speaker_wav(synthetic_voice(16000), source_sr=sr)
    with pytest.raises(FileNotFoundError, match="missing.wav"):
        preprocess_speaker_wav(tmp_path / "missing.wav")
    for bad in (np.zeros(399), np.array([np.inf] * 500), np.zeros((1, 500))):
        with pytest.raises(ValueError, match="`wav`"):
            speaker_mel(bad)
