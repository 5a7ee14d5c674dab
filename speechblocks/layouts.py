"""Weight layouts: TF1 <-> Keras <-> torch, as numpy functions (imports no framework).

**LSTM.** TF1 ``LSTMCell``/``LSTMBlockCell`` (docs/ARCHITECTURE.md, semantics): one ``kernel``
``(in + units, 4 * units)`` applied to ``concat([x, h])``, one ``bias`` ``(4 * units,)``, column blocks in gate order
**i, j, f, o** (``j`` is the candidate), and a ``forget_bias`` (1.0) added to the ``f`` block at run time -- it is not
stored in the checkpoint.

* Keras ``ZoneoutLSTMCell`` stores the TF1 layout itself; the recurrent blocks cut its kernel into input
  and recurrent rows (:func:`split_tf1_kernel`). Stock ``keras.layers.LSTMCell`` has ``kernel (in, 4u)``,
  ``recurrent_kernel (u, 4u)``, gate order **i, f, c, o** and no run-time forget bias (folded into the bias):
  :func:`tf1_to_keras_lstm` / :func:`keras_lstm_to_tf1`.
* torch ``ZoneoutLSTMCell``: ``weight (4u, in + u)`` -- the transposed TF1 kernel with its gate blocks in
  torch's **i, f, g, o** order (``g`` = TF1 ``j``) -- and ``bias (4u,)`` in that order, still *without* the
  forget bias (:func:`tf1_kernel_to_torch`, :func:`tf1_bias_to_torch` and inverses). ``torch.nn.LSTM``:
  ``weight_ih (4u, in)``, ``weight_hh (4u, u)``, ``bias_ih``, ``bias_hh``, forget bias folded into ``bias_ih``
  (:func:`tf1_to_nn_lstm` / :func:`nn_lstm_to_tf1`).

**GRU.** TF1 ``GRUCell``: ``gates/kernel [in + u, 2u]`` over ``concat([x, h])``, columns **(r, u)**,
``gates/bias [2u]``, ``candidate/kernel [in + u, u]`` over ``concat([x, r·h])`` (reset *before* the
matmul), ``candidate/bias [u]``. ``keras.layers.GRU(reset_after=False)``: ``kernel [in, 3u]``,
``recurrent_kernel [u, 3u]``, column blocks **(z, r, h)**, ``bias [3u]`` (Keras ``z`` is TF1's ``u``):
:func:`tf1_to_keras_gru` / :func:`keras_gru_to_tf1`. The torch ``TF1GRUCell`` keeps TF1's grouping in
``nn.Linear`` layout (``gates.weight (2u, in + u)``, ...): :func:`tf1_to_torch_gru` / :func:`torch_gru_to_tf1`.

**Dense and conv1d.** Keras kernels are TF1's; torch ``Linear``/``Conv1d`` weights are transposed:
:func:`dense_to_tf1`, :func:`conv1d_to_tf1` and inverses.

``tf_layers._lstm_layout``/``_gru_layout`` and ``torch_layers._lstm_layout``/``_gru_layout``/``tf1_exchange``
re-export their framework's share of these functions.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = [
    "DEFAULT_FORGET_BIAS", "TF1_TO_KERAS_GATES", "TF1_TO_TORCH_GATES",
    # LSTM, Keras
    "split_tf1_kernel", "join_tf1_kernel", "tf1_effective_bias", "tf1_to_keras_lstm", "keras_lstm_to_tf1",
    # LSTM, torch
    "tf1_kernel_to_torch", "torch_weight_to_tf1", "tf1_bias_to_torch", "torch_bias_to_tf1", "tf1_to_nn_lstm",
    "nn_lstm_to_tf1",
    # GRU
    "TF1_GRU_KEYS", "TORCH_GRU_KEYS", "tf1_to_keras_gru", "keras_gru_to_tf1", "tf1_to_torch_gru", "torch_gru_to_tf1",
    "split_input_recurrent",
    # dense, conv1d (torch)
    "dense_to_tf1", "dense_from_tf1", "conv1d_to_tf1", "conv1d_from_tf1",
]

DEFAULT_FORGET_BIAS = 1.0
# gate block k of Keras (i, f, c, o) and of torch (i, f, g, o) takes TF1 gate block [0, 2, 1, 3][k] of (i, j, f, o);
# the permutation is its own inverse
TF1_TO_KERAS_GATES = (0, 2, 1, 3)
TF1_TO_TORCH_GATES = TF1_TO_KERAS_GATES

TF1_GRU_KEYS = ("gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias")
TORCH_GRU_KEYS = ("gates.weight", "gates.bias", "candidate.weight", "candidate.bias")


# -- LSTM ---------------------------------------------------------------------------------------------
def _units_of(n: int, what: str) -> int:
    if n % 4:
        raise ValueError(f"{what}: the gate axis must have 4 * units entries; got {n}.")
    return n // 4


def _permute_blocks(a: np.ndarray, axis: int, what: str = "gate axis") -> np.ndarray:
    """Reorders the 4 gate blocks along ``axis`` with the permutation (0, 2, 1, 3) (its own inverse)."""
    _units_of(a.shape[axis], what)
    blocks = np.split(np.asarray(a), 4, axis=axis)
    return np.ascontiguousarray(np.concatenate([blocks[k] for k in TF1_TO_KERAS_GATES], axis=axis))


def _kernel_shape_error(kernel: np.ndarray, input_size: int, units: int) -> ValueError:
    return ValueError(f"argument `kernel` must have shape ({input_size} + {units}, {4 * units}); got {kernel.shape}.")


def split_tf1_kernel(kernel: np.ndarray, input_size: int) -> tuple[np.ndarray, np.ndarray]:
    """TF1 kernel ``(in + units, 4u)`` -> ``(input rows (in, 4u), recurrent rows (u, 4u))``, gate order kept."""
    kernel = np.asarray(kernel)
    units = _units_of(kernel.shape[-1], "argument `kernel`")
    if kernel.ndim != 2 or kernel.shape[0] != input_size + units:
        raise _kernel_shape_error(kernel, input_size, units)
    return kernel[:input_size].copy(), kernel[input_size:].copy()


def join_tf1_kernel(input_kernel: np.ndarray, recurrent_kernel: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_tf1_kernel`."""
    return np.concatenate([np.asarray(input_kernel), np.asarray(recurrent_kernel)], axis=0)


