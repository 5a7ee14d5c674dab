"""torch_layers.griffin_lim: the STFT / ISTFT against librosa (both pad modes, win_size < n_fft, signals
shorter than the padding), Griffin-Lim against the originals' librosa loop and speechblocks.audio given the
same initial phases (float64 and float32, tolerances measured in tests/helpers/griffin_lim_cases.py), batched
== one by one, the inverse pre-emphasis against scipy.signal.lfilter, the inversions against
speechblocks.audio for both presets, and bad inputs named."""
import numpy as np
import pytest
import torch
from scipy.signal import lfilter

import torch_layers
from speechblocks import audio
from tests.helpers import griffin_lim_cases as gc
from torch_layers.griffin_lim import (
    griffin_lim,
    inv_linear_spectrogram,
    inv_mel_spectrogram,
    inv_preemphasis,
    istft,
    stft,
)

#: iterations of the inversion checks (the 60-iteration float32 bound is proven on griffin_lim itself)
N_INV = 10


def _peak_close(ours, ref, tol):
    ours = ours.numpy() if isinstance(ours, torch.Tensor) else ours
    assert ours.shape == ref.shape
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    assert err <= tol, f"max error {err:.2e} of the peak > {tol:.0e}"


def test_exported_from_the_package_root():
    assert torch_layers.griffin_lim is griffin_lim
    assert torch_layers.inv_mel_spectrogram is inv_mel_spectrogram
    assert torch_layers.inv_linear_spectrogram is inv_linear_spectrogram


