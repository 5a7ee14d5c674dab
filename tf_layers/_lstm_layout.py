"""LSTM weight layouts: TF1 ``LSTMCell``/``LSTMBlockCell`` <-> ``keras.layers.LSTMCell``.

speechblocks' Keras ``ZoneoutLSTMCell`` stores the TF1 layout itself (``kernel`` ``(in + units, 4 * units)``
over ``concat([x, h])``, ``bias`` ``(4 * units,)``, gate blocks **i, j, f, o**, forget bias 1.0 added at run
time), so its TF1 exchange is the identity. The recurrent blocks split that kernel into its input rows
and recurrent rows (the input projection of every time step is one matmul before the loop):
:func:`split_tf1_kernel`. For interoperability with stock Keras, :func:`tf1_to_keras_lstm` /
:func:`keras_lstm_to_tf1` convert to ``keras.layers.LSTMCell`` (separate ``kernel`` ``(in, 4u)`` and
``recurrent_kernel`` ``(u, 4u)``, gate order **i, f, c, o**, no run-time forget bias: it is folded into the
bias).

Pure numpy; unit-tested on its own (``tests/test_lstm_layout_keras.py``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_FORGET_BIAS", "TF1_TO_KERAS_GATES", "split_tf1_kernel", "join_tf1_kernel",
           "tf1_effective_bias", "tf1_to_keras_lstm", "keras_lstm_to_tf1"]

DEFAULT_FORGET_BIAS = 1.0
# Keras gate block k takes TF1 gate block TF1_TO_KERAS_GATES[k]: (i, f, c, o) <- (i, j, f, o)[0, 2, 1, 3]
TF1_TO_KERAS_GATES = (0, 2, 1, 3)


def _units_of(n: int, what: str) -> int:
    if n % 4:
        raise ValueError(f"argument `{what}`: the gate axis must have 4 * units entries; got {n}.")
    return n // 4


def _permute_blocks(a: np.ndarray, axis: int) -> np.ndarray:
    _units_of(a.shape[axis], "gates")
    blocks = np.split(np.asarray(a), 4, axis=axis)
    return np.ascontiguousarray(np.concatenate([blocks[k] for k in TF1_TO_KERAS_GATES], axis=axis))


def split_tf1_kernel(kernel: np.ndarray, input_size: int) -> tuple[np.ndarray, np.ndarray]:
    """TF1 kernel ``(in + units, 4u)`` -> ``(input rows (in, 4u), recurrent rows (u, 4u))``, gate order kept."""
    kernel = np.asarray(kernel)
    units = _units_of(kernel.shape[-1], "kernel")
    if kernel.ndim != 2 or kernel.shape[0] != input_size + units:
        raise ValueError(f"argument `kernel` must have shape ({input_size} + {units}, {4 * units}); got {kernel.shape}.")
    return kernel[:input_size].copy(), kernel[input_size:].copy()


def join_tf1_kernel(input_kernel: np.ndarray, recurrent_kernel: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_tf1_kernel`."""
    return np.concatenate([np.asarray(input_kernel), np.asarray(recurrent_kernel)], axis=0)


def tf1_effective_bias(bias: np.ndarray, forget_bias: float = DEFAULT_FORGET_BIAS) -> np.ndarray:
    """The bias TF1 actually adds: the stored bias plus ``forget_bias`` on the ``f`` block (TF1 block 2)."""
    b = np.array(bias, dtype=np.result_type(bias, np.float32), copy=True)
    units = _units_of(b.shape[0], "bias")
    b[2 * units:3 * units] += forget_bias
    return b


def tf1_to_keras_lstm(kernel: np.ndarray, bias: np.ndarray, input_size: int,
                      forget_bias: float = DEFAULT_FORGET_BIAS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TF1 ``kernel``/``bias`` -> ``keras.layers.LSTMCell`` ``[kernel, recurrent_kernel, bias]``.

    Args:
        kernel: ``(input_size + units, 4 * units)``, gate order i, j, f, o.
        bias: ``(4 * units,)`` without the forget bias (as TF1 stores it).
        input_size: input feature size.
        forget_bias: TF1's run-time forget bias, folded into the Keras bias.

    Returns:
        ``(kernel (in, 4u), recurrent_kernel (u, 4u), bias (4u,))`` in Keras gate order i, f, c, o, ready for
        ``keras.layers.LSTMCell(units).set_weights``.
    """
    wx, wh = split_tf1_kernel(kernel, input_size)
    return _permute_blocks(wx, 1), _permute_blocks(wh, 1), _permute_blocks(tf1_effective_bias(bias, forget_bias), 0)


def keras_lstm_to_tf1(kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray,
                      forget_bias: float = DEFAULT_FORGET_BIAS) -> tuple[np.ndarray, np.ndarray]:
    """``keras.layers.LSTMCell`` weights -> TF1 ``(kernel, bias)``; inverse of :func:`tf1_to_keras_lstm`."""
    k = join_tf1_kernel(_permute_blocks(np.asarray(kernel), 1), _permute_blocks(np.asarray(recurrent_kernel), 1))
    b = _permute_blocks(np.asarray(bias), 0)
    return k, tf1_effective_bias(b, -forget_bias)
