"""``--device`` and ``synthesize --precision`` (issue #38): the values, where each command runs, and its refusals.

Every device-aware case is parametrised over ``cpu`` and ``cuda`` (:data:`tests.helpers.devices.DEVICES`: the CUDA
cases are skipped, and counted, where torch sees no GPU). Each command's output on a device is checked against the
library call it stands for run on the CPU; on a machine without CUDA, ``--device cuda`` is one line, exit status 2,
and nothing written, for every command that runs a torch model. ``parity --checkpoint`` (its torch side, TF32 off on
CUDA) and ``evaluate`` give with ``--device cpu`` the rows and scores of a run without it.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile
import torch

from speechblocks import resolve_hparams, synthesis
from speechblocks.cli import main
from speechblocks.devices import check_precision, local_rank, parse_device
from speechblocks.errors import UsageError
from tests.helpers.audio_signals import synthetic_speech
from tests.helpers.devices import DEVICES, without_cuda
from tests.helpers.tiny_training import set_args, tiny_corpus, tiny_full_hparams
from torch_layers.tacotron2_trainer import Tacotron2Trainer


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import torch_layers

    d = tmp_path_factory.mktemp("devices")
    tiny_corpus(d / "data", n=6)
    trainer = Tacotron2Trainer.new(resolve_hparams(tiny_full_hparams()), seed=3)
    trainer.save_model(d / "model.pt")
    np.save(d / "spk.npy", np.array([0.5, -0.5, 0.5, 0.5], np.float32))
    soundfile.write(d / "ref.wav", synthetic_speech(16000, seconds=1.7, seed=1), 16000)
    torch.manual_seed(0)
    encoder = torch_layers.SpeakerEncoder(model_hidden_size=16, model_num_layers=1, model_embedding_size=32)
    torch.save({"model_state": encoder.state_dict(), "step": 0}, d / "encoder.pt")
    mel = np.random.default_rng(0).uniform(-4, 0, size=(12, 80)).astype(np.float32)
    np.save(d / "mel.npy", mel)
    corpus = d / "ljs"
    os.makedirs(corpus / "wavs")
    soundfile.write(corpus / "wavs" / "a1.wav", synthetic_speech(16000, 2.0, seed=0), 16000)
    (corpus / "metadata.csv").write_text("a1|Hello there.|Hello there.\n", encoding="utf-8")
    return {k: str(v) for k, v in {"dir": d, "data": d / "data", "model": d / "model.pt", "spk": d / "spk.npy",
                                   "ref": d / "ref.wav", "encoder": d / "encoder.pt", "mel": d / "mel.npy",
                                   "ljs": corpus}.items()}


# -- the values ----------------------------------------------------------------------------------------------
def test_device_values_are_normalised_and_bad_ones_name_the_option():
    assert [parse_device(v) for v in ("auto", "CPU", " cuda ", "cuda:0", "cuda:07")] == \
        ["auto", "cpu", "cuda", "cuda:0", "cuda:7"]
    for bad in ("gpu", "cuda:", "cuda:-1", "cuda:x", "mps", ""):
        with pytest.raises(ValueError, match=r"^--device must be one of auto, cpu, cuda, cuda:N; got "):
            parse_device(bad)
    assert check_precision("BF16") == "bf16" and check_precision("fp16") == "fp16"
    with pytest.raises(ValueError, match=r"^--precision must be one of fp32, bf16; got 'fp16'$"):
        check_precision("fp16", ("fp32", "bf16"))


def test_local_rank_only_under_a_launch_of_several(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert local_rank() is None
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert local_rank() == 1


@pytest.mark.parametrize("device", DEVICES)
def test_torch_device_resolves(device):
    from speechblocks.commands._common import torch_device

    assert torch_device(device) == torch.device(device, 0 if device == "cuda" else None)
    assert torch_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        n = torch.cuda.device_count()
        with pytest.raises(UsageError, match=f"--device cuda:{n}: torch sees {n} CUDA GPU"):
            torch_device(f"cuda:{n}")


@without_cuda
@pytest.mark.parametrize("spec", ["cuda", "cuda:1"])
def test_torch_device_without_cuda_is_one_line(spec):
    from speechblocks.commands._common import torch_device

    with pytest.raises(UsageError) as e:
        torch_device(spec)
    assert str(e.value).startswith(f"--device {spec}: this torch") and "\n" not in str(e.value)
    assert str(e.value).endswith("use --device cpu or auto")


# -- every command: --device cuda without CUDA, bad values ---------------------------------------------------
def _commands(f, out):
    return {
        "synthesize": ["synthesize", f["model"], "--text", "abc", "--speaker-embedding", f["spk"], "--out",
                       os.path.join(out, "s.npy")],
        "synthesize --wav": ["synthesize", f["model"], "--text", "abc", "--speaker-embedding", f["spk"], "--out",
                             os.path.join(out, "s.npy"), "--wav", "--hparams", "rtvc"],
        "train": ["train", f["data"], os.path.join(out, "run"), "--steps", "1", *set_args()],
        "gta": ["gta", f["data"], f["model"], os.path.join(out, "gta")],
        "embed": ["embed", "--encoder", f["encoder"], f["ref"], "--out", os.path.join(out, "e.npy")],
        "griffin-lim": ["griffin-lim", f["mel"], "--hparams", "rtvc", "--out", os.path.join(out, "g.wav")],
        "preprocess": ["preprocess", f["ljs"], os.path.join(out, "pre"), "--hparams", "rtvc", "--encoder",
                       f["encoder"], "--workers", "1"],
    }


def _fails(argv, capsys, fragment, out):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment in err, (argv, err)
    assert os.listdir(out) == [], (argv, os.listdir(out))


@without_cuda
@pytest.mark.parametrize("command", ["synthesize", "synthesize --wav", "train", "gta", "embed", "griffin-lim",
                                     "preprocess"])
def test_device_cuda_without_cuda_is_one_line_exit_2_nothing_written(files, tmp_path, capsys, command):
    argv = _commands(files, str(tmp_path))[command]
    _fails(argv + ["--device", "cuda"], capsys, "--device cuda: this torch", str(tmp_path))
    _fails(argv + ["--device", "gpu0"], capsys, "--device must be one of auto, cpu, cuda, cuda:N; got 'gpu0'",
           str(tmp_path))


@pytest.mark.parametrize("command, value, fragment", [
    ("train", "fp8", "--precision must be one of fp32, bf16, fp16; got 'fp8'"),
    ("train", "float32", "--precision must be one of fp32, bf16, fp16; got 'float32'"),
    ("synthesize", "fp16", "--precision must be one of fp32, bf16; got 'fp16'"),
    ("synthesize", "half", "--precision must be one of fp32, bf16; got 'half'"),
])
def test_bad_precision_is_one_line_exit_2_nothing_written(files, tmp_path, capsys, command, value, fragment):
    _fails(_commands(files, str(tmp_path))[command] + ["--precision", value], capsys, fragment, str(tmp_path))


# -- each command on a device equals its library call on the CPU ---------------------------------------------
def _cpu_model(files):
    from torch_layers import Tacotron2

    return Tacotron2.from_migrated(files["model"], tacotron_dropout_rate=0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_synthesize_on_a_device_equals_the_cpu_model(files, tmp_path, capsys, device):
    out = tmp_path / "s.npy"
    assert main(["synthesize", files["model"], "--text", "abc", "--speaker-embedding", files["spk"], "--out",
                 str(out), "--max-iters", "6", "--set", "tacotron_dropout_rate=0", "--device", device]) == 0
    (want,) = _cpu_model(files).synthesize_batch([[28, 29, 30, 1]], np.load(files["spk"]), max_iters=6)
    got = np.load(out)
    assert got.shape == want["mel_outputs"].shape
    np.testing.assert_allclose(got, want["mel_outputs"], rtol=0, atol=0 if device == "cpu" else 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_gta_on_a_device_equals_the_cpu_trainer(files, tmp_path, capsys, device):
    out = tmp_path / "gta"
    assert main(["gta", files["data"], files["model"], str(out), "--quiet", "--set", "tacotron_dropout_rate=0",
                 "--batch-size", "6", "--device", device]) == 0, capsys.readouterr().err
    got = np.load(out / "gta" / "mel-0.npy")
    cpu = str(tmp_path / "cpu")
    assert main(["gta", files["data"], files["model"], cpu, "--quiet", "--set", "tacotron_dropout_rate=0",
                 "--batch-size", "6", "--device", "cpu"]) == 0
    np.testing.assert_allclose(got, np.load(os.path.join(cpu, "gta", "mel-0.npy")), rtol=0,
                               atol=0 if device == "cpu" else 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_griffin_lim_on_a_device_equals_the_cpu_inverse(files, tmp_path, capsys, device):
    from speechblocks.audio import audio_hparams
    from torch_layers.griffin_lim import inv_mel_spectrogram

    out = tmp_path / "g.wav"
    assert main(["griffin-lim", files["mel"], "--hparams", "rtvc", "--griffin-lim-iters", "8", "--out", str(out),
                 "--device", device]) == 0
    got, sr = soundfile.read(out, dtype="int16")
    hp = audio_hparams("rtvc")
    wav = inv_mel_spectrogram(torch.from_numpy(np.load(files["mel"]))[None], hp, n_iter=8,
                              generator=torch.Generator().manual_seed(0))[0].numpy()
    want = (wav * (32767 / max(0.01, np.abs(wav).max()))).astype(np.int16)  # the original's save_wav
    assert sr == 16000 and got.shape == want.shape
    # the same samples on the CPU; on a GPU within float rounding (a sample or two of 32767)
    np.testing.assert_allclose(got.astype(np.int32), want.astype(np.int32), rtol=0, atol=0 if device == "cpu" else 2)


@pytest.mark.parametrize("device", DEVICES)
def test_embed_on_a_device_equals_the_cpu_encoder(files, tmp_path, capsys, device):
    import torch_layers

    out = tmp_path / "e.npy"
    assert main(["embed", "--encoder", files["encoder"], files["ref"], "--out", str(out), "--device", device]) == 0
    want = torch_layers.SpeakerEncoder.from_checkpoint(files["encoder"]).eval().embed_wav(files["ref"])
    np.testing.assert_allclose(np.load(out), want, rtol=0, atol=0 if device == "cpu" else 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_training_step_on_a_device_equals_the_cpu_step(files, device):
    from speechblocks.training import prepare_batch
    from tests.helpers.training_corpus import letter_ids

    hp = resolve_hparams(tiny_full_hparams())
    rng = np.random.default_rng(1)
    batch = prepare_batch([(letter_ids("abc"), rng.uniform(-4, 4, (5, 8)).astype(np.float32),
                            rng.normal(size=4).astype(np.float32)),
                           (letter_ids("de"), rng.uniform(-4, 4, (3, 8)).astype(np.float32),
                            rng.normal(size=4).astype(np.float32))], tiny_full_hparams())
    cls = Tacotron2Trainer.configured(device)
    assert cls.default_device == str(torch.device(device)) and cls.precision == "fp32"
    here, cpu = cls.new(hp, seed=0), Tacotron2Trainer.new(hp, seed=0)
    assert next(here.model.parameters()).device.type == device
    for step in range(2):
        a, b = here.train_step(batch, 1e-3, seed=step), cpu.train_step(batch, 1e-3, seed=step)
        assert a.losses.keys() == b.losses.keys()
        for k in a.losses:
            assert a.losses[k] == pytest.approx(b.losses[k], rel=1e-5, abs=0), k
    # (two CPU trainers differ in the last bits too: TorchScript's profiling runs, then its optimised graph)
    _, slots = here.optimizer_state()
    _, want = cpu.optimizer_state()
    assert sorted(slots) == sorted(want) and all(slots[k].dtype == np.float32 for k in slots)
    for k in want:
        np.testing.assert_allclose(slots[k], want[k], rtol=1e-4, atol=1e-8)


# -- which decoder loop, and bfloat16 inference ---------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_the_decoder_loop_line_names_the_loop(files, device):
    from torch_layers import _native

    model = _cpu_model(files).to(device)
    fp32, bf16 = (synthesis.decoder_loop_line(model, "torch", 2, p) for p in ("fp32", "bf16"))
    if device == "cpu" and _native.library() is not None:
        assert fp32 == "decoder loop: native-batch"
        assert synthesis.decoder_loop_line(model, "torch", 1) == "decoder loop: native-step"
    elif device == "cuda":
        assert fp32 == "decoder loop: graph (a CUDA tensor (the native steps run on the CPU))"
    assert bf16.startswith("decoder loop: graph (")


def test_precision_error_against_numbers_by_hand():
    def result(mel, argmax, steps, stopped):
        t_in = 3
        alignment = np.zeros((t_in, len(argmax)), np.float32)
        alignment[argmax, np.arange(len(argmax))] = 1.0
        return synthesis.SynthesisResult("t", "t", [1], np.asarray(mel, np.float32), alignment,
                                         np.zeros(len(mel), np.float32), steps, stopped)

    ref = [result([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [0, 1, 2], 3, True), result([[1.0, 1.0]], [2], 1, True)]
    got = [result([[0.5, 1.0], [2.0, 2.0]], [0, 2], 2, True), result([[1.0, 1.25], [9.0, 9.0]], [2, 0], 2, False)]
    e = synthesis.precision_error(ref, got)
    # sentence 1 over its 2 common frames: |d| = 0.5, 0, 0, 1 -> max 1, mean 0.375; argmax agrees on 1 of 2 steps
    # sentence 2 over its 1 common frame: |d| = 0, 0.25 -> mean 0.125; argmax agrees on its 1 common step
    assert e["mel_max_abs"] == 1.0 and e["mel_mean_abs"] == pytest.approx((0.375 + 0.125) / 2)
    assert e["argmax_agreement"] == pytest.approx((0.5 + 1.0) / 2)
    assert e["stop_steps"] == [[3, 2], [1, 2]] and e["stopped"] == [[True, True], [True, False]]


def test_synthesize_bf16_is_bfloat16_autocast_close_to_fp32(files, tmp_path, capsys):
    """bf16 is applied (the mels differ from float32's) and its error is bfloat16's (8 bits of mantissa: a relative
    2^-8 per rounding), far below the mels' own scale."""
    mels = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.npy"
        assert main(["synthesize", files["model"], "--text", "abcabc", "--speaker-embedding", files["spk"], "--out",
                     str(out), "--max-iters", "4", "--set", "tacotron_dropout_rate=0", "--set", "mask_encoder=true",
                     "--device", "cpu", "--precision", precision]) == 0
        mels[precision] = np.load(out)
    a, b = mels["fp32"], mels["bf16"]
    n = min(len(a), len(b))
    d = np.abs(a[:n] - b[:n])
    assert a.dtype == b.dtype == np.float32 and n > 0
    assert 0 < d.max() < 0.05 * np.abs(a).max(), (d.max(), np.abs(a).max())


class _FakeConfig:
    """The two calls :func:`speechblocks.commands._common.keras_device` makes of ``tf.config``, recorded."""

    def __init__(self, gpus):
        self.gpus, self.visible = gpus, None

    def list_physical_devices(self, kind):
        assert kind == "GPU"
        return list(self.gpus)

    def set_visible_devices(self, devices, kind):
        assert kind == "GPU"
        self.visible = list(devices)


@pytest.mark.parametrize("spec, gpus, visible", [("cpu", ["g0", "g1"], []), ("cuda", ["g0", "g1"], ["g0", "g1"]),
                                                 ("cuda:1", ["g0", "g1"], ["g1"]), ("auto", ["g0"], None)])
def test_keras_device_cpu_hides_the_gpus_from_tensorflow(spec, gpus, visible):
    from types import SimpleNamespace

    from speechblocks.commands._common import keras_device

    tf = SimpleNamespace(config=_FakeConfig(gpus))
    keras_device(tf, spec)
    assert tf.config.visible == visible  # auto: TensorFlow's own placement, nothing set


def test_keras_device_cuda_without_a_gpu_names_the_tf_gpu_extra():
    from types import SimpleNamespace

    from speechblocks.commands._common import keras_device

    with pytest.raises(UsageError, match=r"^--device cuda:0: TensorFlow sees 0 GPU\(s\) .*speechblocks\[tf-gpu\]"):
        keras_device(SimpleNamespace(config=_FakeConfig([])), "cuda:0")


# -- parity --checkpoint and evaluate: the torch side on a device --------------------------------------------
@pytest.fixture(scope="module")
def parity_files(tmp_path_factory):
    """A small RTVC-like TF1 checkpoint (never stops) and a tiny keithito Tacotron-1 one, both written with
    ``tf.raw_ops.SaveV2``."""
    import tensorflow as tf

    import torch_layers
    from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables

    d = tmp_path_factory.mktemp("parity")
    _, variables = small_variables("rtvc", seed=3, stop_bias=-30.0)
    os.makedirs(d / "t2")
    ckpt = save_model_checkpoint(d / "t2", variables)
    torch.manual_seed(0)
    t1 = torch_layers.Tacotron1("keithito", num_mels=8, embed_depth=8, prenet_depths=[8, 8], encoder_depth=8,
                                attention_depth=8, decoder_depth=8, postnet_depth=8)
    weights = {f"{t1.tf1_scope}/{k}": v for k, v in t1.tf1_weights().items()}
    names = sorted(weights)
    os.makedirs(d / "t1")
    prefix = str(d / "t1" / "model.ckpt-10")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[weights[n] for n in names])
    return {"tacotron2": ckpt, "tacotron1": prefix}


