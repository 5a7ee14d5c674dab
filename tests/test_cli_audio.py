"""The audio commands: ``mel``, ``griffin-lim``, ``embed``, and ``synthesize --wav`` / ``--speaker-wav``.

Each command's output is checked against the library call it stands for (``speechblocks.audio``, the encoders'
``embed_wav``, the model's own synthesis), every bad input gives one line, exit status 2 and no file.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile

from speechblocks import audio
from speechblocks.cli import main
from tests.helpers.audio_signals import synthetic_speech
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import torch

    import torch_layers

    d = tmp_path_factory.mktemp("cli_audio")
    ref = d / "ref.wav"
    soundfile.write(ref, synthetic_speech(22050, seconds=2.0, seed=1), 22050)  # resampled to 16 kHz by the encoder
    torch.manual_seed(0)
    encoder = torch_layers.SpeakerEncoder(model_hidden_size=16, model_num_layers=1, model_embedding_size=256)
    torch.save({"model_state": encoder.state_dict(), "step": 7}, d / "encoder.pt")
    # a small RTVC model whose speaker embedding is the GE2E size; the stop token held off: it decodes max_iters
    _, variables = small_variables("rtvc", stop_bias=-30.0, speaker_embedding_size=256, num_mels=80)
    ckpt = save_model_checkpoint(d / "ckpt", variables) if os.makedirs(d / "ckpt") is None else None
    return {"dir": d, "ref": str(ref), "encoder": str(d / "encoder.pt"), "ckpt": ckpt}


def test_mel_writes_the_recording_features(files, tmp_path, capsys):
    out = tmp_path / "ref.npy"
    assert main(["mel", files["ref"], "--hparams", "rtvc", "--out", str(out)]) == 0
    want = audio.recording_features(files["ref"], "rtvc")["mel"]
    np.testing.assert_array_equal(np.load(out), want)
    assert want.shape[1] == 80 and "80 mels" in capsys.readouterr().out
    # several recordings -> a directory of <name>.npy; --linear; an audio --set applies
    second = tmp_path / "two.wav"
    soundfile.write(second, synthetic_speech(16000, seconds=1.0, seed=2), 16000)
    assert main(["mel", files["ref"], str(second), "--hparams", "rayhane", "--linear", "--set", "trim_silence=false",
                 "--out", str(tmp_path / "lin")]) == 0
    hp = audio.audio_hparams("rayhane", trim_silence=False)
    np.testing.assert_array_equal(np.load(tmp_path / "lin" / "two.npy"), audio.recording_features(second, hp)["linear"])


@pytest.mark.parametrize("framework", ["torch", "numpy"])
def test_griffin_lim_writes_the_inverse_of_the_mel(files, tmp_path, framework):
    mel = audio.recording_features(files["ref"], "rtvc")["mel"]
    np.save(tmp_path / "m.npy", mel)
    out = tmp_path / "m.wav"
    assert main(["griffin-lim", str(tmp_path / "m.npy"), "--hparams", "rtvc", "--framework", framework,
                 "--griffin-lim-iters", "4", "--seed", "3", "--out", str(out)]) == 0
    wav, sr = soundfile.read(out)
    want = audio.inv_mel_spectrogram(mel, "rtvc", n_iter=4, seed=3)
    assert sr == 16000 and wav.shape == want.shape == ((mel.shape[0] - 1) * 200,)
    if framework == "numpy":  # the same draw of phases: the original's result, as int16 peak-normalised
        np.testing.assert_allclose(wav, want * (32767 / max(0.01, np.abs(want).max())) / 32768, atol=1.5 / 32768)
    else:  # torch's generator draws other phases; the wav still inverts the mel
        back = audio.melspectrogram(wav.astype(np.float32), "rtvc")
        assert np.mean(np.abs(back - mel)[mel > -3]) < 0.6


def test_embed_equals_the_encoder(files, tmp_path, capsys):
    import torch_layers

    out = tmp_path / "e.npy"
    assert main(["embed", "--encoder", files["encoder"], files["ref"], "--out", str(out)]) == 0
    want = torch_layers.SpeakerEncoder.from_checkpoint(files["encoder"]).eval().embed_wav(files["ref"])
    np.testing.assert_allclose(np.load(out), want, atol=1e-6)
    assert abs(np.linalg.norm(np.load(out)) - 1) < 1e-5 and "256 values" in capsys.readouterr().out
    # the encoder as the first positional argument, as `speechblocks embed ENCODER.pt REF.wav ...`
    assert main(["embed", files["encoder"], files["ref"], "--out", str(tmp_path / "f.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "f.npy"), np.load(out))


def test_synthesize_with_a_speaker_wav_and_a_wav_out(files, tmp_path, capsys):
    import torch_layers

    common = ["--text", "Hi there.", "--max-iters", "5", "--set", "tacotron_dropout_rate=0", "--framework", "torch"]
    assert main(["synthesize", files["ckpt"], *common, "--speaker-wav", files["ref"], "--encoder", files["encoder"],
                 "--wav", "--griffin-lim-iters", "2", "--out", str(tmp_path / "a.npy")]) == 0
    emb = torch_layers.SpeakerEncoder.from_checkpoint(files["encoder"]).eval().embed_wav(files["ref"])
    np.save(tmp_path / "emb.npy", emb)
    assert main(["synthesize", files["ckpt"], *common, "--speaker-embedding", str(tmp_path / "emb.npy"),
                 "--out", str(tmp_path / "b.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    wav, sr = soundfile.read(tmp_path / "a.wav")
    assert sr == 16000 and wav.shape == ((10 - 1) * 200,) and np.all(np.isfinite(wav)) and np.abs(wav).max() > 0.5
    assert "a.wav: 0.11 s at 16000 Hz (Griffin-Lim, torch)" in capsys.readouterr().out


def _fails(argv, capsys, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment in err, err


def test_bad_input_is_one_line_and_writes_nothing(files, tmp_path, capsys):
    bad = tmp_path / "nan.npy"
    mel = np.zeros((20, 80), np.float32)
    mel[3, 4] = np.nan
    np.save(bad, mel)
    _fails(["griffin-lim", str(bad), "--out", str(tmp_path / "x.wav")], capsys, "holds NaN or inf")
    np.save(tmp_path / "narrow.npy", np.zeros((20, 40), np.float32))
    _fails(["griffin-lim", str(tmp_path / "narrow.npy"), "--out", str(tmp_path / "x.wav")], capsys, "(frames, 80)")
    np.save(tmp_path / "ok.npy", np.zeros((20, 80), np.float32))
    _fails(["griffin-lim", str(tmp_path / "ok.npy"), "--out", str(tmp_path / "no" / "x.wav")], capsys,
           "does not exist")
    text = tmp_path / "text.wav"
    text.write_text("not audio")
    _fails(["mel", str(text), "--out", str(tmp_path / "t.npy")], capsys, str(text))
    _fails(["embed", "--encoder", files["encoder"], str(text), "--out", str(tmp_path / "t.npy")], capsys, str(text))
    silent = tmp_path / "silent.wav"
    soundfile.write(silent, np.zeros(16000, np.float32), 16000)
    _fails(["mel", str(silent), "--out", str(tmp_path / "s.npy")], capsys, "silent")
    _fails(["synthesize", files["ckpt"], "--text", "Hi.", "--speaker-wav", files["ref"], "--speaker-embedding",
            str(tmp_path / "e.npy"), "--out", str(tmp_path / "y.npy")], capsys, "not both")
    assert sorted(os.listdir(tmp_path)) == ["nan.npy", "narrow.npy", "ok.npy", "silent.wav", "text.wav"]
