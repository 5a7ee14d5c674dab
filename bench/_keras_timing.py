"""Timing server for the Keras recurrent layers (a clean subprocess: imports only tensorflow + ``tf_layers``).

``python -m bench._keras_timing KIND JSON_SIZES THREADS``: the Keras twin of ``bench._legacy_timing`` --
the same inputs (:func:`bench._legacy_timing.bench_inputs`, as eager tensors: no feed cost), TensorFlow
set to ``THREADS`` intra-op and inter-op threads, the layer called in inference inside a ``tf.function``
with a fixed ``input_signature`` (static shapes, like the TF1 graph), called through its concrete function
(traced once, like the session's prebuilt graph), every output fetched as numpy (like ``session.run``); then the same
timing protocol (``ready``, then ``N`` -> seconds for N calls).
"""
from __future__ import annotations

import json
import sys

from bench._legacy_timing import bench_inputs, serve


def _build(kind: str, sizes: dict, threads: int):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import tf_layers

    data = bench_inputs(kind, sizes)
    x = tf.constant(data["x"])
    if kind == "encoder":
        enc = tf_layers.EncoderRNN(size=sizes["size"], zoneout=0.1)
        lengths = tf.constant(data["lengths"])
        fn = tf.function(lambda a, n: enc(a, n, training=False),
                         input_signature=[tf.TensorSpec(x.shape, tf.float32), tf.TensorSpec(lengths.shape, tf.int32)])
        fn = fn.get_concrete_function()
        return lambda: fn(x, lengths).numpy()
    dec = tf_layers.DecoderRNN(layers=sizes["layers"], size=sizes["size"], zoneout=0.1)
    states = tuple((tf.constant(c), tf.constant(h)) for c, h in data["states"])
    spec = tf.TensorSpec(states[0][0].shape, tf.float32)
    fn = tf.function(lambda a, st: dec(a, st, training=False),
                     input_signature=[tf.TensorSpec(x.shape, tf.float32), tuple((spec, spec) for _ in states)])
    fn = fn.get_concrete_function()

    def run():
        out, new_states = fn(x, states)
        return [out.numpy()] + [s.numpy() for pair in new_states for s in pair]

    return run


def main(argv=None) -> int:
    args = argv or sys.argv[1:]
    kind, sizes = args[:2]
    threads = int(args[2]) if len(args) > 2 else 0
    return serve(_build(kind, json.loads(sizes), threads))


if __name__ == "__main__":
    sys.exit(main())