@pytest.fixture(scope="module")
def evaluate_files(tmp_path_factory):
    """A tiny random RTVC Tacotron-2 (80 mels, the 256-value speaker embedding of the GE2E below), small random GE2E
    weights, one sentence and its reference recording (tests/data/evaluate), a tiny torch Tacotron-1."""
    import shutil

    import torch_layers
    from speechblocks import tf1_variable_shapes
    from speechblocks.training.checkpoint_files import torch_model_payload
    from speechblocks.training.tacotron1 import tacotron1_torch_payload

    d = tmp_path_factory.mktemp("evaluate")
    hp = resolve_hparams("rtvc", 66, embedding_dim=16, enc_conv_channels=16, encoder_lstm_units=8, attention_dim=8,
                         attention_filters=4, prenet_layers=[8, 8], decoder_lstm_units=16, postnet_channels=16,
                         speaker_embedding_size=256, num_mels=80)
    torch.manual_seed(0)
    state = {k: v.detach().contiguous() for k, v in torch_layers.Tacotron2(hp).state_dict().items()}
    torch.save(torch_model_payload(hp, state, tf1_variable_shapes(hp)), d / "tiny.pt")
    encoder = torch_layers.SpeakerEncoder(model_hidden_size=16, model_num_layers=1, model_embedding_size=256)
    torch.save({"model_state": encoder.state_dict(), "step": 1}, d / "encoder.pt")
    t1 = torch_layers.Tacotron1("keithito", num_mels=80, embed_depth=8, prenet_depths=[8, 8], encoder_depth=8,
                                attention_depth=8, decoder_depth=8, postnet_depth=8)
    torch.save(tacotron1_torch_payload(t1.hparams, t1.layout, {k: v.detach().contiguous()
                                                               for k, v in t1.state_dict().items()}), d / "t1.pt")
    os.makedirs(d / "refs")
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "evaluate")
    shutil.copy(os.path.join(data, "slt_train.flac"), d / "refs")
    (d / "one.txt").write_text("slt_train|The train leaves at noon.\n", encoding="utf-8")
    return {k: str(d / v) for k, v in {"model": "tiny.pt", "encoder": "encoder.pt", "t1": "t1.pt", "refs": "refs",
                                       "text": "one.txt"}.items()}


