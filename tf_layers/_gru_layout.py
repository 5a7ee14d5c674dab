"""GRU weight layouts: TF1 ``GRUCell`` <-> ``keras.layers.GRU(reset_after=False)`` (numpy only).

TF1 ``GRUCell`` (what checkpoints hold, and what :class:`tf_layers.tf1_gru_cell.TF1GRUCell` stores):

- ``gates/kernel``  ``[in + units, 2·units]`` over ``concat([x, h])``, columns **(r, u)**;
- ``gates/bias``    ``[2·units]`` (initialised to 1.0);
- ``candidate/kernel`` ``[in + units, units]`` over ``concat([x, r·h])`` (reset *before* the matmul);
- ``candidate/bias``  ``[units]``.

``keras.layers.GRU(reset_after=False)`` stores ``kernel [in, 3·units]`` and
``recurrent_kernel [units, 3·units]`` with column blocks **(z, r, h)** and ``bias [3·units]``;
Keras ``z`` is TF1's update gate ``u`` (``h' = z·h + (1 − z)·ĥ`` in both).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["TF1_GRU_KEYS", "tf1_to_keras_gru", "keras_gru_to_tf1"]

TF1_GRU_KEYS = ("gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias")


def _units_of(weights: Mapping[str, np.ndarray]) -> int:
    return int(np.shape(weights["candidate/bias"])[0])


def tf1_to_keras_gru(weights: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """TF1 ``GRUCell`` weights -> ``[kernel, recurrent_kernel, bias]`` of ``keras.layers.GRU(reset_after=False)``.

    Args:
        weights: ``{"gates/kernel": [in+u, 2u], "gates/bias": [2u], "candidate/kernel": [in+u, u],
            "candidate/bias": [u]}``.

    Returns:
        ``[kernel (in, 3u), recurrent_kernel (u, 3u), bias (3u,)]`` with column blocks (z, r, h), ready for
        ``gru.set_weights``.
    """
    u = _units_of(weights)
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
                         f"recurrent_kernel (u, 3u), bias (3u,); got {kernel.shape}, {recurrent_kernel.shape}, {bias.shape}")
    full = np.concatenate([kernel, recurrent_kernel], axis=0)  # (in+u, 3u)
    z, r, h = slice(0, u), slice(u, 2 * u), slice(2 * u, 3 * u)
    return {
        "gates/kernel": np.ascontiguousarray(np.concatenate([full[:, r], full[:, z]], axis=1)),
        "gates/bias": np.concatenate([bias[r], bias[z]]),
        "candidate/kernel": np.ascontiguousarray(full[:, h]),
        "candidate/bias": bias[h].copy(),
    }
