"""``speechblocks evaluate`` and its scores (issue #37).

The scores are tested on real speech: three flite recordings committed under ``tests/data/evaluate/`` (16 kHz
FLAC, 94 KB; see its README), so nothing here needs flite. The command runs end to end on a tiny random RTVC
Tacotron-2 made here (it babbles: its own scores are only checked for form, the ceiling's for their values).
The GE2E test uses the real pretrained weights ``make install`` fetches (skipped without them).
"""
from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest
import soundfile

from speechblocks import audio
from speechblocks.cli import main
from speechblocks.evaluation import (
    MCD_CONSTANT,
    Recognizer,
    alignment_scores,
    dtw_path,
    error_rates,
    mel_cepstral_distortion,
    mel_cepstrum_settings,
    pipeline,
    words,
)
from tests.helpers.speaker_reference import real_weights_path

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "evaluate")
SR = 16000

pytest.importorskip("pocketsphinx", reason="the eval extra (pocketsphinx) is not installed: make install brings it")
pytest.importorskip("jiwer", reason="the eval extra (jiwer) is not installed: make install brings it")


def _wav(name: str) -> np.ndarray:
    return audio.load_wav(os.path.join(DATA, name + ".flac"), "rtvc")


@pytest.fixture(scope="module")
def recordings() -> dict[str, np.ndarray]:
    return {name: _wav(name) for name in ("slt_car", "slt_train", "awb_train")}


@pytest.fixture(scope="module")
def recognizer() -> Recognizer:
    return Recognizer()


# -- the scores, on recordings ----------------------------------------------------------------------------------
def test_words_normalise_both_sides_with_the_cleaners():
    assert words("Dr. Smith paid $3.50, didn't he?") == "doctor smith paid three dollars fifty cents didn't he"
    assert words("  THE  train\u2014leaves! ") == "the train leaves"
    assert words("Turn {HH AW1} left.", ("basic_cleaners",)) == "turn left"
    rates = error_rates(["the train leaves at noon"], ["the train leaves at you"])
    assert (rates.word_errors, rates.reference_words, rates.wer) == (1, 5, 0.2)
    assert rates.char_errors == 3 and rates.reference_chars == 24  # "noon" -> "you": 2 substitutions, 1 deletion
    assert error_rates(["a b"], [""]).wer == 1.0  # nothing heard: every word deleted
    with pytest.raises(ValueError, match="no words"):
        error_rates([""], ["a"])


def test_wer_of_recordings_and_of_their_resynthesis(recordings, recognizer):
    """What the recogniser hears in the flite recordings and in the Griffin-Lim resynthesis of their own RTVC mels
    (numpy, seed 0), as measured: recordings 2/17 words wrong (11.8 %), resynthesis 3/17 (17.6 %)."""
    sentences = pipeline.read_sentences(os.path.join(DATA, "sentences.txt"))
    refs = [words(s.text) for s in sentences]
    wavs = [recordings[s.name] for s in sentences]
    resynthesized = pipeline.resynthesize(wavs, "tacotron2", audio.audio_hparams("rtvc"), griffin_lim="numpy")
    heard = [words(recognizer(w, SR)) for w in wavs]
    heard_again = [words(recognizer(w, SR)) for w in resynthesized]
    rec, res = error_rates(refs, heard), error_rates(refs, heard_again)
    assert heard[1] == "the train leaves at noon"
    assert np.isfinite(rec.wer) and np.isfinite(res.wer) and rec.reference_words == 17
    assert (rec.word_errors, res.word_errors) == (2, 3), (heard, heard_again)
    assert rec.wer <= res.wer and rec.cer <= res.cer
    # the recogniser is stateless between utterances: the same wav heard again, after another, is heard alike
    assert words(recognizer(wavs[0], SR)) == heard[0]
    # another rate is resampled to 16 kHz first
    assert words(recognizer(audio.load_wav(os.path.join(DATA, "slt_train.flac"), "rayhane"), 22050)) == heard[1]


