"""A free-running decoder loop over a batch of utterances in the native batched step (``decoder_batch.c``).

Numpy only, like the rest of :mod:`speechblocks.native`; the framework adapter (``tf_layers/_native.py``) builds it
from a decoder's weights and one call's attention memory.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from ..stop_rule import batch_fired
from ._fields import MAX_BATCH, _ptr, _set_fields
from ._structs import _BatchDecoder, _BatchState

__all__ = ["BatchDecoderLoop", "MAX_BATCH"]

def _wide(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def _aligned_zeros(shape) -> np.ndarray:
    """float32 zeros at a 64-byte boundary (numpy gives large arrays 16 bytes: a vector load across two cache
    lines costs the panels' product ~1.6x)."""
    n = int(np.prod(shape))
    raw = np.zeros(n + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start:start + n].reshape(shape)


class BatchDecoderLoop:
    """A free-running decoder loop over ``batch`` utterances at once, one native call a step.

    The kernels are packed once, here, into the step's column panels (~the kernels' size again in memory, for the
    loop's life). Every array must be float32 and C-contiguous; the framework adapter checks the shapes (the C step
    trusts them).

    Args:
        lib: :func:`speechblocks.native.library`.
        lstm_weights, lstm_biases: per layer ``(in + u, 4u)`` (Keras / TF1 columns; ``rows``: torch's
            ``(4u, in + u)``) over ``[input, h]``, layer 1's input ``[pre-net output, context]``; ``(4u,)`` with the
            forget bias folded in.
        gates: the blocks of i, f, g, o in the gates (``TORCH_GATES``, ``TF1_GATES``).
        prenet_weights, prenet_biases, query_weight, projection_weight, projection_bias: the dense kernels in the
            same layout; the projection stacks the frame and stop outputs.
        location_weight: ``(kernel, att_units)`` the location convolution and its dense folded into one kernel.
        v_a: ``(att_units,)``; keys: ``(batch, T_in, att_units)`` with every constant bias; values:
            ``(batch, T_in, memory_size)``; score_bias: ``(batch, T_in)`` 0 / -inf past each length, or ``None``.
        rows: the kernels are torch's ``(out, in)`` (packed transposed).
        num_mels, frame_size, zoneout, prenet_rate, pad_before, smoothing, cumulate, stop_at_any, threads: the
            decoder's constants, as for :class:`~speechblocks.native.DecoderLoop`.
    """

    def __init__(self, lib: ctypes.CDLL, *, lstm_weights: Sequence[np.ndarray], lstm_biases: Sequence[np.ndarray],
                 gates: tuple, prenet_weights: Sequence[np.ndarray], prenet_biases: Sequence[np.ndarray],
                 query_weight: np.ndarray, location_weight: np.ndarray, v_a: np.ndarray, keys: np.ndarray,
                 values: np.ndarray, score_bias: Optional[np.ndarray], projection_weight: np.ndarray,
                 projection_bias: np.ndarray, num_mels: int, frame_size: int, zoneout: float, prenet_rate: float,
                 pad_before: int, smoothing: bool, cumulate: bool, stop_at_any: bool, threads: int,
                 rows: bool = False):

        arrays = [*lstm_weights, *lstm_biases, *prenet_weights, *prenet_biases, query_weight, location_weight, v_a,
                  keys, values, projection_weight, projection_bias] + ([] if score_bias is None else [score_bias])
        for a in arrays:
            if a.dtype != np.float32 or not a.flags.c_contiguous:
                raise ValueError("BatchDecoderLoop: every array must be float32 and C-contiguous")
        self.lib = lib
        tile = int(lib.sb_tile_columns())

        def pack(w: np.ndarray) -> np.ndarray:
            n, cols = (w.shape[1], w.shape[0]) if rows else w.shape
            out = _aligned_zeros((_wide(cols, tile) // tile, n, tile))
            lib.sb_pack_panels(_ptr(w), n, cols, int(rows), _ptr(out))
            return out

        u = lstm_biases[0].shape[0] // 4
        layers = len(lstm_weights)
        batch, max_time, memory_size = values.shape
        packed_lstm = [pack(w) for w in lstm_weights]
        packed_pre = [pack(w) for w in prenet_weights]
        packed_query, packed_proj = pack(query_weight), pack(projection_weight)
        self._keep = arrays + packed_lstm + packed_pre + [packed_query, packed_proj]
        m = _BatchDecoder()
        _set_fields(m, packed_lstm, lstm_biases, gates, zoneout, packed_pre, prenet_biases, num_mels, prenet_rate,
                    packed_query, location_weight, v_a, keys, values, score_bias, packed_proj, projection_bias,
                    frame_size, pad_before, smoothing, cumulate, stop_at_any, threads)
        self.prenet_sizes = [int(b.shape[0]) for b in prenet_biases]
        units = v_a.shape[0]

        nmax = max(m.input0 + u, 2 * u)
        gmax = max(_wide(x, tile) for x in [4 * u, units, m.proj_rows, *self.prenet_sizes])
        f32 = np.float32
        self.buffers = dict(cells=np.zeros((batch, layers, u), f32), hiddens=np.zeros((batch, layers, u), f32),
                            context=np.zeros((batch, memory_size), f32), attention=np.zeros((batch, max_time), f32),
                            frame=np.zeros((batch, num_mels), f32), xin=np.zeros((batch, layers, nmax), f32),
                            gates=_aligned_zeros((batch, gmax)), prenet=_aligned_zeros((batch, gmax)),
                            query=_aligned_zeros((batch, _wide(units, tile))),
                            energy=np.zeros((max(m.threads, 1), max_time * units), f32),
                            out=np.zeros((batch, u + memory_size), f32))
        s = _BatchState()
        for name, x in self.buffers.items():
            setattr(s, name, _ptr(x))
        s.nmax, s.gmax = nmax, gmax
        self.m, self.s, self.batch = m, s, batch
        self.rate = float(prenet_rate)

    def run(self, n_steps: int, draws: Optional[Callable[[int, int], np.ndarray]] = None,
            keep_masks: Optional[np.ndarray] = None, stop_each: bool = True,
            progress: Optional[Callable[[int, float], object]] = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """Runs up to ``n_steps`` steps.

        Args:
            n_steps: the most steps to run.
            draws: ``draws(step, running)`` -> the pre-net dropout's uniform numbers of that step (0-based) for the
                ``running`` entries still in the loop (in batch order), every layer's concatenated:
                ``(running, sum of prenet sizes)`` (kept where ``u >= rate``); not called when the rate is 0 or
                ``keep_masks`` is given.
            keep_masks: ``(batch, >= n_steps, sum of prenet sizes)`` 0/1 pre-net keep-masks, or ``None``.
            stop_each: each entry leaves the loop at the step its own stop rule fires (the loop ends when none is
                left); otherwise the original rule: every entry runs until one step at which the rule holds over the
                whole batch (each of the ``r`` frames' stop rounds to 1 in every entry; ``stop_at_any``: some frame's
                in every entry).
            progress: called after every step with ``(steps done, largest stop probability of the step)``.

        Returns:
            ``(frames (batch, steps, frame_size), stop probabilities (batch, steps, r), alignments
            (batch, steps, T_in), finished)``, zeros at the steps after an entry left; ``finished``: the stop rule
            ended the loop (not ``n_steps``).
        """
        m, batch = self.m, self.batch
        total = sum(self.prenet_sizes)
        projected = np.zeros((batch, n_steps, m.proj_rows), np.float32)
        alignments = np.zeros((batch, n_steps, m.max_time), np.float32)
        running = np.arange(batch, dtype=np.int32)
        out_p = np.empty((batch, m.proj_rows), np.float32)
        out_a = np.empty((batch, m.max_time), np.float32)
        fired = np.zeros(batch, np.int32)
        ms, ss, fn = ctypes.byref(m), ctypes.byref(self.s), self.lib.sb_decoder_step_batch
        steps, finished = 0, False
        for step in range(n_steps):
            n = len(running)
            if keep_masks is not None:
                u = np.ascontiguousarray(keep_masks[running, step], np.float32)
            elif self.rate > 0.0:
                if draws is None:
                    raise ValueError("BatchDecoderLoop.run: a pre-net dropout rate > 0 needs `draws` or `keep_masks`")
                u = np.ascontiguousarray(draws(step, n), np.float32)
                if u.shape != (n, total):
                    raise ValueError(f"BatchDecoderLoop: draws({step}, {n}) must have shape ({n}, {total}); "
                                     f"got {u.shape}")
            else:
                u = np.zeros((n, total), np.float32)
            if fn(ms, ss, n, running.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), _ptr(u),
                  int(keep_masks is not None), _ptr(out_p), _ptr(out_a),
                  fired.ctypes.data_as(ctypes.POINTER(ctypes.c_int))):
                raise ValueError(f"BatchDecoderLoop: at most {MAX_BATCH} entries")
            projected[running, step] = out_p[:n]
            alignments[running, step] = out_a[:n]
            steps = step + 1
            stop = out_p[:n, m.frame_size:]
            if progress is not None:
                progress(steps, float(stop.max()))
            if stop_each:
                left = fired[:n] != 0
                if left.all():
                    finished = True
                    break
                running = np.ascontiguousarray(running[~left])
            else:
                if batch_fired(stop, m.stop_at_any):
                    finished = True
                    break
        return (projected[:, :steps, :m.frame_size], projected[:, :steps, m.frame_size:], alignments[:, :steps],
                finished)
