"""``run_keras_layer_test``: the checks every speechblocks Keras layer gets for free.

config round-trip, ``.keras`` save/load in safe mode, ``tf.function`` with unknown batch and time,
dtype policies (mixed_float16 / mixed_bfloat16: float32 variables, outputs in the compute dtype, no
NaN), ``training=`` honoured, bad input answered by a ``ValueError``, and deployment (inference), each compared
with the in-process layer:

- **SavedModel**: a functional model holding the layer (inputs with unknown batch and time) through
  ``model.export`` (the ``serve`` endpoint), reloaded with ``tf.saved_model.load`` in a **fresh process** that
  never imports speechblocks (one reloader process per test worker, started at the first check, serves every
  layer: one TensorFlow import per worker, not per layer); ``atol``. Nested outputs (RNN states) are exported
  flattened: a serving signature holds a flat list of tensors. Every ``(batch, time)`` of ``sizes``.
- **XLA**: the layer's inference call in ``tf.function(jit_compile=True)`` (unknown batch and time in the signature)
  at the first size (``deploy_atol``; every new size compiles anew, and unknown dims are the other checks' part).
  Training under XLA draws other random numbers than TensorFlow's kernels, so it is compared with fixed
  dropout/zoneout masks, per block, in ``tests/test_export_keras.py``.
- **LiteRT**: the exported SavedModel through ``tf.lite.TFLiteConverter.from_saved_model`` with the TFLite builtin
  ops only, run in the LiteRT interpreter (``ai_edge_litert``; the step is left out when it is not installed) with
  the inputs resized to every size (``deploy_atol``). A layer pinned :class:`SelectOps` converts with
  ``SELECT_TF_OPS`` instead: its flex ops are asserted, and so is the interpreter's refusal to run them (no flex
  delegate in ``ai_edge_litert``).

What a layer cannot do is pinned with a reason (:class:`Skip`, :class:`Fails`, :class:`SelectOps`) in
:data:`LIMITS` (by class name) or by the test's ``export=``/``xla=``/``litert=`` arguments, and the layer's docstring
must say so (``"SavedModel"``, ``"XLA"``, ``"SELECT_TF_OPS"``): a pin that starts working fails the test.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from tests.helpers.deploy_limits import Fails, Limit, Skip, expect_failure


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


# -- deployment checks: what a layer cannot do is pinned with a reason ------------------------------------------

@dataclass(frozen=True)
class SelectOps(Limit):
    """LiteRT: converts only with ``tf.lite.OpsSet.SELECT_TF_OPS`` (TensorFlow kernels, the flex delegate). The
    check converts with builtins + select ops, asserts the model holds the flex ops ``ops`` (TF op names, e.g.
    ``"TensorListReserve"``) and that the LiteRT interpreter, which links no flex delegate, refuses to run it (if an
    interpreter ever runs it, the outputs are compared instead)."""

    ops: tuple[str, ...] = ()


_FLEX = "running needs the flex delegate (TensorFlow kernels), which the LiteRT interpreter does not link"
_TENSOR_LIST = ("TensorListReserve", "TensorListSetItem", "TensorListStack")
_NEW_AXIS = "a new-axis slice (x[:, :, None]) with unknown dims is no TFLite builtin StridedSlice; " + _FLEX

#: documented deployment limits of the current layers: class name -> ``{check: Limit}`` (checks ``"export"``,
#: ``"xla"``, ``"litert"``), or a function ``(init_kwargs, example_args) -> {check: Limit}`` where the limit depends
#: on the configuration; a test's own ``export=``/``xla=``/``litert=`` argument takes precedence
LIMITS: dict[str, dict[str, Limit] | Callable[[dict, Sequence], dict[str, Limit]]] = {
    # XLA: the masked formulation runs under jit_compile; LiteRT: the default (shrinking) loop is exported here, the
    # masked one converts to builtins (tests/test_encoder_rnn_keras.py, tests/test_litert.py)
    "EncoderRNN": dict(
        litert=SelectOps("the default loop's TensorList ops (unknown batch), InvertPermutation; " + _FLEX,
                         ops=_TENSOR_LIST + ("InvertPermutation",))),
    "Tacotron2Decoder": dict(
        # XLA silently returns the dynamic-size TensorArrays of the free-running loop empty: zero steps, no error
        xla=Fails("the free-running loop's dynamic-size TensorArrays come back empty under XLA",
                  match="output shape (2, 0, 8) != (2, 5, 8)"),
        litert=SelectOps("TensorList ops of the decoder loop; " + _FLEX, ops=_TENSOR_LIST)),
    "Tacotron1Decoder": dict(
        xla=Fails("the free-running loop's dynamic-size TensorArrays come back empty under XLA",
                  match="output shape (2, 0, 12) != (2, 3, 12)"),
        litert=SelectOps("TensorList ops of the decoder loop; " + _FLEX, ops=_TENSOR_LIST)),
    "CBHG": dict(litert=SelectOps("TensorList ops of the GRU loop (unknown batch); " + _FLEX, ops=_TENSOR_LIST)),
    "SpeakerEncoder": dict(litert=SelectOps("TensorList ops of the LSTM loop (unknown batch); " + _FLEX,
                                            ops=_TENSOR_LIST)),
    "DecoderRNN": lambda kwargs, args: dict(litert=SelectOps(
        "the sequence form's loop: TensorList ops (unknown batch); " + _FLEX, ops=_TENSOR_LIST))
        if np.ndim(args[0]) == 3 else {},
    "ContrastiveLoss": dict(litert=SelectOps(_NEW_AXIS, ops=("StridedSlice",))),
    "TAC": dict(litert=SelectOps(_NEW_AXIS, ops=("StridedSlice",))),
    "GaussianEmbedding": dict(litert=SelectOps("UpperBound (tf.searchsorted) is no TFLite builtin; " + _NEW_AXIS,
                                               ops=("UpperBound", "StridedSlice"))),
    "Prenet": lambda kwargs, args: dict(litert=SelectOps(
        "the always-on dropout draws stateless random numbers (no TFLite builtin); " + _FLEX,
        ops=("StatelessRandomUniformV2",))) if kwargs.get("drop_rate", 0.5) > 0 else {},
}

#: ``SPEECHBLOCKS_DEPLOY_CHECKS=0`` leaves the deployment checks out (a quick local run)
DEPLOY_CHECKS = os.environ.get("SPEECHBLOCKS_DEPLOY_CHECKS", "1") != "0"


def _assert_documented(layer_cls, limit: Limit | None, word: str, what: str) -> None:
    if isinstance(limit, (Fails, SelectOps)):
        doc = layer_cls.__doc__ or ""
        assert word in doc, (f"{layer_cls.__name__} is pinned {type(limit).__name__} under {what} ({limit.reason}) "
                             f"but its docstring does not mention {word!r}")


class _Reloader:
    """The fresh process that reloads SavedModels (``saved_model_reload.py``), one per test worker."""

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_model_reload.py")

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="speechblocks_export_")
        self.log = open(os.path.join(self.root, "reloader.log"), "w+")  # noqa: SIM115 -- closed in close()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
        # the child removes ``root`` once its stdin closes: xdist workers may end without running atexit
        self.proc = subprocess.Popen([sys.executable, self.script, self.root], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=self.root, env=env)
        self.count = 0
        atexit.register(self.close)

    def new_dir(self) -> str:
        self.count += 1
        return os.path.join(self.root, f"m{self.count}")

    def _reply(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.log.seek(0)
                raise AssertionError(f"the SavedModel reloader process died:\n{self.log.read()[-4000:]}")
            if line.startswith("RELOAD:"):
                return json.loads(line[len("RELOAD:"):])

    def run(self, directory: str, calls: Sequence[Sequence[np.ndarray]] | Sequence[dict], endpoint="serve"):
        """Every input set of ``calls`` (lists: one list argument; dicts: keywords) through the reloaded endpoint;
        returns the flattened outputs of each call (numpy)."""
        if not getattr(self, "ready", False):
            assert self._reply().get("ready"), "the SavedModel reloader did not start"
            self.ready = True
        kwargs = bool(calls) and isinstance(calls[0], dict)
        arrays = {}
        for c, call in enumerate(calls):
            items = call.items() if kwargs else enumerate(call)
            arrays.update({f"c{c}_{k}": np.asarray(v) for k, v in items})
        inputs, outputs = directory + ".in.npz", directory + ".out.npz"
        np.savez(inputs, **arrays)
        request = dict(dir=directory, endpoint=endpoint, inputs=inputs, outputs=outputs, calls=len(calls),
                       kwargs=kwargs)
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        assert reply["ok"], f"fresh-process tf.saved_model.load of {directory} failed:\n{reply['error']}"
        with np.load(outputs) as data:
            got = [[data[f"c{c}_{j}"] for j in range(sum(k.startswith(f"c{c}_") for k in data.files))]
                   for c in range(len(calls))]
        for path in (inputs, outputs):
            os.remove(path)
        return got

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


_RELOADER: _Reloader | None = None


def saved_model_reloader() -> _Reloader:
    """The worker's fresh reloader process (started on first use; TensorFlow imports there meanwhile)."""
    global _RELOADER
    if _RELOADER is None or _RELOADER.proc.poll() is not None:
        _RELOADER = _Reloader()
    return _RELOADER