def _evaluate_argv(f, out):
    return ["evaluate", f["model"], "--text-file", f["text"], "--reference-dir", f["refs"], "--encoder", f["encoder"],
            "--max-iters", "6", "--set", "tacotron_dropout_rate=0", "--griffin-lim-iters", "4", "--json",
            os.path.join(out, "scores.json")]


def _needs_recognizer():
    pytest.importorskip("pocketsphinx", reason="the eval extra (pocketsphinx) is not installed")
    pytest.importorskip("jiwer", reason="the eval extra (jiwer) is not installed")


@without_cuda
@pytest.mark.parametrize("command", ["parity --checkpoint", "evaluate"])
def test_parity_and_evaluate_device_cuda_without_cuda_is_one_line_exit_2_nothing_written(
        parity_files, evaluate_files, tmp_path, capsys, command):
    if command == "evaluate":
        _needs_recognizer()
        argv = _evaluate_argv(evaluate_files, str(tmp_path))
    else:
        argv = ["parity", "--checkpoint", parity_files["tacotron2"], "--skip-legacy", "--steps", "2"]
    for spec in ("cuda", "cuda:1"):
        _fails(argv + ["--device", spec], capsys, f"--device {spec}: this torch", str(tmp_path))
    for bad in ("gpu0", "cuda:x", "mps"):
        _fails(argv + ["--device", bad], capsys, f"--device must be one of auto, cpu, cuda, cuda:N; got '{bad}'",
               str(tmp_path))


