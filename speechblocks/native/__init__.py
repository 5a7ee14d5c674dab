"""The native decoder step: a Tacotron-2 decoder's free-running inference at batch 1, one C call a step.

At batch 1 a decoder step streams every LSTM weight once (~60 MiB at the RTVC sizes) and does ~100 small things
around those two products; in TensorFlow's while loop and in torch's TorchScript loop the small ops cost about as
much again as the products' distance from the memory bandwidth. ``decoder_step.c`` runs the whole step (pre-net,
zoneout LSTM stack, location-sensitive attention, the projections and the stop rule) in one OpenMP parallel region,
each thread streaming its own rows, reading either framework's weights in place (torch's ``(out, in)`` rows, Keras'
``(in, out)`` columns). It computes the maths of the frameworks' own steps in float32 (the order of each sum is its
own); ``tests/test_native_decoder_step*.py`` hold it to each framework's loop. The framework adapters are
``torch_layers/_native.py`` and ``tf_layers/_native.py``; this module is numpy only.

``decoder_batch.c`` (:class:`BatchDecoderLoop`) is the same step for a batch: from a few entries on a step's LSTM
products are compute-bound, so every kernel is packed once per loop into column panels multiplied against 4 entries
at a time in registers (``vector_tiles.h``); the entries still running are listed per step, each leaving at its own
stop (``tests/test_native_decoder_batch.py``).

The same library holds ``encoder_scan.c`` (:func:`encoder_scan`): both directions of the encoder's zoneout LSTM over
time at inference in one call, a thread per direction (more threads split the batch), only the entries still
running computed; torch's ``EncoderRNN`` runs it (``tests/test_native_encoder_scan.py``). Both share
``vector_maths.h``.

``tacotron1_step.c`` (:class:`Tacotron1Loop`) is the Tacotron-1 decoder's (keithito/tacotron, mimic2) whole
free-running loop in one call: pre-net, attention GRU, Bahdanau attention (mimic2's location term), the residual GRUs,
the frames and the exact-zero stop, either framework's weights read in place
(``tests/test_native_tacotron1_step*.py``).

The library is compiled on first use with the system C compiler (``$CC``, else ``cc``, else ``gcc``: ``-O3
-march=native -fopenmp`` then ``$SPEECHBLOCKS_NATIVE_CFLAGS``, glibc's vector maths when it links) into
``$SPEECHBLOCKS_CACHE/native`` (default ``~/.cache/speechblocks/native``, created ``0700``), one file per compiler,
flags, sources and CPU; the build is atomic (written aside, then renamed). A cached file is loaded only when this user
owns it and its directory and nobody else can write them (else it is rebuilt, or the library built in a private
directory), and only when its structs' layout matches the ctypes mirrors (``_build.py``). Without a compiler, on a
build error, with a refused file, or with ``SPEECHBLOCKS_NATIVE=0``, :func:`library` returns ``None`` and the blocks run
their own loops: the native code is an accelerator, never a requirement. :func:`status` says which, and why;
:func:`cpu_budget` is the thread count the adapters give the native steps (the process's CPUs, its cgroup quota
included).
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from ._build import HEADERS, SOURCES, NativeStatus, enabled, library, status
from ._fields import _F, MAX_ATTENTION_UNITS, MAX_LAYERS, _ptr, _set_fields, _threads, cpu_budget  # noqa: F401 (_F)
from ._structs import _Decoder, _State
from .batch_loop import BatchDecoderLoop
from .tacotron1_loop import Tacotron1Loop

__all__ = ["library", "enabled", "status", "NativeStatus", "cpu_budget", "phase_profile", "DecoderLoop",
           "BatchDecoderLoop", "Tacotron1Loop", "encoder_scan", "PHASES", "MAX_LAYERS", "MAX_ATTENTION_UNITS",
           "TORCH_GATES", "TF1_GATES", "SOURCES", "HEADERS"]

#: each gate's block of ``u`` in the LSTM gates (i, f, g, o): torch's order, TF1's ``i, j, f, o``
TORCH_GATES = (0, 1, 2, 3)
TF1_GATES = (0, 2, 1, 3)
#: the phases of a native step (``SB_PHASES``), as :func:`phase_profile` names them
PHASES = ("pre-net", "LSTM stack", "attention query", "attention energies", "alignments (softmax)",
          "context + attention state", "projections + stop")

_PROFILE = threading.local()


@contextlib.contextmanager
def phase_profile():
    """Times the phases of the native steps run in this thread meanwhile (wall time of thread 0 between the step's
    barriers, so the phases add up to the step): yields a dict ``{phase: seconds}`` (:data:`PHASES`) plus
    ``"steps"``, filled as the steps run."""
    totals: dict = dict.fromkeys(PHASES, 0.0)
    totals["steps"] = 0
    old = getattr(_PROFILE, "value", None)
    _PROFILE.value = totals
    try:
        yield totals
    finally:
        _PROFILE.value = old


class DecoderLoop:
    """A free-running decoder loop at batch 1 over the native step, for one utterance.

    Every array must be float32 and C-contiguous (they are read in place and kept referenced for the loop's life);
    the framework adapters check the shapes before building one (the C step trusts them).

    Args:
        lstm_weights, lstm_biases: per layer ``(4u, in + u)`` (``lstm_cols`` False, torch) or ``(in + u, 4u)``
            (True, TF1/Keras) over ``[input, h]``, layer 1's input ``[pre-net output, context]``; ``(4u,)`` with the
            forget bias folded in.
        gates: the blocks of i, f, g, o in the gates (:data:`TORCH_GATES`, :data:`TF1_GATES`).
        prenet_weights, prenet_biases, query_weight, projection_weight, projection_bias: the dense kernels,
            ``(out, in)`` or ``(in, out)`` (``dense_cols``); the projection stacks the frame and stop outputs.
        location_weight: ``(kernel, att_units)`` the location convolution and its dense folded into one kernel.
        v_a: ``(att_units,)``; keys: ``([1,] T_in, att_units)`` with every constant bias; values:
            ``([1,] T_in, memory_size)``; score_bias: ``([1,] T_in)`` 0 / -inf past the length, or ``None`` (a leading
            batch of one, as the batched loop's arrays have, is read alike).
        num_mels, frame_size, zoneout, prenet_rate, pad_before, smoothing, cumulate, stop_at_any, threads: the
            decoder's constants (``frame_size = r * num_mels``, TF ``'same'`` padding before the alignments).
    """

    def __init__(self, lib: ctypes.CDLL, *, lstm_weights: Sequence[np.ndarray], lstm_biases: Sequence[np.ndarray],
                 lstm_cols: bool, gates: tuple, prenet_weights: Sequence[np.ndarray],
                 prenet_biases: Sequence[np.ndarray], dense_cols: bool, query_weight: np.ndarray,
                 location_weight: np.ndarray, v_a: np.ndarray, keys: np.ndarray, values: np.ndarray,
                 score_bias: Optional[np.ndarray], projection_weight: np.ndarray, projection_bias: np.ndarray,
                 num_mels: int, frame_size: int, zoneout: float, prenet_rate: float, pad_before: int,
                 smoothing: bool, cumulate: bool, stop_at_any: bool, threads: int):
        self.lib = lib
        arrays = [*lstm_weights, *lstm_biases, *prenet_weights, *prenet_biases, query_weight, location_weight, v_a,
                  keys, values, projection_weight, projection_bias] + ([] if score_bias is None else [score_bias])
        for a in arrays:
            if a.dtype != np.float32 or not a.flags.c_contiguous:
                raise ValueError("DecoderLoop: every array must be float32 and C-contiguous")
        self._keep = arrays
        u = lstm_biases[0].shape[0] // 4
        layers = len(lstm_weights)
        max_time, memory_size = values.shape[-2:]
        m = _Decoder()
        _set_fields(m, lstm_weights, lstm_biases, gates, zoneout, prenet_weights, prenet_biases, num_mels, prenet_rate,
                    query_weight, location_weight, v_a, keys, values, score_bias, projection_weight, projection_bias,
                    frame_size, pad_before, smoothing, cumulate, stop_at_any, threads)
        m.lstm_cols, m.dense_cols = int(lstm_cols), int(dense_cols)
        self.prenet_sizes = [int(b.shape[0]) for b in prenet_biases]

        nmax = max(m.input0 + u, 2 * u)
        f32 = np.float32
        self.buffers = dict(cells=np.zeros((layers, u), f32), hiddens=np.zeros((layers, u), f32),
                            context=np.zeros(memory_size, f32), attention=np.zeros(max_time, f32),
                            frame=np.zeros(num_mels, f32), xin=np.zeros((layers + 1, nmax), f32),
                            gates=np.zeros(4 * u, f32), partial=np.zeros((max(threads, 1), 4 * u), f32),
                            prenet_buf=np.zeros((2, max(self.prenet_sizes)), f32),
                            query=np.zeros(m.att_units, f32), energy=np.zeros(max_time * m.att_units, f32),
                            out=np.zeros(u + memory_size, f32))
        s = _State()
        for name, x in self.buffers.items():
            setattr(s, name, _ptr(x))
        s.nmax, s.prenet_max = nmax, max(self.prenet_sizes)
        self.m, self.s = m, s
        self.rate = float(prenet_rate)

    def run(self, n_steps: int, draws: Optional[Callable[[int], np.ndarray]] = None,
            keep_masks: Optional[np.ndarray] = None, progress: Optional[Callable[[int, float], object]] = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """Runs up to ``n_steps`` steps (the stop rule ends it earlier).

        Args:
            n_steps: the most steps to run.
            draws: ``draws(step)`` -> the pre-net dropout's uniform numbers of that step (0-based), every layer's
                concatenated ``(sum of prenet sizes,)`` float32 (kept where ``u >= rate``); not called when the
                rate is 0 or ``keep_masks`` is given.
            keep_masks: ``(>= n_steps, sum of prenet sizes)`` 0/1 pre-net keep-masks, or ``None``.
            progress: called after every step with ``(steps done, largest stop probability)``.

        Returns:
            ``(frames (steps, frame_size), stop probabilities (steps, r), alignments (steps, T_in), finished)``.
        """
        m = self.m
        projected = np.empty((n_steps, m.proj_rows), np.float32)
        alignments = np.empty((n_steps, m.max_time), np.float32)
        total = sum(self.prenet_sizes)
        zeros = np.zeros(total, np.float32)
        if keep_masks is not None:
            keep_masks = np.ascontiguousarray(keep_masks[:n_steps], np.float32)
        profile = getattr(_PROFILE, "value", None)
        timings = np.zeros(len(PHASES), np.float64) if profile is not None else None
        self.s.timings = None if timings is None else timings.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        ms, ss, fn = ctypes.byref(self.m), ctypes.byref(self.s), self.lib.sb_decoder_step
        step, finished = 0, False
        for step in range(1, n_steps + 1):
            if keep_masks is not None:
                u = keep_masks[step - 1]
            elif self.rate > 0.0:
                if draws is None:
                    raise ValueError("DecoderLoop.run: a pre-net dropout rate > 0 needs `draws` or `keep_masks`")
                u = np.ascontiguousarray(draws(step - 1), np.float32)
                if u.shape != (total,):
                    raise ValueError(f"DecoderLoop: draws({step - 1}) must have shape ({total},); got {u.shape}")
            else:
                u = zeros
            fired = fn(ms, ss, _ptr(u), int(keep_masks is not None), _ptr(projected[step - 1]),
                       _ptr(alignments[step - 1]))
            if progress is not None:
                progress(step, float(projected[step - 1, m.frame_size:].max()))
            if fired:
                finished = True
                break
        self.s.timings = None
        if profile is not None:
            for name, seconds in zip(PHASES, timings.tolist()):
                profile[name] += seconds
            profile["steps"] += step
        return projected[:step, :m.frame_size], projected[:step, m.frame_size:], alignments[:step], finished


def encoder_scan(lib: ctypes.CDLL, gx: np.ndarray, w_hh: np.ndarray, lengths: Optional[np.ndarray], zoneout: float,
                 threads: int) -> np.ndarray:
    """Both directions of the encoder's zoneout LSTM over time, inference (``encoder_scan.c``).

    Args:
        lib: :func:`library`.
        gx: ``(batch, time, 2, 4u)`` float32 C-contiguous input projections of both directions at every position,
            bias and forget bias included, gate blocks **i, f, o, g** (the inputs times both directions' input
            weights: one GEMM).
        w_hh: ``(2, u, 4u)`` float32 C-contiguous recurrent weights, blocks i, f, o, g.
        lengths: ``(batch,)`` integer lengths (clipped to ``[0, time]``) or ``None`` (every entry runs every step).
        zoneout: the inference zoneout factor of cell and hidden state (``new * (1 - z) + prev * z``).
        threads: OpenMP threads (one direction each; more split the batch).

    Returns:
        ``(batch, time, 2u)`` float32: forward outputs then backward outputs (the backward direction runs each
        sequence reversed within its length; each output at the position it consumed), zeros past a length.
    """
    if gx.ndim != 4 or gx.shape[2] != 2 or w_hh.ndim != 3 or w_hh.shape[0] != 2 or gx.shape[3] != w_hh.shape[2] \
            or w_hh.shape[2] != 4 * w_hh.shape[1]:
        raise ValueError(f"encoder_scan: `gx` must be (batch, time, 2, 4u) and `w_hh` (2, u, 4u); got {gx.shape} and "
                         f"{w_hh.shape}")
    for name, a in (("gx", gx), ("w_hh", w_hh)):
        if a.dtype != np.float32 or not a.flags.c_contiguous:
            raise ValueError(f"encoder_scan: `{name}` must be float32 and C-contiguous")
    batch, n_steps = gx.shape[:2]
    u = w_hh.shape[1]
    out = np.empty((batch, n_steps, 2 * u), np.float32)
    if out.size == 0:
        return out
    lens = None
    if lengths is not None:
        lengths = np.asarray(lengths)
        if lengths.shape != (batch,):
            raise ValueError(f"encoder_scan: `lengths` must have shape ({batch},); got {lengths.shape}")
        lens = np.ascontiguousarray(np.clip(lengths, 0, n_steps), np.int32)
    failed = lib.sb_encoder_scan(_ptr(gx), _ptr(w_hh),
                                 None if lens is None else lens.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
                                 n_steps, batch, u, 1.0 - zoneout, zoneout, int(zoneout != 0.0), _threads(threads),
                                 _ptr(out))
    if failed:
        raise MemoryError("encoder_scan: the native scan could not allocate its scratch memory")
    return out