@pytest.mark.filterwarnings("ignore:n_fft=.*is too large for input signal")
@pytest.mark.parametrize("n_fft,hop,win,mode", gc.STFT_SIZES)
def test_stft_and_istft_equal_librosa(n_fft, hop, win, mode):
    import librosa

    g = np.random.default_rng(n_fft + win)
    for n in (3000, 3 * hop, 7):  # 7 samples: numpy's repeated reflection
        x = g.standard_normal(n)
        ref = librosa.stft(x, n_fft=n_fft, hop_length=hop, win_length=win, pad_mode=mode)
        ours = stft(torch.tensor(x), n_fft=n_fft, hop_size=hop, win_size=win, pad_mode=mode)
        assert ours.dtype == torch.complex128
        _peak_close(ours, ref, 1e-13)
        ours32 = stft(torch.tensor(x, dtype=torch.float32)[None], n_fft=n_fft, hop_size=hop, win_size=win,
                      pad_mode=mode)
        assert ours32.dtype == torch.complex64
        _peak_close(ours32[0], ref, 1e-6)
    if n_fft % 2 == 0:
        spec = g.standard_normal((1 + n_fft // 2, 9)) + 1j * g.standard_normal((1 + n_fft // 2, 9))
        ref = librosa.istft(spec, hop_length=hop, win_length=win, n_fft=n_fft)
        _peak_close(istft(torch.tensor(spec), n_fft=n_fft, hop_size=hop, win_size=win), ref, 1e-13)


@pytest.mark.parametrize("preset", gc.PRESETS)
def test_griffin_lim_equals_the_original_loop_and_the_reference(preset):
    hp, _, S, angles, _, _ = gc.case(preset)
    ref = gc.original_griffin_lim(S, hp, 60, angles)
    y64 = griffin_lim(torch.tensor(S.T), n_iter=60, angles=torch.tensor(angles), **gc.sizes(hp))
    assert y64.dtype == torch.float64 and y64.shape == (hp.hop_size * (S.shape[1] - 1),)
    _peak_close(y64, ref, gc.FLOAT64_PEAK_TOL)
    reference = audio.griffin_lim(S.T, hp, n_iter=60, angles=angles).astype(np.float64)
    _peak_close(y64, reference, gc.REFERENCE_PEAK_TOL)
    y32 = griffin_lim(torch.tensor(S.T, dtype=torch.float32), n_iter=60, angles=torch.tensor(angles),
                      **gc.sizes(hp))
    assert y32.dtype == torch.float32
    _peak_close(y32, ref, gc.FLOAT32_PEAK_TOL)
    _peak_close(griffin_lim(torch.tensor(S.T), n_iter=0, angles=torch.tensor(angles), **gc.sizes(hp)),
                gc.original_griffin_lim(S, hp, 0, angles), 1e-13)


def test_batched_equals_one_by_one_and_generator_reproduces():
    hp, _, S, angles, _, _ = gc.case("rayhane")
    S2 = gc.case("rayhane", seed=1)[2][:, :S.shape[1]]
    mags = torch.tensor(np.stack([S.T, S2.T, 0.5 * S.T]), dtype=torch.float32)
    g = np.random.default_rng(3)
    ang = np.exp(2j * np.pi * g.random((3,) + S.shape))
    batched = griffin_lim(mags, n_iter=5, angles=torch.tensor(ang), **gc.sizes(hp))
    assert batched.shape == (3, hp.hop_size * (S.shape[1] - 1))
    for i in range(3):
        one = griffin_lim(mags[i], n_iter=5, angles=torch.tensor(ang[i]), **gc.sizes(hp))
        torch.testing.assert_close(batched[i], one, atol=1e-6, rtol=0)
    shared = griffin_lim(mags, n_iter=5, angles=torch.tensor(ang[0]), **gc.sizes(hp))  # (num_freq, frames)
    torch.testing.assert_close(shared[0], batched[0], atol=1e-6, rtol=0)
    with torch.inference_mode():
        a = griffin_lim(mags, n_iter=3, generator=torch.Generator().manual_seed(0), **gc.sizes(hp))
    b = griffin_lim(mags, n_iter=3, generator=torch.Generator().manual_seed(0), **gc.sizes(hp))
    assert torch.equal(a, b) and torch.isfinite(a).all()
    assert not torch.equal(a, griffin_lim(mags, n_iter=3, generator=torch.Generator().manual_seed(1),
                                          **gc.sizes(hp)))


def test_exact_zero_bins_take_phase_one():
    """Zero initial phases: the first inverse STFT is silence, every bin of its STFT is exactly 0 and takes
    phase 1 (np.angle(0) = 0), so one iteration gives istft(S) -- as the original loop."""
    hp, _, S, _, _, _ = gc.case("rtvc")
    zeros = np.zeros(S.shape, complex)
    y = griffin_lim(torch.tensor(S.T), n_iter=1, angles=torch.tensor(zeros), **gc.sizes(hp))
    _peak_close(y, gc.original_griffin_lim(S, hp, 1, zeros), 1e-13)
    _peak_close(y, gc.istft(S.astype(complex), hp), 1e-13)


@pytest.mark.parametrize("k", [0.97, 0.999, 0.0])
def test_inv_preemphasis_equals_lfilter(k):
    x = np.random.default_rng(0).standard_normal((2, 20000))
    ref = lfilter([1.0], [1.0, -k], x)
    _peak_close(inv_preemphasis(torch.tensor(x), k), ref, 1e-14)
    x32 = x.astype(np.float32)
    ref32 = lfilter([1.0], [1.0, -k], x32.astype(np.float64))
    # float32: a few ulps of sum_j k**j |x| (|y| is up to ~1/(1-k) of |x|); measured 2e-7 of the peak
    _peak_close(inv_preemphasis(torch.tensor(x32), k), ref32, 1e-6)
    for n in (1, 2, 3):
        np.testing.assert_allclose(inv_preemphasis(torch.tensor(x[0, :n]), k).numpy(), ref[0, :n], rtol=1e-14)


@pytest.mark.parametrize("preset", gc.PRESETS)
def test_inversions_equal_the_reference(preset):
    hp, _, _, angles, mel, lin = gc.case(preset)
    for fn, ref_fn, spec in ((inv_mel_spectrogram, audio.inv_mel_spectrogram, mel),
                             (inv_linear_spectrogram, audio.inv_linear_spectrogram, lin)):
        ref = ref_fn(spec, hp, n_iter=N_INV, angles=angles).astype(np.float64)
        y64 = fn(torch.tensor(spec, dtype=torch.float64), preset, n_iter=N_INV, angles=torch.tensor(angles))
        assert y64.dtype == torch.float64
        _peak_close(y64, ref, gc.REFERENCE_PEAK_TOL)
        y32 = fn(torch.tensor(spec)[None], hp, n_iter=N_INV, angles=torch.tensor(angles)[None])
        assert y32.dtype == torch.float32 and y32.shape == (1,) + ref.shape
        _peak_close(y32[0], ref, gc.FLOAT32_PEAK_TOL)


def test_bad_inputs_are_named():
    hp = audio.audio_hparams("rtvc")
    mel = torch.zeros(2, 20, 80)
    with pytest.raises(ValueError, match=r"inv_mel_spectrogram: argument `mel` must have shape "
                                         r"\(batch, frames, 80\).*got shape \[2, 80, 20\]"):
        inv_mel_spectrogram(mel.transpose(1, 2), hp)
    with pytest.raises(ValueError, match=r"`mel` must have shape \(batch, frames, 80\)"):
        inv_mel_spectrogram(torch.zeros(1, 2, 20, 80), hp)
    for bad_value in (float("nan"), float("inf")):
        bad = mel.clone()
        bad[1, 3, 4] = bad_value
        with pytest.raises(ValueError, match="inv_mel_spectrogram: argument `mel` holds NaN or inf"):
            inv_mel_spectrogram(bad, hp)
    with pytest.raises(ValueError, match=r"inv_linear_spectrogram: argument `linear` must have shape "
                                         r"\(batch, frames, 401\)"):
        inv_linear_spectrogram(mel, hp)
    with pytest.raises(ValueError, match=r"griffin_lim: argument `magnitudes` must have shape "
                                         r"\(batch, frames, 401\)"):
        griffin_lim(torch.zeros(2, 20, 400), **gc.sizes(hp))
    with pytest.raises(ValueError, match="griffin_lim: argument `magnitudes` holds NaN or inf"):
        griffin_lim(torch.full((5, 401), float("inf")), **gc.sizes(hp))
    with pytest.raises(ValueError, match="argument `magnitudes` must be a float tensor"):
        griffin_lim(torch.zeros(5, 401, dtype=torch.int64), **gc.sizes(hp))
    with pytest.raises(ValueError, match=r"`angles` must be a complex tensor of shape "
                                         r"\(batch, num_freq, frames\) = \(2, 401, 20\) or \(401, 20\)"):
        inv_mel_spectrogram(mel, hp, angles=torch.ones(20, 401, dtype=torch.complex64))
    with pytest.raises(ValueError, match="`angles` holds NaN or inf"):
        inv_mel_spectrogram(mel, hp, angles=torch.full((401, 20), complex(float("nan"), 0)))
    with pytest.raises(ValueError, match="`n_iter` must be an integer >= 0"):
        inv_mel_spectrogram(mel, hp, n_iter=-1)
    with pytest.raises(ValueError, match="`n_iter` must be an integer >= 0"):
        griffin_lim(torch.zeros(5, 401), n_iter=-1, **gc.sizes(hp))
    with pytest.raises(ValueError, match="`pad_mode` must be one of"):
        griffin_lim(torch.zeros(5, 401), n_fft=800, hop_size=200, win_size=800, pad_mode="edge")
    with pytest.raises(ValueError, match=r"`win_size` \(900\) must not exceed `n_fft` \(800\)"):
        griffin_lim(torch.zeros(5, 401), n_fft=800, hop_size=200, win_size=900)
    with pytest.raises(ValueError, match="at least 2 frames"):
        griffin_lim(torch.zeros(1, 401), **gc.sizes(hp))
