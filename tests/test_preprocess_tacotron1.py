"""``speechblocks preprocess --hparams keithito|mimic2``: the Tacotron-1 family's LJSpeech layout.

The files and ``train.txt`` are keithito's ``datasets/ljspeech.py`` layout (``ljspeech-spec-%05d.npy`` linear
``(frames, num_freq)``, ``ljspeech-mel-%05d.npy`` ``(frames, num_mels)``, lines ``spec|mel|n_frames|text``); the
values equal the original formulas (``tests.test_audio_tacotron1.reference_spectrograms``, written from
librosa) of the waveform today's ``librosa.load(path, sr=sample_rate)`` reads. Synthetic speech stands in for a
corpus (flite when installed adds a spoken utterance). A bad input stops with one line and nothing written; the
input is never modified.
"""
from __future__ import annotations

import hashlib
import os

import librosa
import numpy as np
import pytest
import soundfile

from speechblocks.cli import main
from speechblocks.preprocess import preprocess_tacotron1
from tests.helpers.audio_signals import flite_wav, synthetic_speech
from tests.test_audio_tacotron1 import reference_spectrograms

_UTTERANCES = [("LJ001-0001", 0.9, 22050, "Printing, in the only sense."), ("LJ001-0002", 0.6, 16000, "In being."),
               ("LJ001-0003", 0.7, 20000, "Produced the block books.")]


def _corpus(root, flite: bool = False) -> str:
    os.makedirs(root / "wavs")
    lines = []
    for i, (uid, seconds, sr, text) in enumerate(_UTTERANCES):
        soundfile.write(root / "wavs" / f"{uid}.wav", synthetic_speech(sr, seconds, seed=i), sr)
        lines.append(f"{uid}|{text.upper()}|{text}")
    if flite and flite_wav(root / "wavs" / "fl.wav", "hello world"):
        lines.append("fl|Hello world|hello world")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root)


def _digest(root) -> dict:
    return {p: hashlib.sha256(open(os.path.join(d, p), "rb").read()).hexdigest()
            for d, _, files in os.walk(root) for p in files}


def _check_outputs(out, corpus: str, preset: str) -> list[str]:
    lines = open(os.path.join(out, "train.txt"), encoding="utf-8").read().splitlines()
    metadata = open(os.path.join(corpus, "metadata.csv"), encoding="utf-8").read().splitlines()
    assert len(lines) == len(metadata)
    sr = 20000 if preset == "keithito" else 22000
    for index, (line, meta) in enumerate(zip(lines, metadata), 1):
        spec_file, mel_file, n_frames, text = line.split("|")
        uid, _, normalized = meta.split("|")
        assert (spec_file, mel_file, text) == (f"ljspeech-spec-{index:05d}.npy", f"ljspeech-mel-{index:05d}.npy",
                                               normalized)
        spec, mel = np.load(os.path.join(out, spec_file)), np.load(os.path.join(out, mel_file))
        wav = librosa.load(os.path.join(corpus, "wavs", f"{uid}.wav"), sr=sr)[0]
        lin_ref, mel_ref = reference_spectrograms(wav, preset)
        assert spec.dtype == mel.dtype == np.float32
        assert spec.shape == (int(n_frames), 1025) and mel.shape == (int(n_frames), 80)
        assert int(n_frames) == 1 + wav.size // (250 if preset == "keithito" else 275)
        assert np.max(np.abs(spec - lin_ref)) < 1e-5 and np.max(np.abs(mel - mel_ref)) < 1e-5
    return lines


def test_keithito_layout_and_values(tmp_path, capsys):
    corpus = _corpus(tmp_path / "LJSpeech-1.1", flite=True)
    before = _digest(corpus)
    out = tmp_path / "training"
    assert main(["preprocess", corpus, str(out), "--hparams", "keithito", "--workers", "1"]) == 0
    lines = _check_outputs(out, corpus, "keithito")
    assert sorted(os.listdir(out)) == sorted(["train.txt"] + [f for ln in lines for f in ln.split("|")[:2]])
    assert f"{len(lines)} utterances kept" in capsys.readouterr().out
    assert _digest(corpus) == before
    stamps = {f: os.stat(out / f).st_mtime_ns for f in os.listdir(out) if f.endswith(".npy")}
    summary = preprocess_tacotron1(corpus, out, "keithito", skip_existing=True)
    assert summary.reused == summary.kept == len(lines)
    assert {f: os.stat(out / f).st_mtime_ns for f in stamps} == stamps
    assert open(out / "train.txt", encoding="utf-8").read().splitlines() == lines


def test_mimic2_with_two_workers(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "mimic2", "--workers", "2", "--quiet"]) == 0
    _check_outputs(out, corpus, "mimic2")


def test_bad_input_writes_nothing_and_skip_bad_skips(tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus")
    os.remove(os.path.join(corpus, "wavs", "LJ001-0002.wav"))
    before = _digest(corpus)
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "keithito", "--workers", "1"]) == 2
    assert "LJ001-0002.wav" in capsys.readouterr().err and not out.exists()
    assert main(["preprocess", corpus, str(out), "--hparams", "keithito", "--workers", "1", "--skip-bad"]) == 0
    lines = open(out / "train.txt", encoding="utf-8").read().splitlines()
    assert [ln.split("|")[0] for ln in lines] == ["ljspeech-spec-00001.npy", "ljspeech-spec-00002.npy"]
    assert lines[1].endswith("|Produced the block books.") and _digest(corpus) == before


def test_a_failure_while_decoding_removes_what_was_written(tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus")
    soundfile.write(os.path.join(corpus, "wavs", "LJ001-0003.wav"), np.zeros(8000, np.float32), 16000)
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "keithito", "--workers", "1"]) == 2
    assert "silent" in capsys.readouterr().err and not out.exists()


def test_options_that_do_not_apply_are_refused(tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "mimic2", "--encoder", "x.pt"]) == 2
    assert "--encoder" in capsys.readouterr().err
    assert main(["preprocess", corpus, str(out), "--hparams", "keithito", "--set", "fmax=20000"]) == 2
    assert "fmax" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("workers", [0, True])
def test_bad_workers(tmp_path, workers):
    from speechblocks.errors import UsageError

    with pytest.raises(UsageError, match="workers"):
        preprocess_tacotron1(_corpus(tmp_path / "c"), tmp_path / "o", "keithito", workers=workers)
