"""Timing server for the whole Tacotron-1 (keithito/tacotron, mimic2; one side a process: ``keras``, ``torch`` or
``legacy``).

``python -m bench._tacotron1_timing SIDE JSON_CONFIG THREADS`` (``legacy`` with ``TF_USE_LEGACY_KERAS=1``; no side
imports another side's framework). ``JSON_CONFIG`` holds ``weights`` (an ``.npz`` of the TF1 variables by name
relative to ``model/inference/``), ``check`` (where to write the timed call's outputs), ``synth`` (``batch``,
``symbols``, ``steps``), ``preset`` and ``layout`` (the model) and ``checkpoint`` (the TF1 checkpoint prefix the
legacy side writes from the weights with ``Saver`` and the other sides load). The server

1. builds the model the way a user of that side runs it, with THREADS intra-op and inter-op threads:

   * ``keras``: ``tf_layers.Tacotron1.from_tf1_checkpoint(CKPT)``; timed: ``model.synthesize(ids, lengths,
     max_iters=steps)`` (one cached ``tf.function``) and the model called eagerly, ``model(ids, lengths,
     max_iters=steps)`` (the user's other documented call);
   * ``torch``: ``torch_layers.Tacotron1.from_tf1_checkpoint(CKPT).eval()`` called under ``torch.inference_mode()``;
   * ``legacy``: the TF1 graph ``parity_tests.legacy.tf1_tacotron1.tacotron1`` (keithito's, free running,
     ``is_training=False``) under ``model/inference``, its inputs placeholders as keithito's ``synthesizer.py``
     has them (``[batch, None]`` ids, ``[batch]`` lengths; fed every run), the step cap a
     ``placeholder_with_default`` fed only for the one-step run; ``session.run`` of every output; it writes the TF1
     checkpoint (``tf.compat.v1.train.Saver``) the other sides then load;

2. saves the outputs of its timed synthesis (``mel_outputs``, ``linear_outputs``, ``alignments``; Keras also those
   of the eager call, ``call_*``) to ``check`` (``.npz``): inference has no dropout, so the timed call itself is
   compared across the sides;
3. warms the timed calls up and prints ``ready`` and a JSON of notes (``profile``: the ops of largest self time in a
   ``PROFILE_STEPS``-step synthesis, from ``torch.profiler``, TensorFlow's profiler trace (Keras) or the TF1
   session's step stats); then each stdin line ``synth N`` / ``call N`` (Keras, legacy) / ``short N`` (the same
   synthesis with ``max_iters=1``: encoder, one step, post CBHG) runs that call N times and prints the seconds.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from bench._tacotron2_timing import _keras_op_times, _top_ops
from bench._timing import serve

SCOPE = "model/inference"
PROFILE_STEPS = 30  # the free-running steps of the per-op profile (encoder and post CBHG included)
OUTPUT_KEYS = ("mel_outputs", "linear_outputs", "alignments")


def bench_inputs(synth: dict, n_symbols: int) -> dict:
    """Seed-0 ids ``(batch, symbols)`` in ``[1, n_symbols)`` and full lengths, int32 (identical on every side)."""
    rng = np.random.default_rng(0)
    b, t = synth["batch"], synth["symbols"]
    return {"ids": rng.integers(1, n_symbols, (b, t)).astype(np.int32), "lengths": np.full((b,), t, np.int32)}


def _save_check(path: str, out: dict, call: dict | None = None) -> None:
    arrays = {k: np.asarray(out[k], np.float32) for k in OUTPUT_KEYS}
    if call is not None:
        arrays.update({"call_" + k: np.asarray(call[k], np.float32) for k in OUTPUT_KEYS})
    np.savez(path, **arrays)


# -- Keras ------------------------------------------------------------------------------------------------------------
def _keras(cfg: dict, data: dict, threads: int):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import tf_layers

    steps = cfg["synth"]["steps"]
    model = tf_layers.Tacotron1.from_tf1_checkpoint(cfg["checkpoint"])
    ids, lengths = data["ids"], data["lengths"]
    call = model(ids, lengths, max_iters=steps)
    _save_check(cfg["check"], model.synthesize(ids, lengths, max_iters=steps),
                {k: v.numpy() for k, v in call.items()})
    runs = {"synth": lambda: model.synthesize(ids, lengths, max_iters=steps),
            "short": lambda: model.synthesize(ids, lengths, max_iters=1),
            # the call a Keras user makes as often as synthesize: the model called eagerly
            "call": lambda: model(ids, lengths, max_iters=steps)}
    model.synthesize(ids, lengths, max_iters=PROFILE_STEPS)
    ops = _keras_op_times(lambda: model.synthesize(ids, lengths, max_iters=PROFILE_STEPS))
    return runs, {"synth": 2, "short": 2, "call": 2}, {"profile": _top_ops(ops, PROFILE_STEPS, 8)}


# -- torch ------------------------------------------------------------------------------------------------------------
def _torch(cfg: dict, data: dict, threads: int):
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    import torch_layers

    steps = cfg["synth"]["steps"]
    model = torch_layers.Tacotron1.from_tf1_checkpoint(cfg["checkpoint"]).eval()
    ids, lengths = torch.from_numpy(data["ids"]).long(), torch.from_numpy(data["lengths"]).long()

    def synth(max_iters: int = steps):
        with torch.inference_mode():
            return model(ids, lengths, max_iters=max_iters)

    _save_check(cfg["check"], {k: v.numpy() for k, v in synth().items()})
    synth(PROFILE_STEPS)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        synth(PROFILE_STEPS)
    ops = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}  # ms
    info = {"profile": _top_ops(ops, PROFILE_STEPS, 8)}
    return {"synth": synth, "short": lambda: synth(1)}, {"synth": 2, "short": 2}, info


# -- the TF1 graph ----------------------------------------------------------------------------------------------------
def _legacy_graph(cfg: dict, data: dict, weights: dict, config):
    """The free-running TF1 graph in a session with ``weights`` loaded; ``(session, outputs, cap)``; writes the
    checkpoint the other sides load."""
    import tensorflow as tf

    from parity_tests.legacy.tf1_tacotron1 import tacotron1
    from speechblocks import resolve_tacotron1_hparams

    v1 = tf.compat.v1
    hp = resolve_tacotron1_hparams(cfg["preset"])
    graph = tf.Graph()
    with graph.as_default():
        # keithito's synthesizer.py: `inputs` [1, None] and `input_lengths` [1] placeholders, fed every run (the
        # batch dimension static, as there; the text length unknown to the graph)
        ids = v1.placeholder(tf.int32, [data["ids"].shape[0], None], "inputs")
        lengths = v1.placeholder(tf.int32, [data["ids"].shape[0]], "input_lengths")
        # the step cap: `steps` unless fed (the one-step run of the per-step estimate, the profile)
        cap = v1.placeholder_with_default(tf.constant(cfg["synth"]["steps"], tf.int32), [], name="max_iters")
        with v1.variable_scope(SCOPE):
            out = tacotron1(hp, cfg["layout"], ids, lengths, False, max_iters=cap)
        init = v1.global_variables_initializer()
    sess = v1.Session(graph=graph, config=config)
    sess.run(init)
    prefix = SCOPE + "/"
    model_vars = {v.op.name[len(prefix):]: v for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
                  if v.op.name.startswith(prefix)}
    if set(model_vars) != set(weights):
        raise RuntimeError(f"the TF1 graph's variables differ from the weights: "
                           f"{sorted(set(model_vars) ^ set(weights))[:10]}")
    with graph.as_default():
        for name, var in model_vars.items():
            var.load(weights[name], sess)
        # a real TF1 checkpoint of the model's variables (what the Keras and torch sides load)
        v1.train.Saver(list(model_vars.values())).save(sess, cfg["checkpoint"], write_meta_graph=False,
                                                      write_state=False)
    return sess, out, cap, {ids: data["ids"], lengths: data["lengths"]}


def _legacy(cfg: dict, data: dict, threads: int):
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "run the legacy side with TF_USE_LEGACY_KERAS=1"
    import tensorflow as tf

    v1 = tf.compat.v1
    config = v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    with np.load(cfg["weights"]) as f:
        weights = {k: f[k] for k in f.files}
    sess, out, cap, feed = _legacy_graph(cfg, data, weights, config)
    fetches = {k: out[k] for k in OUTPUT_KEYS}
    _save_check(cfg["check"], sess.run(fetches, feed))
    runs = {"synth": lambda: sess.run(fetches, feed), "short": lambda: sess.run(fetches, {**feed, cap: 1}),
            "call": lambda: sess.run(fetches, feed)}
    # per-op profile: the kernels' times of one run from the session's step stats, by op type
    for _ in range(2):
        sess.run(fetches, {**feed, cap: PROFILE_STEPS})
    meta = v1.RunMetadata()
    sess.run(fetches, {**feed, cap: PROFILE_STEPS}, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
             run_metadata=meta)
    ops: dict = {}
    for device in meta.step_stats.dev_stats:
        for node in device.node_stats:
            kind = node.timeline_label.split("(", 1)[0].split(" = ", 1)[-1].strip() or node.node_name
            ops[kind] = ops.get(kind, 0.0) + (node.op_end_rel_micros - node.op_start_rel_micros) / 1e3
    return runs, {"synth": 2, "short": 2, "call": 0}, {"profile": _top_ops(ops, PROFILE_STEPS, 8)}


def main(argv=None) -> int:
    args = argv or sys.argv[1:]
    side, cfg = args[0], json.loads(args[1])
    threads = int(args[2]) if len(args) > 2 else 0
    from speechblocks import resolve_tacotron1_hparams

    data = bench_inputs(cfg["synth"], resolve_tacotron1_hparams(cfg["preset"]).n_symbols)
    build = {"keras": _keras, "torch": _torch, "legacy": _legacy}[side]
    protocol, sys.stdout = sys.stdout, sys.stderr  # whatever the libraries print must not mix with the protocol
    return serve(*build(cfg, data, threads), protocol)


if __name__ == "__main__":
    sys.exit(main())
