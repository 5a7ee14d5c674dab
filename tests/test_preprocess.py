"""``speechblocks preprocess``: a corpus -> the original training data.

Every output is checked against the library call it stands for: the mels (and Rayhane's linear spectrograms) equal
``speechblocks.audio.recording_features`` of each file (the presets' original per-utterance order, tested against
the originals in ``test_audio_*``), the audio equals the waveform the original preprocessors saved (RTVC: the
rescaled wav; Rayhane: it zero-padded and cut to ``frames * hop_size``), the embeddings equal the encoder's
``embed_wav`` of the saved audio (RTVC ``create_embeddings``), the ``train.txt`` lines are the originals' format.
A small random-weights GE2E encoder stands in for the real one. Both layouts, both presets, the filters, resuming,
workers, every bad input (one line, exit status 2, nothing in OUT) and ``--skip-bad``.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil

import numpy as np
import pytest
import soundfile

from speechblocks import audio
from speechblocks.cli import main
from tests.helpers.audio_signals import flite_wav, synthetic_speech

#: (id, seconds, file rate): RTVC keeps 1.6 s <= duration and frames <= 900 (11.25 s at 16 kHz)
_RTVC = [("a1", 2.0, 16000), ("b2", 2.4, 22050), ("short", 1.0, 16000), ("long", 11.5, 16000), ("c3", 1.8, 16000)]
_TEXTS = {"a1": "Dr. Smith paid $3.50.", "b2": "Hello, world!", "short": "Too short.", "long": "Far too long.",
          "c3": "The third one.", "fl": "The quick brown fox jumps over the lazy dog."}


def _ljspeech(root, utterances, flite: bool = False) -> str:
    os.makedirs(root / "wavs")
    lines = []
    for i, (uid, seconds, sr) in enumerate(utterances):
        soundfile.write(root / "wavs" / f"{uid}.wav", synthetic_speech(sr, seconds, seed=i), sr)
        lines.append(f"{uid}|{_TEXTS[uid].upper()}|{_TEXTS[uid]}")
    if flite and flite_wav(root / "wavs" / "fl.wav", _TEXTS["fl"]):
        lines.append(f"fl|raw|{_TEXTS['fl']}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root)


def _pairs(root, utterances) -> str:
    os.makedirs(root)
    for i, (uid, seconds, sr) in enumerate(utterances):
        soundfile.write(root / f"{uid}.wav", synthetic_speech(sr, seconds, seed=10 + i), sr)
        (root / f"{uid}.txt").write_text(_TEXTS[uid] + "\n", encoding="utf-8")
    return str(root)


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    import torch

    import torch_layers

    torch.manual_seed(0)
    enc = torch_layers.SpeakerEncoder(model_hidden_size=16, model_num_layers=1, model_embedding_size=32)
    path = tmp_path_factory.mktemp("ge2e") / "encoder.pt"
    torch.save({"model_state": enc.state_dict(), "step": 0}, path)
    return str(path)


@pytest.fixture(scope="module")
def rtvc_run(tmp_path_factory, encoder_file):
    """The RTVC preset over an LJSpeech corpus (flite speech too when installed), one worker."""
    d = tmp_path_factory.mktemp("rtvc")
    corpus = _ljspeech(d / "LJ", _RTVC, flite=True)
    out = d / "out"
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        status = main(["preprocess", corpus, str(out), "--hparams", "rtvc", "--encoder", encoder_file,
                       "--workers", "1"])
    return {"corpus": corpus, "out": out, "status": status, "stdout": stdout.getvalue()}


def _read_train(out) -> list[list[str]]:
    lines = (out / "train.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("|") for line in lines]


def _outputs(out) -> dict:
    return {os.path.relpath(os.path.join(r, f), out): os.stat(os.path.join(r, f)).st_mtime_ns
            for r, _, files in os.walk(out) for f in files}


def test_rtvc_ljspeech_equals_the_library_calls(rtvc_run, encoder_file):
    import torch_layers

    assert rtvc_run["status"] == 0
    out, corpus = rtvc_run["out"], rtvc_run["corpus"]
    rows = _read_train(out)
    kept = ["a1", "b2", "c3"] + (["fl"] if os.path.exists(os.path.join(corpus, "wavs", "fl.wav")) else [])
    assert [r[1] for r in rows] == [f"mel-{u}.npy" for u in kept]  # corpus order, the filtered ones left out
    encoder = torch_layers.SpeakerEncoder.from_checkpoint(encoder_file).eval()
    for row, uid in zip(rows, kept):
        assert len(row) == 6
        assert row[0] == f"audio-{uid}.npy" and row[2] == f"embed-{uid}.npy" and row[5] == _TEXTS[uid]
        want = audio.recording_features(os.path.join(corpus, "wavs", f"{uid}.wav"), "rtvc", linear=False)
        wav, mel = np.load(out / "audio" / row[0]), np.load(out / "mels" / row[1])
        assert wav.dtype == mel.dtype == np.float32
        np.testing.assert_array_equal(mel, want["mel"])
        np.testing.assert_array_equal(wav, want["wav"])
        assert int(row[3]) == wav.shape[0] and int(row[4]) == mel.shape[0] and mel.shape[1] == 80
        # create_embeddings: embed_utterance(preprocess_wav(np.load(audio file)))
        np.testing.assert_allclose(np.load(out / "embeds" / row[2]), encoder.embed_wav(wav), atol=1e-6)
    for uid in ("short", "long"):
        assert not os.path.exists(out / "mels" / f"mel-{uid}.npy")
    summary = rtvc_run["stdout"]
    assert f"{len(kept)} utterances kept" in summary and "2 dropped: 1 too short, 1 too long" in summary


def test_rayhane_pairs_equals_the_library_calls(tmp_path, capsys):
    # Rayhane has no minimum duration: the 0.5 s file is kept; --set max_mel_frames=100 drops the 2.5 s one
    # (1.6 s after the trim)
    corpus = _pairs(tmp_path / "pairs", [("b2", 2.5, 22050), ("a1", 1.2, 16000), ("c3", 0.5, 22050)])
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "rayhane", "--set", "max_mel_frames=100",
                 "--workers", "1"]) == 0
    hp = audio.audio_hparams("rayhane", max_mel_frames=100)
    rows = _read_train(out)
    assert [r[1] for r in rows] == ["mel-a1.npy", "mel-c3.npy"]  # file-name order
    for row in rows:
        uid = row[1][4:-4]
        want = audio.recording_features(os.path.join(corpus, f"{uid}.wav"), hp)
        mel, lin, wav = (np.load(out / d / f) for d, f in (("mels", row[1]), ("linear", row[2]), ("audio", row[0])))
        np.testing.assert_array_equal(mel, want["mel"])
        np.testing.assert_array_equal(lin, want["linear"])
        frames = mel.shape[0]
        # the original's audio: the wav padded on the right (librosa_pad_lr) and cut to frames * hop_size
        assert wav.dtype == np.float32 and wav.shape == (frames * hp.hop_size,)
        np.testing.assert_array_equal(wav[: want["wav"].size], want["wav"][: wav.size])
        assert not np.any(wav[want["wav"].size:])
        assert row[0] == f"audio-{uid}.npy" and row[2] == f"linear-{uid}.npy" and row[5] == _TEXTS[uid]
        assert int(row[3]) == wav.size and int(row[4]) == frames and lin.shape == (frames, 1025)
    assert not os.path.exists(out / "embeds")
    assert "1 dropped: 1 too long" in capsys.readouterr().out


def test_skip_existing_recomputes_nothing(rtvc_run, encoder_file, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(rtvc_run["out"], out)
    before, train = _outputs(out), (out / "train.txt").read_text()
    args = ["preprocess", rtvc_run["corpus"], str(out), "--hparams", "rtvc", "--encoder", encoder_file,
            "--workers", "1", "--skip-existing"]
    assert main(args) == 0
    after = _outputs(out)
    assert (out / "train.txt").read_text() == train
    assert {k: v for k, v in after.items() if k != "train.txt"} == {k: v for k, v in before.items() if k != "train.txt"}
    os.remove(out / "mels" / "mel-b2.npy")  # an interrupted utterance: only it is computed again
    assert main(args) == 0
    again = _outputs(out)
    assert (out / "train.txt").read_text() == train
    changed = sorted(k for k in again if again[k] != after.get(k))
    assert changed == ["audio/audio-b2.npy", "embeds/embed-b2.npy", "mels/mel-b2.npy", "train.txt"]


def test_two_workers_equal_one(rtvc_run, encoder_file, tmp_path):
    out = tmp_path / "out"
    assert main(["preprocess", rtvc_run["corpus"], str(out), "--hparams", "rtvc", "--encoder", encoder_file,
                 "--workers", "2"]) == 0
    one = rtvc_run["out"]
    assert (out / "train.txt").read_text() == (one / "train.txt").read_text()
    assert sorted(_outputs(out)) == sorted(_outputs(one))
    for name in _outputs(one):
        if name.endswith(".npy"):
            np.testing.assert_array_equal(np.load(out / name), np.load(one / name))  # torch: one thread in both


def _bad_corpus(root, kind: str) -> tuple[str, str]:
    """A corpus with one bad utterance of ``kind``; returns (DATASET, what the error line must name)."""
    if kind in ("neither", "no_dir"):
        os.makedirs(root)
        (root / "notes.csv").write_text("x|y|z\n")
        return (str(root) if kind == "neither" else str(root / "missing")), "neither" if kind == "neither" else \
            "no such directory"
    if kind in ("pair_without_txt", "txt_without_wav"):
        corpus = _pairs(root, [("a1", 1.0, 16000), ("b2", 1.0, 16000)])
        os.remove(root / ("b2.txt" if kind == "pair_without_txt" else "b2.wav"))
        return corpus, "b2."
    corpus = _ljspeech(root, [("a1", 2.0, 16000), ("b2", 2.0, 16000), ("c3", 2.0, 16000)])
    meta = root / "metadata.csv"
    if kind == "fields":
        meta.write_text(meta.read_text().replace("b2|HELLO, WORLD!|", "b2|"))
        return corpus, "metadata.csv line 2"
    if kind == "text":
        meta.write_text(meta.read_text().replace("|Hello, world!", "|Hello # world"))
        return corpus, "metadata.csv line 2"
    wav = root / "wavs" / "b2.wav"
    if kind == "missing_wav":
        os.remove(wav)
    elif kind == "unreadable":
        wav.write_bytes(b"RIFF not really a wave file")
    elif kind == "empty":
        soundfile.write(wav, np.zeros(0, np.float32), 16000)
    elif kind == "silent":  # found only when decoding: the run stops and removes what it wrote
        soundfile.write(wav, np.zeros(40000, np.float32), 16000)
    return corpus, "b2.wav"


_BAD = ["fields", "text", "missing_wav", "unreadable", "empty", "silent", "neither", "no_dir", "pair_without_txt",
        "txt_without_wav"]


@pytest.mark.parametrize("kind", _BAD)
def test_bad_input_is_one_line_and_nothing_written(tmp_path, capsys, kind):
    corpus, named = _bad_corpus(tmp_path / "corpus", kind)
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "rayhane", "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("speechblocks preprocess: error: ") and named in err[0], err
    assert not os.path.exists(out)


def test_skip_bad_skips_and_counts(tmp_path, capsys):
    root = tmp_path / "corpus"
    corpus = _ljspeech(root, [("a1", 2.0, 16000), ("b2", 2.0, 16000), ("c3", 2.0, 16000), ("short", 0.5, 16000)])
    meta = root / "metadata.csv"
    meta.write_text(meta.read_text().replace("|Hello, world!", "|Hello # world") + "x|only two\n"
                    + "gone|GONE|Gone.\n")
    soundfile.write(root / "wavs" / "c3.wav", np.zeros(40000, np.float32), 16000)  # silent: found by decoding
    out = tmp_path / "out"
    assert main(["preprocess", corpus, str(out), "--hparams", "rayhane", "--workers", "1", "--skip-bad"]) == 0
    captured = capsys.readouterr()
    skipped = [ln for ln in captured.err.splitlines() if "skipped" in ln]
    assert len(skipped) == 4 and any("b2" in ln and "bad text" in ln for ln in skipped)
    assert [r[1] for r in _read_train(out)] == ["mel-a1.npy", "mel-short.npy"]
    assert "2 utterances kept" in captured.out
    assert "4 dropped: 1 bad text, 2 unreadable, 1 bad line" in captured.out
    assert sorted(os.listdir(out / "mels")) == ["mel-a1.npy", "mel-short.npy"]


def test_help_says_how_the_layout_is_detected(capsys):
    with pytest.raises(SystemExit):
        main(["preprocess", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "metadata.csv" in text and "x.wav + x.txt" in text and "--skip-existing" in text and "--workers" in text


def test_a_missing_encoder_or_an_encoder_for_rayhane_writes_nothing(rtvc_run, tmp_path, capsys):
    out = tmp_path / "out"
    for preset, encoder in (("rtvc", str(tmp_path / "nope.pt")), ("rayhane", str(tmp_path / "nope.pt"))):
        assert main(["preprocess", rtvc_run["corpus"], str(out), "--hparams", preset, "--encoder", encoder]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--encoder" in err[0]
        assert not os.path.exists(out)


def test_a_set_that_is_no_audio_hparam_is_refused(rtvc_run, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["preprocess", rtvc_run["corpus"], str(out), "--hparams", "rayhane", "--set", "max_mel_frame=3"]) == 2
    assert "max_mel_frame: not an audio hparam" in capsys.readouterr().err and not os.path.exists(out)
