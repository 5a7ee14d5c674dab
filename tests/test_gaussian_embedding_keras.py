import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.deploy_limits import checked_elsewhere
from tests.helpers.keras_layer_test import run_keras_layer_test
from tf_layers import GaussianEmbedding, repeat_merge
from tf_layers.torch_exchange import TorchStateDictError

NUM_LABELS, PAD, BLANK, TOKENS = 12, 0, 1, 4


def _batch(b, t, n=TOKENS):
    """Blank-interleaved ``(b, 2n+1)`` int32 ids and durations (``t`` scales the durations); ragged rows."""
    rng = np.random.default_rng(b * 10 + t)
    text = rng.integers(2, NUM_LABELS, (b, 2 * n + 1)).astype(np.int32)
    text[:, ::2] = BLANK
    durs = rng.integers(0, t + 2, (b, 2 * n + 1)).astype(np.int32)
    for i in range(1, b):
        keep = 2 * max(0, n - 2 * i) + 1
        text[i, keep:] = PAD
        durs[i, keep:] = 0
    return text, durs


def _inputs(b, t):
    return list(_batch(b, t))


def _frames(b, t):
    return int(_batch(b, t)[1].sum(1).max())


@pytest.mark.parametrize("blank_free,merge_blanks", [(True, False), (False, True)])
def test_layer_contract(blank_free, merge_blanks):
    text, durs = _batch(2, 3)
    neg = durs.copy()
    neg[1, 2] = -1
    bad_ids = text.copy()
    bad_ids[0, 1] = NUM_LABELS
    run_keras_layer_test(
        GaussianEmbedding,
        dict(num_labels=NUM_LABELS, d_emb=5, pad=PAD, merge_blanks=merge_blanks, blank_free=blank_free),
        _inputs,
        expected_output_shape=lambda b, t: (b, _frames(b, t), 5),
        bad_inputs=[
            ([text, neg], "durs"),
            ([text, durs[:, :5]], "durs"),
            ([text[:, :6], durs[:, :6]], "2n+1"),
            ([bad_ids, durs], "text"),
            ([text.astype(np.float32), durs], "text"),
            ([text, durs.astype(np.float32)], "durs"),
            ([text[0], durs[0]], "text"),
        ],
        **({} if blank_free else checked_elsewhere("the blank_free=True case", ("export", "xla", "litert"))),
    )


def test_unknown_batch_and_length_in_tf_function():
    layer = GaussianEmbedding(NUM_LABELS, 3, PAD)
    spec = tf.TensorSpec([None, None], tf.int32)
    fn = tf.function(lambda a, b: layer(a, b), input_signature=[spec, spec])
    for b, n in ((2, 4), (1, 0), (3, 7)):
        rng = np.random.default_rng(n)
        text = rng.integers(1, NUM_LABELS, (b, 2 * n + 1)).astype(np.int32)
        durs = rng.integers(0, 5, (b, 2 * n + 1)).astype(np.int32)
        np.testing.assert_allclose(fn(text, durs).numpy(), layer(text, durs).numpy(), atol=1e-6)
    # in graph mode the value checks are run-time assertions that name the argument
    text, durs = _batch(2, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="durs"):
        fn(text, -durs - 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="2n\\+1"):
        fn(text[:, :6], durs[:, :6])
    with pytest.raises(tf.errors.InvalidArgumentError, match="text"):
        fn(text + NUM_LABELS, durs)


def test_hand_derived_two_tokens_and_padded_row():
    # standard TalkNet, tokens 3 and 4 lasting one frame each: sigma 0.5, centres 0.5 / 1.5, frame times
    # 0.5 / 1.5, so each frame weighs its own token by 1 / (1 + e^-2) and the other by the rest
    layer = GaussianEmbedding(6, 6, PAD, blank_free=False)
    layer.load_torch_state_dict({"embed.weight": np.eye(6, dtype=np.float32)})
    u = layer(np.array([[3, 4], [5, PAD]]), np.array([[1, 1], [1, 0]])).numpy()
    p = 1.0 / (1.0 + math.exp(-2.0))
    expect = np.zeros((2, 2, 6))
    expect[0, 0, 3], expect[0, 0, 4] = p, 1 - p
    expect[0, 1, 3], expect[0, 1, 4] = 1 - p, p
    expect[1, 0, 5] = 1.0
    expect[1, 1, PAD] = 1.0  # past the row's end: the last (pad) column
    np.testing.assert_allclose(u, expect, atol=1e-5)