def test_parity_and_evaluate_of_a_tacotron1_refuse_cuda_in_one_line(parity_files, evaluate_files, tmp_path, capsys):
    """Tacotron-1 (keithito, mimic2) runs on the CPU in float32, as its synthesize: --device cuda is refused
    whether or not there is a GPU; the built-in suite has no torch side to move."""
    _fails(["parity", "--checkpoint", parity_files["tacotron1"], "--device", "cuda"], capsys,
           "--device: a Tacotron-1 (keithito, mimic2) checkpoint's parity runs on the CPU (drop it)", str(tmp_path))
    _fails(["parity", "--device", "cuda:0"], capsys, "--device cuda:0: the built-in suite runs on the CPU",
           str(tmp_path))
    _needs_recognizer()
    _fails(["evaluate", evaluate_files["t1"], "--text-file", evaluate_files["text"], "--device", "cuda"], capsys,
           "--device: Tacotron-1 (keithito, mimic2) synthesizes on the CPU in float32 (drop it)", str(tmp_path))


def _parity_rows(argv, capsys):
    import json

    assert main(argv) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


@pytest.mark.parametrize("device", DEVICES)
def test_parity_checkpoint_on_a_device_gives_the_cpu_rows(parity_files, capsys, device):
    """The torch side on ``device`` (float32, TF32 off on CUDA), Keras on TensorFlow's placement: every row passes,
    the progress line names the device; on the CPU the rows are those of the run without --device."""
    argv = ["parity", "--checkpoint", parity_files["tacotron2"], "--skip-legacy", "--steps", "2", "--json"]
    rows, err = _parity_rows(argv + ["--device", device], capsys)
    assert rows and all(r["passed"] for r in rows), [r for r in rows if not r["passed"]]
    where = "cpu" if device == "cpu" else "cuda:0"
    assert f"speechblocks parity: torch: building the model on {where} and loading" in err
    assert {r["comparison"] for r in rows} == {"Keras<->torch"}
    if device == "cuda":
        return
    default, _ = _parity_rows(argv, capsys)  # auto: the CPU here
    assert [(r["block"], r["output"], r["passed"]) for r in rows] == \
        [(r["block"], r["output"], r["passed"]) for r in default]
    for a, b in zip(rows, default):  # the same numbers (TorchScript's first runs may move a last bit)
        assert a["max_abs"] == pytest.approx(b["max_abs"], rel=1e-3, abs=1e-7), (a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_parity_torch_side_alone_runs_on_a_device(parity_files, device):
    """Without TensorFlow (``skip_keras``): the torch side's own checks -- the loaded weights, finite outputs, a
    rerun, the migrated ``.pt`` reloaded -- with every torch model on ``device``."""
    from parity_tests.checkpoint_parity import TORCH_SIDE_CHECKS, run_checkpoint_parity

    lines = []
    rows = run_checkpoint_parity(parity_files["tacotron2"], steps=2, batch=1, skip_legacy=True, skip_keras=True,
                                 device=torch.device(device), progress=lines.append)
    assert rows and all(r.passed for r in rows) and {r.comparison for r in rows} == set(TORCH_SIDE_CHECKS)
    assert any(f"torch: building the model on {'cpu' if device == 'cpu' else 'cuda:0'} and" in line
               for line in lines)


def test_exact_float32_turns_tf32_off_on_cuda_only_and_restores_it():
    from parity_tests.checkpoint_parity import exact_float32

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = matmul.allow_tf32, cudnn.allow_tf32  # (properties of torch's backends: monkeypatch cannot undo them)
    try:
        matmul.allow_tf32 = cudnn.allow_tf32 = True
        for device in (None, "cpu", torch.device("cpu")):
            with exact_float32(device):
                assert matmul.allow_tf32 and cudnn.allow_tf32
        with exact_float32("cuda:0"):  # setting the flags needs no GPU
            assert not matmul.allow_tf32 and not cudnn.allow_tf32
        assert matmul.allow_tf32 and cudnn.allow_tf32
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


def _scores(doc):
    """Every score of an evaluate JSON but the timings."""
    timing = {"seconds", "real_time_factor"}

    def strip(d):
        return {k: strip(v) if isinstance(v, dict) else v for k, v in d.items() if k not in timing}

    return strip({"sentences": doc["sentences"], "total": doc["total"]})


@pytest.mark.parametrize("device", DEVICES)
def test_evaluate_on_a_device_gives_the_cpu_scores(evaluate_files, tmp_path, capsys, device):
    """The torch model's synthesis, Griffin-Lim (the model's speech and the references' resynthesis) and the GE2E
    encoder on ``device``: on the CPU the scores of the run without --device, on a GPU the same within float
    rounding (what the recogniser hears is not compared there: a last bit of a waveform may change a word)."""
    import json

    _needs_recognizer()
    docs = {}
    for name, extra in (("device", ["--device", device]), ("default", ["--device", "cpu"] if device == "cuda" else [])):
        out = tmp_path / name
        out.mkdir()
        assert main(_evaluate_argv(evaluate_files, str(out)) + extra) == 0, capsys.readouterr().err
        docs[name] = json.loads((out / "scores.json").read_text())
    capsys.readouterr()
    assert docs["device"]["settings"]["device"] == ("cpu" if device == "cpu" else "cuda:0")
    assert docs["default"]["settings"]["device"] == "cpu"
    got, want = _scores(docs["device"]), _scores(docs["default"])
    if device == "cpu":
        assert got == want
        return
    for g, w in zip(got["sentences"], want["sentences"]):
        assert (g["model"]["steps"], g["model"]["stopped"]) == (w["model"]["steps"], w["model"]["stopped"])
        for system in ("model", "resynthesis"):
            for key in ("mcd", "similarity", "focus", "monotonicity"):
                if w[system].get(key) is not None:
                    assert g[system][key] == pytest.approx(w[system][key], rel=1e-3, abs=1e-4), (system, key)
