"""Keras masked losses against hand-derived values and an independent numpy reference.

The numpy reference below is written from the TF1 semantics (docs/ARCHITECTURE.md, semantics), with the textbook (not
the numerically stable) cross-entropy formula; the TF1 graph itself is compared in
``parity_tests/test_masked_losses_parity.py``.
"""
import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_layers import (
    MaskedLinearLoss,
    MaskedMSE,
    MaskedSigmoidCrossEntropy,
    masked_linear_loss,
    masked_mse,
    masked_sigmoid_cross_entropy,
)
from tf_layers.masked_losses import priority_frequencies

G = np.random.default_rng(42)


def _np_mask(lengths, time):
    return (np.arange(time)[None] < np.asarray(lengths)[:, None]).astype(np.float64)


def np_mse(t, o, w):
    w = np.broadcast_to(w, t.shape)
    return np.sum(w * (o.astype(np.float64) - t) ** 2) / np.count_nonzero(w)


def np_ce(z, x, m, pos_weight=1.0, count="nonzero_loss"):
    x = x.astype(np.float64)
    losses = pos_weight * z * np.logaddexp(0.0, -x) + (1 - z) * np.logaddexp(0.0, x)
    masked = losses * m
    return masked.sum() / np.count_nonzero(masked if count == "nonzero_loss" else m)


def np_linear(t, o, w, sample_rate, num_freq, low_band_norm="full_mask"):
    w = np.broadcast_to(w, t.shape)
    n = int(2000 / (sample_rate * 0.5) * num_freq)
    l1 = np.abs(t.astype(np.float64) - o) * w
    low_den = w.sum() if low_band_norm == "full_mask" else w[:, :, :n].sum()
    return 0.5 * l1.sum() / w.sum() + 0.5 * l1[:, :, :n].sum() / low_den


def _spec(b, t, c):
    targets = G.standard_normal((b, t, c)).astype(np.float32)
    return targets, (targets + G.standard_normal((b, t, c))).astype(np.float32)


def test_masked_mse_hand_derived_and_numpy():
    # 2 valid frames x 3 channels of error 1 in row 0, 1 frame in row 1: mean 1 whatever the padding
    assert float(masked_mse(np.zeros((2, 4, 3), np.float32), np.ones((2, 4, 3), np.float32), [3, 1],
                            outputs_per_step=2)) == pytest.approx(1.0)
    t, o = _spec(3, 6, 5)
    lengths = [5, 3, 2]  # r = 2: 5 -> 6 frames
    got = masked_mse(t, o, lengths, outputs_per_step=2)
    assert got.dtype == tf.float32 and got.shape == ()
    np.testing.assert_allclose(float(got), np_mse(t, o, _np_mask(lengths, 6)[:, :, None]), rtol=1e-6)
    # explicit weights: the divisor counts non-zero weights (SUM_BY_NONZERO_WEIGHTS), not their sum
    w = G.choice([0.0, 0.5, 1.0], size=(3, 6)).astype(np.float32)
    for mask in (w, w[:, :, None], np.repeat(w[:, :, None], 5, axis=2)):
        np.testing.assert_allclose(float(masked_mse(t, o, None, outputs_per_step=2, mask=mask)),
                                   np_mse(t, o, w[:, :, None]), rtol=1e-6)


def test_masked_sigmoid_cross_entropy_numpy_and_count_quirk():
    z = (G.uniform(size=(3, 9)) < 0.4).astype(np.float32)
    x = (2.0 * G.standard_normal((3, 9))).astype(np.float32)
    lengths = [9, 4, 7]
    m = _np_mask(lengths, 9)
    for pw in (1.0, 20.0):
        for count in ("nonzero_loss", "mask"):
            got = masked_sigmoid_cross_entropy(z, x, lengths, outputs_per_step=3, pos_weight=pw, count=count)
            np.testing.assert_allclose(float(got), np_ce(z, x, m, pw, count), rtol=1e-6)
    # hand-derived quirk: a loss of exactly 0 (logit 120, label 1) leaves the seed's divisor
    z1, x1 = np.array([[1.0, 1.0]], np.float32), np.array([[120.0, 0.0]], np.float32)
    seed = masked_sigmoid_cross_entropy(z1, x1, [2], outputs_per_step=1)
    fixed = masked_sigmoid_cross_entropy(z1, x1, [2], outputs_per_step=1, count="mask")
    np.testing.assert_allclose([float(seed), float(fixed)], [np.log(2.0), np.log(2.0) / 2], rtol=1e-6)