def tf1_effective_bias(bias: np.ndarray, forget_bias: float = DEFAULT_FORGET_BIAS) -> np.ndarray:
    """The bias TF1 actually adds: the stored bias plus ``forget_bias`` on the ``f`` block (TF1 block 2)."""
    b = np.array(bias, dtype=np.result_type(bias, np.float32), copy=True)
    units = _units_of(b.shape[0], "argument `bias`")
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
    gates = "argument `gates`"
    return (_permute_blocks(wx, 1, gates), _permute_blocks(wh, 1, gates),
            _permute_blocks(tf1_effective_bias(bias, forget_bias), 0, gates))


def keras_lstm_to_tf1(kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray,
                      forget_bias: float = DEFAULT_FORGET_BIAS) -> tuple[np.ndarray, np.ndarray]:
    """``keras.layers.LSTMCell`` weights -> TF1 ``(kernel, bias)``; inverse of :func:`tf1_to_keras_lstm`."""
    gates = "argument `gates`"
    k = join_tf1_kernel(_permute_blocks(np.asarray(kernel), 1, gates),
                        _permute_blocks(np.asarray(recurrent_kernel), 1, gates))
    b = _permute_blocks(np.asarray(bias), 0, gates)
    return k, tf1_effective_bias(b, -forget_bias)


def tf1_kernel_to_torch(kernel: np.ndarray) -> np.ndarray:
    """TF1 kernel ``(in + units, 4 * units)`` [i, j, f, o] -> torch ``weight`` ``(4 * units, in + units)``
    [i, f, g, o]."""
    kernel = np.asarray(kernel)
    if kernel.ndim != 2:
        raise ValueError(f"argument `kernel` must have shape (in + units, 4 * units); got {kernel.shape}.")
    return _permute_blocks(kernel, axis=1).T.copy()


def torch_weight_to_tf1(weight: np.ndarray) -> np.ndarray:
    """torch ``weight`` ``(4 * units, in + units)`` [i, f, g, o] -> TF1 kernel ``(in + units, 4 * units)``
    [i, j, f, o]."""
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
        raise _kernel_shape_error(kernel, input_size, units)
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


