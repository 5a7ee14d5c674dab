"""Keras ``Mimic2LocationAttention``: mimic2's location-sensitive attention over the previous step's alignments."""
from __future__ import annotations

import keras
import tensorflow as tf

from .bahdanau_attention import BahdanauAttention, _positive_int
from .tf1_exchange import TF1Variable


@keras.saving.register_keras_serializable(package="speechblocks")
class Mimic2LocationAttention(BahdanauAttention):
    """mimic2's ``LocationSensitiveAttention``: Bahdanau attention plus features of the previous alignments.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    With the previous step's alignments ``a`` (not their running sum; zeros at the first step)::

        f = conv1d_same(a[..., None], location_conv/kernel)      # [kernel_size, 1, filters], no bias
        score = sum_k v[k] * tanh(keys + q @ query_layer + f @ location_layer)   # location_layer no bias
        alignments = softmax(score);   context = sum_j alignments[:, j] * values[:, j]

    TF ``'same'`` padding (``(kernel_size - 1) // 2`` zeros before, the rest after). No memory mask by default
    (mimic2 passes no lengths); ``mask_memory=True`` opts in as for :class:`BahdanauAttention`.

    Args:
        units: int, attention depth.
        filters: int, location convolution filters (mimic2: 20).
        kernel_size: int, location convolution width (mimic2: 7).
        mask_memory: bool, mask the scores past ``memory_lengths`` (default False: the original).
        memory_size: optional int, width of the memory; with it the layer builds at construction.
        query_size: optional int, width of the query (default ``units``).
        tf1_scope: TF1 scope (default ``"location_sensitive_attention"``). Keys: those of
            :class:`BahdanauAttention` plus ``location_conv/kernel`` ``[kernel_size, 1, filters]`` and
            ``location_layer/kernel`` ``[filters, units]``.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        query: float tensor ``(batch, query_size)``.
        keys: float tensor ``(batch, max_time, units)`` from :meth:`process_memory`.
        values: float tensor ``(batch, max_time, memory_size)``.
        previous_alignments: float tensor ``(batch, max_time)``, the previous step's alignments.
        memory_lengths: optional int tensor ``(batch,)``; used only when ``mask_memory``.

    Returns:
        ``(context (batch, memory_size), alignments (batch, max_time))``.

    Masking: none by default; ``mask_memory`` with ``memory_lengths`` gives padded positions zero weight.

    Example:
    >>> att = Mimic2LocationAttention(8)
    >>> memory = tf.random.normal((2, 7, 6))
    >>> context, alignments = att(tf.zeros((2, 8)), att.process_memory(memory), memory, tf.zeros((2, 7)))
    >>> alignments.shape
    TensorShape([2, 7])
    """

    default_tf1_scope = "location_sensitive_attention"
    block_name = "Mimic2LocationAttention"

    def __init__(self, units: int, *, filters: int = 20, kernel_size: int = 7, mask_memory: bool = False,
                 memory_size: int | None = None, query_size: int | None = None, tf1_scope: str | None = None,
                 **kwargs):
        self.filters = _positive_int(filters, "filters", self.block_name)
        self.kernel_size = _positive_int(kernel_size, "kernel_size", self.block_name)
        super().__init__(units, mask_memory=mask_memory, memory_size=memory_size, query_size=query_size,
                         tf1_scope=tf1_scope, **kwargs)

    def _build_location(self):
        self.location_conv_kernel = self.add_weight(shape=(self.kernel_size, 1, self.filters),
                                                    initializer="glorot_uniform", name="location_conv_kernel")
        self.location_kernel = self.add_weight(shape=(self.filters, self.units), initializer="glorot_uniform",
                                               name="location_layer_kernel")

    def location_term(self, previous_alignments):
        """``conv1d_same(previous_alignments) @ location_layer/kernel``, ``(batch, max_time, units)``."""
        dt = previous_alignments.dtype
        f = tf.nn.conv1d(tf.expand_dims(previous_alignments, -1), tf.cast(self.location_conv_kernel, dt), stride=1,
                         padding="SAME")
        return tf.einsum("btf,fu->btu", f, tf.cast(self.location_kernel, dt))

    def get_config(self):
        config = super().get_config()
        config.update(filters=self.filters, kernel_size=self.kernel_size)
        return config

    def _tf1_variables(self):
        out = super()._tf1_variables()
        out["location_conv/kernel"] = TF1Variable(self.location_conv_kernel)
        out["location_layer/kernel"] = TF1Variable(self.location_kernel)
        return out