def test_score_without_the_ceiling_is_the_model_row_alone(recordings, recognizer):
    """``score(..., ceiling=False)`` (the train demo's per-chunk score): the model's row equal to the full score's,
    its MCD still against the references, no resynthesis or recording rows. The "model" here speaks slt_train's
    recording for every sentence: heard as it is, MCD 0 for its own sentence and ~8 dB for another."""
    sentences = pipeline.read_sentences(os.path.join(DATA, "sentences.txt"))
    refs = [recordings[s.name] for s in sentences]
    said = recordings["slt_train"]
    spoken = [pipeline.Spoken(said, np.eye(4, 6, dtype=np.float32), 6, True, s.text) for s in sentences]
    kwargs = dict(references=refs, resynthesized=refs, synthesis_seconds=1.0)
    full = pipeline.score(sentences, ("english_cleaners",), spoken, SR, recognizer, **kwargs)
    alone = pipeline.score(sentences, ("english_cleaners",), spoken, SR, recognizer, ceiling=False, **kwargs)
    assert set(alone["total"]) == {"model"} and set(full["total"]) == {"model", "resynthesis", "recording"}
    assert alone["total"]["model"] == full["total"]["model"]
    assert [r["model"] for r in alone["sentences"]] == [r["model"] for r in full["sentences"]]
    mcd = {s.name: r["model"]["mcd"] for s, r in zip(sentences, alone["sentences"])}
    assert mcd["slt_train"] == 0.0 and mcd["slt_car"] > 7.0, mcd
    assert alone["sentences"][1]["model"]["wer"] == 0.0  # slt_train's own sentence, heard right


def test_mcd_zero_for_itself_small_for_a_stretched_copy_large_for_another_sentence(recordings):
    import librosa

    a = recordings["slt_car"]
    same = mel_cepstral_distortion(a, a, SR)
    assert same.mcd == 0.0 and same.frames == (131, 131) and same.path_length == 131
    assert mel_cepstral_distortion(0.25 * a, a, SR).mcd < 1e-4  # c0 left out: the gain does not count
    stretched = mel_cepstral_distortion(librosa.effects.time_stretch(a, rate=1.1), a, SR)
    other = mel_cepstral_distortion(recordings["slt_train"], a, SR)
    assert stretched.frames[0] < stretched.frames[1]  # 10 % shorter, aligned by the DTW
    assert 0 < stretched.mcd < 5.0 < 7.0 < other.mcd, (stretched, other)  # measured 4.08 and 8.05 dB
    assert other.mcd > 1.8 * stretched.mcd