def test_hand_derived_blank_free_with_merge_blanks():
    # (blank, 3, blank, 4, blank) durations (2, 2, 1, 1, 0) -> blank-free (blank, 3, 4) with (2, 3, 1), then
    # 2 pads; merge_blanks keeps the odd columns: token 3 (centre 3.5, sigma 1.5) and the first pad.
    layer = GaussianEmbedding(6, 6, PAD, merge_blanks=True)
    layer.load_torch_state_dict({"embed.weight": np.eye(6, dtype=np.float32)})
    u = layer(np.array([[BLANK, 3, BLANK, 4, BLANK]]), np.array([[2, 2, 1, 1, 0]])).numpy()[0]
    assert u.shape == (6, 6)
    # token 3 is the only column with weight: every frame inside the utterance is all token 3,
    # up to the +1e-6 of the normaliser (the density at frame 0 is phi(2) / 1.5 = 0.036)
    dens = np.array([math.exp(-((t + 0.5 - 3.5) ** 2) / (2 * 1.5 ** 2)) / (1.5 * math.sqrt(2 * math.pi))
                     for t in range(6)])
    np.testing.assert_allclose(u[:, 3], dens / (dens + 1e-6), atol=1e-6)
    np.testing.assert_allclose(np.delete(u, 3, axis=1), 0.0, atol=1e-7)


def test_torch_state_dict_round_trip_and_all_or_nothing_loading():
    src = GaussianEmbedding(NUM_LABELS, 4, PAD)
    sd = src.torch_state_dict()
    assert list(sd) == ["embed.weight"] and sd["embed.weight"].shape == (NUM_LABELS, 4)
    dst = GaussianEmbedding(NUM_LABELS, 4, PAD)
    assert not dst.built
    dst.load_torch_state_dict(sd)  # builds itself
    text, durs = _batch(3, 2)
    np.testing.assert_array_equal(dst(text, durs).numpy(), src(text, durs).numpy())

    before = dst.torch_state_dict()["embed.weight"]
    with pytest.raises(TorchStateDictError) as err:
        dst.load_torch_state_dict({"embed.weight": np.zeros((NUM_LABELS, 5)), "extra.bias": np.zeros(2)})
    msg = str(err.value)
    assert "embed.weight" in msg and "[12, 5]" in msg and "extra.bias" in msg
    with pytest.raises(ValueError, match="missing key 'embed.weight'"):
        dst.load_torch_state_dict({})
    np.testing.assert_array_equal(dst.torch_state_dict()["embed.weight"], before)  # nothing assigned
    report = dst.load_torch_state_dict({"embed.weight": before + 1, "extra": np.zeros(1)}, strict=False)
    assert report.unexpected_keys == ["extra"] and report.missing_keys == []
    np.testing.assert_array_equal(dst.torch_state_dict()["embed.weight"], before + 1)


def test_mixed_precision_keeps_weights_accurate():
    # weights are computed in float32 even under mixed_float16 (frame times in the thousands)
    ref = GaussianEmbedding(NUM_LABELS, 4, PAD)
    mp = GaussianEmbedding(NUM_LABELS, 4, PAD, dtype="mixed_float16")
    w = np.random.default_rng(0).uniform(-1, 1, (NUM_LABELS, 4)).astype(np.float32)
    ref.load_torch_state_dict({"embed.weight": w})
    mp.load_torch_state_dict({"embed.weight": w})
    text = np.full((1, 41), BLANK, np.int32)
    text[0, 1::2] = np.arange(20) % 10 + 2
    durs = np.full((1, 41), 120, np.int32)  # ~4800 frames
    a, b = ref(text, durs).numpy(), mp(text, durs)
    assert b.dtype == tf.float16 and mp.embed.dtype == "float32"
    np.testing.assert_allclose(b.numpy().astype(np.float32), a, atol=2e-3)


def _loop_repeat_merge(x, reps, pad):
    rows = [np.repeat(x[i], reps[i]) for i in range(x.shape[0])]
    width = max((len(r) for r in rows), default=0)
    out = np.full((x.shape[0], width), pad, dtype=x.dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_repeat_merge_matches_per_row_repeat():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, (6, 9)).astype(np.int32)
    reps = rng.integers(0, 4, (6, 9)).astype(np.int32)
    reps[2] = 0
    np.testing.assert_array_equal(repeat_merge(x, reps, -1).numpy(), _loop_repeat_merge(x, reps, -1))
    spec = tf.TensorSpec([None, None], tf.int32)
    fn = tf.function(lambda a, r: repeat_merge(a, r, -1), input_signature=[spec, spec])
    np.testing.assert_array_equal(fn(x, reps).numpy(), _loop_repeat_merge(x, reps, -1))
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, -reps - 1, 0)
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, reps[:, :3], 0)
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, reps.astype(np.float32), 0)


def test_bad_constructor_arguments_and_config():
    with pytest.raises(ValueError, match="pad"):
        GaussianEmbedding(5, 4, pad=7)
    layer = GaussianEmbedding(9, 4, 2, sigma_c=3.0, merge_blanks=True, blank_free=False)
    cfg = layer.get_config()
    assert {k: cfg[k] for k in ("num_labels", "d_emb", "pad", "sigma_c", "merge_blanks", "blank_free")} == dict(
        num_labels=9, d_emb=4, pad=2, sigma_c=3.0, merge_blanks=True, blank_free=False)
    assert isinstance(keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)),
                      GaussianEmbedding)
