"""The Keras adapter of the native decoder step (:mod:`speechblocks.native`): batch-1 free-running inference.

:func:`free_running` runs an eager ``Tacotron2Decoder`` call's free-running loop in the C step when the call
qualifies (batch 1, float32 on the CPU, no injected zoneout masks, a ReLU pre-net, the library built); the C step
reads the Keras kernels in their own ``(in, out)`` layout and TF1's gate order. The pre-net's dropout draws the
numbers the graph loop draws: ``tf.random.stateless_uniform`` with the seed of step ``t``, layer ``i``
``seed + [0, t * layers + 1 + i]`` (one ``seed_generator`` draw per call), made in chunks of steps.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import tensorflow as tf

from speechblocks import native

__all__ = ["free_running", "CHUNK"]

CHUNK = 32  # pre-net dropout draws made per graph call


def _array(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x), np.float32)


def _threads() -> int:
    n = tf.config.threading.get_intra_op_parallelism_threads()
    return n if n > 0 else (os.cpu_count() or 1)


@tf.function(reduce_retracing=True)
def _uniform_chunk(seed, t0, sizes: tuple, steps: int):
    """``(steps, sum(sizes))`` the pre-net's uniform draws of steps ``t0 .. t0 + steps - 1``, as the graph loop's
    ``Prenet.call(seed=...)`` draws them for a batch of one."""
    n_pre = len(sizes)
    rows = []
    for c in range(steps):
        step_seed = seed + tf.stack([0, (t0 + c) * n_pre + 1])
        rows.append(tf.concat([tf.random.stateless_uniform(tf.stack([1, size]),
                                                           seed=step_seed + tf.constant([0, i], seed.dtype))
                               for i, size in enumerate(sizes)], 1))
    return tf.concat(rows, 0)


class _Draws:
    """The per-step draws of one call, made :data:`CHUNK` steps at a time."""

    def __init__(self, seed, sizes: tuple):
        self.seed, self.sizes = seed, sizes
        self.start, self.block = 0, None

    def __call__(self, step: int) -> np.ndarray:
        if self.block is None or not self.start <= step < self.start + CHUNK:
            self.start = step - step % CHUNK
            self.block = _uniform_chunk(self.seed, tf.constant(self.start, tf.int32), self.sizes, CHUNK).numpy()
        return self.block[step - self.start]


def qualifies(decoder, memory) -> bool:
    """Whether an eager free-running call of ``decoder`` (no injected zoneout masks: the caller's check) can run in
    the native step."""
    if not native.enabled() or decoder.__dict__.get("_loop_opts"):
        return False
    if memory.shape[0] != 1 or memory.dtype != tf.float32 or decoder.compute_dtype != "float32":
        return False
    if "CPU" not in (memory.device or "CPU"):
        return False
    if getattr(decoder.prenet.activation, "__name__", "") != "relu":
        return False
    att = decoder.attention
    return (decoder.decoder_lstm.layers <= native.MAX_LAYERS and len(decoder.prenet.layers_sizes) <= native.MAX_LAYERS
            and att.units <= native.MAX_ATTENTION_UNITS and memory.shape[1] >= 1 and native.library() is not None)


def free_running(decoder, memory, memory_lengths, max_iters: int, prenet_masks) -> Optional[tuple]:
    """The free-running loop of an eager ``Tacotron2Decoder`` call in the native step, or ``None`` when the call
    does not qualify (:func:`qualifies`; pre-net masks shorter than the steps run go to the graph loop too).

    Args:
        decoder: a built ``tf_layers.Tacotron2Decoder``.
        memory: ``(1, T_in, memory_size)`` float32; memory_lengths: ``(1,)`` int32 or None.
        max_iters: the step cap.
        prenet_masks: per pre-net layer ``(1, steps, size)`` keep-masks, or None.

    Returns:
        ``(frames (1, steps, r * num_mels), stop probabilities (1, steps, r), alignments (1, T_in, steps))``.
    """
    if not qualifies(decoder, memory):
        return None
    if prenet_masks is not None and any(m.shape[1] is None or m.shape[1] < max_iters for m in prenet_masks):
        return None
    att, pre = decoder.attention, decoder.prenet
    lengths = memory_lengths if att.mask_encoder else None
    values, keys = att.process_memory(memory, lengths)
    max_time = int(values.shape[1])
    step = decoder.step_weights(tf.float32)  # the LSTM stack's kernels and biases, the attention's, the projections
    a = step.attention
    dense = _array(a["location"])  # (F, U)
    location = _array(_array(a["conv"])[:, 0, :] @ dense)  # the location convolution and its dense as one kernel
    key_bias = _array(a["b"]) + _array(a["conv_bias"]) @ dense  # every constant bias, added to the keys
    score_bias = None
    if lengths is not None:
        n = int(np.asarray(lengths)[0])
        score_bias = np.where(np.arange(max_time) < n, 0.0, -np.inf).astype(np.float32)
    sizes = tuple(int(s) for s in pre.layers_sizes)
    kernel = int(att.kernel_size)
    loop = native.DecoderLoop(
        native.library(), lstm_weights=[_array(k) for k in step.lstm.kernels],
        lstm_biases=[_array(b) for b in step.lstm.biases], lstm_cols=True, gates=native.TF1_GATES,
        prenet_weights=[_array(d.kernel) for d in pre.dense_layers],
        prenet_biases=[_array(d.bias) for d in pre.dense_layers], dense_cols=True,
        query_weight=_array(a["query"]), location_weight=location, v_a=_array(a["v"]),
        keys=_array(_array(keys[0]) + key_bias), values=_array(values[0]), score_bias=score_bias,
        projection_weight=_array(step.projection_kernel), projection_bias=_array(step.projection_bias),
        num_mels=decoder.num_mels, frame_size=decoder.num_mels * decoder.outputs_per_step, zoneout=decoder.zoneout,
        prenet_rate=float(pre.drop_rate), pad_before=(kernel - 1) // 2, smoothing=att.smoothing,
        cumulate=att.cumulate_weights, stop_at_any=decoder.stop_at_any, threads=_threads())
    keep = draws = None
    if prenet_masks is not None:
        keep = np.concatenate([_array(m[0, :max_iters]) for m in prenet_masks], 1)
    elif pre.drop_rate > 0:
        draws = _Draws(tf.cast(pre.seed_generator.next(), tf.int32), sizes)
    frames, stop, alignments, _ = loop.run(max_iters, draws, keep)
    return (tf.constant(frames[None]), tf.constant(stop[None]), tf.constant(np.ascontiguousarray(alignments.T)[None]))
