"""``speechblocks.parity.move_weights``: weights between Keras, torch and TF1 dicts, checked against independent maths.

The torch twins compute their own maths (torch's Conv1d, BatchNorm1d, GRU, LSTM, Linear), and the converters are held
to numpy references derived by hand from each framework's documented equations (TF1 ``LSTMCell`` with its run-time
forget bias, Keras ``GRU(reset_after=True)``, batch norm in inference): equal outputs mean the layouts are right.
"""
from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")
nn = torch.nn

from speechblocks.parity._converters import WeightGroup, get_converter, lstm_converter, register_converter  # noqa: E402
from speechblocks.parity.weights import WeightMatchError, move_weights  # noqa: E402

T, C_IN, CONV, GRU_U, LSTM_U, OUT = 6, 3, 4, 5, 4, 2

# Keras -> torch and torch -> Keras rule lists for the test model (names: Keras weight paths, torch state-dict keys)
TO_TORCH = [
    (r"conv/kernel", "conv.weight", "conv1d"),
    (r"dense/kernel", "dense.weight", "dense_kernel"),
    (r"(conv|dense)/bias", r"\1.bias"),
    (r"bn/.*", "bn", "batch_norm"),
    (r"gru/gru_cell/.*", "gru", "gru"),
    (r"lstm/lstm_cell/.*", "lstm", "lstm_tf1"),
]
TO_KERAS = [
    (r"conv\.weight", "conv/kernel", "conv1d"),
    (r"dense\.weight", "dense/kernel", "dense_kernel"),
    (r"(conv|dense)\.bias", r"\1/bias"),
    (r"bn\..*", "bn", "batch_norm"),
    (r"gru\..*", "gru", "gru"),
    (r"lstm\..*", "lstm/lstm_cell/*", "lstm_tf1"),
]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def randn(*shape, seed=0, scale=0.5):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def keras_model(seed: int = 0, reset_after: bool = True):
    """Not the project's: Conv1D -> BatchNormalization -> GRU -> LSTM -> Dense, channels last, random weights and
    batch-norm statistics."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((T, C_IN))
    x = keras.layers.Conv1D(CONV, 3, padding="same", name="conv")(inp)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.GRU(GRU_U, return_sequences=True, reset_after=reset_after, name="gru")(x)
    x = keras.layers.LSTM(LSTM_U, return_sequences=True, name="lstm")(x)
    model = keras.Model(inp, keras.layers.Dense(OUT, name="dense")(x))
    for i, w in enumerate(model.weights):
        v = randn(*w.shape, seed=100 * seed + i)
        w.assign(np.abs(v) + 0.5 if w.path.endswith("variance") else v)
    return model


class TorchTwin(nn.Module):
    """The same model written for torch (channels first around conv and batch norm)."""

    def __init__(self, eps: float = 1e-3, momentum: float = 0.01):
        super().__init__()
        self.conv = nn.Conv1d(C_IN, CONV, 3, padding=1)
        self.bn = nn.BatchNorm1d(CONV, eps=eps, momentum=momentum)
        self.gru = nn.GRU(CONV, GRU_U, batch_first=True)
        self.lstm = nn.LSTM(GRU_U, LSTM_U, batch_first=True)
        self.dense = nn.Linear(LSTM_U, OUT)

    def forward(self, x):
        y = self.bn(self.conv(x.transpose(1, 2))).transpose(1, 2)
        y, _ = self.gru(y)
        y, _ = self.lstm(y)
        return self.dense(y)


def torch_twin(seed: int = 1, **kw) -> TorchTwin:
    torch.manual_seed(seed)
    twin = TorchTwin(**kw).eval()
    with torch.no_grad():
        twin.bn.running_mean.normal_()
        twin.bn.running_var.uniform_(0.5, 1.5)
        twin.bn.weight.normal_()
        twin.bn.bias.normal_()
    return twin


def run_torch(module, x):
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def run_keras(model, x):
    return np.asarray(model(x, training=False))


def state(module) -> dict:
    return {k: v.detach().clone().numpy() for k, v in module.state_dict().items()}


X = randn(2, T, C_IN, seed=7, scale=1.0)


# -- a model that is not the project's, both directions -----------------------------------------------------------
def test_keras_to_torch_by_rules_then_back():
    km = keras_model(seed=0)
    twin = torch_twin(seed=1)
    assert np.abs(run_keras(km, X) - run_torch(twin, X)).max() > 1e-2  # different weights before
    report = move_weights(km, twin, TO_TORCH)
    assert report.ok and report.warnings == [] and len(report.moved) == 2 + 4 + 4 + 4 + 2
    assert ("gru/gru_cell/{kernel,recurrent_kernel,bias}", "gru.weight_ih_l0", "gru") in report.moved
    np.testing.assert_allclose(run_torch(twin, X), run_keras(km, X), atol=1e-5, rtol=0)

    # torch -> a fresh Keras model: the reverse of every converter
    twin2 = torch_twin(seed=2)
    km2 = keras_model(seed=3)
    report = move_weights(twin2, km2, TO_KERAS)
    assert report.ok and report.direction == "torch -> keras"
    np.testing.assert_allclose(run_keras(km2, X), run_torch(twin2, X), atol=1e-5, rtol=0)
    table = report.table().splitlines()  # one row per group: its destination weights braced
    assert table[0] == "move_weights torch -> keras: 14 moved, 0 unmatched in src, 0 unmatched in dst, 0 warning(s)"
    assert ["lstm.{weight_ih_l0,weight_hh_l0,bias_ih_l0,bias_hh_l0}", "lstm/lstm_cell/{kernel,recurrent_kernel,bias}",
            "lstm_tf1"] in [row.split() for row in table]
    assert len(table) == 2 + 7 and str(report) == report.table()


def test_default_matching_by_layer_names_and_types():
    km, twin = keras_model(seed=4), torch_twin(seed=5)
    report = move_weights(km, twin)  # Keras layer names == torch module paths
    assert report.ok, report.table()
    assert {c for _, _, c in report.moved} == {"conv1d", "identity", "dense_kernel", "batch_norm", "gru", "lstm_tf1"}
    np.testing.assert_allclose(run_torch(twin, X), run_keras(km, X), atol=1e-5, rtol=0)
    km2 = keras_model(seed=6)
    assert move_weights(twin, km2).ok
    np.testing.assert_allclose(run_keras(km2, X), run_torch(twin, X), atol=1e-5, rtol=0)


def test_default_matching_bidirectional_and_unmatched_layers():
    keras.utils.set_random_seed(8)
    inp = keras.Input((T, C_IN))
    y = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True), name="bi")(inp)
    km = keras.Model(inp, keras.layers.Dense(2, name="head")(y))

    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.bi = nn.LSTM(C_IN, 3, batch_first=True, bidirectional=True)
            self.out = nn.Linear(6, 2)  # a name Keras does not have

        def forward(self, x):
            return self.out(self.bi(x)[0])

    twin = Twin().eval()
    report = move_weights(km, twin, strict=False)
    assert report.unmatched_src == ["head/kernel", "head/bias"] and report.unmatched_dst == ["out.weight", "out.bias"]
    assert not report.ok
    with torch.no_grad():
        got = twin.bi(torch.from_numpy(X))[0].numpy()
    np.testing.assert_allclose(got, np.asarray(km.get_layer("bi")(X)), atol=1e-5, rtol=0)


# -- each converter against hand-derived maths --------------------------------------------------------------------
def tf1_lstm_numpy(x, kernel, bias, forget_bias=1.0, h=None, c=None):
    """TF1 LSTMCell: one kernel over concat([x, h]), gates i, j, f, o, forget_bias added at run time."""
    u = kernel.shape[1] // 4
    h = np.zeros((x.shape[0], u)) if h is None else h
    c = np.zeros((x.shape[0], u)) if c is None else c
    out = []
    for t in range(x.shape[1]):
        i, j, f, o = np.split(np.concatenate([x[:, t], h], 1) @ kernel + bias, 4, axis=1)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(j)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.stack(out, 1)


@pytest.mark.parametrize("steps", [1, 5])
def test_tf1_lstm_cell_dict_to_torch_lstm_with_forget_bias(steps):
    n_in, u = 3, 4
    ckpt = {"rnn/lstm_cell/kernel": randn(n_in + u, 4 * u, seed=11), "rnn/lstm_cell/bias": randn(4 * u, seed=12)}
    lstm = nn.LSTM(n_in, u, batch_first=True)
    report = move_weights(ckpt, lstm, [(r"rnn/lstm_cell/.*", "*_l0", "lstm_tf1")])
    assert report.ok and report.direction == "tf1 -> torch"
    assert not lstm.bias_hh_l0.detach().numpy().any()  # the whole bias in bias_ih, zeros in bias_hh
    # a non-zero initial cell state: the forget gate (hence the forget bias) shows from the first step
    x = randn(2, steps, n_in, seed=13, scale=1.0)
    h0, c0 = randn(2, u, seed=14, scale=1.0), randn(2, u, seed=15, scale=2.0)

    def run():
        with torch.no_grad():
            return lstm(torch.from_numpy(x), (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]))[0].numpy()

    def ref(forget_bias):
        return tf1_lstm_numpy(*(a.astype(np.float64) for a in (x, *ckpt.values())), forget_bias=forget_bias,
                              h=h0.astype(np.float64), c=c0.astype(np.float64))

    got = run()
    np.testing.assert_allclose(got, ref(1.0), atol=1e-6, rtol=0)
    # without the forget bias the torch LSTM computes something else: the converter is what adds it
    assert np.abs(got - ref(0.0)).max() > 1e-2

    # another forget bias, registered under a name of one's own
    register_converter("lstm_tf1_fb0", lstm_converter(0.0), leaves=get_converter("lstm_tf1").leaves, replace=True)
    move_weights(ckpt, lstm, [(r"rnn/lstm_cell/.*", "*_l0", "lstm_tf1_fb0")])
    np.testing.assert_allclose(run(), ref(0.0), atol=1e-6, rtol=0)


def test_a_real_tf1_checkpoint_read_in_numpy_to_torch(tmp_path):
    """A TF1 checkpoint file (written by SaveV2, the op TF1's Saver runs) read by the framework-free reader, its
    LSTMCell moved into a torch model with a rule: the torch model computes TF1's LSTM."""
    import tensorflow as tf

    from speechblocks.tf1_checkpoint import read_tf1_checkpoint

    n_in, u = 3, 4
    variables = {"model/rnn/lstm_cell/kernel": randn(n_in + u, 4 * u, seed=16),
                 "model/rnn/lstm_cell/bias": randn(4 * u, seed=17), "global_step": np.int64(100)}
    prefix = str(tmp_path / "model.ckpt-100")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(variables), shape_and_slices=[""] * len(variables),
                      tensors=list(variables.values()))
    ckpt = read_tf1_checkpoint(prefix, prefix="model")  # global_step left out
    assert sorted(ckpt) == ["rnn/lstm_cell/bias", "rnn/lstm_cell/kernel"]

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(n_in, u, batch_first=True)

    enc = Encoder()
    report = move_weights(ckpt, enc, [(r"rnn/lstm_cell/.*", "rnn", "lstm_tf1")])
    assert report.moved[0] == ("rnn/lstm_cell/{bias,kernel}", "rnn.weight_ih_l0", "lstm_tf1")
    x = randn(2, 5, n_in, seed=18, scale=1.0)
    with torch.no_grad():
        got = enc.rnn(torch.from_numpy(x))[0].numpy()
    ref = tf1_lstm_numpy(x.astype(np.float64), variables["model/rnn/lstm_cell/kernel"].astype(np.float64),
                         variables["model/rnn/lstm_cell/bias"].astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)


