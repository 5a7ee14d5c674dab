"""GRU weight layouts: TF1 ``GRUCell`` <-> :class:`torch_layers.tf1_gru_cell.TF1GRUCell` (numpy only).

TF1 ``GRUCell`` variables: ``gates/kernel [in + u, 2u]`` over ``concat([x, h])`` with columns **(r, u)**,
``gates/bias [2u]``, ``candidate/kernel [in + u, u]`` over ``concat([x, r·h])``, ``candidate/bias [u]``.

The torch cell keeps TF1's gate order and grouping in ``nn.Linear`` layout: ``gates.weight (2u, in + u)``
(rows r then u), ``gates.bias (2u,)``, ``candidate.weight (u, in + u)``, ``candidate.bias (u,)``. (Torch's
own ``nn.GRU`` — rows (r, z, n), reset applied *after* the recurrent matmul — computes another function
and cannot hold these weights.) The first ``in`` columns of each weight act on ``x``, the rest on the state;
:func:`split_input_recurrent` cuts them apart for the fast sequence loop.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["TF1_GRU_KEYS", "TORCH_GRU_KEYS", "tf1_to_torch_gru", "torch_gru_to_tf1", "split_input_recurrent"]

TF1_GRU_KEYS = ("gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias")
TORCH_GRU_KEYS = ("gates.weight", "gates.bias", "candidate.weight", "candidate.bias")


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
    """The torch cell's state dict (numpy or tensors) -> TF1 ``GRUCell`` weights (inverse of :func:`tf1_to_torch_gru`)."""
    def arr(k):
        v = state[k]
        return v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)

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