def test_mcd_definition_written_out():
    """The distance is 10/ln10 * sqrt(2 * sum of squared c1..cM differences) averaged over the DTW path; the
    path is the exact minimum (checked against a brute-force dynamic programme)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 3)), rng.standard_normal((5, 3))
    ia, ib, cost = dtw_path(a, b)
    d = np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))
    acc = np.full((8, 6), np.inf)
    acc[0, 0] = 0
    for i in range(1, 8):
        for j in range(1, 6):
            acc[i, j] = d[i - 1, j - 1] + min(acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
    assert cost == pytest.approx(acc[-1, -1]) == pytest.approx(d[ia, ib].sum())
    assert (ia[0], ib[0], ia[-1], ib[-1]) == (0, 0, 6, 4) and set(np.diff(ia)) <= {0, 1} and set(np.diff(ib)) <= {0, 1}
    assert MCD_CONSTANT == pytest.approx(10 / np.log(10) * np.sqrt(2))
    s = mel_cepstrum_settings(16000)
    assert (s.order, s.alpha, s.n_fft, s.n_shift) == (23, 0.42, 1024, 256)
    assert mel_cepstrum_settings(20000).order == 23 and mel_cepstrum_settings(20000).alpha == pytest.approx(0.441)
    with pytest.raises(ValueError, match="silent"):
        mel_cepstral_distortion(np.zeros(4000), np.ones(4000), SR)
    with pytest.raises(ValueError, match="fewer than one MCD frame"):
        mel_cepstral_distortion(np.ones(1000), np.ones(4000), SR)


def test_alignment_scores():
    diagonal = np.eye(6)
    assert alignment_scores(diagonal) == (1.0, 1.0)
    flat = np.full((4, 10), 0.25)
    assert alignment_scores(flat)[0] == 0.25
    backwards = np.eye(5)[:, ::-1]
    assert alignment_scores(backwards) == (1.0, 0.0)


@pytest.mark.skipif(real_weights_path() is None, reason="no pretrained GE2E weights (make install fetches them)")
def test_speaker_similarity_same_voice_above_other_voice(recordings):
    import torch_layers

    enc = torch_layers.SpeakerEncoder.from_checkpoint(str(real_weights_path())).eval()
    e = {k: enc.embed_wav(w, source_sr=SR) for k, w in recordings.items()}
    same_voice = float(e["slt_car"] @ e["slt_train"])  # other sentences, one voice
    other_voice = float(e["slt_train"] @ e["awb_train"])  # the same sentence, another voice
    assert same_voice > other_voice + 0.2, (same_voice, other_voice)


# -- the command ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """A tiny random RTVC Tacotron-2 (80 mels, a 256-value speaker embedding as the GE2E gives), migrated-file
    format; small random GE2E weights (the command's speed, not its voice); the references in a directory."""
    import torch

    import torch_layers
    from speechblocks import resolve_hparams, tf1_variable_shapes
    from speechblocks.training.checkpoint_files import torch_model_payload

    d = tmp_path_factory.mktemp("evaluate")
    hp = resolve_hparams("rtvc", 66, embedding_dim=16, enc_conv_channels=16, encoder_lstm_units=8, attention_dim=8,
                         attention_filters=4, prenet_layers=[8, 8], decoder_lstm_units=16, postnet_channels=16,
                         speaker_embedding_size=256, num_mels=80)
    torch.manual_seed(0)
    model = torch_layers.Tacotron2(hp)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    torch.save(torch_model_payload(hp, state, tf1_variable_shapes(hp)), d / "tiny.pt")
    encoder = torch_layers.SpeakerEncoder(model_hidden_size=16, model_num_layers=1, model_embedding_size=256)
    torch.save({"model_state": encoder.state_dict(), "step": 1}, d / "encoder.pt")
    refs = d / "refs"
    shutil.copytree(DATA, refs)
    return {"dir": d, "model": str(d / "tiny.pt"), "encoder": str(d / "encoder.pt"), "refs": str(refs),
            "text": str(refs / "sentences.txt")}


def _listing(directory) -> dict:
    return {p: os.path.getmtime(os.path.join(directory, p)) for p in sorted(os.listdir(directory))}


def test_evaluate_end_to_end_json_and_plot(tiny, tmp_path, capsys):
    before = _listing(tiny["refs"])
    out_json, out_png = tmp_path / "scores.json", tmp_path / "worst.png"
    argv = ["evaluate", tiny["model"], "--text-file", tiny["text"], "--reference-dir", tiny["refs"],
            "--encoder", tiny["encoder"], "--max-iters", "12", "--set", "tacotron_dropout_rate=0",
            "--griffin-lim-iters", "8", "--json", str(out_json), "--plot", str(out_png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "speechblocks.evaluate/1" and out_png.stat().st_size > 1000
    assert _listing(tiny["refs"]) == before  # the inputs are never modified
    assert set(doc) == {"schema", "settings", "sentences", "total"}
    st = doc["settings"]
    assert (st["family"], st["framework"], st["sample_rate"], st["griffin_lim_iters"]) == ("tacotron2", "torch",
                                                                                            16000, 8)
    assert st["mcd"]["coefficients"] == "c1..c23" and st["similarity_target"] == "references"
    assert [s["name"] for s in doc["sentences"]] == ["slt_car", "slt_train", "awb_train"]
    for s in doc["sentences"]:
        assert s["words"] and s["reference_words"] == len(s["words"].split())
        m, r, rec = s["model"], s["resynthesis"], s["recording"]
        assert set(m) >= {"heard", "wer", "cer", "mcd", "similarity", "focus", "monotonicity", "steps", "stopped",
                          "seconds"}
        assert m["steps"] <= 12 and 0 <= m["focus"] <= 1 and 0 <= m["monotonicity"] <= 1
        assert set(r) >= {"heard", "wer", "cer", "mcd", "similarity"} and "mcd" not in rec
        assert "similarity" not in rec  # the target is the recording itself
        assert r["mcd"] is not None and 0 < r["mcd"] < 10  # the ceiling: Griffin-Lim of the recording's own mel
    t = doc["total"]
    assert set(t) == {"model", "resynthesis", "recording"}
    assert set(t["model"]) == {"wer", "cer", "seconds", "mcd", "similarity", "focus", "monotonicity", "stopped_share",
                               "real_time_factor"}
    assert 0 <= t["model"]["stopped_share"] <= 1 and t["model"]["real_time_factor"] > 0
    assert t["recording"]["wer"] == pytest.approx(2 / 17)  # what the recogniser hears in the flite recordings
    assert t["model"]["wer"] >= t["resynthesis"]["wer"]  # a random model says nothing recognisable
    assert "total (3 sentences)" in out and "resynthesis" in out and "real-time factor" in out
    assert f"{out_png}: alignment of sentence" in out


def _fails(argv, capsys, fragment, tmp_path) -> None:
    before = sorted(os.listdir(tmp_path))
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and fragment in err, err
    assert captured.out == "" and sorted(os.listdir(tmp_path)) == before  # nothing written


def test_every_bad_input_is_one_line_exit_2_nothing_written(tiny, tmp_path, capsys, monkeypatch):
    common = [tiny["model"], "--encoder", tiny["encoder"], "--max-iters", "3", "--json", str(tmp_path / "s.json")]
    refs = ["--reference-dir", tiny["refs"]]
    # characters outside the model's symbol table, named
    bad_text = tmp_path / "bad.txt"
    bad_text.write_text("slt_car|She sold the red car last week.\nslt_train|Meet me @ noon.\n", encoding="utf-8")
    _fails(["evaluate", *common, "--text-file", str(bad_text), *refs], capsys,
           "sentence 2: characters outside the symbol table: '@'", tmp_path)
    # a sentence without a reference
    missing = tmp_path / "missing.txt"
    missing.write_text("slt_car|She sold the red car last week.\nnobody|Nobody recorded this.\n")
    _fails(["evaluate", *common, "--text-file", str(missing), *refs], capsys,
           "no recording of sentence 2 ('Nobody recorded this.'): expected nobody.wav", tmp_path)
    # a silent reference
    quiet_dir = tmp_path / "quiet"
    quiet_dir.mkdir()
    soundfile.write(quiet_dir / "000.wav", np.zeros(SR, np.float32), SR)
    one = tmp_path / "one.txt"
    one.write_text("The train leaves at noon.\n")
    _fails(["evaluate", *common, "--text-file", str(one), "--reference-dir", str(quiet_dir)], capsys,
           f"reference {str(quiet_dir / '000.wav')!r} is silent", tmp_path)
    # an RTVC model needs a voice
    _fails(["evaluate", *common, "--text-file", str(one)], capsys, "give --speaker-wav REF.wav or --reference-dir",
           tmp_path)
    # no text, a missing text file, an output directory that does not exist
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    _fails(["evaluate", *common, "--text-file", str(empty)], capsys, "holds no sentence", tmp_path)
    _fails(["evaluate", *common, "--text-file", str(tmp_path / "nope.txt")], capsys, "does not exist", tmp_path)
    _fails(["evaluate", tiny["model"], "--text-file", str(one), "--json", str(tmp_path / "no" / "s.json")], capsys,
           "does not exist", tmp_path)
    # no recogniser installed: the import fails
    monkeypatch.setitem(sys.modules, "pocketsphinx", None)
    _fails(["evaluate", *common, "--text-file", str(one), *refs], capsys,
           "the recogniser is not installed (pocketsphinx missing): pip install 'speechblocks[eval]'", tmp_path)


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "speechblocks evaluate " in out.split("examples:")[1] and "--reference-dir" in out


def test_evaluate_a_tacotron1_model(tiny, tmp_path, capsys):
    """keithito's family: each sentence alone, Griffin-Lim of the linear output at 20 kHz (the 16 kHz references
    resampled), the ceiling from the references' linear spectrograms."""
    import torch

    import torch_layers
    from speechblocks.training.tacotron1 import tacotron1_torch_payload

    torch.manual_seed(0)
    model = torch_layers.Tacotron1("keithito", num_mels=80, embed_depth=8, prenet_depths=[8, 8], encoder_depth=8,
                                   attention_depth=8, decoder_depth=8, postnet_depth=8)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    path = tmp_path / "t1.pt"
    torch.save(tacotron1_torch_payload(model.hparams, model.layout, state), path)
    out_json, text = tmp_path / "t1.json", tmp_path / "one.txt"
    text.write_text("slt_train|The train leaves at noon.\n")
    assert main(["evaluate", str(path), "--text-file", str(text), "--reference-dir", tiny["refs"], "--encoder",
                 tiny["encoder"], "--speaker-wav", os.path.join(DATA, "awb_train.flac"), "--max-iters", "6",
                 "--griffin-lim-iters", "4", "--json", str(out_json)]) == 0
    doc = json.loads(out_json.read_text())
    st = doc["settings"]
    assert (st["family"], st["sample_rate"], st["mcd"]["order"]) == ("tacotron1", 20000, 23)
    assert st["similarity_target"] == "speaker_wav"  # then the recording has a similarity to it too
    assert -1 <= doc["sentences"][0]["recording"]["similarity"] <= 1
    assert st["mcd"]["alpha"] == pytest.approx(0.441)
    for s in doc["sentences"]:
        assert s["model"]["steps"] <= 6 and s["resynthesis"]["mcd"] is not None
    assert doc["sentences"][0]["recording"]["heard"] == "the train leaves at noon"  # resampled to 20 kHz and back
    capsys.readouterr()