def test_tf1_lstm_cell_dict_to_keras_lstm_and_torch_back_to_tf1_layout():
    n_in, u = 3, 2
    ckpt = {"cell/kernel": randn(n_in + u, 4 * u, seed=21), "cell/bias": randn(4 * u, seed=22)}
    inp = keras.Input((4, n_in))
    km = keras.Model(inp, keras.layers.LSTM(u, return_sequences=True, name="lstm")(inp))
    assert move_weights(ckpt, km, [(r"cell/.*", "lstm", "lstm_tf1")]).ok
    x = randn(2, 4, n_in, seed=23, scale=1.0)
    np.testing.assert_allclose(np.asarray(km(x)), tf1_lstm_numpy(x, *ckpt.values()), atol=1e-6, rtol=0)
    # Keras layout -> torch -> the converter's TF1 (fused) output, through the group API: the stored bias comes back
    lstm = nn.LSTM(n_in, u, batch_first=True)
    move_weights(km, lstm, [(r"lstm/lstm_cell/.*", "*_l0", "lstm_tf1")])
    group = WeightGroup("t", {k: v.detach().numpy() for k, v in
                              (("weight_ih", lstm.weight_ih_l0), ("weight_hh", lstm.weight_hh_l0),
                               ("bias_ih", lstm.bias_ih_l0), ("bias_hh", lstm.bias_hh_l0))},
                        "torch", {"kernel": (n_in + u, 4 * u), "bias": (4 * u,)}, "keras")
    back = get_converter("lstm_tf1").fn(group)
    np.testing.assert_allclose(back["kernel"], ckpt["cell/kernel"], atol=1e-7)
    np.testing.assert_allclose(back["bias"], ckpt["cell/bias"], atol=1e-6)


