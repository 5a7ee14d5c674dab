"""The Tacotron-1 family's audio (keithito/tacotron and mimic2 ``util/audio.py``, both pinned to librosa 0.5.1).

References written here from the originals' formulas, independent of the library's code:

* the spectrograms: today's ``librosa.stft(..., pad_mode="reflect")`` (librosa 0.5.1's default padding) and
  ``librosa.filters.mel(sr=..., n_fft=..., n_mels=..., fmin=..., fmax=...)`` (0.5.1's ``norm=1`` is today's
  Slaney default), the dB floor 1e-5, ``- ref_level_db``, ``clip((S - min) / -min, 0, 1)``;
* librosa 0.5.1's ``stft`` / ``istft`` restated frame by frame (``fft(...).conj()``; ``istft`` conjugating back and
  dividing by the window-sum-square), checked against today's librosa, then the original ``inv_spectrogram``
  (``_denormalize``, ``+ ref``, ``_db_to_amp``, ``** power``, ``_griffin_lim`` with injected phases,
  ``inv_preemphasis`` with ``scipy.signal.lfilter``) on top of them, in float64;
* ``find_endpoint``: cases derived by hand from the loop.
"""
from __future__ import annotations

import librosa
import numpy as np
import pytest
import scipy.signal

from speechblocks import audio
from speechblocks.tacotron1_hparams import TACOTRON1_PRESETS
from tests.helpers.audio_signals import synthetic_speech

#: (sample_rate, n_fft, hop, win, fmin, fmax, pre-emphasis, Griffin-Lim iterations) from each hparams.py
_ORIGINAL = {"keithito": (20000, 2048, 250, 1000, 0.0, None, 0.97, 60),
             "mimic2": (22000, 2048, 275, 1100, 125.0, 7600.0, None, 50)}


def reference_spectrograms(wav: np.ndarray, preset: str) -> tuple[np.ndarray, np.ndarray]:
    """The original ``spectrogram(y)`` and ``melspectrogram(y)``, transposed to ``(frames, channels)``."""
    sr, n_fft, hop, win, fmin, fmax, k, _ = _ORIGINAL[preset]
    y = wav.astype(np.float64)
    if k is not None:
        y = scipy.signal.lfilter([1, -k], [1], y)
    mag = np.abs(librosa.stft(y=y, n_fft=n_fft, hop_length=hop, win_length=win, pad_mode="reflect"))
    basis = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=80, fmin=fmin, fmax=fmax)

    def finish(s):
        db = 20 * np.log10(np.maximum(1e-5, s)) - 20
        return np.clip((db + 100) / 100, 0, 1).T

    return finish(mag), finish(np.dot(basis, mag))


