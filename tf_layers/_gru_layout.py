"""GRU weight layouts: TF1 ``GRUCell`` <-> ``keras.layers.GRU(reset_after=False)`` (numpy only).

TF1 ``GRUCell`` (what checkpoints hold, and what :class:`tf_layers.tf1_gru_cell.TF1GRUCell` stores):

- ``gates/kernel``  ``[in + units, 2·units]`` over ``concat([x, h])``, columns **(r, u)**;
- ``gates/bias``    ``[2·units]`` (initialised to 1.0);
- ``candidate/kernel`` ``[in + units, units]`` over ``concat([x, r·h])`` (reset *before* the matmul);
- ``candidate/bias``  ``[units]``.

``keras.layers.GRU(reset_after=False)`` stores ``kernel [in, 3·units]`` and
``recurrent_kernel [units, 3·units]`` with column blocks **(z, r, h)** and ``bias [3·units]``;
Keras ``z`` is TF1's update gate ``u`` (``h' = z·h + (1 − z)·ĥ`` in both).

Written once for both frameworks in :mod:`speechblocks.layouts` (re-exported here).
"""
from __future__ import annotations

from speechblocks.layouts import TF1_GRU_KEYS, keras_gru_to_tf1, tf1_to_keras_gru

__all__ = ["TF1_GRU_KEYS", "tf1_to_keras_gru", "keras_gru_to_tf1"]
