"""tf_layers.griffin_lim: the STFT / ISTFT against librosa (both pad modes, win_size < n_fft, signals
shorter than the padding), Griffin-Lim against the originals' librosa loop and speechblocks.audio given the
same initial phases (tolerances measured in tests/helpers/griffin_lim_cases.py), eagerly and in a tf.function
with unknown batch and frames, batched == one by one, the inverse pre-emphasis against scipy.signal.lfilter,
the inversions against speechblocks.audio for both presets and against the torch twin, and bad inputs
named."""
import numpy as np
import pytest
import tensorflow as tf
from scipy.signal import lfilter

import tf_layers
from speechblocks import audio
from tests.helpers import griffin_lim_cases as gc
from tf_layers.griffin_lim import (
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
    ours = np.asarray(ours)
    assert ours.shape == ref.shape
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    assert err <= tol, f"max error {err:.2e} of the peak > {tol:.0e}"


def test_exported_from_the_package_root():
    assert tf_layers.griffin_lim is griffin_lim
    assert tf_layers.inv_mel_spectrogram is inv_mel_spectrogram
    assert tf_layers.inv_linear_spectrogram is inv_linear_spectrogram


@pytest.mark.filterwarnings("ignore:n_fft=.*is too large for input signal")
@pytest.mark.parametrize("n_fft,hop,win,mode", [s for s in gc.STFT_SIZES if s[0] % 2 == 0])
def test_stft_and_istft_equal_librosa(n_fft, hop, win, mode):
    import librosa

    g = np.random.default_rng(n_fft + win)
    for n in (3000, 3 * hop, 7):  # 7 samples: numpy's repeated reflection
        x = g.standard_normal(n)
        ref = librosa.stft(x, n_fft=n_fft, hop_length=hop, win_length=win, pad_mode=mode)
        ours = stft(x, n_fft=n_fft, hop_size=hop, win_size=win, pad_mode=mode)
        assert ours.dtype == tf.complex128
        _peak_close(ours, ref, 1e-13)
        ours32 = stft(x[None].astype(np.float32), n_fft=n_fft, hop_size=hop, win_size=win, pad_mode=mode)
        assert ours32.dtype == tf.complex64
        _peak_close(ours32[0], ref, 1e-6)
    spec = g.standard_normal((1 + n_fft // 2, 9)) + 1j * g.standard_normal((1 + n_fft // 2, 9))
    ref = librosa.istft(spec, hop_length=hop, win_length=win, n_fft=n_fft)
    _peak_close(istft(spec, n_fft=n_fft, hop_size=hop, win_size=win), ref, 1e-13)


@pytest.mark.parametrize("preset", gc.PRESETS)
def test_griffin_lim_equals_the_original_loop_eagerly_and_in_tf_function(preset):
    hp, _, S, angles, _, _ = gc.case(preset)
    ref = gc.original_griffin_lim(S, hp, 60, angles)
    y64 = griffin_lim(S.T, n_iter=60, angles=angles, **gc.sizes(hp))
    assert y64.dtype == tf.float64 and y64.shape == (hp.hop_size * (S.shape[1] - 1),)
    _peak_close(y64, ref, gc.FLOAT64_PEAK_TOL)
    reference = audio.griffin_lim(S.T, hp, n_iter=60, angles=angles).astype(np.float64)
    _peak_close(y64, reference, gc.REFERENCE_PEAK_TOL)
    signature = [tf.TensorSpec([None, None, hp.num_freq], tf.float32),
                 tf.TensorSpec([None, hp.num_freq, None], tf.complex64)]
    fn = tf.function(lambda s, a: griffin_lim(s, n_iter=60, angles=a, **gc.sizes(hp)),
                     input_signature=signature)
    y32 = fn(S.T[None].astype(np.float32), angles[None].astype(np.complex64))
    assert y32.dtype == tf.float32 and y32.shape == (1,) + ref.shape
    _peak_close(y32[0], ref, gc.FLOAT32_PEAK_TOL)
    # eager float32 equals the graph
    eager = griffin_lim(S.T.astype(np.float32), n_iter=60, angles=angles.astype(np.complex64), **gc.sizes(hp))
    _peak_close(eager, y32[0].numpy(), 1e-6)


def test_batched_equals_one_by_one_and_seed_reproduces():
    hp, _, S, _, _, _ = gc.case("rayhane")
    S2 = gc.case("rayhane", seed=1)[2][:, :S.shape[1]]
    mags = np.stack([S.T, S2.T, 0.5 * S.T]).astype(np.float32)
    ang = np.exp(2j * np.pi * np.random.default_rng(3).random((3,) + S.shape))
    batched = griffin_lim(mags, n_iter=5, angles=ang, **gc.sizes(hp)).numpy()
    assert batched.shape == (3, hp.hop_size * (S.shape[1] - 1))
    for i in range(3):
        one = griffin_lim(mags[i], n_iter=5, angles=ang[i], **gc.sizes(hp)).numpy()
        np.testing.assert_allclose(batched[i], one, atol=1e-6)
    shared = griffin_lim(mags, n_iter=5, angles=ang[0], **gc.sizes(hp)).numpy()  # (num_freq, frames)
    np.testing.assert_allclose(shared[0], batched[0], atol=1e-6)
    a = griffin_lim(mags, n_iter=3, seed=0, **gc.sizes(hp)).numpy()
    assert np.isfinite(a).all()
    assert np.array_equal(a, griffin_lim(mags, n_iter=3, seed=0, **gc.sizes(hp)).numpy())
    assert not np.array_equal(a, griffin_lim(mags, n_iter=3, seed=1, **gc.sizes(hp)).numpy())


def test_exact_zero_bins_take_phase_one():
    """Zero initial phases: the first inverse STFT is silence, every bin of its STFT is exactly 0 and takes
    phase 1 (np.angle(0) = 0), so one iteration gives istft(S) -- as the original loop."""
    hp, _, S, _, _, _ = gc.case("rtvc")
    zeros = np.zeros(S.shape, complex)
    y = griffin_lim(S.T, n_iter=1, angles=zeros, **gc.sizes(hp))
    _peak_close(y, gc.original_griffin_lim(S, hp, 1, zeros), 1e-13)
    _peak_close(y, gc.istft(S.astype(complex), hp), 1e-13)
    # the last axis unknown at trace time: num_freq comes from n_fft, checked at run time
    fn = tf.function(lambda m: griffin_lim(m, n_iter=1, seed=0, **gc.sizes(hp)),
                     input_signature=[tf.TensorSpec([None, None, None], tf.float32)])
    assert fn(S.T[None].astype(np.float32)).shape == (1, y.shape[0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`magnitudes` must have shape"):
        fn(np.zeros((1, 5, 400), np.float32))


@pytest.mark.parametrize("k", [0.97, 0.999, 0.0])
def test_inv_preemphasis_equals_lfilter(k):
    x = np.random.default_rng(0).standard_normal((2, 20000))
    ref = lfilter([1.0], [1.0, -k], x)
    _peak_close(inv_preemphasis(x, k), ref, 1e-14)
    x32 = x.astype(np.float32)
    ref32 = lfilter([1.0], [1.0, -k], x32.astype(np.float64))
    fn = tf.function(lambda w: inv_preemphasis(w, k),
                     input_signature=[tf.TensorSpec([None, None], tf.float32)])
    _peak_close(fn(x32), ref32, 1e-6)  # a few ulps of sum_j k**j |x|; measured 2e-7 of the peak
    for n in (1, 2, 3):
        np.testing.assert_allclose(inv_preemphasis(x[0, :n], k).numpy(), ref[0, :n], rtol=1e-14)


@pytest.mark.parametrize("preset", gc.PRESETS)
def test_inversions_equal_the_reference_and_the_torch_twin(preset):
    import torch

    from torch_layers import inv_linear_spectrogram as torch_inv_linear
    from torch_layers import inv_mel_spectrogram as torch_inv_mel

    hp, _, _, angles, mel, lin = gc.case(preset)
    for fn, ref_fn, torch_fn, spec in (
            (inv_mel_spectrogram, audio.inv_mel_spectrogram, torch_inv_mel, mel),
            (inv_linear_spectrogram, audio.inv_linear_spectrogram, torch_inv_linear, lin)):
        ref = ref_fn(spec, hp, n_iter=N_INV, angles=angles).astype(np.float64)
        y64 = fn(spec.astype(np.float64), preset, n_iter=N_INV, angles=angles)
        assert y64.dtype == tf.float64
        _peak_close(y64, ref, gc.REFERENCE_PEAK_TOL)
        t64 = torch_fn(torch.tensor(spec, dtype=torch.float64), hp, n_iter=N_INV, angles=torch.tensor(angles))
        _peak_close(y64, t64.numpy(), 1e-12)
        y32 = fn(spec[None], hp, n_iter=N_INV, angles=angles[None])
        assert y32.dtype == tf.float32 and y32.shape == (1,) + ref.shape
        _peak_close(y32[0], ref, gc.FLOAT32_PEAK_TOL)
        t32 = torch_fn(torch.tensor(spec)[None], hp, n_iter=N_INV, angles=torch.tensor(angles)[None])
        _peak_close(y32, t32.numpy(), gc.FLOAT32_PEAK_TOL)


def test_bad_inputs_are_named():
    hp = audio.audio_hparams("rtvc")
    mel = np.zeros((2, 20, 80), np.float32)
    with pytest.raises(ValueError, match=r"inv_mel_spectrogram: argument `mel` must have shape "
                                         r"\(batch, frames, 80\).*got shape \(2, 80, 20\)"):
        inv_mel_spectrogram(mel.transpose(0, 2, 1), hp)
    with pytest.raises(ValueError, match=r"`mel` must have shape \(batch, frames, 80\)"):
        inv_mel_spectrogram(mel[None], hp)
    for bad_value in (np.nan, np.inf):
        bad = mel.copy()
        bad[1, 3, 4] = bad_value
        with pytest.raises(ValueError, match="inv_mel_spectrogram: argument `mel` holds NaN or inf"):
            inv_mel_spectrogram(bad, hp)
    with pytest.raises(ValueError, match=r"inv_linear_spectrogram: argument `linear` must have shape "
                                         r"\(batch, frames, 401\)"):
        inv_linear_spectrogram(mel, hp)
    with pytest.raises(ValueError, match=r"griffin_lim: argument `magnitudes` must have shape "
                                         r"\(batch, frames, 401\)"):
        griffin_lim(np.zeros((2, 20, 400), np.float32), **gc.sizes(hp))
    with pytest.raises(ValueError, match="griffin_lim: argument `magnitudes` holds NaN or inf"):
        griffin_lim(np.full((5, 401), np.inf, np.float32), **gc.sizes(hp))
    with pytest.raises(ValueError, match="argument `magnitudes` must be a float tensor"):
        griffin_lim(np.zeros((5, 401), np.int64), **gc.sizes(hp))
    with pytest.raises(ValueError, match=r"`angles` must be a complex tensor of shape \(batch, num_freq, "
                                         r"frames\) = \(2, 401, 20\) or \(num_freq, frames\)"):
        inv_mel_spectrogram(mel, hp, angles=np.ones((20, 401), np.complex64))
    with pytest.raises(ValueError, match="`angles` holds NaN or inf"):
        inv_mel_spectrogram(mel, hp, angles=np.full((401, 20), complex(np.nan, 0)))
    with pytest.raises(ValueError, match="`n_iter` must be an integer >= 0"):
        inv_mel_spectrogram(mel, hp, n_iter=-1)
    with pytest.raises(ValueError, match="`n_iter` must be an integer >= 0"):
        griffin_lim(np.zeros((5, 401), np.float32), n_iter=-1, **gc.sizes(hp))
    with pytest.raises(ValueError, match="`pad_mode` must be one of"):
        griffin_lim(np.zeros((5, 401), np.float32), n_fft=800, hop_size=200, win_size=800, pad_mode="edge")
    with pytest.raises(ValueError, match="at least 2 frames"):
        griffin_lim(np.zeros((1, 401), np.float32), **gc.sizes(hp))


def test_value_checks_inside_tf_function_fail_at_run_time():
    """Inside a graph the values are unknown at trace time: NaN/inf (and too few frames) raise
    InvalidArgumentError with the argument's name at run time, never a NaN waveform."""
    hp = audio.audio_hparams("rtvc")
    fn = tf.function(lambda m: inv_mel_spectrogram(m, hp, n_iter=1),
                     input_signature=[tf.TensorSpec([None, None, 80], tf.float32)])
    ok = fn(np.zeros((1, 4, 80), np.float32))
    assert ok.shape == (1, 3 * hp.hop_size) and np.isfinite(ok.numpy()).all()
    bad = np.zeros((1, 4, 80), np.float32)
    bad[0, 1, 2] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="inv_mel_spectrogram: argument `mel` holds NaN"):
        fn(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least 2 frames"):
        fn(np.zeros((1, 1, 80), np.float32))
