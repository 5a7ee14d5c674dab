"""Timing server for the TF1 legacy graph (run as a subprocess with ``TF_USE_LEGACY_KERAS=1``).

``python -m bench._legacy_timing KIND JSON_SIZES THREADS``: builds the seed's TF1 graph of KIND (``encoder``
or ``decoder_step``, from ``parity_tests.legacy.tf1_recurrent``), with its inputs (:func:`bench_inputs`) held
in graph variables (no feed cost), in a session with ``THREADS`` intra-op and inter-op threads; then serves
the timing protocol of :func:`serve`. ``bench._keras_timing`` is the Keras twin: same inputs, same protocol.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def bench_inputs(kind: str, sizes: dict) -> dict:
    """The benchmark's input data as numpy (identical in both timing servers): seed-0 normal draws."""
    rng = np.random.default_rng(0)
    if kind == "encoder":
        b, t, n_in = sizes["batch"], sizes["time"], sizes["input"]
        return {"x": rng.standard_normal((b, t, n_in)).astype(np.float32),
                "lengths": np.array(sizes["lengths"], np.int32)}
    if kind == "decoder_step":
        b, n_in, size, layers = sizes["batch"], sizes["input"], sizes["size"], sizes["layers"]
        x = rng.standard_normal((b, n_in)).astype(np.float32)
        states = [(rng.standard_normal((b, size)).astype(np.float32), rng.standard_normal((b, size)).astype(np.float32))
                  for _ in range(layers)]
        return {"x": x, "states": states}
    raise ValueError(f"unknown kind {kind!r}")


def serve(run, warmup: int = 3) -> int:
    """Warm ``run`` up, print ``ready``; then for each line ``N`` on stdin run it N times, print the seconds."""
    for _ in range(warmup):
        run()
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        for _ in range(n):
            run()
        print(time.perf_counter() - t0, flush=True)
    return 0


def _build(kind: str, sizes: dict, threads: int):
    import tensorflow as tf

    from parity_tests.legacy.tf1_recurrent import decoder_rnn_step, encoder_rnn

    v1 = tf.compat.v1
    data = bench_inputs(kind, sizes)
    graph = tf.Graph()
    with graph.as_default():
        def held(name, value):
            return v1.get_variable(name, initializer=tf.constant(value), trainable=False)

        if kind == "encoder":
            x = held("bench_x", data["x"])
            lengths = held("bench_len", data["lengths"])
            with v1.variable_scope("Tacotron_model/inference"):
                out, _ = encoder_rnn(x, lengths, dict(size=sizes["size"], zoneout=0.1), False)
        else:
            x = held("bench_x", data["x"])
            states = [(held(f"bench_c{k}", c), held(f"bench_h{k}", h)) for k, (c, h) in enumerate(data["states"])]
            with v1.variable_scope("Tacotron_model/inference/decoder"):
                (out, new_states), _ = decoder_rnn_step(
                    x, states, dict(layers=sizes["layers"], size=sizes["size"], zoneout=0.1), False)
            out = [out] + [s for pair in new_states for s in pair]
        init = v1.global_variables_initializer()
    config = v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    sess = v1.Session(graph=graph, config=config)
    sess.run(init)
    return sess, out


def main(argv=None) -> int:
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "run with TF_USE_LEGACY_KERAS=1"
    args = argv or sys.argv[1:]
    kind, sizes = args[:2]
    threads = int(args[2]) if len(args) > 2 else 0
    sess, out = _build(kind, json.loads(sizes), threads)
    return serve(lambda: sess.run(out))


if __name__ == "__main__":
    sys.exit(main())