def test_zero_counts_give_zero_not_nan_with_finite_gradients():
    z, x = tf.constant([[1.0, 0.0]]), tf.constant([[120.0, 3.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = masked_sigmoid_cross_entropy(z, x, None, outputs_per_step=1, mask=[[1.0, 0.0]])  # only loss 0 valid
    assert float(value) == 0.0
    np.testing.assert_array_equal(np.asarray(tape.gradient(value, x)), 0.0)
    zeros = np.zeros((2, 2, 3), np.float32)
    empty = np.zeros((2, 2), np.float32)
    assert float(masked_mse(zeros, zeros + 1, None, outputs_per_step=2, mask=empty)) == 0.0
    assert float(masked_linear_loss(zeros, zeros + 1, None, outputs_per_step=2, sample_rate=8000, mask=empty)) == 0.0
    assert float(masked_mse(zeros[:, :0], zeros[:, :0], [0, 0], outputs_per_step=2)) == 0.0  # no frames at all


def test_masked_linear_loss_numpy_and_priority_bins():
    assert priority_frequencies(22050, 1025) == 185  # int(185.94...)
    assert priority_frequencies(16000, 401) == 100
    # hand-derived: 4 bins, n = int(2000 / 4000 * 4) = 2; |error| 1 on bins 0-1, 3 on bins 2-3
    t = np.zeros((1, 2, 4), np.float32)
    o = np.array([[[1, 1, 3, 3], [1, 1, 3, 3]]], np.float32)
    # full mask: 0.5 * 16/8 + 0.5 * 4/8 = 1.25; low-band mask: 0.5 * 2 + 0.5 * 4/4 = 1.5
    assert float(masked_linear_loss(t, o, [2], outputs_per_step=1, sample_rate=8000)) == pytest.approx(1.25)
    assert float(masked_linear_loss(t, o, [2], outputs_per_step=1, sample_rate=8000,
                                    low_band_norm="low_band_mask")) == pytest.approx(1.5)
    t, o = _spec(3, 8, 33)
    lengths = [8, 3, 6]
    for sr, norm in ((22050, "full_mask"), (8000, "low_band_mask")):
        got = masked_linear_loss(t, o, lengths, outputs_per_step=4, sample_rate=sr, low_band_norm=norm)
        np.testing.assert_allclose(float(got), np_linear(t, o, _np_mask(lengths, 8)[:, :, None], sr, 33, norm),
                                   rtol=1e-6)
    # num_freq is the hparam, independent of the channel count
    got = masked_linear_loss(t, o, lengths, outputs_per_step=4, sample_rate=22050, num_freq=1025)
    np.testing.assert_allclose(float(got), np_linear(t, o, _np_mask(lengths, 8)[:, :, None], 22050, 1025), rtol=1e-6)


_T, _O = np.zeros((2, 4, 3), np.float32), np.ones((2, 4, 3), np.float32)


@pytest.mark.parametrize("args,kwargs,fragment", [
    ((_T, _O, [5, 1]), {}, "`targets_lengths` holds a length longer"),
    ((_T, _O, [-1, 4]), {}, "`targets_lengths` must hold lengths >= 0"),
    ((_T, _O, [1, 1]), {}, "rounded up to a multiple of outputs_per_step=2"),
    ((_T, _O, [4, 1, 2]), {}, "`targets_lengths` has 3 entries"),
    ((_T, _O, np.array([4.0, 1.0])), {}, "`targets_lengths`"),
    ((_T, _O, None), {}, "`targets_lengths`"),
    ((_T, _O, [4, 1]), {"outputs_per_step": 0}, "`outputs_per_step`"),
    ((_T[:, :, 0], _O[:, :, 0], [4, 1]), {}, "`targets` must have rank 3"),
    ((_T, _O[:, :3], [4, 1]), {}, "`outputs` must have the shape of `targets`"),
    ((_T, _O[:, :, :1], [4, 1]), {}, "no broadcasting"),
    ((_T, _O, None), {"mask": np.ones((2, 3), np.float32)}, "`mask`"),
    ((_T, _O, None), {"mask": np.ones((2, 4, 2), np.float32)}, "`mask`"),
    ((_T.astype(np.int32), _O, [4, 1]), {}, "floating"),
])
def test_bad_input_raises_value_error_naming_the_argument(args, kwargs, fragment):
    kwargs = {"outputs_per_step": 2, **kwargs}
    with pytest.raises(ValueError) as err:
        masked_mse(*args, **kwargs)
    assert fragment in str(err.value)
    if "mask" not in kwargs and "rank 3" not in fragment:  # the other losses share the checks
        with pytest.raises(ValueError, match="masked_linear_loss"):
            masked_linear_loss(*args, sample_rate=8000, **kwargs)


def test_cross_entropy_and_linear_specific_bad_arguments():
    z = np.zeros((1, 2), np.float32)
    with pytest.raises(ValueError, match="`count`"):
        masked_sigmoid_cross_entropy(z, z, [2], outputs_per_step=1, count="all")
    with pytest.raises(ValueError, match="`mask`"):
        masked_sigmoid_cross_entropy(z, z, None, outputs_per_step=1, mask=np.ones((1, 2, 1), np.float32))
    with pytest.raises(ValueError, match="`targets` must have rank 2"):
        masked_sigmoid_cross_entropy(z[:, :, None], z[:, :, None], [2], outputs_per_step=1)
    with pytest.raises(ValueError, match="`sample_rate`"):
        masked_linear_loss(_T, _O, [4, 1], outputs_per_step=2, sample_rate=0)
    with pytest.raises(ValueError, match="`low_band_norm`"):
        masked_linear_loss(_T, _O, [4, 1], outputs_per_step=2, sample_rate=8000, low_band_norm="low")


def test_tf_function_unknown_shapes_and_run_time_assertions():
    spec3 = tf.TensorSpec([None, None, None], tf.float32)
    fn = tf.function(lambda t, o, lengths: masked_mse(t, o, lengths, outputs_per_step=3),
                     input_signature=[spec3, spec3, tf.TensorSpec([None], tf.int32)])
    for b, time, c in ((2, 6, 3), (1, 3, 5), (4, 9, 2)):
        t, o = _spec(b, time, c)
        lengths = np.array([time - 2] + [1] * (b - 1), np.int32)
        np.testing.assert_allclose(float(fn(t, o, lengths)), np_mse(t, o, _np_mask(lengths, time)[:, :, None]),
                                   rtol=1e-6)
    t, o = _spec(2, 6, 3)
    for lengths, message in (([7, 1], "holds a length longer"), ([3, 1], "rounded up to a multiple"),
                             ([6, -1], "lengths >= 0"), ([6, 1, 1], "targets_lengths")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            fn(t, o, np.array(lengths, np.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`outputs` must have the shape"):
        fn(t, o[:, :3], np.array([6, 1], np.int32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs_compute_in_float32_long_sequence(dtype):
    b, time, c = 2, 2000, 1025
    t32, o32 = _spec(b, time, c)
    lengths = np.array([2000, 1234], np.int32)
    t16, o16 = tf.cast(t32, dtype), tf.cast(o32, dtype)
    if dtype == "float16":  # a float16 computation overflows at this size
        assert not np.isfinite(float(tf.reduce_sum(tf.square(o16 - t16))))
    z32 = (G.uniform(size=(b, time)) < 0.1).astype(np.float32)
    x32 = (3 * G.standard_normal((b, time))).astype(np.float32)
    cases = [
        (masked_mse, (t16, o16), (t32, o32), {}),
        (masked_linear_loss, (t16, o16), (t32, o32), {"sample_rate": 22050}),
        (masked_sigmoid_cross_entropy, (tf.cast(z32, dtype), tf.cast(x32, dtype)), (z32, x32), {"pos_weight": 5.0}),
    ]
    for fn, low, full, kw in cases:
        got = fn(*low, lengths, outputs_per_step=2, **kw)
        assert got.dtype == tf.float32 and np.isfinite(float(got)), fn.__name__
        want_same_inputs = fn(*[tf.cast(a, tf.float32) for a in low], lengths, outputs_per_step=2, **kw)
        want = fn(*full, lengths, outputs_per_step=2, **kw)
        np.testing.assert_allclose(float(got), float(want_same_inputs), rtol=1e-6, err_msg=fn.__name__)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-3, err_msg=fn.__name__)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_loss_classes_under_mixed_precision_policy(policy):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        t, o = _spec(2, 6, 4)
        lengths = np.array([6, 3], np.int32)
        dense = keras.layers.Dense(4)
        low = dense(o)  # float16 / bfloat16 output of a mixed-precision layer
        assert low.dtype == keras.config.dtype_policy().compute_dtype
        value = MaskedLinearLoss(2, sample_rate=8000)((t, lengths), low)
        assert value.dtype == tf.float32 and np.isfinite(float(value))
        ref = np_linear(t, np.asarray(tf.cast(low, tf.float32)), _np_mask(lengths, 6)[:, :, None], 8000, 4)
        np.testing.assert_allclose(float(value), ref, rtol=1e-5)
    finally:
        keras.config.set_dtype_policy(previous)


_CLASSES = [
    (MaskedMSE, dict(outputs_per_step=2)),
    (MaskedSigmoidCrossEntropy, dict(outputs_per_step=3, pos_weight=4.0, count="mask")),
    (MaskedLinearLoss, dict(outputs_per_step=2, sample_rate=16000, num_freq=9, low_band_norm="low_band_mask")),
]


@pytest.mark.parametrize("cls,kwargs", _CLASSES)
def test_loss_class_config_round_trip_registration_and_conventions(cls, kwargs):
    loss = cls(**kwargs, packed=True, name="my_loss")
    config = loss.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config and config["name"] == "my_loss" and config["packed"] is True
    ser = keras.saving.serialize_keras_object(loss)
    assert ser["registered_name"] == f"speechblocks>{cls.__name__}"
    assert keras.saving.deserialize_keras_object(ser).get_config() == config

    r = kwargs["outputs_per_step"]
    lengths = np.array([6, 4, 1], np.int32)
    if cls is MaskedSigmoidCrossEntropy:
        t = (G.uniform(size=(3, 6)) < 0.3).astype(np.float32)
        o = G.standard_normal((3, 6)).astype(np.float32)
        fn_kw = dict(pos_weight=4.0, count="mask")
        fn = masked_sigmoid_cross_entropy
    else:
        t, o = _spec(3, 6, 9)
        fn_kw = {k: v for k, v in kwargs.items() if k != "outputs_per_step"}
        fn = masked_mse if cls is MaskedMSE else masked_linear_loss
    want = float(fn(t, o, lengths, outputs_per_step=r, **fn_kw))
    mask = _np_mask(lengths, 6).astype(np.float32)
    plain = cls(**kwargs)
    np.testing.assert_allclose(float(plain((t, lengths), o)), want, rtol=1e-6)  # (targets, lengths)
    np.testing.assert_allclose(float(loss(cls.pack(t, lengths), o)), want, rtol=1e-6)  # packed y_true
    np.testing.assert_allclose(float(plain(t, o, sample_weight=mask)), want, rtol=1e-6)  # mask as sample_weight
    with pytest.raises(ValueError, match="no lengths and no mask"):
        plain(t, o)
    with pytest.raises(ValueError, match="`reduction`"):
        cls(**kwargs, reduction="none")
    with pytest.raises(ValueError, match="float32 or float64"):
        cls.pack(tf.cast(t, tf.float16), lengths)
    with pytest.raises(ValueError, match="`outputs_per_step`"):
        cls(**{**kwargs, "outputs_per_step": 0})


def test_fit_evaluate_with_packed_targets_and_sample_weight_and_safe_mode_reload():
    x = G.standard_normal((4, 6, 3)).astype(np.float32)
    y = G.standard_normal((4, 6, 2)).astype(np.float32)
    lengths = np.array([6, 3, 5, 1], np.int32)
    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer="sgd", loss=MaskedMSE(2, packed=True))
    packed = np.asarray(MaskedMSE.pack(y, lengths))
    want = np_mse(y, np.asarray(model(x)), _np_mask(lengths, 6)[:, :, None])
    np.testing.assert_allclose(model.evaluate(x, packed, batch_size=4, verbose=0), want, rtol=1e-5)
    history = model.fit(x, packed, batch_size=4, epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(history)) and history[1] < history[0]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded.loss, MaskedMSE) and loaded.loss.get_config() == model.loss.get_config()
    np.testing.assert_allclose(loaded.evaluate(x, packed, batch_size=4, verbose=0),
                               model.evaluate(x, packed, batch_size=4, verbose=0), rtol=1e-6)
    model.compile(optimizer="sgd", loss=MaskedMSE(2))
    mask = _np_mask(lengths, 6).astype(np.float32)
    want = np_mse(y, np.asarray(model(x)), mask[:, :, None])
    np.testing.assert_allclose(model.evaluate(x, y, sample_weight=mask, batch_size=4, verbose=0), want, rtol=1e-5)


def test_float64_inputs_compute_in_float64():
    t, o = _spec(2, 4, 3)
    got = masked_mse(t.astype(np.float64), o.astype(np.float64), [4, 2], outputs_per_step=2)
    assert got.dtype == tf.float64
    np.testing.assert_allclose(float(got), np_mse(t.astype(np.float64), o.astype(np.float64),
                                                  _np_mask([4, 2], 4)[:, :, None]), rtol=1e-12)
