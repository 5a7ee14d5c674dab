"""Timing server for the TF1 legacy graph (run as a subprocess with ``TF_USE_LEGACY_KERAS=1``).

``python -m bench._legacy_timing KIND JSON_SIZES``: builds the seed's TF1 graph of KIND (``encoder`` or
``decoder_step``, from ``parity_tests.legacy.tf1_recurrent``), with its inputs held in graph variables (no
feed cost), prints ``ready``; then for each line ``N`` on stdin runs the op N times in the session and prints
the elapsed seconds. The parent interleaves these requests with its own timings so machine noise hits both.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def _build(kind: str, sizes: dict):
    import tensorflow as tf

    from parity_tests.legacy.tf1_recurrent import decoder_rnn_step, encoder_rnn

    v1 = tf.compat.v1
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        def held(name, value):
            return v1.get_variable(name, initializer=tf.constant(value), trainable=False)

        if kind == "encoder":
            b, t, n_in, size = sizes["batch"], sizes["time"], sizes["input"], sizes["size"]
            x = held("bench_x", rng.standard_normal((b, t, n_in)).astype(np.float32))
            lengths = held("bench_len", np.array(sizes["lengths"], np.int32))
            with v1.variable_scope("Tacotron_model/inference"):
                out, _ = encoder_rnn(x, lengths, dict(size=size, zoneout=0.1), False)
        elif kind == "decoder_step":
            b, n_in, size, layers = sizes["batch"], sizes["input"], sizes["size"], sizes["layers"]
            x = held("bench_x", rng.standard_normal((b, n_in)).astype(np.float32))
            states = [(held(f"bench_c{k}", rng.standard_normal((b, size)).astype(np.float32)),
                       held(f"bench_h{k}", rng.standard_normal((b, size)).astype(np.float32))) for k in range(layers)]
            with v1.variable_scope("Tacotron_model/inference/decoder"):
                (out, new_states), _ = decoder_rnn_step(x, states, dict(layers=layers, size=size, zoneout=0.1), False)
            out = [out] + [s for pair in new_states for s in pair]
        else:
            raise ValueError(f"unknown kind {kind!r}")
        init = v1.global_variables_initializer()
    sess = v1.Session(graph=graph)
    sess.run(init)
    return sess, out


def main(argv=None) -> int:
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "run with TF_USE_LEGACY_KERAS=1"
    kind, sizes = (argv or sys.argv[1:])[:2]
    sess, out = _build(kind, json.loads(sizes))
    for _ in range(3):
        sess.run(out)
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        for _ in range(n):
            sess.run(out)
        print(time.perf_counter() - t0, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