def _compare(got, want, atol, deterministic, what):
    want = _flat(want)
    got = [np.asarray(g) for g in got]
    assert len(got) == len(want), f"{what}: {len(got)} outputs, in-process model has {len(want)}"
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: output shape {g.shape} != {w.shape}"
        if deterministic:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), atol=atol, rtol=0, err_msg=what)


def _litert_check(directory, calls, wants, limit, atol, deterministic):
    """The SavedModel at ``directory`` through the TFLite converter, run in the LiteRT interpreter."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # optional: ``pip install ai-edge-litert`` (setup.cfg extra ``export``)
        return
    converter = tf.lite.TFLiteConverter.from_saved_model(directory)
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if isinstance(limit, SelectOps):
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    converter.target_spec.supported_ops = ops
    if isinstance(limit, Fails):
        expect_failure(limit, "LiteRT conversion", converter.convert)
        return
    blob = converter.convert()
    if isinstance(limit, SelectOps):
        assert b"Flex" in blob, f"pinned SelectOps ({limit.reason}) but the model holds no flex op: update the pin"
        missing = [op for op in limit.ops if f"Flex{op}".encode() not in blob]
        assert not missing, f"pinned SelectOps: the converted model holds no flex op {missing}"
    interpreter = Interpreter(model_content=blob)
    signature = interpreter.get_signature_list()["serving_default"]
    runner = interpreter.get_signature_runner("serving_default")
    for call, want in zip(calls, wants):
        feed = {name: np.asarray(a) for name, a in zip(sorted(signature["inputs"]), call)}
        try:
            out = runner(**feed)
        except RuntimeError as e:
            if isinstance(limit, SelectOps) and "Flex delegate" in str(e):
                return  # the documented limit: running needs the flex delegate (TensorFlow kernels)
            raise
        got = [out[k] for k in sorted(out, key=lambda k: int(k.rsplit("_", 1)[-1]))]
        _compare(got, want, atol, deterministic, f"LiteRT differs at {tuple(np.shape(call[0]))[:2]}")


def _xla_check(layer, make_inputs, sizes, specs, call_kwargs, limit, atol, deterministic):
    """The layer's inference call in ``tf.function(jit_compile=True)`` (unknown dims in the signature) at the first
    size (each new size compiles again: seconds per layer)."""
    if isinstance(limit, Fails):  # the failure may be an exception or a wrong output
        expect_failure(limit, "XLA (jit_compile=True)", lambda: _xla_check(
            layer, make_inputs, sizes, specs, call_kwargs, None, atol, deterministic))
        return
    fn = tf.function(lambda *a: layer(*a, training=False, **call_kwargs), input_signature=specs, jit_compile=True)
    a = make_inputs(*sizes[0])
    _compare(_flat(fn(*a)), layer(*a, training=False, **call_kwargs), atol, deterministic,
             f"XLA differs at {sizes[0]}")


def _deploy_limits(layer_cls, init_kwargs, make_inputs, sizes, export, xla, litert):
    """The deployment pins: the test's, else :data:`LIMITS`'; every one documented in the layer's docstring."""
    pins = LIMITS.get(layer_cls.__name__, {})
    if callable(pins):
        pins = pins(init_kwargs, make_inputs(*sizes[0]))
    export, xla, litert = (given if given is not None else pins.get(name)
                           for name, given in (("export", export), ("xla", xla), ("litert", litert)))
    for name, limit in (("export", export), ("xla", xla), ("litert", litert)):
        if limit is not None and not isinstance(limit, Limit):
            raise TypeError(f"{name}= takes None or a Limit with a reason (Skip, Fails, SelectOps); got {limit!r}")
    if not DEPLOY_CHECKS:
        export = xla = Skip("SPEECHBLOCKS_DEPLOY_CHECKS=0")
    _assert_documented(layer_cls, export, "SavedModel", "SavedModel export")
    _assert_documented(layer_cls, xla, "XLA", "XLA")
    _assert_documented(layer_cls, litert, "SELECT_TF_OPS" if isinstance(litert, SelectOps) else "LiteRT", "LiteRT")
    return export, xla, litert


