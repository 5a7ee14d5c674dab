"""``speechblocks inspect`` / ``migrate`` and ``load_migrated`` (issue #5), against real TF1 checkpoints.

The checkpoints come from the TF1 legacy reference (``parity_tests/legacy/builders_model.py``): every
block built under its real ``Tacotron_model/inference/`` scope at full size, one ``AdamOptimizer`` step run
before saving. The migrated Keras and torch blocks are run on the TF1 graph's inputs and compared with its
outputs (docs/ARCHITECTURE.md, tolerances). Error cases use small checkpoints written here with ``tf.raw_ops.SaveV2``
(the op TF1's ``Saver`` runs), derived from the legacy checkpoint's real variables.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from parity_tests.demo import legacy_model_spec, parity_rows
from parity_tests.legacy.builders_model import model_configs
from parity_tests.reference import run_legacy
from parity_tests.report import format_table
from speechblocks.cli import main as cli_main
from speechblocks.migration import (
    MigrationError,
    NoTacotronBlocksError,
    inspect_checkpoint,
    migrate_checkpoint,
)
from tf_layers.checkpoint import load_migrated, read_tf1_checkpoint

PREFIX = "Tacotron_model/inference/"
RTVC_BLOCKS = ["decoder/decoder_prenet", "decoder/decoder_LSTM", "decoder/linear_transform_projection",
               "decoder/stop_token_projection"]
SMALL_BLOCKS = ["decoder/decoder_prenet", "decoder/stop_token_projection", "postnet_projection"]
UNMIGRATED = {"inputs_embedding", "memory_layer/kernel", "decoder/Location_Sensitive_Attention/attention_bias",
              "decoder/Location_Sensitive_Attention/attention_variable_projection",
              "decoder/Location_Sensitive_Attention/query_layer/kernel",
              "decoder/Location_Sensitive_Attention/location_features_convolution/kernel",
              "decoder/Location_Sensitive_Attention/location_features_convolution/bias",
              "decoder/Location_Sensitive_Attention/location_features_layer/kernel"}


def _specs():
    specs = [
        legacy_model_spec("rayhane", batch=2, time_steps=7, seed=0),
        legacy_model_spec("rtvc", batch=2, time_steps=5, seed=1, only=RTVC_BLOCKS),
        legacy_model_spec("rayhane", batch=2, time_steps=4, seed=2, only=SMALL_BLOCKS, adam_step=False,
                          model_scope="Tacotron_model/inference", doubled_adam_prefix=True, ema=True),
    ]
    specs[2].scope = ""
    return dict(zip(("rayhane", "rtvc", "small"), specs))


def _shared_legacy(specs: dict) -> dict:
    """Under pytest-xdist the module's tests are spread over workers: the first one to get here runs the
    legacy reference and publishes the checkpoints (hard links) and outputs in a directory of this test
    run; the others wait on its lock and reuse them. The last worker to leave removes the directory."""
    import atexit
    import fcntl
    import json
    import shutil
    import tempfile

    from parity_tests.reference import LegacyResult

    key = hashlib.sha1(("".join(s.key() for s in specs.values()) + os.environ["PYTEST_XDIST_TESTRUNUID"]).encode())
    root = os.path.join(tempfile.gettempdir(), f"speechblocks-migration-tests-{key.hexdigest()[:16]}")
    os.makedirs(os.path.join(root, "users"), exist_ok=True)
    with open(root + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        open(os.path.join(root, "users", str(os.getpid())), "w").close()
        manifest = os.path.join(root, "manifest.json")
        if not os.path.exists(manifest):
            meta = {}
            for name, res in zip(specs, run_legacy(list(specs.values()))):
                d = os.path.join(root, name)
                os.makedirs(d)
                src = os.path.dirname(res.checkpoint)
                for f in os.listdir(src):
                    if f.startswith(os.path.basename(res.checkpoint)):
                        try:
                            os.link(os.path.join(src, f), os.path.join(d, f))
                        except OSError:
                            shutil.copy(os.path.join(src, f), os.path.join(d, f))
                np.savez(os.path.join(d, "outputs.npz"), **res.outputs)
                meta[name] = {"checkpoint": os.path.join(d, os.path.basename(res.checkpoint)),
                              "block_scope": res.block_scope}
            with open(manifest, "w") as f:
                json.dump(meta, f)
        with open(manifest) as f:
            meta = json.load(f)

    def leave():
        with open(root + ".lock", "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            os.remove(os.path.join(root, "users", str(os.getpid())))
            if not os.listdir(os.path.join(root, "users")):
                shutil.rmtree(root, ignore_errors=True)
                os.remove(root + ".lock")

    atexit.register(leave)
    out = {}
    for name, spec in specs.items():
        with np.load(os.path.join(root, name, "outputs.npz")) as z:
            outputs = {k: z[k] for k in z.files}
        out[name] = LegacyResult(spec, meta[name]["checkpoint"], meta[name]["block_scope"], outputs)
    return out


@functools.cache
def legacy():
    """The module's legacy checkpoints, from one legacy subprocess: Rayhane full size, RTVC decoder full
    size (both with an Adam step), and a small model with a doubled Adam prefix and EMA shadows."""
    specs = _specs()
    if os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        return _shared_legacy(specs)
    return dict(zip(specs, run_legacy(list(specs.values()))))


def checksum(prefix: str) -> dict[str, str]:
    d = os.path.dirname(prefix)
    return {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest() for f in sorted(os.listdir(d))
            if f.startswith(os.path.basename(prefix))}


def save_checkpoint(prefix: str, variables: dict[str, np.ndarray]) -> str:
    """Writes a TF1 name-based checkpoint (what ``tf.compat.v1.train.Saver`` writes) with these variables."""
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[np.asarray(variables[n]) for n in names])
    return prefix


def all_variables(ckpt: str) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(ckpt)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def datasets(group) -> list[str]:
    import h5py

    keys = []
    group.visititems(lambda k, v: keys.append(k) if isinstance(v, h5py.Dataset) else None)
    return keys


def run_cli(argv, capsys):
    rc = cli_main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_parity(legacy_result, keras_blocks, torch_blocks, expected_paths):
    assert sorted(keras_blocks) == sorted(expected_paths) == sorted(torch_blocks)
    rows = parity_rows(legacy_result, keras_blocks, torch_blocks)
    assert len(rows) == 3 * len(expected_paths)
    failed = [r for r in rows if not r.passed]
    assert not failed, "migration parity failures:\n" + format_table(failed)


# -- recognition ---------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["rayhane", "rtvc"])
def test_inspect_infers_every_block_config(variant):
    res = legacy()[variant]
    inv = inspect_checkpoint(res.checkpoint)
    truth = res.spec.config["blocks"]  # the configs the TF1 graph was built with
    assert inv.prefix == PREFIX
    assert [b.path for b in inv.blocks] == [p for p in model_configs(variant)["blocks"] if p in truth]
    for b in inv.blocks:
        assert b.class_name == truth[b.path]["class_name"]
        assert b.input_size == truth[b.path]["input_size"], b.path
        assert b.config == truth[b.path]["config"], b.path
        assert b.problems == []
    if variant == "rayhane":  # every variable of a Tacotron-2: the whole model migrates, nothing is left over
        assert inv.model is not None and inv.model.complete and inv.model.preset == "rayhane"
        assert inv.model.inferred["n_symbols"] == 66 and inv.model.inferred["outputs_per_step"] == 1
        assert inv.unmigrated == []
    else:  # the decoder blocks and the attention only: an incomplete model, migrated block by block
        assert inv.model is not None and not inv.model.complete
        assert any("encoder_convolutions" in p for p in inv.model.problems)
        assert {n[len(PREFIX):] for n, _ in inv.unmigrated} == UNMIGRATED
    # the Adam step left m and v slots of every trained variable, plus beta powers
    slots = [n for n, _ in inv.optimizer if n.endswith(("/Adam", "/Adam_1"))]
    trained = [n for b in inv.blocks for n in b.variables.values() if "moving_" not in n]
    assert len(slots) == 2 * (len(trained) + len(UNMIGRATED))
    assert {"beta1_power", "beta2_power"} <= {n for n, _ in inv.optimizer}


def test_inspect_reports_the_cbhg_dimension_fix(capsys):
    rc, out, err = run_cli(["inspect", legacy()["rayhane"].checkpoint], capsys)
    assert rc == 0, err
    assert "K=8, conv_channels=128, pool_size=2, projections=[256, 80], projection_kernel_size=3" in out
    assert "dimension-fix dense: yes (projections[-1]=80, highway_units=128)" in out
    assert "outputs_per_step (from the stop projection): 1" in out
    assert "whole model: Tacotron-2 (complete)" in out
    assert ("Rayhane (no speaker embedding); preset rayhane; r (outputs_per_step)=1, speaker_embedding_size=0, "
            "n_symbols=66, num_mels=80, predict_linear=True") in out
    # parameters per part, by hand from docs/ARCHITECTURE.md, TF1 names's sizes: embedding 66 x 512; attention: memory
    # layer 512 x 128, query 1024 x 128, location conv 31 x 1 x 32 + 32, location layer 32 x 128, v 128, bias 128
    assert "embedding 33,792" in out
    assert f"attention {512 * 128 + 1024 * 128 + 31 * 32 + 32 + 32 * 128 + 128 + 128:,d}" in out


def test_inspect_reports_outputs_per_step_and_sizes(capsys):
    rc, out, err = run_cli(["inspect", legacy()["rtvc"].checkpoint], capsys)
    assert rc == 0, err
    assert "outputs_per_step (from the stop projection): 2" in out
    assert "decoder/decoder_LSTM" in out and "input_size=1024, layers=2, size=1024" in out
    assert "input_size=1792, shape=160" in out  # linear projection: 1024 + 768 -> 80 * r
    assert "unmigrated variables (not blocks of this library): 8" in out
    assert "Tacotron_model/inference/inputs_embedding [66, 512]" in out
    assert "optimizer state (skipped):" in out and "strict check: OK" in out


# -- migration: full size, both frameworks, parity with the TF1 graph ----------------------------
@functools.cache
def migrated(variant, tmp_root):
    res = legacy()[variant]
    keras_file = os.path.join(tmp_root, f"{variant}.weights.h5")
    torch_file = os.path.join(tmp_root, f"{variant}.pt")
    before = checksum(res.checkpoint)
    # the legacy graph builds every block with the seed's batch norm position (before the activation); a whole
    # Rayhane model defaults to its final hparams' "after", which the shapes cannot tell: say so, as a user would
    extra = ["--set", "batch_norm_position=before"] if variant == "rayhane" else []
    assert cli_main(["migrate", res.checkpoint, "--to", "keras", keras_file] + extra) == 0
    assert cli_main(["migrate", res.checkpoint, "--to", "torch", torch_file] + extra) == 0
    assert checksum(res.checkpoint) == before, "migration modified the input checkpoint"
    return keras_file, torch_file


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("migration"))


@pytest.mark.parametrize("variant", ["rayhane", "rtvc"])
def test_migrated_blocks_match_tf1_graph(variant, tmp_root):
    import torch_layers

    keras_file, torch_file = migrated(variant, tmp_root)
    res = legacy()[variant]
    keras_blocks, torch_blocks = load_migrated(keras_file), torch_layers.load_migrated(torch_file)
    if variant == "rayhane":  # a whole model: its blocks, the attention included, come from the rebuilt Tacotron2
        attention = "decoder/Location_Sensitive_Attention"
        assert type(keras_blocks.pop(attention)).__name__ == type(torch_blocks.pop(attention)).__name__ == (
            "LocationSensitiveAttention")
    assert_parity(res, keras_blocks, torch_blocks, list(res.spec.config["blocks"]))


def test_migrated_files_are_plain_and_complete(tmp_root):
    import h5py
    import torch

    keras_file, torch_file = migrated("rayhane", tmp_root)
    raw = read_tf1_checkpoint(legacy()["rayhane"].checkpoint, prefix=PREFIX)
    payload = torch.load(torch_file, weights_only=True)  # plain tensors and strings only
    assert payload["speechblocks_format"] == "speechblocks.migrated.torch" and payload["format_version"] == 2
    assert all(isinstance(t, torch.Tensor) for t in payload["model_state_dict"].values())
    assert json.loads(payload["model"])["hparams"]["outputs_per_step"] == 1
    with h5py.File(keras_file, "r") as f:
        n = 0
        for path in model_configs("rayhane")["blocks"]:
            group = f[path]
            keys = datasets(group)
            for k in keys:  # every stored value is the checkpoint's, bit for bit
                np.testing.assert_array_equal(group[k][()], raw[f"{path}/{k}"])
            n += len(keys)
        assert n == len(raw) - len(UNMIGRATED)  # every block variable
        for name in UNMIGRATED:  # and the rest of the model: embedding, memory layer, attention
            np.testing.assert_array_equal(f[name][()], raw[name])
        assert len(datasets(f)) == len(raw)  # and nothing else


def test_progress_lines_and_report(tmp_root, capsys):
    res = legacy()["rtvc"]
    rc, out, err = run_cli(["migrate", res.checkpoint, "--to", "torch", os.path.join(tmp_root, "p.pt"), "--dry-run"],
                           capsys)
    assert rc == 0, err
    progress = [line for line in err.splitlines() if line.startswith("speechblocks migrate: checked ")]
    assert len(progress) == len(RTVC_BLOCKS)
    assert "checked (dry run, nothing written)" in out
    assert not os.path.exists(os.path.join(tmp_root, "p.pt"))


# -- doubled Adam prefix, EMA shadows, bare scopes ----------------------------------------------
def test_doubled_adam_prefix_is_skipped():
    res = legacy()["small"]
    inv = inspect_checkpoint(res.checkpoint)
    doubled = [n for n, _ in inv.optimizer if n.startswith("Tacotron_model/Tacotron_model/inference/")]
    trained = [n for b in inv.blocks for n in b.variables.values()]
    assert len(doubled) == 2 * (len(trained) + len(UNMIGRATED))  # m and v of every trained variable
    assert "Tacotron_model/beta1_power" in {n for n, _ in inv.optimizer}
    assert [b.path for b in inv.blocks] == SMALL_BLOCKS
    assert not any("Adam" in n for n, _ in inv.unmigrated)
    assert all(b.problems == [] for b in inv.blocks)


@pytest.mark.parametrize("use_ema", [False, True])
def test_use_ema_takes_the_shadows(use_ema, tmp_path):
    import torch_layers

    res = legacy()["small"]
    values = all_variables(res.checkpoint)
    out = str(tmp_path / "m.pt")
    report = migrate_checkpoint(res.checkpoint, "torch", out, use_ema=use_ema)
    assert report.migrated == SMALL_BLOCKS
    kout = str(tmp_path / "m.weights.h5")
    migrate_checkpoint(res.checkpoint, "keras", kout, use_ema=use_ema)
    torch_blocks, keras_blocks = torch_layers.load_migrated(out), load_migrated(kout)
    for path in SMALL_BLOCKS:
        for key, got in keras_blocks[path].tf1_weights().items():
            name = f"{PREFIX}{path}/{key}"
            want = values[name + "/ExponentialMovingAverage"] if use_ema else values[name]
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(torch_blocks[path].tf1_weights()[key], want)
    if not use_ema:  # raw weights: the blocks compute what the TF1 graph computed
        assert_parity(res, keras_blocks, torch_blocks, SMALL_BLOCKS)
    # the one-block loader skips the shadows, or takes them
    import tf_layers
    from tf_layers.checkpoint import load_tf1_checkpoint

    block = tf_layers.FrameProjection(80, tf1_scope="postnet_projection")
    load_tf1_checkpoint(block, res.checkpoint, PREFIX + "postnet_projection", use_ema=use_ema)
    for key, got in block.tf1_weights().items():
        name = f"{PREFIX}postnet_projection/{key}"
        np.testing.assert_array_equal(got, values[name + "/ExponentialMovingAverage"] if use_ema else values[name])


def test_shadows_under_a_repeated_scope_and_orphan_shadows(small_variables, tmp_path):
    ema = "/ExponentialMovingAverage"
    renamed = {("Tacotron_model/" + n if n.endswith(ema) else n): v for n, v in small_variables.items()}
    orphan = f"{PREFIX}decoder/gone/kernel{ema}"
    ckpt = save_checkpoint(str(tmp_path / "ema.ckpt"), dict(renamed, **{orphan: np.ones(2, np.float32)}))
    inv = inspect_checkpoint(ckpt, use_ema=True)
    prenet = inv.block("decoder/decoder_prenet")
    assert prenet.ema_used == len(prenet.variables) == 4
    assert prenet.variables["dense_1/kernel"] == f"Tacotron_model/{PREFIX}decoder/decoder_prenet/dense_1/kernel{ema}"
    assert (orphan, (2,)) in inv.unmigrated  # never silently dropped


def test_use_ema_without_shadows_is_a_clear_error(capsys):
    rc, out, err = run_cli(["inspect", legacy()["rtvc"].checkpoint, "--use-ema"], capsys)
    assert rc == 2 and "no ExponentialMovingAverage shadow" in err and "Traceback" not in err


def test_bare_scopes(tmp_path):
    import torch_layers

    res = legacy()["small"]
    model = {n[len(PREFIX):]: v for n, v in read_tf1_checkpoint(res.checkpoint).items() if n.startswith(PREFIX)
             and not n.endswith("/ExponentialMovingAverage")}
    ckpt = save_checkpoint(str(tmp_path / "bare.ckpt"), model)
    inv = inspect_checkpoint(ckpt)
    assert inv.prefix == "" and [b.path for b in inv.blocks] == SMALL_BLOCKS
    assert {n for n, _ in inv.unmigrated} == UNMIGRATED
    migrate_checkpoint(ckpt, "torch", str(tmp_path / "bare.pt"))
    migrate_checkpoint(ckpt, "keras", str(tmp_path / "bare.weights.h5"))
    assert_parity(res, load_migrated(str(tmp_path / "bare.weights.h5")),
                  torch_layers.load_migrated(str(tmp_path / "bare.pt")), SMALL_BLOCKS)


# -- strictness, atomic output, error messages --------------------------------------------------
@pytest.fixture()
def small_variables():
    return all_variables(legacy()["small"].checkpoint)


def test_unknown_variable_inside_a_block_strict_and_no_strict(small_variables, tmp_path, capsys):
    extra = f"{PREFIX}decoder/decoder_prenet/dense_1/kernel_scale"
    ckpt = save_checkpoint(str(tmp_path / "extra.ckpt"), dict(small_variables, **{extra: np.ones(3, np.float32)}))
    before = checksum(ckpt)
    out = str(tmp_path / "extra.pt")
    rc, _, err = run_cli(["migrate", ckpt, "--to", "torch", out], capsys)
    assert rc == 2 and "Traceback" not in err
    assert "decoder/decoder_prenet: unknown variable 'dense_1/kernel_scale'" in err
    assert not os.path.exists(out) and sorted(os.listdir(tmp_path)) == sorted(before)
    rc, report, err = run_cli(["migrate", ckpt, "--to", "torch", out, "--no-strict"], capsys)
    assert rc == 0, err
    assert "ignored unknown variable 'dense_1/kernel_scale' [3]" in report
    import torch_layers

    assert sorted(torch_layers.load_migrated(out)) == sorted(SMALL_BLOCKS)
    assert checksum(ckpt) == before


def test_strict_failure_lists_every_problem(small_variables, tmp_path, capsys):
    v = dict(small_variables)
    del v[f"{PREFIX}decoder/decoder_prenet/dense_2/bias"]
    v[f"{PREFIX}postnet_projection/projection_postnet_projection/bias"] = np.zeros(79, np.float32)
    ckpt = save_checkpoint(str(tmp_path / "bad.ckpt"), v)
    out = tmp_path / "bad.weights.h5"
    out.write_bytes(b"previous file")  # a failed run must leave an existing output untouched
    with pytest.raises(MigrationError) as e:
        migrate_checkpoint(ckpt, "keras", str(out))
    assert len(e.value.problems) == 2
    msg = str(e.value)
    assert "decoder/decoder_prenet: missing variable 'dense_2/bias' (expected shape [256])" in msg
    assert ("postnet_projection: variable 'projection_postnet_projection/bias' has shape [79], expected [80]"
            in msg)
    assert out.read_bytes() == b"previous file"
    # --no-strict migrates the sound block and reports the others as skipped
    report = migrate_checkpoint(ckpt, "keras", str(out), strict=False)
    assert report.migrated == ["decoder/stop_token_projection"]
    assert sorted(load_migrated(str(out))) == ["decoder/stop_token_projection"]


def test_failure_while_writing_leaves_no_partial_file(tmp_path, monkeypatch):
    from speechblocks.migration import migrate as migrate_module

    def broken(self, path, data):
        raise OSError("disk full")

    monkeypatch.setattr(migrate_module._KerasWriter, "add", broken)
    out = tmp_path / "m.weights.h5"
    with pytest.raises(OSError, match="disk full"):
        migrate_checkpoint(legacy()["small"].checkpoint, "keras", str(out))
    assert os.listdir(tmp_path) == []


def test_missing_path_exit_code_2_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "speechblocks.cli", "inspect", str(tmp_path / "nope.ckpt")],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("speechblocks")]
    assert len(lines) == 1 and "does not exist" in lines[0] and "nope.ckpt" in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("damage", ["truncated data", "garbage index", "no data file"])
def test_damaged_checkpoint_is_a_clear_error(damage, small_variables, tmp_path, capsys):
    ckpt = save_checkpoint(str(tmp_path / "d.ckpt"), small_variables)
    data = ckpt + ".data-00000-of-00001"
    if damage == "truncated data":
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) // 2)
    elif damage == "garbage index":
        with open(ckpt + ".index", "wb") as f:
            f.write(os.urandom(300))
    else:
        os.remove(data)
    before = checksum(ckpt)
    for argv in (["inspect", ckpt], ["migrate", ckpt, "--to", "keras", str(tmp_path / "o.weights.h5")]):
        rc, out, err = run_cli(argv, capsys)
        assert rc == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert ("truncated" in err or "corrupted" in err or "no data file" in err) and "d.ckpt" in err
    assert not os.path.exists(tmp_path / "o.weights.h5") and checksum(ckpt) == before


def test_no_tacotron_block_is_a_clear_error(tmp_path, capsys):
    ckpt = save_checkpoint(str(tmp_path / "other.ckpt"), {"resnet/conv1/kernel": np.ones((3, 3), np.float32),
                                                         "resnet/conv1/kernel/Adam": np.ones((3, 3), np.float32)})
    with pytest.raises(NoTacotronBlocksError):
        inspect_checkpoint(ckpt)
    rc, out, err = run_cli(["migrate", ckpt, "--to", "torch", str(tmp_path / "o.pt")], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "holds no Tacotron-2 block" in err
    assert not os.path.exists(tmp_path / "o.pt")


def test_loaders_refuse_the_other_format(tmp_root):
    import torch_layers

    keras_file, torch_file = migrated("rtvc", tmp_root)
    with pytest.raises(ValueError, match="is a torch file .*read it with torch_layers"):
        load_migrated(torch_file)
    with pytest.raises(ValueError, match="is a Keras file .*tf_layers.checkpoint.load_migrated"):
        torch_layers.load_migrated(keras_file)
    with pytest.raises(FileNotFoundError):
        torch_layers.load_migrated(keras_file + ".missing")


def test_torch_load_migrated_needs_no_tensorflow(tmp_root):
    _, torch_file = migrated("rtvc", tmp_root)
    code = ("import sys, torch, torch_layers\n"
            f"blocks = torch_layers.load_migrated({torch_file!r})\n"
            "y, _ = blocks['decoder/decoder_LSTM'](torch.zeros(1, 3, 1024))\n"
            "assert tuple(y.shape) == (1, 3, 1024), y.shape\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'tensorflow'], 'tensorflow imported'\n"
            "print(sorted(blocks))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(sorted(RTVC_BLOCKS))


def test_checkpoint_directory_and_index_path_are_accepted(small_variables, tmp_path):
    ckpt = save_checkpoint(str(tmp_path / "model.ckpt-1000"), small_variables)
    assert inspect_checkpoint(ckpt + ".index").checkpoint == ckpt
    assert inspect_checkpoint(str(tmp_path)).checkpoint == ckpt  # the only checkpoint of the directory
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1000"\n')
    assert inspect_checkpoint(str(tmp_path)).checkpoint == ckpt  # via the 'checkpoint' state file


@pytest.mark.parametrize("strict", [True, False])
def test_a_block_refusing_its_weights(strict, tmp_path, monkeypatch):
    from speechblocks.migration import migrate as migrate_module

    real = migrate_module._build_keras

    def refuse_prenet(entry, weights):
        if entry["class_name"] == "Prenet":
            raise ValueError("Prenet: cannot load TF1 weights (simulated)")
        return real(entry, weights)

    monkeypatch.setattr(migrate_module, "_build_keras", refuse_prenet)
    out = str(tmp_path / "m.weights.h5")
    if strict:
        with pytest.raises(MigrationError, match="decoder/decoder_prenet: Prenet: cannot load TF1 weights"):
            migrate_checkpoint(legacy()["small"].checkpoint, "keras", out)
        assert os.listdir(tmp_path) == []
    else:
        report = migrate_checkpoint(legacy()["small"].checkpoint, "keras", out, strict=False)
        assert report.migrated == [p for p in SMALL_BLOCKS if p != "decoder/decoder_prenet"]
        assert sorted(load_migrated(out)) == sorted(report.migrated)


def test_cbhg_without_dimension_fix_dense(tmp_path, capsys):
    """projections[-1] == highway_units: no ``dense`` (hand-written names and shapes of a small CBHG)."""
    import torch

    import torch_layers

    rng = np.random.default_rng(5)
    v, s = {}, "CBHG_postnet"

    def put(name, *shape):
        v[f"{s}/{name}"] = (0.3 * rng.standard_normal(shape)).astype(np.float32)

    def conv_bn(scope, k, cin, cout):
        put(f"{scope}/conv1d/kernel", k, cin, cout)
        put(f"{scope}/conv1d/bias", cout)
        for leaf in ("gamma", "beta", "moving_mean"):
            put(f"{scope}/batch_normalization/{leaf}", cout)
        v[f"{s}/{scope}/batch_normalization/moving_variance"] = rng.uniform(0.5, 1.5, cout).astype(np.float32)

    for k in (1, 2, 3):
        conv_bn(f"conv_bank/conv1d_{k}", k, 8, 4)
    conv_bn("proj1", 3, 12, 6)
    conv_bn("proj2", 3, 6, 8)
    for n in (1, 2):
        for g in ("H", "T"):
            put(f"{s}_highwaynet_{n}/{g}/kernel", 8, 8)
            put(f"{s}_highwaynet_{n}/{g}/bias", 8)
    for d, name in (("fw", "forward"), ("bw", "backward")):
        put(f"bidirectional_rnn/{d}/{s}_{name}_RNN/gates/kernel", 13, 10)
        put(f"bidirectional_rnn/{d}/{s}_{name}_RNN/gates/bias", 10)
        put(f"bidirectional_rnn/{d}/{s}_{name}_RNN/candidate/kernel", 13, 5)
        put(f"bidirectional_rnn/{d}/{s}_{name}_RNN/candidate/bias", 5)
    ckpt = save_checkpoint(str(tmp_path / "cbhg.ckpt"), v)
    (block,) = inspect_checkpoint(ckpt).blocks
    assert block.input_size == 8 and block.problems == []
    assert block.config == dict(K=3, conv_channels=4, pool_size=2, projections=[6, 8], projection_kernel_size=3,
                                n_highwaynet_layers=2, highway_units=8, rnn_units=5, tf1_scope="CBHG_postnet")
    rc, out, err = run_cli(["inspect", ckpt], capsys)
    assert "dimension-fix dense: no (projections[-1]=8, highway_units=8)" in out
    migrate_checkpoint(ckpt, "keras", str(tmp_path / "c.weights.h5"))
    migrate_checkpoint(ckpt, "torch", str(tmp_path / "c.pt"))
    kb = load_migrated(str(tmp_path / "c.weights.h5"))["CBHG_postnet"]
    tb = torch_layers.load_migrated(str(tmp_path / "c.pt"))["CBHG_postnet"]
    x = rng.standard_normal((2, 6, 8)).astype(np.float32)
    lengths = np.array([6, 3])
    yk = np.asarray(kb(x, input_lengths=lengths, training=False))
    with torch.no_grad():
        yt = tb(torch.from_numpy(x), torch.from_numpy(lengths)).numpy()
    assert yk.shape == (2, 6, 10)
    np.testing.assert_allclose(yt, yk, atol=1e-5, rtol=0)
    assert np.all(yk[1, 3:] == 0)  # outputs past a sequence's length are zeros