def test_gru_converter_against_keras_reset_after_maths():
    n_in, u = 3, 4
    w = {"g/kernel": randn(n_in, 3 * u, seed=31), "g/recurrent_kernel": randn(u, 3 * u, seed=32),
         "g/bias": randn(2, 3 * u, seed=33)}
    gru = nn.GRU(n_in, u, batch_first=True)
    assert move_weights(w, gru, [(r"g/.*", "*_l0", "gru")]).ok
    x, h0 = randn(2, 1, n_in, seed=34, scale=1.0), randn(2, u, seed=35, scale=1.0)
    # Keras GRU(reset_after=True), column blocks (z, r, h): hh = tanh(x Wh + b_h + r * (h Uh + rb_h))
    xw, hu = x[:, 0] @ w["g/kernel"] + w["g/bias"][0], h0 @ w["g/recurrent_kernel"] + w["g/bias"][1]
    z, r = sigmoid(xw[:, :u] + hu[:, :u]), sigmoid(xw[:, u:2 * u] + hu[:, u:2 * u])
    hh = np.tanh(xw[:, 2 * u:] + r * hu[:, 2 * u:])
    ref = z * h0 + (1 - z) * hh
    with torch.no_grad():
        got = gru(torch.from_numpy(x), torch.from_numpy(h0)[None])[0][:, 0].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)


