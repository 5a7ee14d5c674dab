"""TF1 checkpoints read in numpy, without TensorFlow.

``CheckpointFiles.read_array`` decodes the verified bytes of every dtype a checkpoint can hold; TensorFlow's own
reader (``tf.train.load_checkpoint``) is the independent cross-check: every tensor equal, bit for bit, on a
checkpoint of every dtype and on a whole-model Tacotron-2 checkpoint. Then, in a process where ``import
tensorflow`` fails (an import hook), a torch user inspects, migrates and synthesizes from a TF1 checkpoint, and
``speechblocks parity --checkpoint --skip-legacy`` runs the torch side alone (exit status 4: no comparison made).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from speechblocks.tf1_checkpoint_file import open_checkpoint_files
from speechblocks.tf1_checkpoint_reader import TF1CheckpointReader
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables


def _every_dtype():
    import tensorflow as tf

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4)).astype(np.float32) * 100
    return {
        "f32": tf.constant(x), "f64": tf.constant(x.astype(np.float64) / 3), "f16": tf.constant(x.astype(np.float16)),
        "bf16": tf.cast(tf.constant(x), tf.bfloat16), "i32": tf.constant(x.astype(np.int32)),
        "i64": tf.constant(x.astype(np.int64) * 2**40), "i8": tf.constant(x.astype(np.int8)),
        "i16": tf.constant(x.astype(np.int16)), "u8": tf.constant(np.abs(x).astype(np.uint8)),
        "u16": tf.constant(np.abs(x).astype(np.uint16)), "u32": tf.constant(np.abs(x).astype(np.uint32)),
        "u64": tf.constant(np.abs(x).astype(np.uint64)), "bool": tf.constant(x > 0),
        "c64": tf.constant((x + 1j * x).astype(np.complex64)), "c128": tf.constant((x - 2j * x).astype(np.complex128)),
        "scalar": tf.constant(7, tf.int64), "empty": tf.zeros((0, 5)), "nonfinite": tf.constant([np.nan, np.inf, -1.0]),
        "str": tf.constant([b"hello", b"", b"\x00\xffbytes"]), "str_scalar": tf.constant(b"x" * 300),
    }


def test_every_dtype_reads_bit_for_bit_like_tensorflow(tmp_path):
    import tensorflow as tf

    tensors = _every_dtype()
    prefix = str(tmp_path / "all.ckpt")
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tensors[n] for n in names])
    files = open_checkpoint_files(prefix)
    theirs = tf.train.load_checkpoint(prefix)
    assert set(files.entries) == set(theirs.get_variable_to_shape_map())
    for name in names:
        ours = files.read_array(name)
        ref = theirs.get_tensor(name)
        if name.startswith("str"):  # bytes objects (TensorFlow: a fixed-width bytes array, or bytes for a scalar)
            assert ours.dtype == object and ours.shape == np.shape(ref), name
            assert ours.tolist() == np.asarray(ref, dtype=object).tolist(), name
            continue
        if name == "bf16":  # TensorFlow hands bfloat16 out as its own numpy type: compare the widened bits
            ref = np.asarray(tf.cast(tf.constant(ref), tf.float32))
            assert ours.dtype == np.float32
        else:
            ref = np.asarray(ref)
            assert ours.dtype == ref.dtype, name
        assert ours.shape == ref.shape, name
        assert ours.tobytes() == ref.tobytes(), name  # bit for bit (NaN payloads included)


def test_whole_model_checkpoint_reads_like_tensorflow(tmp_path):
    import tensorflow as tf

    _, variables = small_variables("rayhane")
    prefix = save_model_checkpoint(tmp_path, variables)
    reader = TF1CheckpointReader(prefix)
    theirs = tf.train.load_checkpoint(prefix)
    assert reader.shapes() == {k: tuple(v) for k, v in theirs.get_variable_to_shape_map().items()}
    ours = reader.read(sorted(reader.shapes()))
    assert len(ours) == len(variables) > 50
    for name, value in ours.items():
        assert value.tobytes() == np.asarray(theirs.get_tensor(name)).tobytes(), name


# a process where TensorFlow cannot be imported (a torch-only install)
_NO_TF = """
import importlib.machinery, sys
_find = importlib.machinery.PathFinder.find_spec
def _hidden(name):
    return name.split(".")[0] in ("tensorflow", "keras", "tf_keras")
# as if not installed: the path finder does not see them (find_spec answers None, imports raise ImportError)
importlib.machinery.PathFinder.find_spec = classmethod(
    lambda cls, name, path=None, target=None: None if _hidden(name) else _find(name, path, target))
"""


def _run_without_tensorflow(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-c", _NO_TF + code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)


def test_a_torch_user_reads_migrates_and_synthesizes_without_tensorflow(tmp_path):
    _, variables = small_variables("rtvc", stop_bias=-30.0)
    prefix = save_model_checkpoint(tmp_path, variables)
    np.save(tmp_path / "spk.npy", np.full(6, 0.1, np.float32))
    code = f"""
import json, numpy as np
try:
    import tensorflow  # noqa: F401
    raise SystemExit("the test's hook failed: tensorflow imports")
except ImportError:
    pass
