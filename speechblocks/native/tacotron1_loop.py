"""The free-running Tacotron-1 decoder loop (keithito/tacotron, mimic2) in one native call (``tacotron1_step.c``).

Numpy only, like the rest of :mod:`speechblocks.native`; the framework adapters (``torch_layers/_native.py``,
``tf_layers/_native.py``) build a :class:`Tacotron1Loop` from a decoder's weights and one call's attention memory.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ._fields import MAX_ATTENTION_UNITS, MAX_LAYERS, _ptr, _threads
from ._structs import _Tacotron1Decoder

__all__ = ["Tacotron1Loop", "MAX_BATCH"]

#: the largest batch the native loop is planned for: it multiplies each weight row against every entry in turn (a
#: batched product past a few entries is the frameworks' GEMMs' ground)
MAX_BATCH = 8
#: a step's multiply-adds per OpenMP thread: a step is small (keithito's sizes: ~1.7 M at batch 1, ~0.1 ms on one core)
#: and its threads meet at ~18 barriers a step, so a step runs on one thread per this many (at most ``threads``):
#: keithito's batch-1 step on up to 3, a test's tiny one on one
MACS_PER_THREAD = 512_000


def _check(name: str, a: np.ndarray, shape: tuple) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous:
        raise ValueError(f"Tacotron1Loop: argument `{name}` must be a float32 C-contiguous numpy array; got "
                         f"{type(a).__name__}{'' if not isinstance(a, np.ndarray) else ' ' + str(a.dtype)}.")
    if a.shape != shape:
        raise ValueError(f"Tacotron1Loop: argument `{name}` must have shape {shape}; got {a.shape}.")
    return a


class Tacotron1Loop:
    """A Tacotron-1 decoder's free-running inference over one call's attention memory, every step in one C call.

    The maths of ``torch_layers.tacotron1_decoder.decoder_step`` (no dropout: inference), the exact-zero stop: a row is
    finished once a step's ``num_mels * r`` outputs are all exactly 0.0, and the loop ends when every row is (finished
    rows keep being computed) or after ``max_iters`` steps. Every array must be float32 and C-contiguous: it is read
    in place (and kept referenced for the loop's life); every shape is checked here (the C loop trusts them).

    Args:
        lib: :func:`speechblocks.native.library`.
        prenet_weights, prenet_biases: per pre-net layer (relu) ``(out, in)`` (``cols`` False, torch) or ``(in,
            out)`` (True, Keras) and ``(out,)``; layer 1's input is ``[frame, context]`` (``prenet_outside`` False) or
            the frame.
        gru_weights: the attention GRU's, GRU 1's and GRU 2's ``(gates kernel, gates bias, candidate kernel,
            candidate bias)``, TF1 ``GRUCell``'s over ``[x, h]`` (gate columns ``r, u``): ``(2u, n + u)`` / ``(n + u,
            2u)``, ``(2u,)``, ``(u, n + u)`` / ``(n + u, u)``, ``(u,)``; the attention GRU's input ``[pre-net output,
            context]`` (``prenet_outside``) or the pre-net output, GRU 1's cell_0's projection, GRU 2's ``out0 + h1``.
        query_weight: ``(A, A)`` the query layer (no bias); v_a: ``(A,)``.
        location_weight: ``(kernel, A)`` mimic2's location convolution and layer folded into one kernel, or ``None``
            (content-only attention); pad_before: its TF ``'same'`` padding before.
        keys: ``(batch, T_in, A)`` ``memory @ memory_layer``; values: ``(batch, T_in, E)`` the memory; score_bias:
            ``(batch, T_in)`` 0 / -inf past each length (``mask_memory``), or ``None``.
        cell0_weight, cell0_bias: ``[h_att, context]``'s projection, ``(D, A + E)`` / ``(A + E, D)`` and ``(D,)``.
        projection_weight, projection_bias: the frames' projection, ``(num_mels * r, D)`` / ``(D, num_mels * r)``
            and ``(num_mels * r,)``.
        num_mels: the frame size (the next step reads the last ``num_mels`` outputs).
        prenet_outside: the pre-net outside the attention wrapper (keithito-20180906).
        cols: every kernel in the Keras ``(in, out)`` layout (else torch's ``(out, in)``).
        threads: the most OpenMP threads (each product's outputs split between them): one per
            :data:`MACS_PER_THREAD` multiply-adds of a step, at least one.

    Raises:
        ValueError: an array of another dtype, layout or shape, or sizes past the C loop's limits (the argument
            named).
    """

    def __init__(self, lib: ctypes.CDLL, *, prenet_weights: Sequence[np.ndarray], prenet_biases: Sequence[np.ndarray],
                 gru_weights: Sequence[Sequence[np.ndarray]], query_weight: np.ndarray, v_a: np.ndarray,
                 location_weight: Optional[np.ndarray], pad_before: int, keys: np.ndarray, values: np.ndarray,
                 score_bias: Optional[np.ndarray], cell0_weight: np.ndarray, cell0_bias: np.ndarray,
                 projection_weight: np.ndarray, projection_bias: np.ndarray, num_mels: int, prenet_outside: bool,
                 cols: bool, threads: int):
        self.lib = lib
        if not isinstance(values, np.ndarray) or values.ndim != 3 or min(values.shape) < 1:
            raise ValueError(f"Tacotron1Loop: argument `values` must be a (batch, T_in, E) array; got "
                             f"{getattr(values, 'shape', type(values).__name__)}.")
        batch, max_time, e = values.shape
        _check("values", values, values.shape)
        if not isinstance(v_a, np.ndarray) or v_a.ndim != 1 or not 1 <= v_a.shape[0] <= MAX_ATTENTION_UNITS:
            raise ValueError(f"Tacotron1Loop: argument `v_a` must have shape (A,) with 1 <= A <= "
                             f"{MAX_ATTENTION_UNITS}; got {getattr(v_a, 'shape', type(v_a).__name__)}.")
        a = v_a.shape[0]
        n_pre = len(prenet_weights)
        if not 1 <= n_pre <= MAX_LAYERS or len(prenet_biases) != n_pre:
            raise ValueError(f"Tacotron1Loop: arguments `prenet_weights` and `prenet_biases` must hold 1 to "
                             f"{MAX_LAYERS} layers alike; got {n_pre} and {len(prenet_biases)}.")
        if len(gru_weights) != 3 or any(len(g) != 4 for g in gru_weights):
            raise ValueError("Tacotron1Loop: argument `gru_weights` must hold 3 GRUs' (gates kernel, gates bias, "
                             "candidate kernel, candidate bias).")
        kernel = lambda n_in, n_out: (n_in, n_out) if cols else (n_out, n_in)  # noqa: E731
        n_in, sizes = (num_mels if prenet_outside else num_mels + e), []
        for k, (w, b) in enumerate(zip(prenet_weights, prenet_biases)):
            n_out = int(b.shape[0]) if isinstance(b, np.ndarray) and b.ndim == 1 else 0
            if n_out < 1:
                raise ValueError(f"Tacotron1Loop: argument `prenet_biases[{k}]` must have shape (out,) with out >= 1.")
            _check(f"prenet_weights[{k}]", w, kernel(n_in, n_out))
            _check(f"prenet_biases[{k}]", b, (n_out,))
            sizes.append(n_out)
            n_in = n_out
        d = int(cell0_bias.shape[0]) if isinstance(cell0_bias, np.ndarray) and cell0_bias.ndim == 1 else 0
        if d < 1:
            raise ValueError("Tacotron1Loop: argument `cell0_bias` must have shape (D,) with D >= 1.")
        f = int(projection_bias.shape[0]) if isinstance(projection_bias, np.ndarray) and projection_bias.ndim == 1 \
            else 0
        if f < num_mels or num_mels < 1:
            raise ValueError(f"Tacotron1Loop: argument `projection_bias` must have shape (num_mels * r,) with "
                             f"num_mels={num_mels} >= 1; got {getattr(projection_bias, 'shape', None)}.")
        for k, (n, u) in enumerate(((sizes[-1] + (e if prenet_outside else 0), a), (d, d), (d, d))):
            gw, gb, cw, cb = gru_weights[k]
            _check(f"gru_weights[{k}][0]", gw, kernel(n + u, 2 * u))
            _check(f"gru_weights[{k}][1]", gb, (2 * u,))
            _check(f"gru_weights[{k}][2]", cw, kernel(n + u, u))
            _check(f"gru_weights[{k}][3]", cb, (u,))
        _check("query_weight", query_weight, (a, a))
        _check("v_a", v_a, (a,))
        width = 0
        if location_weight is not None:
            width = int(location_weight.shape[0]) if isinstance(location_weight, np.ndarray) else 0
            _check("location_weight", location_weight, (max(width, 1), a))
            if not 0 <= pad_before < width:
                raise ValueError(f"Tacotron1Loop: argument `pad_before` must lie in [0, {width}); got {pad_before}.")
        _check("keys", keys, (batch, max_time, a))
        if score_bias is not None:
            _check("score_bias", score_bias, (batch, max_time))
        _check("cell0_weight", cell0_weight, kernel(a + e, d))
        _check("cell0_bias", cell0_bias, (d,))
        _check("projection_weight", projection_weight, kernel(d, f))
        _check("projection_bias", projection_bias, (f,))

        self._keep = [*prenet_weights, *prenet_biases, *(x for g in gru_weights for x in g), query_weight, v_a,
                      location_weight, keys, values, score_bias, cell0_weight, cell0_bias, projection_weight,
                      projection_bias]
        m = _Tacotron1Decoder()
        m.batch, m.num_mels, m.frame_size, m.max_time, m.memory_size = batch, num_mels, f, max_time, e
        m.att_units, m.dec_units, m.cols, m.prenet_outside = a, d, int(cols), int(prenet_outside)
        m.prenet_layers = n_pre
        for k, (w, b) in enumerate(zip(prenet_weights, prenet_biases)):
            m.prenet_sizes[k], m.prenet_w[k], m.prenet_b[k] = sizes[k], _ptr(w), _ptr(b)
        for k, (gw, gb, cw, cb) in enumerate(gru_weights):
            m.gates_w[k], m.gates_b[k], m.cand_w[k], m.cand_b[k] = _ptr(gw), _ptr(gb), _ptr(cw), _ptr(cb)
        m.query_w, m.v_a = _ptr(query_weight), _ptr(v_a)
        m.location_wt = None if location_weight is None else _ptr(location_weight)
        m.kernel, m.pad_before = width, int(pad_before) if location_weight is not None else 0
        m.keys, m.values = _ptr(keys), _ptr(values)
        m.score_bias = None if score_bias is None else _ptr(score_bias)
        m.cell0_w, m.cell0_b, m.out_w, m.out_b = (_ptr(cell0_weight), _ptr(cell0_bias), _ptr(projection_weight),
                                                  _ptr(projection_bias))
        kernels = [*prenet_weights, *(g[k] for g in gru_weights for k in (0, 2)), query_weight, cell0_weight,
                   projection_weight]
        macs = batch * (sum(int(x.size) for x in kernels) + max_time * a * (width + 2) + max_time * e)
        m.threads = _threads(max(1, min(int(threads), macs // MACS_PER_THREAD)))
        self.m = m

    def run(self, max_iters: int) -> tuple[np.ndarray, np.ndarray]:
        """Runs up to ``max_iters`` steps (the exact-zero stop ends it earlier).

        Args:
            max_iters: the most steps, ``>= 1``.

        Returns:
            ``(frames (batch, steps, num_mels * r), alignments (batch, T_in, steps))``, C-contiguous.
        """
        if isinstance(max_iters, bool) or int(max_iters) != max_iters or int(max_iters) < 1:
            raise ValueError(f"Tacotron1Loop.run: argument `max_iters` must be an integer >= 1; got {max_iters!r}.")
        n, m = int(max_iters), self.m
        frames = np.empty((m.batch, n, m.frame_size), np.float32)
        alignments = np.empty((m.batch, n, m.max_time), np.float32)
        steps = ctypes.c_int(0)
        if self.lib.sb_tacotron1_decode(ctypes.byref(m), n, _ptr(frames), _ptr(alignments), ctypes.byref(steps)):
            raise MemoryError("Tacotron1Loop: the native loop could not allocate its scratch memory")
        s = steps.value
        frames = frames[:, :s] if m.batch == 1 or s == n else np.ascontiguousarray(frames[:, :s])
        return frames, np.ascontiguousarray(alignments[:, :s].transpose(0, 2, 1))