def test_batch_norm_converter_and_epsilon_warning():
    stats = {"bn/gamma": randn(4, seed=41), "bn/beta": randn(4, seed=42), "bn/moving_mean": randn(4, seed=43),
             "bn/moving_variance": np.abs(randn(4, seed=44)) + 0.5}
    bn = nn.BatchNorm1d(4, eps=1e-3).eval()
    # one rule per weight, each naming its destination weight exactly (a bare module's names have no prefix)
    assert move_weights(stats, bn, [(r"bn/gamma", "weight", "batch_norm"), (r"bn/beta", "bias", "batch_norm"),
                                    (r"bn/moving_mean", "running_mean", "batch_norm"),
                                    (r"bn/moving_variance", "running_var", "batch_norm")]).ok
    x = randn(3, 4, seed=45, scale=1.0)
    ref = (x - stats["bn/moving_mean"]) / np.sqrt(stats["bn/moving_variance"] + 1e-3) * stats["bn/gamma"] \
        + stats["bn/beta"]
    with torch.no_grad():
        np.testing.assert_allclose(bn(torch.from_numpy(x)).numpy(), ref, atol=1e-6, rtol=0)

    # both epsilons visible (Keras 1e-3, torch's default 1e-5): the report says so, and the momentum too
    km, twin = keras_model(seed=9), torch_twin(eps=1e-5, momentum=0.1)
    report = move_weights(km, twin, TO_TORCH)
    assert report.ok and len(report.warnings) == 2
    assert "epsilon differs: source 0.001, destination 1e-05" in report.warnings[0]
    assert "momentum differs" in report.warnings[1]


def test_dense_and_conv1d_converters_by_hand():
    k = randn(2, 3, 5, seed=51)  # Keras conv1d (k, in, out)
    out = get_converter("conv1d").fn(WeightGroup("c", {"kernel": k}, "keras", {"weight": (5, 3, 2)}, "torch"))
    assert out["weight"][4, 1, 0] == k[0, 1, 4] and out["weight"].shape == (5, 3, 2)
    d = randn(3, 5, seed=52)
    out = get_converter("dense_kernel").fn(WeightGroup("d", {"kernel": d}, "tf1", {"weight": (5, 3)}, "torch"))
    np.testing.assert_array_equal(out["weight"], d.T)
    same = get_converter("dense_kernel").fn(WeightGroup("d", {"kernel": d}, "tf1", {"kernel": (3, 5)}, "keras"))
    np.testing.assert_array_equal(same["kernel"], d)  # TF1 -> Keras: same layout
    with pytest.raises(ValueError, match="needs a 2-D kernel; got shape \\(2, 3, 5\\).*use 'conv1d'"):
        get_converter("dense_kernel").fn(WeightGroup("d", {"kernel": k}, "keras", {"weight": (5, 3, 2)}, "torch"))