def _stft_051(y, n_fft, hop, win):
    """librosa 0.5.1 ``stft`` (reflect centre padding; the conjugated DFT), column by column, complex128."""
    window = np.zeros(n_fft)
    left = (n_fft - win) // 2
    window[left:left + win] = scipy.signal.get_window("hann", win, fftbins=True)
    y = np.pad(y, n_fft // 2, mode="reflect")
    n_frames = 1 + (len(y) - n_fft) // hop
    out = np.empty((n_fft // 2 + 1, n_frames), dtype=np.complex128)
    for t in range(n_frames):
        out[:, t] = np.fft.fft(window * y[t * hop:t * hop + n_fft])[:n_fft // 2 + 1].conj()
    return out


def _istft_051(D, hop, win):
    """librosa 0.5.1 ``istft`` (conjugates back, window-sum-square normalisation, centre trim), float64."""
    n_fft = 2 * (D.shape[0] - 1)
    window = np.zeros(n_fft)
    left = (n_fft - win) // 2
    window[left:left + win] = scipy.signal.get_window("hann", win, fftbins=True)
    y = np.zeros(n_fft + hop * (D.shape[1] - 1))
    wss = np.zeros_like(y)
    for t in range(D.shape[1]):
        spec = np.concatenate((D[:, t].conj(), D[-2:0:-1, t]))
        y[t * hop:t * hop + n_fft] += window * np.fft.ifft(spec).real
        wss[t * hop:t * hop + n_fft] += window * window
    nonzero = wss > np.finfo(np.float32).tiny
    y[nonzero] /= wss[nonzero]
    return y[n_fft // 2:-(n_fft // 2)]


def reference_inv_spectrogram(linear: np.ndarray, preset: str, angles: np.ndarray) -> np.ndarray:
    """The original ``inv_spectrogram`` of ``linear`` ``(frames, num_freq)`` with ``_griffin_lim``'s random phases
    replaced by ``angles``."""
    _, _, hop, win, _, _, k, iters = _ORIGINAL[preset]
    S = np.power(10.0, ((np.clip(linear.T.astype(np.float64), 0, 1) * 100 - 100) + 20) * 0.05) ** 1.5
    S_complex = np.abs(S).astype(np.complex128)
    y = _istft_051(S_complex * angles, hop, win)
    for _ in range(iters):
        y = _istft_051(S_complex * np.exp(1j * np.angle(_stft_051(y, 2048, hop, win))), hop, win)
    return y if k is None else scipy.signal.lfilter([1], [1, -k], y)


def _draw(shape, seed):
    return np.exp(2j * np.pi * np.random.default_rng(seed).random(shape))


# -- the presets -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["keithito", "mimic2"])
def test_presets_are_the_originals_values(preset):
    hp = audio.audio_hparams(preset)
    sr, n_fft, hop, win, fmin, fmax, k, iters = _ORIGINAL[preset]
    original = TACOTRON1_PRESETS[preset]
    assert (hp.sample_rate, hp.n_fft, hp.hop_size, hp.win_size) == (sr, n_fft, hop, win)
    assert (hp.num_mels, hp.num_freq, hp.fmin, hp.fmax) == (80, 1025, fmin, sr / 2 if fmax is None else fmax)
    assert hp.preemphasize == (k is not None) and (k is None or hp.preemphasis == k)
    assert (hp.griffin_lim_iters, hp.power, hp.min_level_db, hp.ref_level_db) == (iters, 1.5, -100, 20)
    assert (hp.signal_normalization, hp.allow_clipping_in_normalization, hp.symmetric_mels) == (True, True, False)
    assert (hp.max_abs_value, hp.magnitude_power, hp.stft_pad_mode, hp.rescale) == (1.0, 1.0, "reflect", False)
    assert hp.trim_silence is False and hp.preset == preset
    assert hp.griffin_lim_iters == original["griffin_lim_iters"] and hp.sample_rate == original["sample_rate"]
    assert audio.audio_hparams(hp) == hp
    if preset == "mimic2":
        assert (hp.trim_top_db, hp.trim_fft_size, hp.trim_hop_size) == (40, 1024, 256)


def test_a_mapping_of_tacotron1_names_derives_the_sizes():
    hp = audio.audio_hparams({"sample_rate": 16000, "num_freq": 513, "frame_length_ms": 25, "frame_shift_ms": 10,
                              "min_mel_freq": 55, "max_mel_freq": 7000}, preset="mimic2")
    assert (hp.n_fft, hp.win_size, hp.hop_size, hp.fmin, hp.fmax) == (1024, 400, 160, 55.0, 7000.0)
    hp = audio.audio_hparams({"sample_rate": 16000, "num_freq": 513}, preset="keithito")
    assert (hp.n_fft, hp.win_size, hp.hop_size, hp.fmin, hp.fmax) == (1024, 800, 200, 0.0, 8000.0)
    with pytest.raises(ValueError, match="preset"):
        audio.audio_hparams("tacotron1")


# -- the spectrograms ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["keithito", "mimic2"])
def test_spectrograms_equal_the_original_formulas(preset):
    sr = _ORIGINAL[preset][0]
    wav = synthetic_speech(sr, 1.2, seed=3)
    lin_ref, mel_ref = reference_spectrograms(wav, preset)
    out = audio.spectrograms(wav, preset)
    assert out["linear"].shape == lin_ref.shape == (1 + wav.size // _ORIGINAL[preset][2], 1025)
    assert out["mel"].shape == (lin_ref.shape[0], 80) and out["mel"].dtype == np.float32
    assert np.max(np.abs(out["linear"] - lin_ref)) < 1e-5
    assert np.max(np.abs(out["mel"] - mel_ref)) < 1e-5
    assert 0.0 <= out["linear"].min() and out["linear"].max() <= 1.0


@pytest.mark.parametrize("preset", ["keithito", "mimic2"])
def test_the_mel_basis_is_librosa_slaney(preset):
    sr, n_fft, _, _, fmin, fmax, _, _ = _ORIGINAL[preset]
    ref = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=80, fmin=fmin, fmax=fmax, htk=False, norm="slaney")
    np.testing.assert_array_equal(audio.mel_basis(preset), ref)


def test_the_librosa_051_restatement_is_todays_stft_conjugated():
    y = synthetic_speech(20000, 0.3, seed=1).astype(np.float64)
    D = _stft_051(y, 2048, 250, 1000)
    today = librosa.stft(y=y, n_fft=2048, hop_length=250, win_length=1000, pad_mode="reflect")
    assert np.max(np.abs(D - today.conj())) < 1e-9
    back = librosa.istft(today, hop_length=250, win_length=1000)
    assert np.max(np.abs(_istft_051(D, 250, 1000) - back)) < 1e-9


# -- the wav path ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["keithito", "mimic2"])
def test_inversion_equals_the_original_inv_spectrogram(preset):
    sr = _ORIGINAL[preset][0]
    linear = audio.linearspectrogram(synthetic_speech(sr, 0.4, seed=5), preset)
    angles = _draw((1025, linear.shape[0]), 7)
    ref = reference_inv_spectrogram(linear, preset, angles)
    got = audio.tacotron1_wav(linear, preset, angles=angles, trim=False)
    assert got.dtype == np.float32 and got.shape == ref.shape == ((linear.shape[0] - 1) * _ORIGINAL[preset][2],)
    assert np.max(np.abs(got - ref)) < 1e-5
    seeded = audio.tacotron1_wav(linear, preset, seed=7, trim=False)
    np.testing.assert_array_equal(seeded, got)


def test_fewer_iterations_and_the_cut():
    linear = audio.linearspectrogram(synthetic_speech(20000, 0.4, seed=6), "keithito")
    angles = _draw((1025, linear.shape[0]), 2)
    full = audio.tacotron1_wav(linear, "keithito", angles=angles, n_iter=3, trim=False)
    one = audio.tacotron1_wav(linear, "keithito", angles=angles, n_iter=3)
    np.testing.assert_array_equal(one, full[:audio.find_endpoint(full, "keithito")])
    with pytest.raises(ValueError, match="linear"):
        audio.tacotron1_wav(linear[:, :80], "keithito")
    with pytest.raises(ValueError, match="angles"):
        audio.tacotron1_wav(linear, "keithito", angles=angles[:, 1:])


def test_a_long_silence_is_cut():
    sr = 20000
    loud = synthetic_speech(sr, 0.5, seed=4, lead=0.0, tail=0.0)
    wav = np.concatenate([loud, np.zeros(2 * sr, np.float32)])
    linear = audio.linearspectrogram(wav, "keithito")
    out = audio.tacotron1_wav(linear, "keithito", seed=0, n_iter=5)
    assert loud.size <= out.size < loud.size + sr


# -- find_endpoint ---------------------------------------------------------------------------------------------------
def test_find_endpoint_hand_cases():
    # 20 kHz: window int(20000 * 0.8) = 16000, hop 4000, x in range(4000, len - 16000, 4000)
    wav = np.zeros(40000)
    wav[:10000] = 0.5
    assert audio.find_endpoint(wav, "keithito") == 12000 + 4000  # x = 4000, 8000 see the loud part; 12000 not
    assert audio.find_endpoint(np.full(40000, 0.5), "keithito") == 40000
    assert audio.find_endpoint(np.full(40000, -0.5), "keithito") == 8000  # the signed max, as the original
    assert audio.find_endpoint(np.full(40000, 0.01), "keithito") == 40000  # 10 ** (-40 / 20) is not below itself
    assert audio.find_endpoint(np.zeros(20000), "keithito") == 20000  # range(4000, 4000) is empty
    assert audio.find_endpoint(np.zeros(20001), "keithito") == 8000
    assert audio.find_endpoint(np.zeros(0), "keithito") == 0
    # 22 kHz: window 17600, hop 4400
    wav = np.zeros(50000)
    wav[30000] = 1.0
    assert audio.find_endpoint(wav, "mimic2") == 4400 + 4400  # [4400, 22000) is silent
    wav[:30000] = 0.2
    assert audio.find_endpoint(wav, "mimic2") == 30800 + 4400  # the last x (< 50000 - 17600) sees [30800, 48400)
    wav[30800:] = 0.3
    assert audio.find_endpoint(wav, "mimic2") == 50000
    # threshold -20 dB (0.1), 0.1 s at 20 kHz: window 2000, hop 500
    wav = np.concatenate([np.full(3000, 0.5), np.full(3000, 0.05)])
    assert audio.find_endpoint(wav, "keithito", threshold_db=-20, min_silence_sec=0.1) == 3000 + 500


def test_find_endpoint_refuses_bad_input():
    with pytest.raises(ValueError, match="wav"):
        audio.find_endpoint(np.zeros((2, 100)), "keithito")
    with pytest.raises(ValueError, match="wav"):
        audio.find_endpoint(np.array([0.0, np.nan]), "keithito")
    with pytest.raises(ValueError, match="min_silence_sec"):
        audio.find_endpoint(np.zeros(100), "keithito", min_silence_sec=1e-4)
    with pytest.raises(ValueError, match="threshold_db"):
        audio.find_endpoint(np.zeros(100), "keithito", threshold_db=float("nan"))
