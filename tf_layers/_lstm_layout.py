"""LSTM weight layouts: TF1 ``LSTMCell``/``LSTMBlockCell`` <-> ``keras.layers.LSTMCell``.

speechblocks' Keras ``ZoneoutLSTMCell`` stores the TF1 layout itself (``kernel`` ``(in + units, 4 * units)``
over ``concat([x, h])``, ``bias`` ``(4 * units,)``, gate blocks **i, j, f, o**, forget bias 1.0 added at run
time), so its TF1 exchange is the identity. The recurrent blocks split that kernel into its input rows
and recurrent rows (the input projection of every time step is one matmul before the loop):
:func:`split_tf1_kernel`. For interoperability with stock Keras, :func:`tf1_to_keras_lstm` /
:func:`keras_lstm_to_tf1` convert to ``keras.layers.LSTMCell`` (separate ``kernel`` ``(in, 4u)`` and
``recurrent_kernel`` ``(u, 4u)``, gate order **i, f, c, o**, no run-time forget bias: it is folded into the
bias).

Pure numpy, written once for both frameworks in :mod:`speechblocks.layouts` (re-exported here);
unit-tested on its own (``tests/test_lstm_layout_keras.py``).
"""
from __future__ import annotations

from speechblocks.layouts import (
    DEFAULT_FORGET_BIAS,
    TF1_TO_KERAS_GATES,
    join_tf1_kernel,
    keras_lstm_to_tf1,
    split_tf1_kernel,
    tf1_effective_bias,
    tf1_to_keras_lstm,
)

__all__ = ["DEFAULT_FORGET_BIAS", "TF1_TO_KERAS_GATES", "split_tf1_kernel", "join_tf1_kernel",
           "tf1_effective_bias", "tf1_to_keras_lstm", "keras_lstm_to_tf1"]
