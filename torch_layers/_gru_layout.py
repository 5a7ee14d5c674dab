"""GRU weight layouts: TF1 ``GRUCell`` <-> :class:`torch_layers.tf1_gru_cell.TF1GRUCell` (numpy only).

TF1 ``GRUCell`` variables: ``gates/kernel [in + u, 2u]`` over ``concat([x, h])`` with columns **(r, u)**,
``gates/bias [2u]``, ``candidate/kernel [in + u, u]`` over ``concat([x, r·h])``, ``candidate/bias [u]``.

The torch cell keeps TF1's gate order and grouping in ``nn.Linear`` layout: ``gates.weight (2u, in + u)``
(rows r then u), ``gates.bias (2u,)``, ``candidate.weight (u, in + u)``, ``candidate.bias (u,)``. (Torch's
own ``nn.GRU`` — rows (r, z, n), reset applied *after* the recurrent matmul — computes another function
and cannot hold these weights.) The first ``in`` columns of each weight act on ``x``, the rest on the state;
:func:`split_input_recurrent` cuts them apart for the fast sequence loop.

Written once for both frameworks in :mod:`speechblocks.layouts` (re-exported here).
"""
from __future__ import annotations

from speechblocks.layouts import (
    TF1_GRU_KEYS,
    TORCH_GRU_KEYS,
    split_input_recurrent,
    tf1_to_torch_gru,
    torch_gru_to_tf1,
)

__all__ = ["TF1_GRU_KEYS", "TORCH_GRU_KEYS", "tf1_to_torch_gru", "torch_gru_to_tf1", "split_input_recurrent"]
