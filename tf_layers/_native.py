"""The Keras adapter of the native decoder steps (:mod:`speechblocks.native`): free-running inference.

:func:`free_running` runs an eager ``Tacotron2Decoder`` call's free-running loop in C when the call's plan names it
(:func:`tf_layers.decoding_plan.plan_decoding`: float32 on the CPU, no injected zoneout masks, a ReLU pre-net, the
library built): batch 1 in the batch-1 step (``decoder_step.c``), larger batches in the batched step
(``decoder_batch.c``: the kernels packed once per call into column panels; the entries still running computed, each
entry leaving at its own stop with ``stop_each``, as ``Tacotron2.synthesize_batch`` asks, else the original's batch
rule). The C steps read :meth:`Tacotron2Decoder.step_weights` (the location kernel folded there) and
:meth:`Tacotron2Decoder.attention_memory`: the Keras LSTM kernels in their own ``(in, out)`` layout and TF1's gate
order (the batch-1 step the small dense kernels transposed per call, ``_loop_arrays(dense_rows=True)``). The pre-net's
dropout draws the numbers the graph loop draws: ``tf.random.stateless_uniform`` of shape ``(entries running, size)``
with the seed of step ``t``, layer ``i`` ``seed + [0, t * layers + 1 + i]`` (one ``seed_generator`` draw per call),
made in chunks of steps.

:func:`tacotron1_free_running` runs an eager ``Tacotron1Decoder`` call's whole free-running loop in one C call
(``tacotron1_step.c``, :class:`speechblocks.native.Tacotron1Loop`) when its plan names ``native-tacotron1``: the Keras
kernels read in their ``(in, out)`` layout, mimic2's location convolution and layer folded into one kernel per call.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from speechblocks import native
from speechblocks.decoding import DecodingPlan

from .decoding_plan import plan_decoding

__all__ = ["free_running", "tacotron1_free_running", "CHUNK"]

CHUNK = 32  # pre-net dropout draws made per graph call


def _array(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x), np.float32)


def _threads() -> int:
    """TensorFlow's intra-op threads when set, at most the CPUs the process may use (:func:`speechblocks.native.
    cpu_budget`: affinity, cgroup quota)."""
    n = tf.config.threading.get_intra_op_parallelism_threads()
    budget = native.cpu_budget()
    return min(n, budget) if n > 0 else budget


@tf.function(reduce_retracing=True)
def _uniform_chunk(seed, t0, rows, sizes: tuple, steps: int):
    """``(steps, rows, sum(sizes))`` the pre-net's uniform draws of steps ``t0 .. t0 + steps - 1`` for ``rows``
    entries, as the graph loop's ``Prenet.call(seed=...)`` draws them for a batch of ``rows``."""
    n_pre = len(sizes)
    out = []
    for c in range(steps):
        step_seed = seed + tf.stack([0, (t0 + c) * n_pre + 1])
        out.append(tf.concat([tf.random.stateless_uniform(tf.stack([rows, size]),
                                                          seed=step_seed + tf.constant([0, i], seed.dtype))
                              for i, size in enumerate(sizes)], 1))
    return tf.stack(out, 0)


class _Draws:
    """The per-step draws of one call, made :data:`CHUNK` steps at a time (again from the step at which the number of
    entries still running changes)."""

    def __init__(self, seed, sizes: tuple):
        self.seed, self.sizes = seed, sizes
        self.start, self.rows, self.block = 0, 0, None

    def __call__(self, step: int, rows: Optional[int] = None) -> np.ndarray:
        """``(sum(sizes),)`` the draws of ``step`` at batch 1 (``rows`` None), else ``(rows, sum(sizes))``."""
        n = 1 if rows is None else rows
        if self.block is None or n != self.rows or not self.start <= step < self.start + CHUNK:
            self.start = step - step % CHUNK if n == self.rows or self.block is None else step
            self.rows = n
            self.block = _uniform_chunk(self.seed, tf.constant(self.start, tf.int32), tf.constant(n, tf.int32),
                                        self.sizes, CHUNK).numpy()
        block = self.block[step - self.start]
        return block[0] if rows is None else block


def qualifies(decoder, memory) -> bool:
    """Whether an eager free-running inference call of ``decoder`` on ``memory`` (no injected masks) runs in the native
    step: :func:`tf_layers.decoding_plan.plan_decoding` decides."""
    return plan_decoding(decoder, memory).native


def _loop_arrays(decoder, memory, memory_lengths, dense_rows: bool = False) -> dict:
    """The keyword arguments both native loops share: the decoder's kernels in their Keras ``(in, out)`` layout, the
    attention memory of the call ``(batch, T_in, ...)`` (keys with every constant bias folded in, the location
    convolution and its dense as one kernel), the constants.

    ``dense_rows``: the pre-net, query and projection kernels in the ``(out, in)`` row layout instead (the batch-1
    step's ``dense_cols=False``). At batch 1 the step reads those small kernels (~2 MiB at RTVC sizes) with one dot
    product per output row; in the Keras layout each thread strides over every row for its share of a few unaligned
    columns (the bench's profile: projections + stop 0.08-0.11 ms a step, 0.03 ms in rows). The transposed copies
    cost ~0.5 ms a call; the LSTM kernels (64 MiB) stay in place: their column layout streams within 3-9 % of the row
    layout (a C probe, 3 runs)."""
    dense_kernel = (lambda k: _array(np.asarray(k).T)) if dense_rows else _array
    att = decoder.attention
    memory = decoder.attention_memory(memory, memory_lengths)  # keys with every constant bias, the score mask
    w = decoder.step_weights(tf.float32)  # the location kernel folded there
    kernel = int(att.kernel_size)
    return dict(
        lstm_weights=[_array(k) for k in w.lstm_weights.kernels], lstm_biases=[_array(b) for b in w.lstm_biases],
        gates=native.TF1_GATES, prenet_weights=[dense_kernel(k) for k in w.prenet_weights],
        prenet_biases=[_array(b) for b in w.prenet_biases], query_weight=dense_kernel(w.query_weight),
        location_weight=_array(w.location_weight), v_a=_array(w.v_a), keys=_array(memory.keys),
        values=_array(memory.values), score_bias=None if memory.score_bias is None else _array(memory.score_bias),
        projection_weight=dense_kernel(w.projection_weight), projection_bias=_array(w.projection_bias),
        num_mels=decoder.num_mels, frame_size=decoder.num_mels * decoder.outputs_per_step, zoneout=decoder.zoneout,
        prenet_rate=float(decoder.prenet.drop_rate), pad_before=(kernel - 1) // 2, smoothing=att.smoothing,
        cumulate=att.cumulate_weights, stop_at_any=decoder.stop_at_any, threads=_threads())


def free_running(decoder, memory, memory_lengths, max_iters: int, prenet_masks, stop_each: bool = False,
                 progress=None, *, plan: Optional[DecodingPlan] = None) -> Optional[tuple]:
    """The free-running loop of an eager ``Tacotron2Decoder`` call in the native step, or ``None`` when the call's
    plan (:func:`tf_layers.decoding_plan.plan_decoding`) names another loop (pre-net masks shorter than the steps
    run go to the graph loop too).

    Args:
        decoder: a built ``tf_layers.Tacotron2Decoder``.
        memory: ``(batch, T_in, memory_size)`` float32; memory_lengths: ``(batch,)`` int32 or None.
        max_iters: the step cap.
        prenet_masks: per pre-net layer ``(batch, steps, size)`` keep-masks, or None.
        stop_each: each entry leaves the loop at its own stop (``synthesize_batch``'s rule) instead of the
            original's batch rule (the same for one entry).
        progress: ``progress(step, largest stop probability)`` after every step, or None.
        plan: the call's plan, when the caller made it (then ``stop_each`` and ``progress`` are the plan's).

    Returns:
        ``(frames (batch, steps, r * num_mels), stop probabilities (batch, steps, r), alignments
        (batch, T_in, steps))``; with ``stop_each`` zeros at the steps after an entry stopped, as the graph loop.
    """
    if plan is None:
        plan = plan_decoding(decoder, memory, noise_masks={"prenet": prenet_masks}, max_iters=max_iters,
                             progress=progress, stop_each=stop_each)
    if not plan.native:
        return None
    stop_each, progress = plan.stop_each, plan.progress
    pre = decoder.prenet
    sizes = tuple(int(s) for s in pre.layers_sizes)
    arrays = _loop_arrays(decoder, memory, memory_lengths, dense_rows=plan.loop == "native-step")
    keep = None
    if prenet_masks is not None:
        keep = np.concatenate([_array(m[:, :max_iters]) for m in prenet_masks], 2)
    seed = tf.cast(pre.seed_generator.next(), tf.int32) if keep is None and pre.drop_rate > 0 else None
    if plan.loop == "native-step":
        loop = native.DecoderLoop(native.library(), lstm_cols=True, dense_cols=False, **arrays)
        draws = None if seed is None else _Draws(seed, sizes)
        frames, stop, alignments, _ = loop.run(max_iters, draws, None if keep is None else keep[0], progress)
        return (tf.constant(frames[None]), tf.constant(stop[None]),
                tf.constant(np.ascontiguousarray(alignments.T)[None]))
    loop = native.BatchDecoderLoop(native.library(), **arrays)
    draws = None if seed is None else _Draws(seed, sizes)
    frames, stop, alignments, _ = loop.run(max_iters, draws, keep, stop_each, progress)
    return tf.constant(frames), tf.constant(stop), tf.constant(np.ascontiguousarray(alignments.transpose(0, 2, 1)))


def tacotron1_free_running(decoder, memory, keys, memory_lengths, max_iters: int) -> tuple:
    """An eager ``Tacotron1Decoder`` inference call's free-running loop in the native loop, once
    :func:`tf_layers.decoding_plan.plan_decoding` named it (``native-tacotron1``).

    Args:
        decoder: the decoder (``tf_layers.Tacotron1Decoder``, float32).
        memory: ``(batch, T_in, memory_size)`` float32; keys: ``(batch, T_in, attention_depth)`` its keys
            (:meth:`Tacotron1Decoder.process_memory`).
        memory_lengths: ``(batch,)`` int or None (read with ``mask_memory`` only).
        max_iters: the step cap.

    Returns:
        ``(frames (batch, steps, num_mels * r), alignments (batch, T_in, steps))``, as the decoder's loop.

    One thread: TensorFlow's own pool threads keep their CPUs busy a while after each op, and a second thread here
    made the loop slower, not faster (2-CPU probe, keithito's sizes: 33 ms against 27 ms for 200 steps; torch's
    loop, whose pool sleeps, gains from a second: 13 ms against 20 ms).
    """
    att = decoder.attention
    location, pad_before = None, 0
    if hasattr(att, "location_conv_kernel"):  # mimic2: conv1d(previous alignments) @ location_layer, one kernel
        conv = np.asarray(att.location_conv_kernel, np.float32)[:, 0, :]
        location = _array(conv @ np.asarray(att.location_kernel, np.float32))
        pad_before = (int(att.kernel_size) - 1) // 2
    score_bias = None
    if decoder.mask_memory and memory_lengths is not None:
        inside = tf.sequence_mask(memory_lengths, tf.shape(memory)[1]).numpy()
        score_bias = np.where(inside, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)
    grus = (decoder.attention_gru, *decoder.decoder_grus)
    layers = decoder.prenet.dense_layers
    loop = native.Tacotron1Loop(
        native.library(), prenet_weights=[_array(d.kernel) for d in layers],
        prenet_biases=[_array(d.bias) for d in layers],
        gru_weights=[[_array(x) for x in (g.gates_kernel, g.gates_bias, g.candidate_kernel, g.candidate_bias)]
                     for g in grus],
        query_weight=_array(att.query_kernel), v_a=_array(att.v), location_weight=location, pad_before=pad_before,
        keys=_array(keys), values=_array(memory), score_bias=score_bias,
        cell0_weight=_array(decoder.cell0_projection.kernel), cell0_bias=_array(decoder.cell0_projection.bias),
        projection_weight=_array(decoder.output_projection.kernel),
        projection_bias=_array(decoder.output_projection.bias), num_mels=decoder.hparams.num_mels,
        prenet_outside=not decoder.prenet_inside, cols=True, threads=1)
    frames, alignments = loop.run(max_iters)
    return tf.constant(frames), tf.constant(alignments)