# -- GRU ----------------------------------------------------------------------------------------------
def tf1_to_keras_gru(weights: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """TF1 ``GRUCell`` weights -> ``[kernel, recurrent_kernel, bias]`` of ``keras.layers.GRU(reset_after=False)``.

    Args:
        weights: ``{"gates/kernel": [in+u, 2u], "gates/bias": [2u], "candidate/kernel": [in+u, u],
            "candidate/bias": [u]}``.

    Returns:
        ``[kernel (in, 3u), recurrent_kernel (u, 3u), bias (3u,)]`` with column blocks (z, r, h), ready for
        ``gru.set_weights``.
    """
    u = int(np.shape(weights["candidate/bias"])[0])
    gk = np.asarray(weights["gates/kernel"])
    gb = np.asarray(weights["gates/bias"])
    ck = np.asarray(weights["candidate/kernel"])
    cb = np.asarray(weights["candidate/bias"])
    n_in = gk.shape[0] - u
    if gk.shape != (n_in + u, 2 * u) or ck.shape != (n_in + u, u) or gb.shape != (2 * u,):
        raise ValueError(f"inconsistent TF1 GRU shapes: gates/kernel {gk.shape}, gates/bias {gb.shape}, "
                         f"candidate/kernel {ck.shape}, candidate/bias {cb.shape}")
    r, z = slice(0, u), slice(u, 2 * u)
    full = np.concatenate([gk[:, z], gk[:, r], ck], axis=1)  # (in+u, 3u) in Keras order (z, r, h)
    bias = np.concatenate([gb[z], gb[r], cb])
    return [np.ascontiguousarray(full[:n_in]), np.ascontiguousarray(full[n_in:]), bias]


def keras_gru_to_tf1(kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    """``keras.layers.GRU(reset_after=False)`` weights -> TF1 ``GRUCell`` weights (inverse of :func:`tf1_to_keras_gru`).

    Args:
        kernel: ``(in, 3u)``, column blocks (z, r, h).
        recurrent_kernel: ``(u, 3u)``.
        bias: ``(3u,)`` (a ``reset_after=True`` GRU has a ``(2, 3u)`` bias and cannot be expressed in TF1's cell).

    Returns:
        ``{"gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"}`` in TF1 layout.
    """
    kernel, recurrent_kernel, bias = (np.asarray(a) for a in (kernel, recurrent_kernel, bias))
    u = recurrent_kernel.shape[0]
    if bias.shape != (3 * u,) or recurrent_kernel.shape != (u, 3 * u) or kernel.shape[1:] != (3 * u,):
        raise ValueError("expected the weights of a keras GRU(reset_after=False): kernel (in, 3u), "
                         f"recurrent_kernel (u, 3u), bias (3u,); got {kernel.shape}, {recurrent_kernel.shape}, "
                         f"{bias.shape}")
    full = np.concatenate([kernel, recurrent_kernel], axis=0)  # (in+u, 3u)
    z, r, h = slice(0, u), slice(u, 2 * u), slice(2 * u, 3 * u)
    return {
        "gates/kernel": np.ascontiguousarray(np.concatenate([full[:, r], full[:, z]], axis=1)),
        "gates/bias": np.concatenate([bias[r], bias[z]]),
        "candidate/kernel": np.ascontiguousarray(full[:, h]),
        "candidate/bias": bias[h].copy(),
    }


def tf1_to_torch_gru(weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """TF1 ``GRUCell`` weights -> the torch cell's state dict (numpy).

    Args:
        weights: ``{"gates/kernel": [in+u, 2u], "gates/bias": [2u], "candidate/kernel": [in+u, u],
            "candidate/bias": [u]}``.

    Returns:
        ``{"gates.weight": (2u, in+u), "gates.bias": (2u,), "candidate.weight": (u, in+u), "candidate.bias": (u,)}``.
    """
    gk, ck = np.asarray(weights["gates/kernel"]), np.asarray(weights["candidate/kernel"])
    u = ck.shape[1]
    if gk.ndim != 2 or gk.shape[1] != 2 * u or gk.shape[0] != ck.shape[0]:
        raise ValueError(f"inconsistent TF1 GRU kernels: gates/kernel {gk.shape}, candidate/kernel {ck.shape}")
    return {
        "gates.weight": np.ascontiguousarray(gk.T),
        "gates.bias": np.asarray(weights["gates/bias"]).copy(),
        "candidate.weight": np.ascontiguousarray(ck.T),
        "candidate.bias": np.asarray(weights["candidate/bias"]).copy(),
    }


def torch_gru_to_tf1(state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The torch cell's state dict (numpy or tensors) -> TF1 ``GRUCell`` weights (inverse of
    :func:`tf1_to_torch_gru`)."""
    def arr(k):
        v = state[k]
        return v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)  # a torch tensor, without torch

    return {
        "gates/kernel": np.ascontiguousarray(arr("gates.weight").T),
        "gates/bias": arr("gates.bias").copy(),
        "candidate/kernel": np.ascontiguousarray(arr("candidate.weight").T),
        "candidate/bias": arr("candidate.bias").copy(),
    }


def split_input_recurrent(weight, input_size: int):
    """Cuts a ``(out, in + u)`` weight into its input part ``(out, in)`` and recurrent part ``(out, u)``.

    Works on numpy arrays and torch tensors (returns views).
    """
    return weight[:, :input_size], weight[:, input_size:]


# -- dense and conv1d (torch layouts) ------------------------------------------------------------------
def dense_to_tf1(w: np.ndarray) -> np.ndarray:
    """torch Linear weight ``(out, in)`` -> TF1 dense kernel ``(in, out)``."""
    return np.ascontiguousarray(w.T)


def dense_from_tf1(k: np.ndarray) -> np.ndarray:
    """TF1 dense kernel ``(in, out)`` -> torch Linear weight ``(out, in)``."""
    return np.ascontiguousarray(k.T)


def conv1d_to_tf1(w: np.ndarray) -> np.ndarray:
    """torch Conv1d weight ``(out, in, k)`` -> TF1 conv1d kernel ``(k, in, out)``."""
    return np.ascontiguousarray(np.transpose(w, (2, 1, 0)))


def conv1d_from_tf1(k: np.ndarray) -> np.ndarray:
    """TF1 conv1d kernel ``(k, in, out)`` -> torch Conv1d weight ``(out, in, k)``."""
    return np.ascontiguousarray(np.transpose(k, (2, 1, 0)))
