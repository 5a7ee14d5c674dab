"""``run_keras_layer_test``: the checks every speechblocks Keras layer gets for free.

config round-trip, ``.keras`` save/load in safe mode, ``tf.function`` with unknown batch and time,
dtype policies (mixed_float16 / mixed_bfloat16: float32 variables, outputs in the compute dtype, no
NaN), ``training=`` honoured, bad input answered by a ``ValueError``.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf


def _flat(x):
    return [np.asarray(t) for t in tf.nest.flatten(x)]


def _shapes(s):
    """A shape or a list of shapes -> list of shapes."""
    if isinstance(s, (tuple, list)) and all(isinstance(d, (int, type(None))) for d in s):
        return [tuple(s)]
    return [tuple(x) for x in s]


def _assert_close(a, b, atol, what):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb), what
    for u, v in zip(fa, fb):
        np.testing.assert_allclose(u.astype(np.float64), v.astype(np.float64), atol=atol, rtol=0, err_msg=what)


def run_keras_layer_test(
    layer_cls,
    init_kwargs: dict,
    make_inputs: Callable[[int, int], Sequence],
    expected_output_shape: Callable[[int, int], object] | None = None,
    call_kwargs: dict | None = None,
    bad_inputs: Sequence[tuple[Sequence, str]] = (),
    deterministic_in_inference: bool = True,
    changes_in_training: bool = False,
    test_saving: bool = True,
    test_mixed_precision: bool = True,
    sizes: Sequence[tuple[int, int]] = ((2, 7), (1, 1), (3, 4)),
    atol: float = 1e-6,
    input_specs: Sequence[tf.TensorSpec] | None = None,
):
    """Runs the shared layer checks.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor keywords.
        make_inputs: ``(batch, time) -> list of positional call arguments`` (numpy arrays).
        expected_output_shape: ``(batch, time) -> shape`` (or a nest of shapes) of the output.
        call_kwargs: extra call keywords (not ``training``).
        bad_inputs: ``(args, message_fragment)``: each call must raise ``ValueError`` whose message
            contains the fragment (typically the argument name).
        deterministic_in_inference: two inference calls must agree exactly.
        changes_in_training: ``training=True`` must change the output (dropout, batch statistics).
        test_saving: save a functional model with the layer as ``.keras``, reload in safe mode.
        test_mixed_precision: run under mixed_float16 and mixed_bfloat16.
        sizes: ``(batch, time)`` pairs to call with, under one ``tf.function`` with unknown dims.
        input_specs: the ``tf.TensorSpec`` of each positional argument for that ``tf.function``;
            default: every axis unknown except the last (channels).
    """
    call_kwargs = dict(call_kwargs or {})
    layer = layer_cls(**init_kwargs)
    args = make_inputs(*sizes[0])
    y = layer(*args, training=False, **call_kwargs)
    if expected_output_shape is not None:
        for t, s in zip(tf.nest.flatten(y), _shapes(expected_output_shape(*sizes[0]))):
            assert tuple(t.shape) == tuple(s), f"output shape {tuple(t.shape)} != expected {tuple(s)}"
    for t in tf.nest.flatten(y):
        assert np.all(np.isfinite(np.asarray(t))), "non-finite output"
    if deterministic_in_inference:
        _assert_close(layer(*args, training=False, **call_kwargs), y, 0.0, "inference is not deterministic")

    # config round trip: from_config(get_config()) reproduces the config and, with copied weights, the output
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config, "get_config() does not round-trip"
    clone(*args, training=False, **call_kwargs)
    clone.set_weights(layer.get_weights())
    if deterministic_in_inference:
        _assert_close(clone(*args, training=False, **call_kwargs), y, atol, "clone with copied weights differs")
    ser = keras.saving.serialize_keras_object(layer)
    assert ser["registered_name"].startswith("speechblocks>"), "layer is not registered in package speechblocks"
    keras.saving.deserialize_keras_object(ser)

    # tf.function with unknown batch and time: one trace for every size
    specs = input_specs or [tf.TensorSpec([None] * (np.ndim(a) - 1) + list(np.shape(a)[-1:]) if np.ndim(a) >= 2 else [None] * np.ndim(a),
                           tf.as_dtype(np.asarray(a).dtype)) for a in args]
    fn = tf.function(lambda *a: layer(*a, training=False, **call_kwargs), input_signature=specs)
    for b, t in sizes:
        a = make_inputs(b, t)
        got = fn(*a)
        if deterministic_in_inference:
            _assert_close(got, layer(*a, training=False, **call_kwargs), 1e-5, f"tf.function differs at {(b, t)}")
        if expected_output_shape is not None:
            for g, s in zip(tf.nest.flatten(got), _shapes(expected_output_shape(b, t))):
                assert tuple(g.shape) == tuple(s)

    # training= honoured
    if changes_in_training:
        yt = layer(*args, training=True, **call_kwargs)
        diff = max(float(np.max(np.abs(u - v))) for u, v in zip(_flat(yt), _flat(y)))
        assert diff > 0, "training=True gives the inference output"

    # saving as .keras, reloaded in safe mode
    if test_saving:
        inputs = [keras.Input(batch_shape=s.shape, dtype=s.dtype) for s in specs]
        fresh = layer_cls.from_config(config)
        model = keras.Model(inputs, fresh(*inputs, **call_kwargs))
        ref = model(args, training=False)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.keras")
            model.save(path)
            loaded = keras.saving.load_model(path, safe_mode=True)
        if deterministic_in_inference:
            _assert_close(loaded(args, training=False), ref, atol, "reloaded .keras model differs")

    # dtype policies
    if test_mixed_precision:
        for policy, dt in (("mixed_float16", tf.float16), ("mixed_bfloat16", tf.bfloat16)):
            mp = layer_cls(**{**init_kwargs, "dtype": policy})
            out = mp(*args, training=False, **call_kwargs)
            for v in mp.weights:
                if v.dtype in ("float16", "bfloat16"):
                    raise AssertionError(f"{policy}: variable {v.path} is {v.dtype}, expected float32")
            float_outs = [t for t in tf.nest.flatten(out) if tf.as_dtype(t.dtype).is_floating]
            assert any(t.dtype == dt for t in float_outs), f"{policy}: outputs are not in {dt.name}"
            for t in float_outs:
                assert np.all(np.isfinite(np.asarray(tf.cast(t, tf.float32)))), f"{policy}: non-finite output"

    # bad input: ValueError naming the argument
    for bad_args, fragment in bad_inputs:
        try:
            layer(*bad_args, training=False, **call_kwargs)
        except ValueError as e:
            assert fragment in str(e), f"error message {str(e)!r} does not mention {fragment!r}"
        else:
            raise AssertionError(f"bad input {[np.shape(a) for a in bad_args]} did not raise ValueError")
    return layer
