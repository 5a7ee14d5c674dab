"""The ``speechblocks`` command line (issue #11): whole-model migration and ``Tacotron2.from_migrated`` in both
frameworks, ``synthesize`` and its input errors, exit statuses, one-line errors, quiet start-up, ``--help``.

Models are small whole-model TF1 checkpoints (``tests/helpers/tacotron2_checkpoint.py``); the reference of every
synthesized file is the model itself run on that one sentence, outside the command line.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from speechblocks import cli
from speechblocks.text import text_to_sequence
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables

DETERMINISTIC = ["--set", "tacotron_dropout_rate=0"]


def run(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def rtvc(tmp_path_factory):
    """A small RTVC-like checkpoint and its migrated Keras and torch files."""
    d = tmp_path_factory.mktemp("rtvc")
    hp, variables = small_variables("rtvc", seed=3, stop_bias=-30.0)  # never stops: max_iters cuts decoding
    ckpt = save_model_checkpoint(d, variables)
    files = {}
    for to, name in (("keras", "m.weights.h5"), ("torch", "m.pt")):
        files[to] = str(d / name)
        assert cli.main(["migrate", ckpt, "--to", to, files[to], "--set", "max_iters=12"]) == 0
    emb = np.random.default_rng(0).standard_normal(6).astype(np.float32)
    np.save(d / "spk.npy", emb)
    return {"dir": d, "ckpt": ckpt, "hp": hp, "weights": variables, "emb": str(d / "spk.npy"), **files}


# -- from_migrated: both formats, both frameworks ----------------------------------------------------
def test_from_migrated_rebuilds_the_same_model_in_both_frameworks(rtvc):
    import keras
    import torch

    import tf_layers
    import torch_layers
    from torch_layers.tf_batch_norm import TFBatchNorm

    km = tf_layers.Tacotron2.from_migrated(rtvc["keras"], tacotron_dropout_rate=0.0)
    tm = torch_layers.Tacotron2.from_migrated(rtvc["torch"], tacotron_dropout_rate=0.0)
    tk = torch_layers.Tacotron2.from_migrated(rtvc["keras"], tacotron_dropout_rate=0.0)  # h5py, no TF needed
    assert km.hparams.max_iters == tm.hparams.max_iters == 12  # the --set stored in the file
    for model in (km, tm, tk):  # every variable of the checkpoint, bit for bit
        w = model.tf1_weights()
        assert sorted(w) == sorted(rtvc["weights"])
        for k, v in w.items():
            np.testing.assert_array_equal(v, rtvc["weights"][k])
    ids = np.array([text_to_sequence("Hello there.")], np.int64)
    emb = np.load(rtvc["emb"])[None]
    ref = km.synthesize(ids, speaker_embeddings=emb, max_iters=8)
    with torch.no_grad():
        for model in (tm, tk):
            out = model(torch.from_numpy(ids), None, torch.from_numpy(emb), max_iters=8)
            np.testing.assert_allclose(out["mel_outputs"].numpy(), ref["mel_outputs"], atol=1e-5)
            np.testing.assert_allclose(out["alignments"].numpy(), ref["alignments"], atol=1e-5)
    # the data-parallel keywords reach the rebuilt model (every batch norm of it)
    synced = tf_layers.Tacotron2.from_migrated(rtvc["keras"], sync_batch_norm=True, loss_reduction="per_replica")
    assert (synced.sync_batch_norm, synced.loss_reduction) == (True, "per_replica")
    norms = [x for x in synced._flatten_layers() if isinstance(x, keras.layers.BatchNormalization)]
    assert norms and all(x.synchronized for x in norms)
    for path in (rtvc["torch"], rtvc["keras"]):
        model = torch_layers.Tacotron2.from_migrated(path, sync_batch_norm=True)
        norms = [x for x in model.modules() if isinstance(x, TFBatchNorm)]
        assert model.sync_batch_norm and norms and all(x.sync_batch_norm for x in norms)


def test_from_migrated_refuses_what_it_cannot_read(rtvc, tmp_path):
    import tf_layers
    import torch_layers

    with pytest.raises(ValueError, match=r"is a torch file .*torch_layers\.Tacotron2\.from_migrated"):
        tf_layers.Tacotron2.from_migrated(rtvc["torch"])
    with pytest.raises(ValueError, match="contradict"):  # sizes the tensors contradict
        torch_layers.Tacotron2.from_migrated(rtvc["torch"], decoder_lstm_units=32)
    with pytest.raises(ValueError, match="contradict"):
        tf_layers.Tacotron2.from_migrated(rtvc["keras"], "rtvc")  # the preset's full sizes
    with pytest.raises(FileNotFoundError):
        torch_layers.Tacotron2.from_migrated(str(tmp_path / "none.pt"))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="not a file written by `speechblocks migrate`"):
        torch_layers.Tacotron2.from_migrated(str(junk))
    # a checkpoint of some blocks migrates block by block; its file is not a model
    _, variables = small_variables("rtvc", seed=4)
    part = {k: v for k, v in variables.items() if k.startswith("decoder/decoder_prenet/")}
    ckpt = save_model_checkpoint(tmp_path, part)
    for to, name in (("keras", "p.weights.h5"), ("torch", "p.pt")):
        assert cli.main(["migrate", ckpt, "--to", to, str(tmp_path / name)]) == 0
    with pytest.raises(ValueError, match="not a whole model .*load_migrated"):
        tf_layers.Tacotron2.from_migrated(str(tmp_path / "p.weights.h5"))
    with pytest.raises(ValueError, match="not a whole model .*load_migrated"):
        torch_layers.Tacotron2.from_migrated(str(tmp_path / "p.pt"))
    assert list(torch_layers.load_migrated(str(tmp_path / "p.pt"))) == ["decoder/decoder_prenet"]


def test_inspect_shows_the_model(rtvc, capsys):
    rc, out, err = run(["inspect", rtvc["ckpt"]], capsys)
    assert rc == 0, err
    assert "whole model: Tacotron-2 (complete)" in out
    assert ("RTVC (speaker embedding); preset none (sizes differ from both presets); r (outputs_per_step)=2, "
            "speaker_embedding_size=6, n_symbols=66, num_mels=10") in out
    n_emb = 66 * 16
    assert f"embedding {n_emb:,d}" in out
    assert "unmigrated variables (not blocks of this library): 0" in out


# -- synthesize ----------------------------------------------------------------------------------------
def _alone(model_file, text, emb, max_iters):
    """The reference: the model run on this one sentence, outside the command line."""
    import tf_layers

    model = tf_layers.Tacotron2.from_migrated(model_file, tacotron_dropout_rate=0.0)
    ids = np.array([text_to_sequence(text)], np.int64)
    out = model.synthesize(ids, speaker_embeddings=None if emb is None else emb[None], max_iters=max_iters)
    return out["mel_outputs"][0]


@pytest.mark.parametrize("framework", ["keras", "torch"])
def test_synthesize_one_sentence(rtvc, framework, tmp_path, capsys):
    out = tmp_path / "hello.npy"
    source = rtvc["torch"] if framework == "torch" else rtvc["keras"]
    rc, stdout, err = run(["synthesize", source, "--text", "Hello, Dr. Smith!", "--speaker-embedding", rtvc["emb"],
                           "--framework", framework, "--max-iters", "7", "--out", str(out)] + DETERMINISTIC, capsys)
    assert rc == 0, err
    mel = np.load(out)
    ref = _alone(rtvc["keras"], "Hello, Dr. Smith!", np.load(rtvc["emb"]), 7)
    assert mel.shape == ref.shape == (14, 10)  # no stop: 7 steps x r = 2 frames, 10 mels
    np.testing.assert_allclose(mel, ref, atol=1e-5)
    assert "'hello, doctor smith!'" in stdout and "no stop after 7 steps" in stdout


def test_synthesize_several_sentences_equal_each_alone(rtvc, tmp_path, capsys):
    texts = ["It costs $3.50.", "Hi.", "The 2nd of May, 1984, was a Sunday."]
    text_file = tmp_path / "lines.txt"
    text_file.write_text("\n".join(texts[1:]) + "\n\n", encoding="utf-8")
    out = tmp_path / "mels"
    rc, stdout, err = run(["synthesize", rtvc["torch"], "--text", texts[0], "--text-file", str(text_file),
                           "--speaker-embedding", rtvc["emb"], "--max-iters", "6", "--out", str(out),
                           "--plot", str(tmp_path / "mels" / "align.png")] + DETERMINISTIC, capsys)
    assert rc == 0, err
    assert sorted(os.listdir(out)) == ["000.npy", "001.npy", "002.npy", "align_000.png", "align_001.png",
                                       "align_002.png"]
    emb = np.load(rtvc["emb"])
    for i, text in enumerate(texts):
        np.testing.assert_allclose(np.load(out / f"{i:03d}.npy"), _alone(rtvc["keras"], text, emb, 6), atol=1e-5)
    assert (out / "align_000.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "three dollars, fifty cents" in stdout and "nineteen eighty-four" in stdout


def test_synthesize_stops_where_the_stop_rule_fires(tmp_path, capsys):
    _, variables = small_variables("rayhane", seed=5, stop_bias=5.0)  # sigmoid(5 + small) rounds to 1 at step 1
    variables["decoder/stop_token_projection/projection_stop_token_projection/kernel"][:] = 0.0
    ckpt = save_model_checkpoint(tmp_path, variables)
    out = tmp_path / "a.npy"
    rc, stdout, err = run(["synthesize", ckpt, "--text", "A short one.", "--framework", "torch", "--out", str(out)],
                          capsys)
    assert rc == 0, err
    assert np.load(out).shape == (1, 10) and "stop at step 1" in stdout  # Rayhane: r = 1


@pytest.mark.parametrize("case", ["empty", "unknown", "emb_size", "emb_missing", "emb_extra", "no_text", "out_dir",
                                  "plot_no_matplotlib", "missing_source", "bad_set"])
def test_synthesize_input_errors(rtvc, case, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out" / "x.npy"
    out.parent.mkdir()
    argv = ["synthesize", rtvc["torch"], "--out", str(out), "--speaker-embedding", rtvc["emb"], "--text", "Fine."]
    expect = None
    if case == "empty":
        argv[-1], expect = "   ", "sentence 1 is empty"
    elif case == "unknown":
        argv[-1] = "Ça va? 10€"
        argv += ["--cleaners", "basic_cleaners"]
        expect = "ça va? 10€"  # the cleaned text is shown, with the characters outside the table named
    elif case == "emb_size":
        np.save(tmp_path / "e.npy", np.zeros(5, np.float32))
        argv[argv.index(rtvc["emb"])] = str(tmp_path / "e.npy")
        expect = "has size 5; this model needs speaker_embedding_size=6"
    elif case == "emb_missing":
        argv = [a for a in argv if a not in ("--speaker-embedding", rtvc["emb"])]
        expect = "give --speaker-embedding"
    elif case == "emb_extra":
        _, variables = small_variables("rayhane", seed=6)
        argv[1] = save_model_checkpoint(tmp_path, variables)
        expect = "drop --speaker-embedding"
    elif case == "no_text":
        argv = argv[:-2]
        expect = "no text"
    elif case == "out_dir":
        argv += ["--text", "Two."]
        out.write_bytes(b"")
        expect = "need a directory"
    elif case == "plot_no_matplotlib":
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        argv += ["--plot", str(tmp_path / "out" / "a.png")]
        expect = "pip install"
    elif case == "missing_source":
        argv[1] = str(tmp_path / "nothing.pt")
        expect = "does not exist"
    elif case == "bad_set":
        argv += ["--set", "no_such_hparam=1"]
        expect = "no_such_hparam"
    before = sorted(os.listdir(out.parent))
    rc, stdout, err = run(argv, capsys)
    assert rc == 2, (stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("speechblocks synthesize: error: "), err
    assert expect in lines[0], lines[0]
    if case == "unknown":
        assert "'ç'" in lines[0] and "'€'" in lines[0]
    assert sorted(os.listdir(out.parent)) == before  # nothing written
    assert stdout == ""


# -- command-line conventions --------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["parity", "inspect", "migrate", "synthesize"])
def test_every_subcommand_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"speechblocks {command} " in out.split("examples:")[1]
    assert "--verbose" in out and "--debug" in out


def test_exit_statuses_and_one_line_errors(rtvc, tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as e:  # argparse: usage error
        cli.main(["migrate", rtvc["ckpt"]])
    assert e.value.code == 2
    capsys.readouterr()
    rc, out, err = run(["migrate", str(tmp_path / "none"), "--to", "keras", str(tmp_path / "o.weights.h5")], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "does not exist" in err and "Traceback" not in err
    with pytest.raises(FileNotFoundError):  # --debug: the exception itself
        cli.main(["--debug", "inspect", str(tmp_path / "none")])

    def boom(args):
        raise RuntimeError("a bug\nsecond line")

    from speechblocks.commands import inspect as inspect_command

    monkeypatch.setattr(inspect_command, "run", boom)  # the parser takes each command's run when it is built
    rc, out, err = run(["inspect", rtvc["ckpt"]], capsys)
    assert rc == 3
    assert err.strip() == "speechblocks inspect: internal error: RuntimeError: a bug second line (run with --debug " \
                          "for the traceback)"


def test_start_up_is_quiet_in_a_fresh_process(rtvc, tmp_path):
    """No TensorFlow / absl / oneDNN line on stderr: the start-up chatter is written by C++ straight to file
    descriptor 2, so only a separate process shows it."""
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    out = tmp_path / "q.npy"
    # synthesize from the TF1 checkpoint: TensorFlow, Keras, TF's checkpoint reader and the model all start up here
    # (inspect and migrate start the same way; each fresh process costs ~10 s of CPU)
    argv = ["synthesize", rtvc["ckpt"], "--framework", "keras", "--text", "Quiet.", "--speaker-embedding", rtvc["emb"],
            "--max-iters", "3", "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "speechblocks.cli"] + argv, capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    assert proc.stdout.strip()
    assert np.load(out).shape == (6, 10)


# -- parity on the user's checkpoint ---------------------------------------------------------------------
def test_parity_on_a_checkpoint(rtvc, capsys, monkeypatch):
    import json

    rc, out, err = run(["parity", "--checkpoint", rtvc["ckpt"], "--steps", "3", "--json"], capsys)
    assert rc == 0, err
    rows = json.loads(out)
    assert rows and all(r["passed"] for r in rows)
    model_rows = {(r["comparison"], r["output"]) for r in rows if r["block"].startswith("Tacotron2")}
    for comparison in ("TF1->Keras", "TF1->torch", "Keras<->torch"):
        for mode in ("GTA", "free"):
            assert any(c == comparison and o.startswith(mode) and "mel_outputs" in o for c, o in model_rows), (
                comparison, mode, sorted(model_rows))
    assert all(line.startswith("speechblocks parity: ") for line in err.strip().splitlines())  # progress only

    import parity_tests.checkpoint_parity as cp

    monkeypatch.setattr(cp, "legacy_reference_available", lambda: False)  # as without the `legacy` extra
    rc, out, err = run(["parity", "--checkpoint", rtvc["ckpt"]], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "pip install 'speechblocks[legacy]'" in err
