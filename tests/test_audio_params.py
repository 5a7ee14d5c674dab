"""The audio hparams: the originals' values in both presets, validation, and the model's hparams unchanged."""
import dataclasses

import pytest

from speechblocks import resolve_hparams, tacotron2_hparams
from speechblocks.audio import AUDIO_HPARAM_NAMES, AudioHParams, audio_hparams

# written out from the originals' hparams.py (RTVC synthesizer/hparams.py, Rayhane hparams.py)
RTVC = dict(sample_rate=16000, n_fft=800, hop_size=200, win_size=800, num_mels=80, fmin=55, fmax=7600,
            preemphasize=True, preemphasis=0.97, signal_normalization=True, allow_clipping_in_normalization=True,
            symmetric_mels=True, max_abs_value=4.0, min_level_db=-100, ref_level_db=20, power=1.5,
            griffin_lim_iters=60, rescale=True, rescaling_max=0.9, trim_top_db=23, trim_fft_size=512,
            trim_hop_size=128, utterance_min_duration=1.6, max_mel_frames=900, clip_mels_length=True)
RAYHANE = dict(sample_rate=22050, n_fft=2048, hop_size=275, win_size=1100, num_mels=80, num_freq=1025, fmin=55,
               fmax=7600, preemphasize=True, preemphasis=0.97, magnitude_power=2.0, signal_normalization=True,
               allow_clipping_in_normalization=True, symmetric_mels=True, max_abs_value=4.0, min_level_db=-100,
               ref_level_db=20, power=1.5, griffin_lim_iters=60, rescale=True, rescaling_max=0.999,
               trim_silence=True, trim_top_db=40, trim_fft_size=2048, trim_hop_size=512, max_mel_frames=900,
               clip_mels_length=True)


@pytest.mark.parametrize("preset,original", [("rtvc", RTVC), ("rayhane", RAYHANE)])
def test_presets_hold_the_original_values(preset, original):
    raw = tacotron2_hparams(preset)
    hp = audio_hparams(preset)
    for name, value in original.items():
        assert raw[name] == value, name
        assert getattr(hp, name) == value, name
    assert hp.preset == preset


def test_the_names_one_original_lacks():
    """RTVC: no magnitude_power (amplitude: 1.0), no num_freq (n_fft // 2 + 1 = 401), no trim_silence (False);
    Rayhane: no utterance_min_duration. The non-original pad mode / pre-emphasis placement per preset."""
    raw = tacotron2_hparams("rtvc")
    assert "magnitude_power" not in raw and "num_freq" not in raw
    rtvc, rayhane = audio_hparams("rtvc"), audio_hparams("rayhane")
    assert (rtvc.magnitude_power, rtvc.num_freq, rtvc.trim_silence) == (1.0, 401, False)
    assert rayhane.utterance_min_duration is None
    assert (rtvc.stft_pad_mode, rayhane.stft_pad_mode) == ("reflect", "constant")
    assert (rtvc.preemphasis_in_spectrogram, rayhane.preemphasis_in_spectrogram) == (True, False)


def test_model_hparams_unchanged_by_the_audio_names():
    """The model ignores the audio names: RTVC infers no linear output (num_freq 0), Rayhane keeps 1025."""
    rtvc, rayhane = resolve_hparams("rtvc"), resolve_hparams("rayhane")
    assert (rtvc.predict_linear, rtvc.num_freq, rtvc.sample_rate) == (False, 0, 16000)
    assert (rayhane.predict_linear, rayhane.num_freq, rayhane.sample_rate) == (True, 1025, 22050)
    assert not AUDIO_HPARAM_NAMES & {f.name for f in dataclasses.fields(rtvc)} - {
        "num_mels", "num_freq", "sample_rate", "symmetric_mels", "max_abs_value"}
    # a whole hparams dict (audio names included) still resolves, and the audio names are accepted overrides
    assert resolve_hparams(tacotron2_hparams("rayhane"), n_symbols=66) == rayhane
    assert resolve_hparams("rtvc", trim_top_db=30) == rtvc


def test_mappings_objects_and_overrides():
    rayhane = tacotron2_hparams("rayhane")
    assert audio_hparams(rayhane) == audio_hparams("rayhane")  # inferred from magnitude_power
    partial = {"sample_rate": 16000, "n_fft": 1024, "num_freq": None, "win_size": None}
    assert audio_hparams(partial).preset == "rtvc"
    assert audio_hparams(partial, preset="rayhane").stft_pad_mode == "constant"
    hp = audio_hparams("rtvc", fmax=8000, win_size=None)
    assert (hp.fmax, hp.win_size) == (8000, 800)
    again = audio_hparams(hp, griffin_lim_iters=3)
    assert (again.griffin_lim_iters, again.fmax, again.preset) == (3, 8000, "rtvc")
    assert audio_hparams({"hop_size": None, "frame_shift_ms": 12.5}).hop_size == 200  # the originals' rule

    class Original:  # tf.contrib.training.HParams-like
        def values(self):
            return dict(rayhane, n_fft=1024, num_freq=None, win_size=1024)

    assert audio_hparams(Original()).num_freq == 513
    assert hash(hp) == hash(audio_hparams(hp))
    with pytest.raises(dataclasses.FrozenInstanceError):
        hp.n_fft = 1
    assert isinstance(hp, AudioHParams) and set(hp.to_dict()) == AUDIO_HPARAM_NAMES


@pytest.mark.parametrize("overrides,name", [
    ({"fmax": 9000}, "fmax"), ({"num_freq": 400}, "num_freq"), ({"win_size": 1024}, "win_size"),
    ({"n_fft": 800.0}, "n_fft"), ({"hop_size": 0}, "hop_size"), ({"preemphasize": 1}, "preemphasize"),
    ({"preemphasis": 1.0}, "preemphasis"), ({"min_level_db": 0}, "min_level_db"),
    ({"max_abs_value": float("nan")}, "max_abs_value"), ({"stft_pad_mode": "edge"}, "stft_pad_mode"),
    ({"rescaling_max": 1.5}, "rescaling_max"), ({"fmin": 7600}, "fmin"), ({"magnitude_power": 0}, "magnitude_power"),
    ({"griffin_lim_iters": -1}, "griffin_lim_iters"), ({"utterance_min_duration": "1"}, "utterance_min_duration"),
])
def test_bad_values_name_the_hparam(overrides, name):
    with pytest.raises(ValueError, match=f"hparam `{name}`"):
        audio_hparams("rtvc", **overrides)


def test_unknown_names_and_presets_refused():
    with pytest.raises(ValueError, match=r"unknown hparam override\(s\) \['trim_db'\]"):
        audio_hparams("rtvc", trim_db=3)
    with pytest.raises(ValueError, match="`hparams` must be a preset.*'ljspeech'"):
        audio_hparams("ljspeech")
    with pytest.raises(ValueError, match="`preset` must be a preset"):
        audio_hparams({}, preset="tacotron")
    with pytest.raises(ValueError, match="got int"):
        audio_hparams(3)
