"""Subprocess entry point of the TF1 legacy reference.

``python -m parity_tests.legacy.runner SPECS.json INPUTS.npz OUT_DIR`` (with ``TF_USE_LEGACY_KERAS=1``), or
``... runner --serve``: a long-lived server reading one such batch per stdin line (see :func:`serve`).
For every spec: build the block's TF1 graph under the spec's scope prefix, fill every variable with
seeded random values, optionally run one Adam training step, save a real TF1 checkpoint with
``tf.compat.v1.train.Saver``, run the graph on the inputs and write the outputs.

Options read here (besides the builders' own): ``adam_step``; ``assign`` (``{name relative to the spec's scope:
value}`` set after the fill); ``assign_file`` -- an ``.npz`` of ``{full TF1 variable name: array}`` whose
entries replace the random values of the graph's variables of those names (real weights, e.g. ~30M of a whole
model, without passing them through JSON), with ``assign_file_strict`` every variable of the graph must be in it;
``save_checkpoint`` (default True) -- False skips writing the checkpoint (the result's ``checkpoint`` is ``""``).
Each spec's ``meta.json`` also names the graph tensors of its inputs (``placeholders``) and outputs (``tensors``).

A spec whose block is ``__meta_graph__`` runs a user's own TF1 checkpoint instead (``speechblocks.parity.TF1Graph``):
its ``config`` holds ``checkpoint`` (a prefix with its ``.meta`` graph), ``feeds`` and ``fetches`` (``{name: graph
tensor name}``); the graph is imported with ``tf.compat.v1.train.import_meta_graph``, restored with its ``Saver`` and
run on the inputs (see :func:`run_meta_graph`).
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys

import numpy as np

assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "the legacy reference must run with TF_USE_LEGACY_KERAS=1"

import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1


def _session_config():
    """Sessions run the graph's ops as built: grappler's rewrites (constant folding, arithmetic and layout
    optimizers, the memory optimizer) are semantics-preserving up to float reassociation and cost ~25 % of a
    whole-model spec's time, so the reference leaves them out (the numbers are the ops' own)."""
    config = v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


def _builders():
    import parity_tests.legacy as pkg

    table = {}
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name.startswith("builders_"):
            table.update(importlib.import_module(f"{pkg.__name__}.{mod.name}").BUILDERS)
    return table


def random_value(name: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Seeded random values by TF1 variable role (moving variances positive, gammas near 1)."""
    shape = tuple(shape)
    leaf = name.split("/")[-1]
    if leaf == "moving_variance":
        return rng.uniform(0.5, 1.5, shape)
    if leaf == "gamma":
        return 1.0 + 0.1 * rng.standard_normal(shape)
    if leaf in ("beta", "moving_mean", "bias"):
        return 0.1 * rng.standard_normal(shape)
    if leaf == "kernel" and len(shape) >= 2:
        fan_in = int(np.prod(shape[:-1]))
        return rng.standard_normal(shape) / np.sqrt(fan_in)
    return 0.3 * rng.standard_normal(shape)


_ASSIGN_FILES: dict = {}


def _assign_file(path):
    """The opened ``assign_file`` (``np.load`` reads each array only when asked), cached across specs."""
    if not path:
        return None
    if path not in _ASSIGN_FILES:
        z = np.load(path)
        _ASSIGN_FILES[path] = (z, frozenset(z.files))
    return _ASSIGN_FILES[path]


def _fill_value(v, rng, from_file, strict, missing):
    """The value a variable gets: its ``assign_file`` entry when it has one, else the seeded random value."""
    dtype = v.dtype.base_dtype.as_numpy_dtype
    shape = v.shape.as_list()
    if from_file is not None:
        z, names = from_file
        if v.op.name in names:
            value = z[v.op.name]
            if list(value.shape) != shape:
                raise ValueError(f"assign_file: variable {v.op.name!r} has shape {shape} in the graph, "
                                 f"{list(value.shape)} in the file")
            return value.astype(dtype)
        if strict:
            missing.append(v.op.name)
    return random_value(v.op.name, shape, rng).astype(dtype)