def _check_inference(layer, args, call_kwargs, expected_output_shape, size, deterministic):
    """The inference output at the first size: its shape, finite, the same at a second call; returns it."""
    y = layer(*args, training=False, **call_kwargs)
    if expected_output_shape is not None:
        for t, s in zip(tf.nest.flatten(y), _shapes(expected_output_shape(*size))):
            assert tuple(t.shape) == tuple(s), f"output shape {tuple(t.shape)} != expected {tuple(s)}"
    for t in tf.nest.flatten(y):
        assert np.all(np.isfinite(np.asarray(t))), "non-finite output"
    if deterministic:
        _assert_close(layer(*args, training=False, **call_kwargs), y, 0.0, "inference is not deterministic")
    return y


def _check_config_round_trip(layer_cls, layer, args, call_kwargs, y, atol, deterministic):
    """from_config(get_config()) reproduces the config and, with copied weights, the output; the layer is registered
    in package speechblocks. Returns the config."""
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config, "get_config() does not round-trip"
    clone(*args, training=False, **call_kwargs)
    clone.set_weights(layer.get_weights())
    if deterministic:
        _assert_close(clone(*args, training=False, **call_kwargs), y, atol, "clone with copied weights differs")
    ser = keras.saving.serialize_keras_object(layer)
    assert ser["registered_name"].startswith("speechblocks>"), "layer is not registered in package speechblocks"
    keras.saving.deserialize_keras_object(ser)
    return config


