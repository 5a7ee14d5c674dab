"""LSTM weight layouts: TF1 ``LSTMCell``/``LSTMBlockCell`` <-> speechblocks torch <-> ``torch.nn.LSTM``.

TF1 (docs/ARCHITECTURE.md, semantics): one ``kernel`` of shape ``(in + units, 4 * units)`` applied to
``concat([x, h])``, one ``bias`` ``(4 * units,)``, column blocks in gate order **i, j, f, o** (``j`` is the candidate),
and a ``forget_bias`` (1.0) added to the ``f`` block at run time -- it is not stored in the checkpoint.

speechblocks torch (``ZoneoutLSTMCell``): ``weight`` ``(4 * units, in + units)`` -- the transposed TF1
kernel with its gate blocks reordered to torch's **i, f, g, o** (``g`` = TF1 ``j``) -- and ``bias``
``(4 * units,)`` in the same order, still *without* the forget bias (so the exchange is exact).

``torch.nn.LSTM``: ``weight_ih`` ``(4 * units, in)``, ``weight_hh`` ``(4 * units, units)``, ``bias_ih`` and
``bias_hh``, gate order i, f, g, o, no run-time forget bias: :func:`tf1_to_nn_lstm` folds it into
``bias_ih``.

Pure numpy, written once for both frameworks in :mod:`speechblocks.layouts` (re-exported here); every
function is unit-tested on its own (``tests/test_lstm_layout_torch.py``).
"""
from __future__ import annotations

from speechblocks.layouts import (
    DEFAULT_FORGET_BIAS,
    TF1_TO_TORCH_GATES,
    nn_lstm_to_tf1,
    tf1_bias_to_torch,
    tf1_kernel_to_torch,
    tf1_to_nn_lstm,
    torch_bias_to_tf1,
    torch_weight_to_tf1,
)

__all__ = ["TF1_TO_TORCH_GATES", "tf1_kernel_to_torch", "torch_weight_to_tf1", "tf1_bias_to_torch",
           "torch_bias_to_tf1", "tf1_to_nn_lstm", "nn_lstm_to_tf1", "DEFAULT_FORGET_BIAS"]
