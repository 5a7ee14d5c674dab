import math

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import GumbelVectorQuantizer


def _inputs(b, t):
    return [np.random.default_rng(b * 100 + t).standard_normal((b, t, 6)).astype(np.float32)]


def _np_logits(q, x):
    w = np.asarray(q.weight_proj.kernel, np.float64)  # Keras kernel (in, out)
    bias = np.asarray(q.weight_proj.bias, np.float64)
    return (x.astype(np.float64) @ w + bias).reshape(x.shape[0], x.shape[1], q.groups, q.num_vars)


def test_layer_contract():
    run_keras_layer_test(
        GumbelVectorQuantizer, dict(dim=6, num_vars=5, groups=2, vq_dim=4), _inputs,
        expected_output_shape=lambda b, t: [(b, t, 4), (), ()], changes_in_training=True,
        bad_inputs=[([np.zeros((2, 7), np.float32)], "`x`"), ([np.zeros((2, 7, 3), np.float32)], "(batch, time, 6)"),
                    ([np.zeros((2, 7, 6), np.int32)], "floating")],
    )


@pytest.mark.parametrize("combine_groups", [True, False])
def test_inference_picks_argmax_entries_and_ids(combine_groups):
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4, combine_groups=combine_groups, seed=1)
    (x,) = _inputs(2, 7)
    out, _, temp, ids = q(x, return_ids=True)
    k = _np_logits(q, x).argmax(-1)
    vars_ = np.asarray(q.vars)[0]
    assert vars_.shape == (5 if combine_groups else 10, 2)
    rows = k + (0 if combine_groups else np.arange(2) * 5)
    np.testing.assert_array_equal(np.asarray(out), np.concatenate([vars_[rows[..., 0]], vars_[rows[..., 1]]], -1))
    np.testing.assert_array_equal(np.asarray(ids), k[..., 0] * 5 + k[..., 1])
    assert float(temp) == 2.0


def test_training_with_injected_noise_and_straight_through_gradient():
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4, seed=3)
    (x,) = _inputs(3, 4)
    noise = -np.log(np.random.default_rng(0).exponential(size=(3, 4, 2, 5))).astype(np.float32)
    with tf.GradientTape() as tape:
        out, _, _ = q(x, training=True, gumbel_noise=noise)
        total = tf.reduce_sum(out * tf.range(1.0, 5.0))
    k = (_np_logits(q, x) + noise).argmax(-1)
    vars_ = np.asarray(q.vars)[0]
    np.testing.assert_allclose(np.asarray(out), np.concatenate([vars_[k[..., 0]], vars_[k[..., 1]]], -1), atol=1e-7)
    grad = tape.gradient(total, q.weight_proj.kernel)
    assert grad is not None and float(tf.reduce_sum(tf.abs(grad))) > 0


def test_perplexity_of_uniform_distribution_hand_derived():
    q = GumbelVectorQuantizer(3, 8, groups=2, vq_dim=4)
    q.build()
    q.weight_proj.kernel.assign(np.zeros((3, 16), np.float32))
    _, ppl_loss, _ = q(np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32))
    ppl = 2 / (1 / 8 + 1e-7)
    assert math.isclose(float(ppl_loss), (16 - ppl) / 16, abs_tol=1e-6)


def test_temperature_schedule_is_read_at_run_time_in_tf_function():
    q = GumbelVectorQuantizer(3, 4, temp=(2.0, 0.5, 0.999995), groups=1, vq_dim=2)
    fn = tf.function(lambda x: q(x)[2])
    x = np.zeros((1, 2, 3), np.float32)
    assert float(fn(x)) == 2.0
    q.set_num_updates(100_000)
    assert math.isclose(float(fn(x)), 2.0 * math.exp(100_000 * math.log(0.999995)), rel_tol=1e-6)
    q.set_num_updates(10_000_000)
    assert float(fn(x)) == 0.5 and q.curr_temp == 0.5


def test_time_first_false_and_codebook_sampling():
    a = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4)
    b = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4, time_first=False)
    b.load_torch_state_dict(a.torch_state_dict())
    (x,) = _inputs(2, 7)
    np.testing.assert_array_equal(np.asarray(b(x.transpose(0, 2, 1))[0]), np.asarray(a(x)[0]).transpose(0, 2, 1))
    z = a.sample_from_codebook(2, 3, indices=np.array([[0, 6, 24], [13, 1, 5]]))
    vars_ = np.asarray(a.vars)[0]
    np.testing.assert_array_equal(np.asarray(z[1, 0]), np.concatenate([vars_[2], vars_[3]]))  # 13 = 2*5 + 3
    np.testing.assert_array_equal(np.asarray(z[0, 2]), np.concatenate([vars_[4], vars_[4]]))
    assert tuple(a.sample_from_codebook(4, 3).shape) == (4, 3, 4)
    with pytest.raises(ValueError, match="codebook holds only 25"):
        a.sample_from_codebook(2, 25)


def test_torch_state_dict_layout_and_all_or_nothing_load():
    q = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4)
    sd = q.torch_state_dict()
    assert set(sd) == {"vars", "weight_proj.weight", "weight_proj.bias"}
    assert sd["weight_proj.weight"].shape == (10, 6)
    np.testing.assert_array_equal(sd["weight_proj.weight"], np.asarray(q.weight_proj.kernel).T)
    fresh = GumbelVectorQuantizer(6, 5, groups=2, vq_dim=4)  # unbuilt: builds itself
    fresh.load_torch_state_dict(sd)
    for k, v in fresh.torch_state_dict().items():
        np.testing.assert_array_equal(v, sd[k])
    before = fresh.torch_state_dict()
    bad = {"vars": np.zeros((1, 5, 3)), "weight_proj.weight": sd["weight_proj.weight"] + 1, "extra": np.zeros(2)}
    with pytest.raises(ValueError) as err:
        fresh.load_torch_state_dict(bad)
    msg = str(err.value)
    assert "'vars' has shape [1, 5, 3]" in msg and "weight_proj.bias" in msg and "extra" in msg
    for k, v in fresh.torch_state_dict().items():
        np.testing.assert_array_equal(v, before[k])  # nothing assigned
    missing, unexpected = fresh.load_torch_state_dict({"weight_proj.bias": np.ones(10)}, strict=False)
    assert set(missing) == {"vars", "weight_proj.weight"} and not unexpected
    np.testing.assert_array_equal(np.asarray(fresh.weight_proj.bias), np.ones(10))


def test_initialisation_statistics():
    q = GumbelVectorQuantizer(64, 320, groups=2, vq_dim=128, seed=0)
    q.build()
    w = np.asarray(q.weight_proj.kernel)
    # N(0, 1) draws (Keras' global seed stream: they vary with the tests run before): bounds at 5 standard errors
    # of the sample mean (1/sqrt(n)) and the sample std (1/sqrt(2n)), a false alarm below 1e-6 (2 sigma failed 1 in 20)
    n = w.size
    assert abs(w.mean()) < 5 / np.sqrt(n) and abs(w.std() - 1.0) < 5 / np.sqrt(2 * n)
    assert float(np.abs(np.asarray(q.weight_proj.bias)).max()) == 0.0
    v = np.asarray(q.vars)
    assert v.shape == (1, 320, 64) and v.min() >= 0.0 and v.max() < 1.0 and abs(v.mean() - 0.5) < 0.02