def _default_specs(args):
    """Every axis unknown except the last (channels) of arguments of rank >= 2."""
    return [tf.TensorSpec([None] * (np.ndim(a) - 1) + list(np.shape(a)[-1:]) if np.ndim(a) >= 2
                          else [None] * np.ndim(a),
                          tf.as_dtype(np.asarray(a).dtype)) for a in args]


def _check_tf_function(layer, make_inputs, sizes, specs, call_kwargs, expected_output_shape, deterministic):
    """``tf.function`` with unknown batch and time: one trace for every size, the eager numbers and shapes."""
    fn = tf.function(lambda *a: layer(*a, training=False, **call_kwargs), input_signature=specs)
    for b, t in sizes:
        a = make_inputs(b, t)
        got = fn(*a)
        if deterministic:
            _assert_close(got, layer(*a, training=False, **call_kwargs), 1e-5, f"tf.function differs at {(b, t)}")
        if expected_output_shape is not None:
            for g, s in zip(tf.nest.flatten(got), _shapes(expected_output_shape(b, t))):
                assert tuple(g.shape) == tuple(s)


def _check_training_changes(layer, args, call_kwargs, y):
    """``training=True`` is honoured: it changes the output."""
    yt = layer(*args, training=True, **call_kwargs)
    diff = max(float(np.max(np.abs(u - v))) for u, v in zip(_flat(yt), _flat(y)))
    assert diff > 0, "training=True gives the inference output"


def _functional_models(layer_cls, config, specs, call_kwargs):
    """A functional model holding a fresh layer (inputs ``specs``), and its flat-output form: a serving signature
    holds a flat list of tensors, so nested outputs (e.g. RNN states) are exported flattened."""
    inputs = [keras.Input(batch_shape=s.shape, dtype=s.dtype, name=f"in_{i:02d}") for i, s in enumerate(specs)]
    fresh = layer_cls.from_config(config)
    outputs = fresh(*inputs, **call_kwargs)
    model = keras.Model(inputs, outputs)
    flat_model = keras.Model(inputs, keras.tree.flatten(outputs)) if keras.tree.is_nested(outputs) else model
    return model, flat_model


def _check_keras_file(model, args, atol, deterministic):
    """Saved as ``.keras`` and reloaded in safe mode: the same output."""
    ref = model(args, training=False)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    if deterministic:
        _assert_close(loaded(args, training=False), ref, atol, "reloaded .keras model differs")


