"""Spectrograms against independent references: librosa.stft / istft / filters.mel called with the originals'
settings (pad modes!), the originals' formulas written out in float64, hand-derived values (normalisation
endpoints, a pure tone's mel and linear peak), each preset's whole per-utterance order, and bad inputs."""
import librosa
import numpy as np
import pytest
import soundfile as sf
from scipy.signal import lfilter

import speechblocks.audio.spectrogram as spectrogram_module
from speechblocks.audio import (
    audio_hparams,
    db_to_amp,
    denormalize,
    inv_mel_basis,
    istft,
    linearspectrogram,
    mel_basis,
    melspectrogram,
    normalize,
    recording_features,
    stft,
)
from tests.helpers.audio_signals import flite_wav, synthetic_speech

PRESETS = ["rtvc", "rayhane"]


def _librosa_stft(x, hp):
    return librosa.stft(np.asarray(x, np.float64), n_fft=hp.n_fft, hop_length=hp.hop_size, win_length=hp.win_size,
                        window="hann", center=True, pad_mode=hp.stft_pad_mode)


def _original_spectrograms(x, hp):
    """The originals' melspectrogram / linearspectrogram in float64, transposed: RTVC pre-emphasises inside,
    Rayhane raises |D| to magnitude_power (x is then the already pre-emphasised signal)."""
    if hp.preemphasis_in_spectrogram:
        x = lfilter([1, -hp.preemphasis], [1], x)
    mag = np.abs(_librosa_stft(x, hp)) ** hp.magnitude_power
    basis = librosa.filters.mel(sr=hp.sample_rate, n_fft=hp.n_fft, n_mels=hp.num_mels, fmin=hp.fmin, fmax=hp.fmax)
    floor = 10 ** (hp.min_level_db / 20)
    out = []
    for S in (basis.astype(np.float64) @ mag, mag):
        S = 20 * np.log10(np.maximum(floor, S)) - hp.ref_level_db
        S = np.clip(2 * hp.max_abs_value * (S - hp.min_level_db) / -hp.min_level_db - hp.max_abs_value,
                    -hp.max_abs_value, hp.max_abs_value)  # both presets: symmetric, clipped
        out.append(S.T)
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_stft_and_istft_equal_librosa(preset):
    hp = audio_hparams(preset)
    x = synthetic_speech(hp.sample_rate, 0.3, seed=1).astype(np.float64)
    D = stft(x, hp)
    ref = _librosa_stft(x, hp)
    assert D.shape == ref.shape == (hp.num_freq, 1 + x.size // hp.hop_size)
    np.testing.assert_allclose(D, ref, atol=1e-10)
    y = istft(D, hp)
    y_ref = librosa.istft(ref, hop_length=hp.hop_size, win_length=hp.win_size, window="hann", center=True)
    assert y.shape == y_ref.shape == (hp.hop_size * (D.shape[1] - 1),)
    np.testing.assert_allclose(y, y_ref, atol=1e-12)
    np.testing.assert_allclose(y, x[:y.size], atol=1e-12)  # perfect reconstruction (COLA)
    D32 = stft(x.astype(np.float32), hp)  # single precision path
    assert D32.dtype == np.complex64
    np.testing.assert_allclose(D32, ref, atol=2e-5 * np.abs(ref).max())
    assert istft(D32, hp).dtype == np.float32
    other = "constant" if hp.stft_pad_mode == "reflect" else "reflect"
    assert not np.allclose(D[:, 0], librosa.stft(x, n_fft=hp.n_fft, hop_length=hp.hop_size,
                                                 win_length=hp.win_size, pad_mode=other)[:, 0])
    with pytest.raises(ValueError, match=rf"`spec` must have shape \(num_freq, frames\) = \({hp.num_freq}, frames"):
        istft(D.T, hp)


def test_mel_basis_and_its_pseudo_inverse():
    for preset in PRESETS:
        hp = audio_hparams(preset)
        basis = mel_basis(hp)
        ref = librosa.filters.mel(sr=hp.sample_rate, n_fft=hp.n_fft, n_mels=hp.num_mels, fmin=hp.fmin,
                                  fmax=hp.fmax, htk=False, norm="slaney")
        assert basis.shape == (hp.num_mels, hp.num_freq) and basis.dtype == np.float32
        np.testing.assert_array_equal(basis, ref)
        inv = inv_mel_basis(preset)
        assert inv.shape == (hp.num_freq, hp.num_mels)
        np.testing.assert_array_equal(inv, np.linalg.pinv(ref))
        assert mel_basis(preset) is basis and not basis.flags.writeable  # cached, read-only
    with pytest.raises(ValueError, match=r"hparam `fmax` must be <= sample_rate // 2 = 8000"):
        mel_basis({"fmax": 8001})


def test_normalisation_endpoints_by_hand():
    """S = 0 dB -> max_abs_value, S = min_level_db -> -max_abs_value (symmetric) or 0; the midpoint -50 dB -> 0
    or 2; clipping beyond; denormalize inverts within the range."""
    S = np.array([0.0, -100.0, -50.0, 10.0, -130.0])
    for symmetric, expected in ((True, [4, -4, 0, 4, -4]), (False, [4, 0, 2, 4, 0])):
        hp = audio_hparams("rtvc", symmetric_mels=symmetric)
        np.testing.assert_allclose(normalize(S, hp), expected, atol=1e-12)
        np.testing.assert_allclose(denormalize(normalize(S[:3], hp), hp), S[:3], atol=1e-12)
        np.testing.assert_allclose(denormalize(np.array([9.0, -9.0]), hp), [0, -100])  # clipped first
        free = audio_hparams("rtvc", symmetric_mels=symmetric, allow_clipping_in_normalization=False)
        np.testing.assert_allclose(normalize(S[:3], free), expected[:3], atol=1e-12)
        np.testing.assert_allclose(denormalize(np.array([8.0]), free), [50 if symmetric else 100])
        with pytest.raises(ValueError, match=r"must lie in \[min_level_db, 0\] = \[-100.0, 0\]"):
            normalize(S, free)
    np.testing.assert_allclose(db_to_amp([0.0, 20.0, -100.0]), [1.0, 10.0, 1e-5])


@pytest.mark.parametrize("preset", PRESETS)
def test_spectrograms_equal_the_original_formulas(preset, monkeypatch):
    hp = audio_hparams(preset)
    x = synthetic_speech(hp.sample_rate, 0.6, seed=2)
    if not hp.preemphasis_in_spectrogram:  # Rayhane's preprocessor hands in the pre-emphasised signal
        x = lfilter([1, -0.97], [1], x)
    mel_ref, lin_ref = _original_spectrograms(x, hp)
    mel, lin = melspectrogram(x, hp), linearspectrogram(x, hp)
    frames = 1 + x.size // hp.hop_size
    assert mel.shape == (frames, 80) and lin.shape == (frames, hp.num_freq)
    assert mel.dtype == lin.dtype == np.float32
    np.testing.assert_allclose(mel, mel_ref, atol=2e-5)
    np.testing.assert_allclose(lin, lin_ref, atol=2e-5)
    assert mel.min() < -3.5 and mel.max() > 0  # silences near the floor, voiced frames well above
    monkeypatch.setattr(spectrogram_module, "_BLOCK_FRAMES", 7)  # blocked computation, same numbers
    np.testing.assert_array_equal(melspectrogram(x, hp), mel)


def _slaney_hz(mel):
    """Slaney's mel scale inverted (linear below 1000 Hz, 200/3 Hz a mel; log above, 27 mels an octave x 6.4)."""
    return np.where(mel < 15, mel * 200 / 3, 1000 * np.exp(np.log(6.4) / 27 * (mel - 15)))


def _slaney_mel(hz):
    return hz / (200 / 3) if hz < 1000 else 15 + np.log(hz / 1000) / (np.log(6.4) / 27)


@pytest.mark.parametrize("preset,band", [("rtvc", 40), ("rayhane", 25)])
def test_pure_tone_peaks_where_derived(preset, band):
    """A tone at the centre of mel band k (the k+1-th of num_mels + 2 points evenly spaced in Slaney mels from
    fmin to fmax) lies on the edges of bands k-1 and k+1: the mel peak is band k. The linear peak is the FFT bin
    round(f n_fft / sr)."""
    hp = audio_hparams(preset)
    points = np.linspace(_slaney_mel(hp.fmin), _slaney_mel(hp.fmax), hp.num_mels + 2)
    f = float(_slaney_hz(points[band + 1]))
    t = np.arange(hp.sample_rate // 2) / hp.sample_rate
    tone = 0.01 * np.sin(2 * np.pi * f * t)  # quiet: no bin reaches the clipping at 0 dB
    if not hp.preemphasis_in_spectrogram:
        tone = lfilter([1, -0.97], [1], tone)
    mel, lin = melspectrogram(tone, hp)[3:-3], linearspectrogram(tone, hp)[3:-3]  # away from the edges
    assert mel.max() < hp.max_abs_value and lin.max() < hp.max_abs_value
    assert set(np.argmax(mel, axis=1)) == {band}
    assert set(np.argmax(lin, axis=1)) == {round(f * hp.n_fft / hp.sample_rate)}


def _reference_features(path, hp):
    """Each original preprocessor's order with librosa as called then (load: soxr_hq, see load_wav)."""
    wav = librosa.load(path, sr=hp.sample_rate, res_type="soxr_hq")[0]
    if hp.preemphasis_in_spectrogram:  # RTVC: rescale, then melspectrogram (pre-emphasis inside)
        wav = wav / np.abs(wav).max() * hp.rescaling_max
        return wav, _original_spectrograms(wav, hp)
    rms = librosa.feature.rms(y=wav, frame_length=hp.trim_fft_size, hop_length=hp.trim_hop_size,
                              pad_mode="reflect")[0]  # Rayhane: trim as librosa 0.6-0.8, pre-emphasis, rescale
    keep = np.flatnonzero(librosa.amplitude_to_db(rms, ref=np.max, top_db=None) > -hp.trim_top_db)
    wav = wav[keep[0] * hp.trim_hop_size:min(wav.size, (keep[-1] + 1) * hp.trim_hop_size)]
    preem = lfilter([1, -hp.preemphasis], [1], wav)
    wav = wav / np.abs(wav).max() * hp.rescaling_max
    preem = preem / np.abs(preem).max() * hp.rescaling_max
    return wav, _original_spectrograms(preem, hp)


@pytest.mark.parametrize("source", ["synthetic", "flite"])
def test_recording_features_follow_each_preprocessor(tmp_path, source):
    path = tmp_path / "utt.wav"
    if source == "flite":
        if not flite_wav(path):
            pytest.skip("flite not installed (the synthetic case covers this test)")
    else:
        sf.write(path, synthetic_speech(16000, 1.2, seed=3), 16000, subtype="PCM_16")
    for preset in PRESETS:
        hp = audio_hparams(preset)
        out = recording_features(path, hp)
        wav, (mel, lin) = _reference_features(path, hp)
        assert out["wav"].dtype == np.float32 and out["wav"].shape == wav.shape
        np.testing.assert_allclose(out["wav"], wav, atol=1e-6)
        np.testing.assert_allclose(out["mel"], mel, atol=1e-4)
        np.testing.assert_allclose(out["linear"], lin, atol=1e-4)
        if preset == "rayhane":
            assert out["wav"].size < load_size(path, hp)  # trimmed
        assert set(recording_features(out["wav"] if preset == "rtvc" else wav, hp, linear=False)) == {"wav", "mel"}


def load_size(path, hp):
    return librosa.load(path, sr=hp.sample_rate, res_type="soxr_hq")[0].size


@pytest.mark.parametrize("preset", PRESETS)
def test_bad_waveforms_are_named(preset):
    hp = audio_hparams(preset)
    with pytest.raises(ValueError, match=rf"melspectrogram: `wav` holds {hp.win_size - 1} samples, fewer than "
                                         rf"{hp.win_size}"):
        melspectrogram(np.ones(hp.win_size - 1), hp)
    with pytest.raises(ValueError, match="linearspectrogram: `wav` is silent"):
        linearspectrogram(np.zeros(4000), hp)
    with pytest.raises(ValueError, match="melspectrogram: `wav` holds NaN or inf"):
        melspectrogram(np.r_[np.ones(4000), np.inf], hp)
    with pytest.raises(ValueError, match=r"melspectrogram: `wav` must be a 1-D float array of samples \(samples,\)"):
        melspectrogram(np.ones((2, 4000)), hp)
    with pytest.raises(ValueError, match="melspectrogram: `wav` holds no samples"):
        melspectrogram(np.zeros(0), hp)


def test_bad_recordings_are_named(tmp_path):
    sf.write(tmp_path / "short.wav", synthetic_speech(16000, 0.04), 16000)  # 640 samples < win_size 800
    with pytest.raises(ValueError, match=r"'.*short.wav' holds 640 samples, fewer than one analysis window "
                                         r"\(win_size = 800\)"):
        recording_features(tmp_path / "short.wav", "rtvc")
    sf.write(tmp_path / "silent.wav", np.zeros(16000), 16000)
    for preset in PRESETS:
        with pytest.raises(ValueError, match=r"'.*silent.wav' is silent"):
            recording_features(tmp_path / "silent.wav", preset)
    (tmp_path / "text.flac").write_text("hello")
    with pytest.raises(ValueError, match="text.flac' is not a readable audio file"):
        recording_features(tmp_path / "text.flac", "rayhane")
    click = np.zeros(22050)
    click[11000:11010] = 0.9  # trimmed with 256-sample frames to ~320 samples, under Rayhane's 1100 window
    with pytest.raises(ValueError, match=r"`wav` holds \d+ samples after trim_silence, fewer than one analysis"):
        recording_features(click, audio_hparams("rayhane", trim_fft_size=256, trim_hop_size=64))
