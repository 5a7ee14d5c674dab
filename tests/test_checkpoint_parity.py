"""``parity_tests.checkpoint_parity.run_checkpoint_parity`` (``speechblocks parity --checkpoint``) on small TF1
checkpoints of the whole model written here with ``tf.raw_ops.SaveV2`` (the op ``tf.compat.v1.train.Saver`` runs):
RTVC-like (speaker embedding, r = 2) and Rayhane-like (r = 1, BN after the activation, clipped outputs,
post-CBHG). Every row passes and every block and whole-model row group exists for the three comparisons; a
twin loaded with sabotaged weights fails its rows; a missing ``tf_keras`` raises ``LegacyReferenceUnavailable``
before any work, and ``skip_legacy`` compares Keras and torch alone. One legacy subprocess per checkpoint (the
sabotaged run finds the TF1 results memoised).
"""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import tensorflow as tf

from parity_tests.checkpoint_parity import LegacyReferenceUnavailable, rows_to_json, run_checkpoint_parity
from parity_tests.report import Row, format_table
from speechblocks import resolve_hparams, tacotron2_hparams, tf1_variable_shapes

SMALL = dict(num_mels=8, embedding_dim=6, enc_conv_num_layers=2, enc_conv_kernel_size=(3,), enc_conv_channels=5,
             encoder_lstm_units=4, attention_dim=5, attention_filters=3, attention_kernel=(5,), prenet_layers=[6, 4],
             decoder_layers=2, decoder_lstm_units=7, postnet_num_layers=3, postnet_kernel_size=(3,), postnet_channels=5)
RTVC = dict(tacotron2_hparams("rtvc"), **SMALL, speaker_embedding_size=3)
RAYHANE = dict(tacotron2_hparams("rayhane"), **SMALL, num_freq=9, cbhg_kernels=3, cbhg_conv_channels=4,
               cbhg_projection=5, cbhg_projection_kernel_size=3, cbhg_highwaynet_layers=2, cbhg_highway_units=6,
               cbhg_rnn_units=3)
N_SYMBOLS = 12
STEPS = 6
BLOCKS = {"EncoderConvolutions", "EncoderRNN", "Prenet", "DecoderRNN", "LocationSensitiveAttention", "FrameProjection",
          "StopProjection", "Postnet"}
COMPARISONS = ("TF1->Keras", "TF1->torch", "Keras<->torch")


def write_checkpoint(prefix: str, hp_dict: dict, seed: int) -> str:
    """A TF1 checkpoint of the whole model with random weights (plus a global step and an Adam slot)."""
    hp = resolve_hparams(hp_dict, N_SYMBOLS)
    g = np.random.default_rng(seed)
    variables = {}
    for name, shape in tf1_variable_shapes(hp).items():
        leaf = name.split("/")[-1]
        if leaf == "moving_variance":
            v = g.uniform(0.5, 1.5, shape)
        elif leaf == "kernel" and len(shape) >= 2:
            v = g.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
        else:
            v = 0.3 * g.standard_normal(shape)
        variables[f"Tacotron_model/inference/{name}"] = v.astype(np.float32)
    variables["global_step"] = np.array(1000, np.int64)
    variables["Tacotron_model/inference/inputs_embedding/Adam"] = np.zeros((N_SYMBOLS, hp.embedding_dim), np.float32)
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[variables[n] for n in names])
    return prefix


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    return {"rtvc": write_checkpoint(str(d / "rtvc.ckpt-1000"), RTVC, 1),
            "rayhane": write_checkpoint(str(d / "rayhane.ckpt-1000"), RAYHANE, 2)}


@pytest.fixture(scope="module")
def results(checkpoints):
    """``name -> (rows, progress lines)``, each checkpoint run once per process, when a test first asks for it
    (under pytest-xdist a worker runs only the checkpoints its tests need)."""
    cache = {}

    def get(name):
        if name not in cache:
            lines = []
            cache[name] = (run_checkpoint_parity(checkpoints[name], steps=STEPS, progress=lines.append), lines)
        return cache[name]

    return get


def _groups(rows):
    return {(r.block, r.comparison) for r in rows}


