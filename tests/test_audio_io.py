"""Waveforms in and out: load_wav against librosa.load, save_wav against the original formula, rescale, trimming
against librosa's RMS with librosa 0.6-0.8's reflect padding, pre-emphasis against its difference equation; and
every bad input named in the error."""
import os

import librosa
import numpy as np
import pytest
import soundfile as sf
from scipy.io import wavfile

from speechblocks.audio import (
    audio_hparams,
    inv_preemphasis,
    load_wav,
    preemphasis,
    rescale,
    save_wav,
    trim_silence,
)
from tests.helpers.audio_signals import flite_wav, synthetic_speech


@pytest.mark.parametrize("source", ["synthetic", "flite"])
def test_load_wav_equals_librosa_load(tmp_path, source):
    """At the preset's rate the samples are the file's (int16 / 32768, as librosa.load); at another rate the
    resampling is librosa.load's soxr_hq (our documented deviation from the original's resampy)."""
    path = tmp_path / "x.wav"
    if source == "flite":
        if not flite_wav(path):
            pytest.skip("flite not installed (the synthetic case covers this test)")
    else:
        sf.write(path, synthetic_speech(16000, 0.5), 16000, subtype="PCM_16")
    for preset in ("rtvc", "rayhane"):  # 16 kHz: read as is; 22.05 kHz: resampled
        hp = audio_hparams(preset)
        ours = load_wav(path, hp)
        ref = librosa.load(path, sr=hp.sample_rate, res_type="soxr_hq")[0]
        assert ours.dtype == np.float32 and ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, atol=1e-6)
    pcm = wavfile.read(path)[1]
    np.testing.assert_array_equal(load_wav(path, "rtvc"), pcm / np.float32(32768))


def test_load_wav_stereo_flac_ogg(tmp_path):
    x = synthetic_speech(16000, 0.4)
    stereo = np.stack([x, 0.5 * x], axis=1)
    sf.write(tmp_path / "s.flac", stereo, 16000, subtype="PCM_24")
    np.testing.assert_allclose(load_wav(tmp_path / "s.flac", "rtvc"), 0.75 * x, atol=1e-6)  # channel mean
    sf.write(tmp_path / "s.ogg", x, 16000)
    y = load_wav(tmp_path / "s.ogg", "rtvc")
    assert y.shape == x.shape and np.corrcoef(x, y)[0, 1] > 0.95  # lossy, yet the same signal


def test_load_wav_bad_files_are_named(tmp_path):
    text = tmp_path / "notes.wav"
    text.write_text("not audio at all")
    with pytest.raises(ValueError, match="notes.wav' is not a readable audio file"):
        load_wav(text, "rtvc")
    with pytest.raises(ValueError, match="no such audio file: .*missing.wav"):
        load_wav(tmp_path / "missing.wav", "rtvc")
    sf.write(tmp_path / "empty.wav", np.zeros(0), 16000)
    with pytest.raises(ValueError, match="empty.wav' holds no samples"):
        load_wav(tmp_path / "empty.wav", "rtvc")


def test_save_wav_is_the_original_formula(tmp_path):
    x = synthetic_speech(16000, 0.3) * np.float32(1.7)
    before = x.copy()
    save_wav(x, tmp_path / "out.wav", 16000)
    sr, pcm = wavfile.read(tmp_path / "out.wav")
    expected = (x.astype(np.float64) * (32767 / max(0.01, np.abs(x).max()))).astype(np.int16)
    assert sr == 16000 and pcm.dtype == np.int16
    assert np.abs(pcm.astype(int) - expected).max() <= 1  # float32 vs float64 scaling, truncated
    assert pcm.max() == 32767 or pcm.min() == -32767
    np.testing.assert_array_equal(x, before)  # the caller's array is not scaled in place
    quiet = np.full(100, 0.001)  # peak below 0.01: scaled by 32767 / 0.01, not up to full scale
    save_wav(quiet, tmp_path / "quiet.wav", 8000)
    assert set(wavfile.read(tmp_path / "quiet.wav")[1]) == {3276}
    assert sorted(os.listdir(tmp_path)) == ["out.wav", "quiet.wav"]  # no temporary file left


