"""Keras ``BahdanauAttention``: TF contrib's content-only additive attention, as keithito/tacotron builds it."""
from __future__ import annotations

import numbers

import keras
import tensorflow as tf

from ._validation import check_float_tensor, check_lengths
from .tf1_exchange import TF1Variable, TF1WeightsMixin


def _positive_int(value, name: str, block: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValueError(f"{block}: `{name}` must be an integer >= 1; got {value!r}.")
    return int(value)


@keras.saving.register_keras_serializable(package="speechblocks")
class BahdanauAttention(TF1WeightsMixin, keras.layers.Layer):
    """Content-only Bahdanau attention with TF 1.x contrib semantics (``normalize=False``, softmax).

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    The memory is projected once to keys by ``memory_layer`` (no bias); at each step, with the query ``q``::

        score[b, j] = sum_k v[k] * tanh(keys[b, j, k] + (q @ query_layer)[b, k])
        alignments = softmax(score);   context = sum_j alignments[b, j] * values[b, j]

    keithito/tacotron builds the mechanism without ``memory_sequence_length``: padded memory positions are
    attended (the default here). ``mask_memory=True`` (not the original) sets the scores of positions at or past
    each memory length to ``-inf`` before the softmax.

    Args:
        units: int, attention depth (``attention_depth``).
        mask_memory: bool, mask the scores past ``memory_lengths`` (default False: the original).
        memory_size: optional int, width of the memory; with it the layer builds at construction.
        query_size: optional int, width of the query (default ``units``, used with ``memory_size``).
        tf1_scope: TF1 scope (default ``"bahdanau_attention"``). Keys relative to it: ``memory_layer/kernel``
            ``[memory_size, units]``, ``query_layer/kernel`` ``[query_size, units]``, ``attention_v`` ``[units]``
            (in the model ``memory_layer`` sits at ``model/inference``, where the mechanism is built).
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        query: float tensor ``(batch, query_size)``.
        keys: float tensor ``(batch, max_time, units)`` from :meth:`process_memory`.
        values: float tensor ``(batch, max_time, memory_size)`` (the memory).
        previous_alignments: float tensor ``(batch, max_time)`` (unused by the content-only score; zeros at the
            first step).
        memory_lengths: optional int tensor ``(batch,)``; used only when ``mask_memory``.

    Returns:
        ``(context (batch, memory_size), alignments (batch, max_time))``.

    Masking: none by default (the original); ``mask_memory`` with ``memory_lengths`` gives padded positions zero
    weight.

    Example:
    >>> att = BahdanauAttention(8)
    >>> memory = tf.random.normal((2, 7, 6))
    >>> keys = att.process_memory(memory)
    >>> context, alignments = att(tf.zeros((2, 8)), keys, memory, tf.zeros((2, 7)))
    >>> context.shape, alignments.shape
    (TensorShape([2, 6]), TensorShape([2, 7]))
    """

    default_tf1_scope = "bahdanau_attention"
    block_name = "BahdanauAttention"

    def __init__(self, units: int, *, mask_memory: bool = False, memory_size: int | None = None,
                 query_size: int | None = None, tf1_scope: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.units = _positive_int(units, "units", self.block_name)
        if not isinstance(mask_memory, bool):
            raise ValueError(f"{self.block_name}: `mask_memory` must be True or False; got {mask_memory!r}.")
        self.mask_memory = mask_memory
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.memory_size = None if memory_size is None else _positive_int(memory_size, "memory_size",
                                                                           self.block_name)
        self.query_size = None if query_size is None else _positive_int(query_size, "query_size", self.block_name)
        if self.memory_size is not None:
            self.build_from_sizes(self.query_size or self.units, self.memory_size)

    # -- construction -------------------------------------------------------------------------
    def build(self, query_shape, keys_shape=None, values_shape=None, previous_alignments_shape=None,
              memory_lengths_shape=None):
        if values_shape is None or values_shape[-1] is None or query_shape[-1] is None:
            raise ValueError(f"{self.block_name}: build needs known channel axes of `query` (batch, query_size) "
                             f"and `values` (batch, max_time, memory_size).")
        self.build_from_sizes(int(query_shape[-1]), int(values_shape[-1]))

    def build_from_sizes(self, query_size: int, memory_size: int):
        """Creates the variables for a query of ``query_size`` and a memory of ``memory_size`` features."""
        if self.built:
            return
        self.query_size, self.memory_size = int(query_size), int(memory_size)
        u = self.units
        for attr, shape, name in (("memory_kernel", (self.memory_size, u), "memory_layer_kernel"),
                                  ("query_kernel", (self.query_size, u), "query_layer_kernel"),
                                  ("v", (u,), "attention_v")):  # TF1: Dense(use_bias=False) x2, get_variable
            setattr(self, attr, self.add_weight(shape=shape, initializer="glorot_uniform", name=name))
        self._build_location()
        self.built = True

    def _build_location(self):
        """Variables a subclass adds to the score (none here)."""

    # -- the mechanism ------------------------------------------------------------------------
    def process_memory(self, memory):
        """The keys ``memory @ memory_layer/kernel``.

        Args:
            memory: float tensor ``(batch, max_time, memory_size)``. An unbuilt layer builds for its width (and a
                query of ``query_size`` or ``units`` features).

        Returns:
            float tensor ``(batch, max_time, units)``.
        """
        memory = tf.convert_to_tensor(memory)
        if not self.built and memory.shape.rank == 3 and memory.shape[-1] is not None:
            self.build_from_sizes(self.query_size or self.units, int(memory.shape[-1]))
        check_float_tensor(memory, "memory", self.block_name, rank=3, last_dim=self.memory_size,
                           shape_doc=f"(batch, max_time, {self.memory_size})")
        return tf.einsum("btd,du->btu", memory, tf.cast(self.memory_kernel, memory.dtype))

    def location_term(self, previous_alignments):
        """What the previous alignments add to the score's ``tanh`` argument, ``(batch, max_time, units)``; None
        for content-only attention."""
        return None

    def score(self, query, keys, previous_alignments):
        """The energies ``(batch, max_time)`` before any mask (arguments as :meth:`call`)."""
        dt = keys.dtype
        processed_query = tf.expand_dims(tf.matmul(query, tf.cast(self.query_kernel, dt)), 1)
        location = self.location_term(previous_alignments)
        inner = keys + processed_query if location is None else keys + processed_query + location
        return tf.reduce_sum(tf.cast(self.v, dt) * tf.tanh(inner), axis=2)

    def call(self, query, keys, values, previous_alignments, memory_lengths=None):
        self._check(query, keys, values, previous_alignments)
        energy = self.score(query, keys, previous_alignments)
        if self.mask_memory and memory_lengths is not None:
            memory_lengths = check_lengths(memory_lengths, "memory_lengths", self.block_name,
                                           batch_dim=query.shape[0])
            inside = tf.sequence_mask(memory_lengths, tf.shape(energy)[1])
            energy = tf.where(inside, energy, tf.cast(float("-inf"), energy.dtype))
        alignments = tf.nn.softmax(energy, axis=-1)
        context = tf.einsum("bj,bje->be", alignments, values)
        return context, alignments

    def _check(self, query, keys, values, previous_alignments):
        b = self.block_name
        check_float_tensor(query, "query", b, rank=2, last_dim=self.query_size,
                           shape_doc=f"(batch, {self.query_size})")
        check_float_tensor(keys, "keys", b, rank=3, last_dim=self.units, shape_doc=f"(batch, max_time, {self.units})")
        check_float_tensor(values, "values", b, rank=3, last_dim=self.memory_size,
                           shape_doc=f"(batch, max_time, {self.memory_size})")
        check_float_tensor(previous_alignments, "previous_alignments", b, rank=2, shape_doc="(batch, max_time)")

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, mask_memory=self.mask_memory, memory_size=self.memory_size,
                      query_size=self.query_size, tf1_scope=self.tf1_scope)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return {"memory_layer/kernel": TF1Variable(self.memory_kernel),
                "query_layer/kernel": TF1Variable(self.query_kernel),
                "attention_v": TF1Variable(self.v)}

    def _tf1_input_shape(self, weights):  # an unbuilt layer without both kernels: the mixin names the key
        raise KeyError("query_layer/kernel" if "query_layer/kernel" not in weights else "memory_layer/kernel")

    def load_tf1_weights(self, weights, strict: bool = True):
        """As :meth:`TF1WeightsMixin.load_tf1_weights`; an unbuilt layer builds from the two kernels' shapes."""
        if not self.built and {"query_layer/kernel", "memory_layer/kernel"} <= set(weights):
            self.build_from_sizes(int(weights["query_layer/kernel"].shape[0]),
                                  int(weights["memory_layer/kernel"].shape[0]))
        return super().load_tf1_weights(weights, strict)