import speechblocks
from speechblocks.cli import main
assert main(["inspect", {prefix!r}]) == 0
assert main(["migrate", {prefix!r}, "--to", "torch", "model.pt"]) == 0
assert main(["synthesize", {prefix!r}, "--framework", "torch", "--text", "Hi there.", "--speaker-embedding",
             "spk.npy", "--max-iters", "3", "--set", "tacotron_dropout_rate=0", "--out", "tf1.npy"]) == 0
assert main(["synthesize", "model.pt", "--text", "Hi there.", "--speaker-embedding", "spk.npy", "--max-iters", "3",
             "--set", "tacotron_dropout_rate=0", "--out", "migrated.npy"]) == 0
import torch_layers
m = torch_layers.Tacotron2.from_tf1_checkpoint({prefix!r})
w = m.tf1_weights()
import sys
print(json.dumps({{"tf_loaded": any(k.split(".")[0] in ("tensorflow", "keras") for k in sys.modules),
                   "n_weights": len(w), "same": bool(np.array_equal(np.load("tf1.npy"), np.load("migrated.npy")))}}))
"""
    proc = _run_without_tensorflow(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"tf_loaded": False, "n_weights": len(variables), "same": True}
    # the weights the torch model got from the numpy reader are the checkpoint's
    import torch_layers

    m = torch_layers.Tacotron2.from_tf1_checkpoint(prefix)
    for name, value in m.tf1_weights().items():
        np.testing.assert_array_equal(value, variables[name], err_msg=name)


def test_parity_on_a_checkpoint_without_tensorflow_runs_the_torch_side_alone(tmp_path):
    """``speechblocks parity --checkpoint CKPT --skip-legacy`` where TensorFlow cannot be imported: the torch side's
    own checks, no row that reads as a comparison with Keras or TF1, exit status 4 (not 0: parity not established)."""
    _, variables = small_variables("rayhane", seed=5, stop_bias=-30.0)  # predict_linear: the linear outputs too
    prefix = save_model_checkpoint(tmp_path, variables)
    code = f"""
import json, sys
from speechblocks.cli import main
rc = main(["parity", "--checkpoint", {prefix!r}, "--skip-legacy", "--steps", "3", "--json"])
print(json.dumps({{"rc": rc, "tf_loaded": any(k.split(".")[0] in ("tensorflow", "keras", "tf_layers")
                                             for k in sys.modules)}}))
rc = main(["parity", "--checkpoint", {prefix!r}, "--steps", "3"])  # the TF1 reference needs TensorFlow
print(json.dumps({{"rc": rc}}))
"""
    proc = _run_without_tensorflow(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.strip().splitlines()
    rows = json.loads("\n".join(out[:-2]))
    assert json.loads(out[-2]) == {"rc": 4, "tf_loaded": False}
    assert json.loads(out[-1]) == {"rc": 2}
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert any("parity not established" in ln and "needs TensorFlow" in ln for ln in err), err
    assert "this needs TensorFlow" in err[-1] and "--skip-legacy" in err[-1]
    assert {r["comparison"] for r in rows} == {"checkpoint->torch", "torch finite", "torch rerun",
                                               "torch<->migrated .pt"}
    assert all(r["passed"] for r in rows), [r for r in rows if not r["passed"]]
    # the weights the model loaded are the checkpoint's (the test wrote them), bit for bit
    (weights_row,) = [r for r in rows if r["comparison"] == "checkpoint->torch"]
    assert weights_row["max_abs"] == 0.0 and str(len(variables)) in weights_row["output"]
    # both runs, every output (linear_outputs included): finite, the same on a rerun and after migrate/from_migrated
    for check in ("torch finite", "torch rerun", "torch<->migrated .pt"):
        got = {r["output"].split(": ")[-1] for r in rows if r["comparison"] == check and r["output"].startswith("GTA")}
        assert got == {"decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments", "linear_outputs"}
        assert sum(r["comparison"] == check for r in rows) == 10
        assert all(r["max_abs"] == 0.0 for r in rows if r["comparison"] == check)


def test_the_torch_side_checks_fail_on_a_sabotaged_model(tmp_path):
    """The rows can fail: torch weights that are not the checkpoint's fail the weights row and the migrated-file rows
    (the migrated file holds the checkpoint's weights)."""
    from parity_tests.checkpoint_parity import run_checkpoint_parity

    _, variables = small_variables("rtvc", seed=6, stop_bias=-30.0)
    prefix = save_model_checkpoint(tmp_path, variables)
    key = "decoder/decoder_LSTM/multi_rnn_cell/cell_0/decoder_LSTM_1/kernel"

    def perturb(framework, weights):
        assert framework == "torch"
        weights[key] = weights[key] + np.float32(1e-2)
        return weights

    rows = run_checkpoint_parity(prefix, steps=2, batch=1, skip_legacy=True, skip_keras=True, _perturb=perturb)
    failed = {(r.comparison, r.output.split(": ")[-1]) for r in rows if not r.passed}
    (weights_row,) = [r for r in rows if r.comparison == "checkpoint->torch"]
    assert not weights_row.passed and abs(weights_row.max_abs - 1e-2) < 1e-6
    assert ("torch<->migrated .pt", "mel_outputs") in failed
    assert all(r.passed for r in rows if r.comparison in ("torch finite", "torch rerun"))
