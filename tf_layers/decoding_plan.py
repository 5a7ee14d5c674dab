"""Which loop runs a Keras ``Tacotron2Decoder`` call, decided in one place (:func:`plan_decoding`).

Every caller that runs the decoder asks :func:`plan_decoding` (the decoder's ``call``, ``Tacotron2.synthesize`` and
``synthesize_batch`` through it, ``tf_layers._native.free_running``) and runs the loop the
:class:`~speechblocks.decoding.DecodingPlan` names, with the options it carries (``progress``, ``stop_each``) passed
explicitly to the loop:

============================================================  ================  ====================================
call                                                          loop              reason
============================================================  ================  ====================================
``mel_targets`` given (training, GTA)                         teacher-forced    (none: the only loop)
inside a ``tf.function`` trace (``fit``, ``predict``, export)  graph             ``inside a tf.function trace``
free running in training, eagerly                             python            ``training (an eager GradientTape
                                                                                ...)``
compute dtype other than float32                              graph             ``float64 compute dtype``
memory on an accelerator                                      graph             ``memory on /GPU:0``
injected zoneout masks (``noise_masks["decoder_LSTM"]``)      graph             ``injected zoneout masks``
injected pre-net masks shorter than ``max_iters``             graph             ``pre-net masks shorter than ...``
``SPEECHBLOCKS_NATIVE=0``, or the library cannot be built     graph             ``the native library is off: ...``
a pre-net other than ReLU, sizes past the C step's limits     graph             the limit
batch > ``MAX_BATCH`` (or unknown)                            graph             ``batch N > MAX_BATCH=1024``
eager float32 CPU inference, batch 1                          native-step
eager float32 CPU inference, batch 2 .. ``MAX_BATCH``         native-batch
============================================================  ================  ====================================

A ``Tacotron1Decoder`` (keithito/tacotron, mimic2; :func:`tacotron1_plan`) plans the same way among
``teacher-forced``, ``graph`` (inside a trace), ``python`` (the decoder's ``tf.while_loop`` called eagerly runs op by
op: training, or a call the native loop refuses) and ``native-tacotron1`` (its whole free-running loop in one C call:
eager float32 CPU inference, batch 1 to ``speechblocks.native.tacotron1_loop.MAX_BATCH``, no injected pre-net masks,
the library built); ``Tacotron1.synthesize`` and the model's eager inference call run the decoder eagerly between the
cached encoder and post-net graphs when the plan names the native loop.

:class:`ProgressRelay` hands a traced loop's per-step report (a ``tf.numpy_function``, bound at trace time) to the
callback of the call that runs the traced function.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import tensorflow as tf

from speechblocks import native
from speechblocks.decoding import DecodingPlan

__all__ = ["plan_decoding", "tacotron1_plan", "native_off_reason", "ProgressRelay"]


def native_off_reason() -> Optional[str]:
    """Why the native library cannot run in this process (``None`` when it can): the core's own words
    (:func:`speechblocks.native.status`)."""
    if not native.enabled():
        return "SPEECHBLOCKS_NATIVE=0"
    if native.library() is None:
        return native.status().reason or "the library could not be loaded"
    return None


def _static_steps(max_iters) -> Optional[int]:
    if max_iters is None or isinstance(max_iters, int):
        return max_iters
    try:
        return int(tf.get_static_value(max_iters))
    except TypeError:
        return None


def _graph_reason(decoder, memory, noise_masks, max_iters) -> Optional[str]:
    """Why an eager free-running inference call cannot take the native step (``None``: it can)."""
    if decoder.compute_dtype != "float32":
        return f"{decoder.compute_dtype} compute dtype"
    if memory.dtype != tf.float32:
        return f"{memory.dtype.name} memory"
    if "CPU" not in (getattr(memory, "device", "") or "CPU"):
        return f"memory on {memory.device}"
    noise = noise_masks or {}
    if noise.get("decoder_LSTM") is not None:
        return "injected zoneout masks"
    prenet, steps = noise.get("prenet"), _static_steps(max_iters)
    if prenet is not None and any(m.shape[1] is None or steps is None or m.shape[1] < steps for m in prenet):
        return "pre-net masks shorter than max_iters"
    if getattr(decoder.prenet.activation, "__name__", "") != "relu":
        return "a pre-net activation other than ReLU"
    if decoder.decoder_lstm.layers > native.MAX_LAYERS or len(decoder.prenet.layers_sizes) > native.MAX_LAYERS:
        return f"more than MAX_LAYERS={native.MAX_LAYERS} layers"
    if decoder.attention.units > native.MAX_ATTENTION_UNITS:
        return f"attention_dim > MAX_ATTENTION_UNITS={native.MAX_ATTENTION_UNITS}"
    batch, time = memory.shape[0], memory.shape[1]
    if batch is None or batch < 1 or time is None or time < 1:
        return f"memory of shape {tuple(memory.shape)}"
    if batch > native.batch_loop.MAX_BATCH:
        return f"batch {batch} > MAX_BATCH={native.batch_loop.MAX_BATCH}"
    off = native_off_reason()
    return None if off is None else f"the native library is off: {off}"


def plan_decoding(decoder, memory, *, mel_targets=None, training=False, noise_masks=None, max_iters=None,
                  progress=None, stop_each: bool = False, tracing: Optional[bool] = None) -> DecodingPlan:
    """The loop that runs ``decoder`` (a built ``Tacotron2Decoder``, or a ``Tacotron1Decoder``:
    :func:`tacotron1_plan`) on ``memory``, and why (see the module's table).

    Args:
        decoder: the decoder.
        memory: ``(batch, T_in, memory_size)`` the call's memory (its static batch, time, dtype and device are read).
        mel_targets: the call's targets or None (free running).
        training: the call's ``training``.
        noise_masks: the decoder's ``noise_masks`` dict (``"prenet"``, ``"decoder_LSTM"``) or None.
        max_iters: the step cap (an int or a tensor; pre-net masks must cover it for the native step).
        progress: ``progress(step, largest stop probability)`` after every free-running step, or None.
        stop_each: each entry leaves the loop at its own stop (``synthesize_batch``).
        tracing: whether the call runs inside a ``tf.function`` trace; default ``not tf.executing_eagerly()``.

    Returns:
        :class:`speechblocks.decoding.DecodingPlan` (``str(plan)`` prints the loop and the reason).
    """
    if getattr(decoder, "decoder_family", None) == "tacotron1":  # a Tacotron1Decoder (which imports this module)
        if progress is not None:
            raise ValueError("plan_decoding: argument `progress` must be None for a Tacotron1Decoder (its loops "
                             "report no progress).")
        return tacotron1_plan(decoder, memory, mel_targets=mel_targets, training=training, noise_masks=noise_masks,
                              tracing=tracing)
    if progress is not None and not callable(progress):
        raise ValueError(f"plan_decoding: argument `progress` must be callable or None; got {progress!r}.")
    options = dict(progress=progress, stop_each=bool(stop_each))
    if mel_targets is not None:
        return DecodingPlan("teacher-forced", **options)
    tracing = (not tf.executing_eagerly()) if tracing is None else bool(tracing)
    if tracing:
        return DecodingPlan("graph", "inside a tf.function trace", **options)
    if training:  # free running in training, eagerly: the loop runs op by op, so a GradientTape records every step
        return DecodingPlan("python", "training (an eager GradientTape records the loop op by op)", **options)
    reason = _graph_reason(decoder, memory, noise_masks, max_iters)
    if reason is not None:
        return DecodingPlan("graph", reason, **options)
    return DecodingPlan("native-step" if memory.shape[0] == 1 else "native-batch", **options)


def tacotron1_plan(decoder, memory, *, mel_targets=None, training=False, noise_masks=None,
                   tracing: Optional[bool] = None) -> DecodingPlan:
    """The loop that runs a ``Tacotron1Decoder`` call on ``memory`` ``(batch, T_in, memory_size)``, and why.

    Args:
        decoder: the decoder.
        memory: the call's memory (its static batch, time, dtype and device are read).
        mel_targets: the call's targets or None (free running).
        training: the call's ``training``.
        noise_masks: ``{"decoder_prenet": the call's prenet_masks}`` or None.
        tracing: whether the call runs inside a ``tf.function`` trace; default ``not tf.executing_eagerly()``.

    Returns:
        :class:`speechblocks.decoding.DecodingPlan`: ``teacher-forced``, ``graph`` (traced), ``python`` (eager: the
        ``tf.while_loop`` op by op) or ``native-tacotron1``.
    """
    if mel_targets is not None:
        return DecodingPlan("teacher-forced")
    tracing = (not tf.executing_eagerly()) if tracing is None else bool(tracing)
    if tracing:
        return DecodingPlan("graph", "inside a tf.function trace")
    if training:
        return DecodingPlan("python", "training (the pre-net's dropout is on; the native loop is inference only)")
    limit = native.tacotron1_loop.MAX_BATCH
    batch, time = memory.shape[0], memory.shape[1]
    reason = None
    if (noise_masks or {}).get("decoder_prenet") is not None:
        reason = "injected pre-net masks"
    elif decoder.compute_dtype != "float32":
        reason = f"{decoder.compute_dtype} compute dtype"
    elif tf.as_dtype(memory.dtype) != tf.float32:
        reason = f"{tf.as_dtype(memory.dtype).name} memory"
    elif "CPU" not in (getattr(memory, "device", "") or "CPU"):
        reason = f"memory on {memory.device}"
    elif batch is None or time is None or not 1 <= batch <= limit or time < 1:
        reason = f"memory of shape {tuple(memory.shape)} (the native loop runs batches of 1 to {limit})"
    elif (len(decoder.prenet.layers_sizes) > native.MAX_LAYERS
          or decoder.attention.units > native.MAX_ATTENTION_UNITS):
        reason = (f"sizes past the native loop's limits (MAX_LAYERS={native.MAX_LAYERS}, "
                  f"MAX_ATTENTION_UNITS={native.MAX_ATTENTION_UNITS})")
    else:
        off = native_off_reason()
        reason = None if off is None else f"the native library is off: {off}"
    return DecodingPlan("python", reason) if reason else DecodingPlan("native-tacotron1")


class ProgressRelay:
    """The bridge between a traced free-running loop's per-step report and the callback of the running call.

    A ``tf.function`` binds its loop's ``tf.numpy_function`` at trace time; :meth:`hook` is that function, bound
    once, and hands each step to the callback :meth:`reporting` installs for the call (an exception the callback
    raises ends the loop and is re-raised once TensorFlow has ended it)."""

    def __init__(self):
        self.callback, self.error = None, None

    def hook(self, step: int, stop_probability: float):
        if self.callback is not None:
            try:
                self.callback(step, stop_probability)
            except BaseException as err:  # re-raised by reporting() once TF has ended the loop
                self.error = err
                raise

    @contextlib.contextmanager
    def reporting(self, progress):
        """While the traced function runs: its loop's reports go to ``progress`` (None: nowhere)."""
        self.callback, self.error = progress, None
        try:
            yield
        except tf.errors.OpError:
            if self.error is not None:
                raise self.error from None
            raise
        finally:
            self.callback, self.error = None, None
