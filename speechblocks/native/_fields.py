"""What both native decoder loops share (``DecoderLoop``, ``batch_loop.BatchDecoderLoop``): the pointer type, the
OpenMP thread rule, and the fields both C decoder structs hold."""
from __future__ import annotations

import ctypes
import os

import numpy as np

_F = ctypes.POINTER(ctypes.c_float)
MAX_LAYERS = 8  # SB_MAX_LAYERS
_POOL_PID: list[int] = []  # the process whose OpenMP threads a native step started


def _threads(requested: int) -> int:
    """The OpenMP threads a native call may use: a child forked after its parent ran OpenMP threads must not reuse
    that pool (GNU libgomp is not fork-safe): one thread there, as torch does in such a child."""
    n = max(1, int(requested))
    if _POOL_PID and _POOL_PID[0] != os.getpid():
        return 1
    if n > 1 and not _POOL_PID:
        _POOL_PID.append(os.getpid())
    return n


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(_F)


def _set_fields(m, lstm_weights, lstm_biases, gates, zoneout, prenet_weights, prenet_biases, num_mels, prenet_rate,
                query_weight, location_weight, v_a, keys, values, score_bias, projection_weight, projection_bias,
                frame_size, pad_before, smoothing, cumulate, stop_at_any, threads) -> None:
    """Fills the fields both C decoder structs share (``_Decoder``, ``batch_loop._BatchDecoder``, the same names):
    the kernels' pointers into ``lstm_weights`` / ``prenet_weights`` / ``query_weight`` / ``projection_weight`` (the
    batch-1 step's own arrays, the batched step's packed panels), the rest from the decoder's arrays and constants.
    Layer 1's input is ``[pre-net output, context]``: its width follows from the last pre-net layer and the memory."""
    u = lstm_biases[0].shape[0] // 4
    m.layers, m.units = len(lstm_biases), u
    m.input0 = prenet_biases[-1].shape[0] + values.shape[-1]
    for k, (x, b) in enumerate(zip(lstm_weights, lstm_biases)):
        m.lstm_w[k], m.lstm_b[k] = _ptr(x), _ptr(b)
    m.gate_i, m.gate_f, m.gate_g, m.gate_o = gates
    m.zoneout = int(zoneout != 0.0)
    m.keep_new, m.keep_old = 1.0 - zoneout, zoneout
    m.prenet_layers, m.num_mels = len(prenet_biases), num_mels
    for k, (x, b) in enumerate(zip(prenet_weights, prenet_biases)):
        m.prenet_sizes[k] = int(b.shape[0])
        m.prenet_w[k], m.prenet_b[k] = _ptr(x), _ptr(b)
    m.drop_rate, m.drop_scale = prenet_rate, 1.0 / (1.0 - prenet_rate)
    m.att_units, m.max_time, m.memory_size = v_a.shape[0], values.shape[-2], values.shape[-1]
    m.kernel, m.pad_before = location_weight.shape[0], pad_before
    m.smoothing, m.cumulate = int(smoothing), int(cumulate)
    m.query_w, m.location_wt, m.v_a = _ptr(query_weight), _ptr(location_weight), _ptr(v_a)
    m.keys_t, m.values = _ptr(keys), _ptr(values)
    m.score_bias = None if score_bias is None else _ptr(score_bias)
    m.proj_rows, m.frame_size = projection_bias.shape[0], frame_size
    m.r, m.stop_at_any = m.proj_rows - frame_size, int(stop_at_any)
    m.proj_w, m.proj_b = _ptr(projection_weight), _ptr(projection_bias)
    m.threads = _threads(threads)