# -- the project's blocks: TF1 names ------------------------------------------------------------------------------
def test_project_blocks_move_by_tf1_names():
    import tf_layers
    import torch_layers

    config = dict(layers_sizes=[6, 5], drop_rate=0.5)
    kb = tf_layers.Prenet(**config)
    x = randn(2, 3, 4, seed=61, scale=1.0)
    masks = [(np.random.default_rng(62 + j).random((2, 3, n)) > 0.5).astype(np.float32)
             for j, n in enumerate(config["layers_sizes"])]
    yk = np.asarray(kb(x, training=False, dropout_masks=masks))
    tb = torch_layers.Prenet(4, **config).eval()
    report = move_weights(kb, tb)
    assert report.ok and {s for s, _, _ in report.moved} == set(kb.tf1_weights())
    assert report.moved[0] == ("dense_1/kernel", "dense_1/kernel", "tf1_names")
    with torch.no_grad():
        yt = tb(torch.from_numpy(x), [torch.from_numpy(m) for m in masks]).numpy()
    np.testing.assert_allclose(yt, yk, atol=1e-5, rtol=0)
    # a dict of TF1 names (a checkpoint's block) into a project block: its load_tf1_weights, strict
    fresh = torch_layers.Prenet(4, **config)
    assert move_weights(kb.tf1_weights(), fresh).direction == "tf1 -> torch (TF1 names)"
    np.testing.assert_array_equal(fresh.tf1_weights()["dense_2/bias"], kb.tf1_weights()["dense_2/bias"])
    with pytest.raises(ValueError, match=r"cannot load TF1 weights \(1 problem\(s\)\); nothing was assigned"):
        move_weights({**kb.tf1_weights(), "dense_3/bias": np.zeros(2, np.float32)}, fresh)

    cfg = dict(K=3, conv_channels=8, pool_size=2, projections=[12, 6], projection_kernel_size=3,
               n_highwaynet_layers=2, highway_units=6, rnn_units=4)
    kc = tf_layers.CBHG(**cfg)
    xc = randn(2, 7, 6, seed=63, scale=1.0)
    yk = np.asarray(kc(xc, training=False))
    tc = torch_layers.CBHG(6, **cfg).eval()
    report = move_weights(kc, tc)
    assert report.ok and len(report.moved) == len(kc.tf1_weights())
    assert "CBHG_highwaynet_1/H/kernel" in {s for s, _, _ in report.moved}
    with torch.no_grad():
        np.testing.assert_allclose(tc(torch.from_numpy(xc)).numpy(), yk, atol=1e-5, rtol=0)


# -- errors -------------------------------------------------------------------------------------------------------
def test_strict_lists_every_unmatched_weight_and_writes_nothing():
    km, twin = keras_model(seed=0), torch_twin(seed=1)
    before = state(twin)
    with pytest.raises(WeightMatchError) as err:
        move_weights(km, twin, TO_TORCH[:-1])  # no LSTM rule
    lines = str(err.value).splitlines()
    assert lines[0] == ("move_weights: 7 weight(s) unmatched (3 in `src`, 4 in `dst`); nothing was written:")
    assert "  - src 'lstm/lstm_cell/recurrent_kernel': no destination" in lines
    assert "  - dst 'lstm.bias_hh_l0': no source" in lines and len(err.value.problems) == 7
    after = state(twin)
    assert all(np.array_equal(before[k], after[k]) for k in before)

    report = move_weights(km, twin, TO_TORCH[:-1], strict=False)  # moves what matched
    assert not report.ok and report.unmatched_src == [f"lstm/lstm_cell/{k}" for k in ("kernel", "recurrent_kernel",
                                                                                     "bias")]
    np.testing.assert_array_equal(twin.dense.weight.detach().numpy(), np.asarray(km.get_layer("dense").kernel).T)


def test_shape_mismatch_is_one_line_and_writes_nothing():
    km, twin = keras_model(seed=0), torch_twin(seed=1)
    twin.dense = nn.Linear(LSTM_U, OUT + 1)
    before = state(twin)
    with pytest.raises(ValueError) as err:
        move_weights(km, twin, TO_TORCH)
    assert str(err.value) == ("`src` 'dense/kernel' -> `dst` 'dense.weight' (converter 'dense_kernel'): converted "
                              "shape (2, 4) does not fit the destination's (3, 4).")
    assert all(np.array_equal(before[k], v) for k, v in state(twin).items())