@pytest.mark.parametrize("name", ["rtvc", "rayhane"])
def test_every_row_passes_and_every_block_is_compared(results, name):
    rows, lines = results(name)
    failed = [r for r in rows if not r.passed]
    assert not failed, format_table(failed)
    blocks = BLOCKS | ({"CBHG"} if name == "rayhane" else set())
    for comparison in COMPARISONS:
        for block in blocks | {"Tacotron2"}:
            assert (block, comparison) in _groups(rows), (block, comparison)
        model = [r.output for r in rows if r.block == "Tacotron2" and r.comparison == comparison]
        outputs = ["decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments"]
        outputs += ["linear_outputs"] if name == "rayhane" else []
        for mode in ("GTA", "free running"):
            for key in outputs:
                assert any(o.startswith(mode) and o.endswith(f"[{STEPS} steps]: {key}") for o in model), (mode, key)
        projections = {r.output.split(" ")[0] for r in rows if r.block == "FrameProjection"
                       and r.comparison == comparison}
        expected = {"linear_transform_projection", "postnet_projection"}
        assert projections == expected | ({"cbhg_linear_specs_projection"} if name == "rayhane" else set())
    assert not any(r.block == "CBHG" for r in rows) or name == "rayhane"
    # one progress line per stage, the legacy reference included
    assert any("TF1 legacy reference" in line for line in lines) and any("torch" in line for line in lines)
    assert any(name in line for line in lines)  # the inferred preset


def test_rows_to_json(results):
    rows, _ = results("rtvc")
    data = json.loads(rows_to_json(rows))
    assert len(data) == len(rows)
    assert set(data[0]) == {"block", "comparison", "output", "max_abs", "tol", "passed", "note"}
    assert all(d["passed"] for d in data)
    bad = Row("X", "TF1->Keras", "y", float("inf"), 1e-5, False, "shape (1,) vs (2,)")
    assert json.loads(rows_to_json([bad]))[0] == {"block": "X", "comparison": "TF1->Keras", "output": "y",
                                                  "max_abs": None, "tol": 1e-5, "passed": False,
                                                  "note": "shape (1,) vs (2,)"}


def test_sabotaged_keras_weights_fail(checkpoints, results):
    results("rtvc")  # the TF1 reference of this checkpoint, memoised: the sabotaged run reuses it

    def perturb(framework, weights):
        if framework == "Keras":
            name = "postnet_projection/projection_postnet_projection/kernel"
            weights[name] = weights[name] + np.float32(1e-2)
        return weights

    rows = run_checkpoint_parity(checkpoints["rtvc"], steps=STEPS, _perturb=perturb)
    failed = {(r.block, r.comparison) for r in rows if not r.passed}
    assert ("FrameProjection", "TF1->Keras") in failed and ("FrameProjection", "Keras<->torch") in failed
    assert ("Tacotron2", "TF1->Keras") in failed  # mel_outputs go through the postnet projection
    assert all(r.passed for r in rows if r.comparison == "TF1->torch")
    assert all(r.passed for r in rows if r.block == "EncoderRNN")


def test_missing_tf_keras_raises_before_any_work_and_skip_legacy_runs(checkpoints, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name == "tf_keras"
                        else real(name, *a, **k))
    with pytest.raises(LegacyReferenceUnavailable) as err:
        run_checkpoint_parity("/nonexistent/model.ckpt")  # raised before the checkpoint is even read
    message = str(err.value)
    assert "pip install 'speechblocks[legacy]'" in message and "\n" not in message
    assert isinstance(err.value, RuntimeError)

    rows = run_checkpoint_parity(checkpoints["rayhane"], steps=3, batch=1, skip_legacy=True)
    assert rows and {r.comparison for r in rows} == {"Keras<->torch"}
    assert all(r.passed for r in rows), format_table([r for r in rows if not r.passed])
    assert {r.block for r in rows} == BLOCKS | {"CBHG", "Tacotron2"}


def test_bad_arguments(checkpoints):
    with pytest.raises(ValueError, match="steps"):
        run_checkpoint_parity(checkpoints["rtvc"], steps=0, skip_legacy=True)
    with pytest.raises(ValueError, match="`skip_keras` needs `skip_legacy`"):  # the TF1 reference needs TensorFlow
        run_checkpoint_parity(checkpoints["rtvc"], skip_keras=True)
    with pytest.raises(ValueError, match="mismatch"):  # hparams contradicting the shapes, before any model runs
        run_checkpoint_parity(checkpoints["rtvc"], hparams="rtvc", skip_legacy=True)
