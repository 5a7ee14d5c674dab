"""LSTM weight layouts: TF1 ``LSTMCell``/``LSTMBlockCell`` <-> speechblocks torch <-> ``torch.nn.LSTM``.

TF1 (DESIGN §4): one ``kernel`` of shape ``(in + units, 4 * units)`` applied to ``concat([x, h])``, one
``bias`` ``(4 * units,)``, column blocks in gate order **i, j, f, o** (``j`` is the candidate), and a
``forget_bias`` (1.0) added to the ``f`` block at run time -- it is not stored in the checkpoint.

speechblocks torch (``ZoneoutLSTMCell``): ``weight`` ``(4 * units, in + units)`` -- the transposed TF1
kernel with its gate blocks reordered to torch's **i, f, g, o** (``g`` = TF1 ``j``) -- and ``bias``
``(4 * units,)`` in the same order, still *without* the forget bias (so the exchange is exact).

``torch.nn.LSTM``: ``weight_ih`` ``(4 * units, in)``, ``weight_hh`` ``(4 * units, units)``, ``bias_ih`` and
``bias_hh``, gate order i, f, g, o, no run-time forget bias: :func:`tf1_to_nn_lstm` folds it into
``bias_ih``.

Pure numpy; every function is unit-tested on its own (``tests/test_lstm_layout_torch.py``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["TF1_TO_TORCH_GATES", "tf1_kernel_to_torch", "torch_weight_to_tf1", "tf1_bias_to_torch",
           "torch_bias_to_tf1", "tf1_to_nn_lstm", "nn_lstm_to_tf1", "DEFAULT_FORGET_BIAS"]

DEFAULT_FORGET_BIAS = 1.0
# torch gate block k takes TF1 gate block TF1_TO_TORCH_GATES[k]: (i, f, g, o) <- (i, j, f, o)[0, 2, 1, 3]
TF1_TO_TORCH_GATES = (0, 2, 1, 3)


def _units_of(n_cols: int, what: str) -> int:
    if n_cols % 4:
        raise ValueError(f"{what}: the gate axis must have 4 * units entries; got {n_cols}.")
    return n_cols // 4


def _permute_blocks(a: np.ndarray, axis: int) -> np.ndarray:
    """Reorders the 4 gate blocks along ``axis`` with the permutation (0, 2, 1, 3) (its own inverse)."""
    _units_of(a.shape[axis], "gate axis")
    blocks = np.split(np.asarray(a), 4, axis=axis)
    return np.ascontiguousarray(np.concatenate([blocks[k] for k in TF1_TO_TORCH_GATES], axis=axis))


def tf1_kernel_to_torch(kernel: np.ndarray) -> np.ndarray:
    """TF1 kernel ``(in + units, 4 * units)`` [i, j, f, o] -> torch ``weight`` ``(4 * units, in + units)`` [i, f, g, o]."""
    kernel = np.asarray(kernel)
    if kernel.ndim != 2:
        raise ValueError(f"argument `kernel` must have shape (in + units, 4 * units); got {kernel.shape}.")
    return _permute_blocks(kernel, axis=1).T.copy()


def torch_weight_to_tf1(weight: np.ndarray) -> np.ndarray:
    """torch ``weight`` ``(4 * units, in + units)`` [i, f, g, o] -> TF1 kernel ``(in + units, 4 * units)`` [i, j, f, o]."""
    weight = np.asarray(weight)
    if weight.ndim != 2:
        raise ValueError(f"argument `weight` must have shape (4 * units, in + units); got {weight.shape}.")
    return _permute_blocks(weight, axis=0).T.copy()


def tf1_bias_to_torch(bias: np.ndarray) -> np.ndarray:
    """TF1 bias ``(4 * units,)`` [i, j, f, o] -> torch ``bias`` [i, f, g, o] (forget bias stays out)."""
    return _permute_blocks(np.asarray(bias), axis=0)


def torch_bias_to_tf1(bias: np.ndarray) -> np.ndarray:
    """torch ``bias`` [i, f, g, o] -> TF1 bias [i, j, f, o]."""
    return _permute_blocks(np.asarray(bias), axis=0)


def tf1_to_nn_lstm(kernel: np.ndarray, bias: np.ndarray, input_size: int,
                   forget_bias: float = DEFAULT_FORGET_BIAS) -> dict[str, np.ndarray]:
    """TF1 ``kernel``/``bias`` -> the four ``torch.nn.LSTM`` layer tensors (suffix ``_l0``-free names).

    Args:
        kernel: ``(input_size + units, 4 * units)``, TF1 gate order i, j, f, o.
        bias: ``(4 * units,)``.
        input_size: the input feature size (rows of ``kernel`` that multiply ``x``).
        forget_bias: the run-time forget bias of the TF1 cell, folded into ``bias_ih``.

    Returns:
        ``{"weight_ih": (4u, in), "weight_hh": (4u, u), "bias_ih": (4u,), "bias_hh": (4u,) zeros}``.
    """
    kernel = np.asarray(kernel)
    units = _units_of(kernel.shape[1], "kernel")
    if kernel.shape[0] != input_size + units:
        raise ValueError(f"argument `kernel` must have shape ({input_size} + {units}, {4 * units}); got {kernel.shape}.")
    w = tf1_kernel_to_torch(kernel)
    b = tf1_bias_to_torch(bias).copy()
    b[units:2 * units] += forget_bias  # torch block 1 is the forget gate
    return {"weight_ih": np.ascontiguousarray(w[:, :input_size]), "weight_hh": np.ascontiguousarray(w[:, input_size:]),
            "bias_ih": b, "bias_hh": np.zeros_like(b)}


def nn_lstm_to_tf1(weight_ih: np.ndarray, weight_hh: np.ndarray, bias_ih: np.ndarray, bias_hh: np.ndarray,
                   forget_bias: float = DEFAULT_FORGET_BIAS) -> tuple[np.ndarray, np.ndarray]:
    """``torch.nn.LSTM`` layer tensors -> TF1 ``(kernel, bias)``, the inverse of :func:`tf1_to_nn_lstm`."""
    w = np.concatenate([np.asarray(weight_ih), np.asarray(weight_hh)], axis=1)
    b = (np.asarray(bias_ih) + np.asarray(bias_hh)).copy()
    units = _units_of(b.shape[0], "bias_ih")
    b[units:2 * units] -= forget_bias
    return torch_weight_to_tf1(w), torch_bias_to_tf1(b)