def test_rule_errors_and_argument_types():
    km, twin = keras_model(seed=0), torch_twin(seed=1)
    with pytest.raises(ValueError, match=r"^argument `rules`: no rule matches any of the 14 source weights "
                                         r"\('conv/kernel', 'conv/bias', 'bn/gamma', \.\.\.\)\.$"):
        move_weights(km, twin, [(r"encoder/.*", "x")])
    with pytest.raises(TypeError, match=r"^argument `src` must be a Keras layer or model, a torch module or a dict "
                                        r"\{name: array\}; got int\.$"):
        move_weights(3, twin)
    with pytest.raises(TypeError, match=r"^argument `dst` must be a Keras layer or model or a torch module; got "
                                        r"dict\.$"):
        move_weights(km, {"a": np.zeros(1)})
    with pytest.raises(TypeError, match="argument `rules` must be a dict"):
        move_weights(km, twin, "conv")
    with pytest.raises(ValueError, match="unknown converter 'dense'"):
        move_weights(km, twin, [(r"dense/kernel", "dense.weight", "dense")])
    # a rule that matches nothing among others is a warning; a destination that does not exist leaves src unmatched
    report = move_weights(km, twin, TO_TORCH + [(r"nothing", "x")], strict=False)
    assert report.ok and report.warnings == ["rule 6 (('nothing', 'x')) matched no source weight"]
    bi = nn.Module()
    bi.lstm = nn.LSTM(GRU_U, LSTM_U, bidirectional=True)
    with pytest.raises(ValueError, match=r"destination 'lstm' holds 2 weight sets for 'lstm_tf1' \(lstm\.\*_l0, "
                                         r"lstm\.\*_l0_reverse\): name one"):
        move_weights(km, bi, [(r"lstm/lstm_cell/.*", "lstm", "lstm_tf1")], strict=False)


def test_gru_without_reset_after_and_tf1_gru_cell_are_refused():
    km, twin = keras_model(seed=0, reset_after=False), torch_twin(seed=1)
    before = state(twin)
    with pytest.raises(ValueError) as err:
        move_weights(km, twin, TO_TORCH)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("gru/gru_cell/{kernel,recurrent_kernel,bias} -> gru.{")
    assert "a Keras GRU(reset_after=False) resets before its candidate matmul while torch nn.GRU" in msg
    assert all(np.array_equal(before[k], v) for k, v in state(twin).items())
    tf1 = {"rnn/gru_cell/gates/kernel": randn(9, 8), "rnn/gru_cell/gates/bias": randn(8),
           "rnn/gru_cell/candidate/kernel": randn(9, 4), "rnn/gru_cell/candidate/bias": randn(4)}
    with pytest.raises(ValueError, match="a TF1 GRUCell resets before its candidate matmul"):
        move_weights(tf1, nn.GRU(5, 4), [(r"rnn/gru_cell/.*", "*_l0", "gru")])


def test_exact_dict_rules_and_destination_dtype():
    km, twin = keras_model(seed=0), torch_twin(seed=1).double()  # a float64 destination keeps its dtype
    report = move_weights(km, twin, {"dense/kernel": ("dense.weight", "dense_kernel"), "dense/bias": "dense.bias"},
                          strict=False)
    assert report.moved == [("dense/kernel", "dense.weight", "dense_kernel"), ("dense/bias", "dense.bias", "identity")]
    assert twin.dense.weight.dtype == torch.float64
    np.testing.assert_array_equal(twin.dense.weight.detach().numpy(), np.asarray(km.get_layer("dense").kernel).T)
    assert len(report.unmatched_src) == 12 and len(report.unmatched_dst) == 14


def test_importing_the_module_loads_no_framework():
    import subprocess
    import sys

    code = ("import sys, types, os, speechblocks\n"
            "pkg = types.ModuleType('speechblocks.parity')\n"  # the module alone, whatever the package imports
            "pkg.__path__ = [os.path.join(os.path.dirname(speechblocks.__file__), 'parity')]\n"
            "sys.modules['speechblocks.parity'] = pkg\n"
            "import speechblocks.parity.weights\n"
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
