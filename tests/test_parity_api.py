"""``speechblocks.parity.compare`` on a small model that is not the project's: a Keras Conv1D + BatchNormalization +
GRU + LSTM + Dense model and its torch twin (written here), weights moved by a regex map (``move_weights``).

The numbers are checked against references computed here, independently of the report: the rows' max |Δ| against
the two models' outputs, the batch-norm fault's trace row against the numpy batch norm at both epsilons, the
untransposed kernel's against ``h @ K`` vs ``h @ K.T``, the TF1 graph's outputs against numpy maths on its
checkpoint's variables.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from speechblocks.parity import TF1Graph, compare
from speechblocks.parity.report import Row, compare_arrays, format_table, rows_to_json

T, C_IN, C, U_GRU, U_LSTM, D = 7, 3, 5, 4, 6, 6  # U_LSTM == D: the dense kernel is square (a transpose fits)
#: Keras weight paths -> torch names and the layout converters (move_weights' regex rules)
RULES = [(r"conv/kernel", "conv.weight", "conv1d"), (r"conv/bias", "conv.bias"), (r"bn/.*", "bn", "batch_norm"),
         (r"gru/gru_cell/.*", "gru", "gru"), (r"lstm/lstm_cell/.*", "lstm", "lstm_tf1"),
         (r"dense/kernel", "dense.weight", "dense_kernel"), (r"dense/bias", "dense.bias")]


def keras_model(seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input((T, C_IN))
    x = keras.layers.Conv1D(C, 3, padding="same", name="conv")(inp)
    x = keras.layers.BatchNormalization(epsilon=1e-3, name="bn")(x)
    x = keras.layers.GRU(U_GRU, return_sequences=True, name="gru")(x)
    x = keras.layers.LSTM(U_LSTM, return_sequences=True, name="lstm")(x)
    model = keras.Model(inp, keras.layers.Dense(D, name="dense")(x), name="twin")
    rng = np.random.default_rng(seed)  # moving statistics that are not the identity
    model.get_layer("bn").set_weights([1 + 0.1 * rng.standard_normal(C), 0.1 * rng.standard_normal(C),
                                       0.3 * rng.standard_normal(C), rng.uniform(0.5, 1.5, C)])
    return model


def torch_twin(eps: float = 1e-3, dense_name: str = "dense"):
    import torch
    from torch import nn

    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(C_IN, C, 3, padding=1)
            self.bn = nn.BatchNorm1d(C, eps=eps)
            self.gru = nn.GRU(C, U_GRU, batch_first=True)
            self.lstm = nn.LSTM(U_GRU, U_LSTM, batch_first=True)
            setattr(self, dense_name, nn.Linear(U_LSTM, D))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.bn(self.conv(x.transpose(1, 2))).transpose(1, 2)
            x = self.gru(x)[0]
            return getattr(self, dense_name)(self.lstm(x)[0])

    return Twin().eval()


def moved(km, **kwargs):
    """A torch twin with the Keras weights moved by :data:`RULES`."""
    from speechblocks.parity import move_weights

    tm = torch_twin(**kwargs)
    rules = [(p, r.replace("dense", kwargs.get("dense_name", "dense")), *c) for p, r, *c in RULES]
    report = move_weights(km, tm, rules=rules)
    assert report.ok and len(report.moved) == 16, report.table()
    return tm


@pytest.fixture(scope="module")
def twin():
    km = keras_model()
    x = np.random.default_rng(1).standard_normal((2, T, C_IN)).astype(np.float32)
    return km, moved(km), x


def _torch_out(tm, x):
    import torch

    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


# -- the row type: one spelling for the suite and the API --------------------------------------------------------
def test_the_suite_rows_are_the_api_rows():
    import parity_tests.report as suite

    assert suite.compare is compare_arrays and suite.Row is Row and suite.format_table is format_table
    a, b = np.array([1.0, np.nan, 3.0]), np.array([1.25, np.nan, 3.0])
    row = compare_arrays("Blk", "Keras<->torch", "y", a, b, 1e-5)
    assert row.max_abs == 0.25 and not row.passed and row.masks_match
    assert str(row) == "Blk | Keras<->torch | y | 2.500e-01 | 1e-05 | FAIL"
    shape_row = compare_arrays("Blk", "Keras<->torch", "y", np.zeros(3), np.zeros(4), 1e-5)
    assert not shape_row.passed and shape_row.note == "shape (3,) vs (4,)"
    table = format_table([row, shape_row]).splitlines()
    assert table[0].split() == ["block", "comparison", "output", "max", "|Δ|", "tol", "result"]
    assert table[-1] == "0 passed, 2 failed"
    assert json.loads(rows_to_json([shape_row]))[0]["max_abs"] is None


def test_importing_the_api_loads_no_framework():
    code = ("import sys, speechblocks.parity, speechblocks.parity.pytest_plugin\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'torch', 'keras')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


# -- the small model ---------------------------------------------------------------------------------------------
def test_twin_agrees_and_the_numbers_are_the_outputs(twin):
    km, tm, x = twin
    report = compare(km, tm, x, trace=True)
    expected = float(np.max(np.abs(np.asarray(km(x), np.float64) - _torch_out(tm, x))))
    assert [(r.block, r.comparison, r.output) for r in report.rows] == [("twin", "Keras<->torch", "output")]
    assert report.rows[0].max_abs == expected and 0 < expected <= 1e-5
    assert report.ok and report.first_divergence is None
    assert [r.block for r in report.trace_rows] == ["conv", "bn", "gru", "lstm", "dense"]
    assert all(r.inputs_agree and r.outputs_agree for r in report.trace_rows)
    assert "last two axes swapped" in report.trace_rows[0].note  # channels-first torch conv, compared transposed
    assert report.trace_rows[0].inputs_max_abs == 0.0
    table = report.table()
    assert table.splitlines()[0].split()[:3] == ["block", "comparison", "output"]
    assert "first divergence: none (every matched sub-block's outputs agree)" in table
    data = json.loads(report.to_json())
    assert data["ok"] and data["first_divergence"] is None and len(data["trace"]) == 5
    assert data["rows"][0]["max_abs"] == expected


def test_float64_runs_both_sides_in_float64(twin):
    km, tm, x = twin
    report = compare(km, tm, x, float64=True, atol=1e-9)
    assert report.ok and report.notes == []
    assert report.rows[0].max_abs < 1e-12  # float32 on either side would leave ~1e-8
    assert str(next(iter(tm.parameters())).dtype) == "torch.float32"  # the caller's module is not cast


def test_float64_a_side_that_cannot_is_named():
    """A Keras layer that cannot be cloned at float64 runs in float32 and the report says so."""
    import keras

    class Apply(keras.layers.Layer):  # a function argument: no config, so no clone at another dtype
        def __init__(self, fn, **kwargs):
            super().__init__(**kwargs)
            self.fn = fn

        def call(self, x):
            return self.fn(x)

    report = compare(Apply(lambda x: 2.0 * x), lambda x: 2.0 * np.asarray(x), np.ones((2, 3), np.float32),
                     float64=True)
    assert any("`a` (Keras) cannot run in float64" in n and "it ran in float32" in n for n in report.notes)
    assert report.ok


@pytest.mark.parametrize("fault,where", [("gru_gates", "gru"), ("dense_untransposed", "dense"),
                                         ("forget_bias", "lstm"), ("bn_epsilon", "bn")])
def test_each_fault_is_located(twin, fault, where):
    import torch

    km, _, x = twin
    tm = moved(km, eps=1e-5 if fault == "bn_epsilon" else 1e-3)
    with torch.no_grad():
        if fault == "gru_gates":  # a hand port that kept Keras' (z, r, h) blocks for torch's (r, z, n)
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                w = getattr(tm.gru, name)
                w.copy_(torch.cat([w[U_GRU:2 * U_GRU], w[:U_GRU], w[2 * U_GRU:]]))
        elif fault == "dense_untransposed":
            tm.dense.weight.copy_(torch.from_numpy(km.get_layer("dense").get_weights()[0]))
        elif fault == "forget_bias":
            _lstm_from_tf1(km, tm)
    report = compare(km, tm, x, trace=True)
    assert not report.ok and report.first_divergence == where
    row = next(r for r in report.trace_rows if r.diverges)
    assert row.block == where and row.inputs_max_abs <= 1e-5 < row.outputs_max_abs
    assert report.table().splitlines()[-1].startswith(f"first divergence: {where} (call 1 of 1): inputs agree")
    if fault == "bn_epsilon":  # the numpy batch norm at both epsilons, on Keras' own conv output
        import keras

        h = np.asarray(keras.Model(km.input, km.get_layer("conv").output)(x), np.float64)
        g, b, m, v = km.get_layer("bn").get_weights()
        bn = lambda eps: g * (h - m) / np.sqrt(v + eps) + b  # noqa: E731
        assert row.outputs_max_abs == pytest.approx(np.max(np.abs(bn(1e-3) - bn(1e-5))), abs=1e-6)  # float32 rounding
    if fault == "dense_untransposed":  # h @ K against h @ K.T on Keras' own LSTM output
        import keras

        h = np.asarray(keras.Model(km.input, km.get_layer("lstm").output)(x), np.float64)
        k = km.get_layer("dense").get_weights()[0]
        assert row.outputs_max_abs == pytest.approx(np.max(np.abs(h @ k - h @ k.T)), abs=1e-6)


def _lstm_from_tf1(km, tm):
    """The LSTM of both sides from one TF1 ``LSTMCell`` (kernel over ``[x, h]``, gates i, j, f, o): Keras through
    ``lstm_tf1`` (TF1's forget bias 1.0, added at run time, folded into the bias), torch through a converter that
    forgets it -- the classic port bug."""
    from speechblocks.parity import move_weights
    from speechblocks.parity._converters import lstm_converter
    from speechblocks.parity.weights import register_converter

    rng = np.random.default_rng(5)
    tf1 = {"lstm/kernel": (rng.standard_normal((U_GRU + U_LSTM, 4 * U_LSTM)) / 3).astype(np.float32),
           "lstm/bias": (0.1 * rng.standard_normal(4 * U_LSTM)).astype(np.float32)}
    register_converter("lstm_tf1_forget_bias_0", lstm_converter(0.0), replace=True,
                       leaves={"keras": ["kernel", "recurrent_kernel", "bias"],
                               "torch": ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]})
    move_weights(tf1, km, rules=[(r"lstm/.*", "lstm", "lstm_tf1")], strict=False)
    move_weights(tf1, tm, rules=[(r"lstm/.*", "lstm", "lstm_tf1_forget_bias_0")], strict=False)
    assert compare(km, moved(km), np.zeros((1, T, C_IN), np.float32)).ok  # with the forget bias: they agree


def test_a_users_match_pairs_renamed_blocks(twin):
    import torch

    km, _, x = twin
    tm = moved(km, dense_name="proj")
    with torch.no_grad():
        tm.proj.weight.copy_(torch.from_numpy(km.get_layer("dense").get_weights()[0]))  # left untransposed
    plain = compare(km, tm, x, trace=True)
    assert "dense" not in [r.block for r in plain.trace_rows] and plain.first_divergence is None
    matched = compare(km, tm, x, match={"dense": "proj"})
    assert matched.traced and matched.first_divergence == "dense"
    assert next(r for r in matched.trace_rows if r.block == "dense").b_name == "proj"


def test_randomness_a_side_was_not_given_is_noted(twin):
    import tf_layers
    import torch_layers

    km, tm, x = twin
    tm.train()
    try:
        report = compare(km, tm, x)
    finally:
        tm.eval()
    assert any("`b` (torch) ran in train() mode without injected masks" in n for n in report.notes)
    keras_training = compare(km, km, {"inputs": x, "training": True})
    assert sum("ran with training=True without injected masks" in n for n in keras_training.notes) == 2
    kp = tf_layers.Prenet([4], drop_rate=0.5)
    kp.build((None, 3))
    tp = torch_layers.Prenet(3, [4], 0.5).eval()
    tp.load_tf1_weights(kp.tf1_weights())
    xp = np.ones((2, 3), np.float32)
    noted = compare(kp, tp, xp).notes
    assert sum("drops units at inference too" in n for n in noted) == 2
    masks = [np.random.default_rng(0).integers(0, 2, (2, 4)).astype(np.float32)]
    given = compare(kp, tp, {"inputs": xp, "dropout_masks": masks}, outputs=["output"])
    assert given.ok and given.notes == []


# -- bad inputs: one line naming the argument ---------------------------------------------------------------------
def test_bad_inputs_are_one_line_errors(twin):
    km, tm, x = twin
    for call, err, words in [
            (lambda: compare(3, tm, x), TypeError, "argument `a`"),
            (lambda: compare(km, "model", x), TypeError, "argument `b`"),
            (lambda: compare(km, tm, [x]), TypeError, "argument `inputs`"),
            (lambda: compare(km, tm, x, atol=-1.0), ValueError, "argument `atol`"),
            (lambda: compare(km, tm, x, atol=0.0), ValueError, "both 0"),
            (lambda: compare(km, tm, x, match={"nope": "dense"}), ValueError, "'nope'"),
            (lambda: compare(km, tm, x, match={"dense": "nowhere"}), ValueError, "'nowhere'"),
            (lambda: compare(km, tm, x, outputs=["mel"]), ValueError, "'mel'")]:
        with pytest.raises(err) as info:
            call()
        message = str(info.value)
        assert words in message and "\n" not in message, message


def test_differing_shapes_are_a_failing_row(twin):
    km, _, x = twin
    narrow = torch_twin()
    import torch

    narrow.dense = torch.nn.Linear(U_LSTM, D - 1)
    report = compare(km, narrow, x)
    assert not report.ok and report.rows[0].note == f"shape (2, {T}, {D}) vs (2, {T}, {D - 1})"
    assert "note: output: shape" in report.table()


# -- a TF1 graph as one side -------------------------------------------------------------------------------------
def test_tf1_graph_builder_spec_and_users_meta_checkpoint():
    """One legacy run (the Prenet builder, dropout off): the spec's graph vs the Keras block loaded from its
    checkpoint, then the same checkpoint imported from its ``.meta`` graph as a user's own, vs Keras and torch; both
    graphs checked against numpy maths on the checkpoint's variables."""
    import json as json_module
    import os

    import tf_layers
    import torch_layers
    from parity_tests.reference import LegacySpec
    from tf_layers.checkpoint import load_tf1_checkpoint, read_tf1_checkpoint

    config = dict(layers_sizes=[5, 4], drop_rate=0.0, activation="tanh")
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(np.float32)
    graph = TF1Graph(LegacySpec("Prenet", config, {"inputs": x}, seed=7))
    keras_block = tf_layers.Prenet(**config)
    load_tf1_checkpoint(keras_block, graph.checkpoint, graph.block_scope)
    w = read_tf1_checkpoint(graph.checkpoint, prefix=graph.block_scope)
    numpy_out = np.tanh(np.tanh(x @ w["dense_1/kernel"] + w["dense_1/bias"]) @ w["dense_2/kernel"] + w["dense_2/bias"])
    assert np.max(np.abs(graph({"inputs": x})["outputs"] - numpy_out)) < 1e-6
    report = compare(graph, keras_block, {"inputs": x})
    assert report.ok and report.rows[0].comparison == "TF1->Keras" and report.rows[0].block == "Prenet"

    # the checkpoint as a user's: its .meta graph, feeds and fetches by tensor name (the runner lists them)
    with open(os.path.join(os.path.dirname(graph.checkpoint), "meta.json")) as f:
        names = json_module.load(f)
    user = TF1Graph(graph.checkpoint, feeds={"inputs": names["placeholders"]["inputs"]},
                    fetches={"y": names["tensors"]["outputs"]})
    x2 = np.random.default_rng(1).standard_normal((1, 4, 6)).astype(np.float32)
    torch_block = torch_layers.Prenet(6, **config).eval()
    torch_block.load_tf1_weights(w)
    for other, label in ((keras_block, "TF1->Keras"), (torch_block, "TF1->torch")):
        report = compare(user, other, {"inputs": x2})
        assert report.ok and report.rows[0].comparison == label and report.rows[0].max_abs <= 1e-6
    with pytest.raises(FileNotFoundError, match="no .*nowhere.ckpt.meta"):
        TF1Graph("nowhere.ckpt", feeds={"x": "x:0"}, fetches={"y": "y:0"})
    with pytest.raises(ValueError, match="argument `fetches` maps 'y'"):
        TF1Graph(graph.checkpoint, feeds={"inputs": "inputs:0"}, fetches={"y": "not a tensor"})