def _check_saved_model(model, flat_model, make_inputs, sizes, export, litert, atol, deploy_atol, deterministic):
    """SavedModel export reloaded in a fresh process, at every size (or the pinned failure), then LiteRT."""
    if isinstance(export, Fails):
        with tempfile.TemporaryDirectory() as d:
            expect_failure(export, "SavedModel export", lambda: flat_model.export(d, verbose=False))
        return
    if isinstance(export, Skip):
        return
    reloader = saved_model_reloader()
    directory = reloader.new_dir()
    calls = [make_inputs(b, t) for b, t in sizes]
    wants = [model(c, training=False) for c in calls]
    flat_model.export(directory, verbose=False)
    for (b, t), got, want in zip(sizes, reloader.run(directory, calls), wants):
        _compare(got, want, atol, deterministic, f"SavedModel reloaded in a fresh process differs at {(b, t)}")
    if not isinstance(litert, Skip):
        _litert_check(directory, calls, wants, litert, deploy_atol, deterministic)
    shutil.rmtree(directory, ignore_errors=True)


def _check_dtype_policies(layer_cls, init_kwargs, args, call_kwargs):
    """Under mixed_float16 and mixed_bfloat16: float32 variables, outputs in the compute dtype, finite."""
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


def _check_bad_inputs(layer, bad_inputs, call_kwargs):
    """Each bad input raises a ``ValueError`` whose message names the argument (contains the fragment)."""
    for bad_args, fragment in bad_inputs:
        try:
            layer(*bad_args, training=False, **call_kwargs)
        except ValueError as e:
            assert fragment in str(e), f"error message {str(e)!r} does not mention {fragment!r}"
        else:
            raise AssertionError(f"bad input {[np.shape(a) for a in bad_args]} did not raise ValueError")


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
    export: Limit | None = None,
    xla: Limit | None = None,
    litert: Limit | None = None,
    deploy_atol: float = 1e-5,
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
            default: every axis unknown except the last (channels). Also the exported model's inputs.
        export: ``None`` (SavedModel exported, reloaded in a fresh process, compared within ``atol`` at every size),
            or a pinned :class:`Fails` / :class:`Skip` (with a reason); default from :data:`LIMITS`.
        xla: ``None`` (``jit_compile=True`` inference compared within ``deploy_atol`` at ``sizes[0]``), or
            :class:`Fails` / :class:`Skip`.
        litert: ``None`` (TFLite builtins, run in LiteRT, ``deploy_atol``), or :class:`SelectOps`, :class:`Fails`,
            :class:`Skip`; needs the SavedModel export.
        deploy_atol: tolerance of the XLA and LiteRT checks against the in-process layer.
    """
    call_kwargs = dict(call_kwargs or {})
    export, xla, litert = _deploy_limits(layer_cls, init_kwargs, make_inputs, sizes, export, xla, litert)
    if not isinstance(export, Skip):
        saved_model_reloader()  # the fresh process imports TensorFlow while this one runs the other checks
    layer = layer_cls(**init_kwargs)
    args = make_inputs(*sizes[0])
    y = _check_inference(layer, args, call_kwargs, expected_output_shape, sizes[0], deterministic_in_inference)
    config = _check_config_round_trip(layer_cls, layer, args, call_kwargs, y, atol, deterministic_in_inference)
    specs = input_specs or _default_specs(args)
    _check_tf_function(layer, make_inputs, sizes, specs, call_kwargs, expected_output_shape,
                       deterministic_in_inference)
    if not isinstance(xla, Skip):
        _xla_check(layer, make_inputs, sizes, specs, call_kwargs, xla, deploy_atol, deterministic_in_inference)
    if changes_in_training:
        _check_training_changes(layer, args, call_kwargs, y)
    if test_saving or not isinstance(export, Skip):
        model, flat_model = _functional_models(layer_cls, config, specs, call_kwargs)
        if test_saving:
            _check_keras_file(model, args, atol, deterministic_in_inference)
        _check_saved_model(model, flat_model, make_inputs, sizes, export, litert, atol, deploy_atol,
                           deterministic_in_inference)
    if test_mixed_precision:
        _check_dtype_policies(layer_cls, init_kwargs, args, call_kwargs)
    _check_bad_inputs(layer, bad_inputs, call_kwargs)
    return layer