def test_save_wav_refuses_bad_input_and_writes_nothing(tmp_path):
    bad = np.array([0.1, np.nan, 0.2])
    with pytest.raises(ValueError, match="nan.wav' holds NaN or inf"):
        save_wav(bad, tmp_path / "nan.wav", 16000)
    with pytest.raises(ValueError, match="inf.wav' holds NaN or inf"):
        save_wav(np.array([np.inf]), tmp_path / "inf.wav", 16000)
    with pytest.raises(ValueError, match="output directory of .*nowhere.*x.wav' does not exist"):
        save_wav(np.ones(10), tmp_path / "nowhere" / "x.wav", 16000)
    with pytest.raises(ValueError, match="e.wav' holds no samples"):
        save_wav(np.zeros(0), tmp_path / "e.wav", 16000)
    with pytest.raises(ValueError, match="s.wav' must be a 1-D float array"):
        save_wav(np.ones((2, 10)), tmp_path / "s.wav", 16000)
    with pytest.raises(ValueError, match="`sample_rate` must be a positive integer"):
        save_wav(np.ones(10), tmp_path / "r.wav", 0)
    assert os.listdir(tmp_path) == []


def test_rescale():
    x = synthetic_speech(16000, 0.2)
    y = rescale(x, 0.9)
    np.testing.assert_allclose(y, x / np.abs(x).max() * 0.9, rtol=1e-7)
    assert np.isclose(np.abs(y).max(), 0.9)
    with pytest.raises(ValueError, match="`wav` is silent"):
        rescale(np.zeros(100), 0.9)
    with pytest.raises(ValueError, match="`wav` holds no samples"):
        rescale(np.zeros(0), 0.9)


def _reference_trim(y, top_db, frame_length, hop_length):
    """librosa.effects.trim as librosa 0.6-0.8 computed it: the frame RMS with pad_mode='reflect'."""
    rms = librosa.feature.rms(y=y, frame_length=frame_length, hop_length=hop_length, pad_mode="reflect")[0]
    keep = np.flatnonzero(librosa.amplitude_to_db(rms, ref=np.max, top_db=None) > -top_db)
    start, end = keep[0] * hop_length, min(y.size, (keep[-1] + 1) * hop_length)
    return y[start:end]


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_trim_silence(preset):
    hp = audio_hparams(preset)
    x = synthetic_speech(hp.sample_rate, 1.0, lead=0.3, tail=0.3)
    ours = trim_silence(x, hp)
    np.testing.assert_array_equal(ours, _reference_trim(x, hp.trim_top_db, hp.trim_fft_size, hp.trim_hop_size))
    # quiet edges: the padding does not matter, today's librosa.effects.trim agrees
    today = librosa.effects.trim(x, top_db=hp.trim_top_db, frame_length=hp.trim_fft_size,
                                 hop_length=hp.trim_hop_size)[0]
    np.testing.assert_array_equal(ours, today)
    assert 0.3 * x.size < ours.size < 0.7 * x.size
    loud = x[int(0.3 * hp.sample_rate):]  # starts in the voiced stretch: reflect padding decides the first frame
    np.testing.assert_array_equal(trim_silence(loud, hp), _reference_trim(loud, hp.trim_top_db,
                                                                          hp.trim_fft_size, hp.trim_hop_size))
    with pytest.raises(ValueError, match="trim_silence: `wav` holds NaN"):
        trim_silence(np.array([0.0, np.nan, 1.0]), hp)


def test_preemphasis_difference_equation():
    x = synthetic_speech(16000, 0.1).astype(np.float64)
    y = preemphasis(x, 0.97)
    expected = x.copy()
    expected[1:] -= 0.97 * x[:-1]
    np.testing.assert_allclose(y, expected, atol=1e-12)
    np.testing.assert_allclose(inv_preemphasis(y, 0.97), x, atol=1e-9)
    assert preemphasis(x.astype(np.float32), 0.97).dtype == np.float64  # lfilter's type, as the originals