def run_spec(spec: dict, inputs: dict[str, np.ndarray], out_dir: str, builders) -> None:
    os.makedirs(out_dir, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(spec.get("seed", 0))
        feeds = {}
        tensors = {}
        for key, value in inputs.items():
            shape = list(value.shape)
            if spec.get("dynamic_shapes", True):  # unknown batch/time as the real graph; channels static
                shape = [None] * (value.ndim - 1) + shape[-1:] if value.ndim >= 2 else [None] * value.ndim
            ph = v1.placeholder(tf.as_dtype(value.dtype), shape=shape, name=key.replace("/", "_"))
            feeds[ph] = value
            tensors[key] = ph
        prefix = spec.get("scope", "")
        build = builders[spec["block"]]
        if prefix:
            with v1.variable_scope(prefix):
                block_scope, outputs = build(spec["config"], tensors, spec.get("training", False),
                                             spec.get("options", {}))
        else:
            block_scope, outputs = build(spec["config"], tensors, spec.get("training", False), spec.get("options", {}))
        model_vars = v1.global_variables()
        train_op = None
        if spec.get("options", {}).get("adam_step"):
            loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(t, tf.float32))) for k, t in outputs.items()
                             if not k.startswith("mask/") and t.dtype.is_floating])
            train_op = v1.train.AdamOptimizer(1e-3).minimize(loss)
        rng = np.random.default_rng(spec.get("seed", 0))
        # one grouped assignment (a session run per variable costs O(graph) each)
        fill_phs = [v1.placeholder(v.dtype.base_dtype, v.shape) for v in model_vars]
        fill = tf.group(*[v.assign(p) for v, p in zip(model_vars, fill_phs)]) if model_vars else None
        with v1.Session(graph=graph, config=_session_config()) as sess:
            sess.run(v1.global_variables_initializer())
            if fill is not None:
                options = spec.get("options", {})
                from_file, missing = _assign_file(options.get("assign_file")), []
                values = {p: _fill_value(v, rng, from_file, options.get("assign_file_strict", False), missing)
                          for v, p in zip(model_vars, fill_phs)}
                if missing:
                    raise ValueError(f"assign_file_strict: {len(missing)} variable(s) of the graph are not in the "
                                     f"file: {missing[:20]}")
                sess.run(fill, values)
            for name, value in spec.get("options", {}).get("assign", {}).items():
                # fixed values after the random fill (e.g. a stop-token bias that never fires), names relative
                # to the spec's scope; a scalar fills the whole variable
                full = "/".join(p for p in (prefix.strip("/"), name) if p)
                var = next(v for v in model_vars if v.op.name == full)
                var.load(np.broadcast_to(np.asarray(value, var.dtype.base_dtype.as_numpy_dtype), var.shape), sess)
            if train_op is not None:
                sess.run(train_op, feeds)
            ckpt = ""
            save = spec.get("options", {}).get("save_checkpoint", True)
            if save and v1.global_variables():  # a graph of pure ops (losses) has nothing to save
                saver = v1.train.Saver(max_to_keep=1)
                ckpt = saver.save(sess, os.path.join(out_dir, "model.ckpt"))
            values = sess.run(outputs, feeds)
    np.savez(os.path.join(out_dir, "outputs.npz"), **{k: np.asarray(v) for k, v in values.items()})
    full_scope = "/".join(p for p in (prefix.strip("/"), block_scope) if p)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump({"checkpoint": ckpt, "block_scope": full_scope,
                   "placeholders": {k: t.name for k, t in tensors.items()},
                   "tensors": {k: t.name for k, t in outputs.items()}}, f)


META_GRAPH = "__meta_graph__"


def run_meta_graph(spec: dict, inputs: dict[str, np.ndarray], out_dir: str) -> None:
    """A user's own TF1 checkpoint: ``import_meta_graph(checkpoint + ".meta")``, its ``Saver`` restores the
    variables, the ``fetches`` run on ``{feeds[name]: inputs[name]}``; outputs and ``meta.json`` as
    :func:`run_spec`."""
    os.makedirs(out_dir, exist_ok=True)
    config = spec["config"]
    prefix = config["checkpoint"]
    graph = tf.Graph()
    with graph.as_default():
        saver = v1.train.import_meta_graph(prefix + ".meta", clear_devices=True)
        fetches = {name: graph.get_tensor_by_name(t) for name, t in config["fetches"].items()}
        feeds = {graph.get_tensor_by_name(config["feeds"][name]): value for name, value in inputs.items()}
        with v1.Session(graph=graph, config=_session_config()) as sess:
            if saver is not None:  # None: a graph without variables
                saver.restore(sess, prefix)
            values = sess.run(fetches, feeds)
    np.savez(os.path.join(out_dir, "outputs.npz"), **{k: np.asarray(v) for k, v in values.items()})
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump({"checkpoint": prefix, "block_scope": "", "placeholders": dict(config["feeds"]),
                   "tensors": dict(config["fetches"])}, f)


def run_batch(spec_path: str, inputs_path: str, out_root: str, builders: dict) -> None:
    """Every spec of ``spec_path`` (inputs from ``inputs_path``) into ``out_root/<spec id>/``."""
    with open(spec_path) as f:
        specs = json.load(f)
    arrays = dict(np.load(inputs_path))
    for spec in specs:
        inputs = {k: arrays[f"{spec['id']}::{k}"] for k in spec["input_names"]}
        if spec["block"] == META_GRAPH:
            run_meta_graph(spec, inputs, os.path.join(out_root, spec["id"]))
        else:
            run_spec(spec, inputs, os.path.join(out_root, spec["id"]), builders)


def serve(builders: dict) -> int:
    """``--serve``: one batch per stdin line (a JSON list ``[SPECS.json, INPUTS.npz, OUT_DIR]``), answered by one
    stdout line ``LEGACY-DONE`` or ``LEGACY-ERROR <JSON string: the traceback>``; ends when stdin closes. One
    TensorFlow import serves every batch of a test process (each spec builds its own graph)."""
    import traceback

    print("LEGACY-READY", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            run_batch(*json.loads(line), builders)
            reply = "LEGACY-DONE"
        except Exception:  # noqa: BLE001 -- reported to the caller, which raises LegacyReferenceError
            reply = "LEGACY-ERROR " + json.dumps(traceback.format_exc())
        print(reply, flush=True)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--serve"]:
        return serve(_builders())
    spec_path, inputs_path, out_root = argv
    run_batch(spec_path, inputs_path, out_root, _builders())
    return 0


if __name__ == "__main__":
    sys.exit(main())
