"""Keras ``LocationSensitiveAttention``: Tacotron-2's hybrid (content + location) Bahdanau attention."""
from __future__ import annotations

import keras
import tensorflow as tf

from ._fan_out import fan_out
from ._validation import check_float_tensor, check_lengths
from .tf1_exchange import TF1Variable, TF1WeightsMixin


def same_pad_conv1d(x, kernel, bias=None):
    """TF ``'same'`` 1-D convolution of ``x`` ``(batch, time, in)`` with ``kernel`` ``(k, in, out)``."""
    y = tf.nn.conv1d(x, kernel, stride=1, padding="SAME")
    return y if bias is None else y + bias


def score_mask(memory_lengths, max_time):
    """``(batch, max_time)`` bool, True inside each memory length (``None`` -> no masking)."""
    if memory_lengths is None:
        return None
    return tf.sequence_mask(memory_lengths, max_time)


def nan_poisoned_softmax(energy):
    """Softmax over the last axis; a row whose energies hold a NaN (or +inf) is NaN in every position.

    That is what ``exp(e - max e) / sum exp(e - max e)`` gives in IEEE arithmetic (masked ``-inf`` entries
    included). It is stated here rather than left to the kernel: TensorFlow's oneDNN softmax on AVX-512 returns 0
    at the finite entries of such a row, Eigen's NaN everywhere.
    """
    # spelled without logical_not: grappler rewrites not(e < inf) into e >= inf, which is False for NaN
    clean = tf.reduce_all(tf.math.is_finite(energy) | tf.equal(energy, float("-inf")), axis=-1, keepdims=True)
    return tf.where(clean, tf.nn.softmax(energy, axis=-1), tf.cast(float("nan"), energy.dtype))


def attention_step(query, state, values, keys, score_bias, weights: dict, smoothing: bool, cumulate: bool,
                   for_gradient: bool = True):
    """One location-sensitive attention step, the only Keras spelling (the layer and every decoder loop call it).

    Args:
        query: ``(batch, query_size)``; state: ``(batch, max_time)`` previous (cumulative) alignments.
        values: ``(batch, max_time, memory_size)``; keys: ``(batch, max_time, units)`` with every constant bias
            (:meth:`LocationSensitiveAttention.attention_memory`); score_bias: ``(batch, max_time)`` 0 / -inf, or None.
        weights: :meth:`LocationSensitiveAttention.weights_in` (``query``, ``location`` the folded location kernel
            ``(kernel_size, units)``, ``v``).
        smoothing, cumulate: the layer's options; for_gradient: see :meth:`LocationSensitiveAttention.step`.

    Returns:
        ``(context, alignments, next_state)``.
    """
    processed_query = tf.expand_dims(tf.matmul(query, weights["query"]), 1)
    # TF 'same' convolution of the state with the folded kernel: the location features already in attention units
    location = same_pad_conv1d(tf.expand_dims(state, -1), tf.expand_dims(weights["location"], 1))
    energy = tf.reduce_sum(weights["v"] * tf.tanh(keys + processed_query + location), axis=2)
    if score_bias is not None:  # replaced, not added (TF1's score mask): a NaN energy past the length gives -inf
        energy = tf.where(score_bias < 0, score_bias, energy)
    if smoothing:
        s = tf.sigmoid(energy)
        alignments = s / tf.reduce_sum(s, axis=-1, keepdims=True)
    else:
        alignments = nan_poisoned_softmax(energy)
    # three uses (state, context, the caller's history): copies keep a while loop's gradient free of 3-input AddNs
    for_state, for_context, alignments = fan_out(alignments, 3) if for_gradient else (alignments,) * 3
    next_state = for_state + state if cumulate else for_state
    context = tf.squeeze(tf.matmul(tf.expand_dims(for_context, 1), values), 1)
    return context, alignments, next_state


@keras.saving.register_keras_serializable(package="speechblocks")
class LocationSensitiveAttention(TF1WeightsMixin, keras.layers.Layer):
    """Location-sensitive attention (Chorowski et al. 2015) exactly as TF1 Tacotron-2 computes it.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a step whose
    attention energies hold a NaN gives alignments that are NaN at every position of that example, on every CPU.
    (:func:`nan_poisoned_softmax` defines that row; the softmax kernel no longer chooses.)

    The memory (encoder outputs) is zeroed past each sequence's length when ``mask_encoder`` and projected
    once to keys by ``memory_layer`` (no bias). At each decoder step, with the query ``q`` (the new decoder
    LSTM output) and the state ``s`` (previous alignments, cumulated when ``cumulate_weights``)::

        f = conv1d(s, location_features_convolution)        # 'same', filters, bias
        e = Σ v_a · tanh(keys + q W_query + f W_location + b_a)
        e[t >= length] = -inf                                # mask_encoder
        a = softmax(e)   or   sigmoid(e) / Σ sigmoid(e)      # smoothing
        context = Σ_t a_t · values_t;   next state = s + a (cumulate_weights) or a

    Args:
        units: int, attention depth (``attention_dim``).
        filters: int, location convolution filters (``attention_filters``).
        kernel_size: int, location convolution width (``attention_kernel``).
        mask_encoder: bool, zero the memory and mask the scores past the memory lengths; when False the
            lengths are ignored entirely (the original passes no lengths to the mechanism then).
        smoothing: bool, sigmoid "smoothing" normalisation instead of softmax.
        cumulate_weights: bool, the state accumulates the alignments (else it is the last alignments).
        tf1_scope: TF1 scope (default ``"Location_Sensitive_Attention"``, created inside the decoder's scope).
            Keys: ``query_layer/kernel``, ``location_features_convolution/{kernel,bias}``,
            ``location_features_layer/kernel``, ``attention_variable_projection``, ``attention_bias`` and
            ``memory_layer/kernel`` -- the latter lives at the model scope in TF1
            (``Tacotron_model/inference/memory_layer/kernel``); ``Tacotron2`` maps it there.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        query: float tensor ``(batch, query_size)``.
        state: float tensor ``(batch, max_time)``, previous (cumulative) alignments; zeros at the first step.
        memory: float tensor ``(batch, max_time, memory_size)``.
        memory_lengths: optional int tensor ``(batch,)``.

    Returns:
        ``(context (batch, memory_size), alignments (batch, max_time), next_state (batch, max_time))``.

    A decoder loop calls :meth:`attention_memory` once and :func:`attention_step` per step (the call form re-projects
    the memory every time). The location convolution and ``location_features_layer`` run as one folded kernel
    (:meth:`fused_location_weights`; their biases and ``attention_bias`` ride on the keys): the same maths as TF1's
    two products, rounded in another order.

    Masking: ``memory_lengths`` (with ``mask_encoder``); padded memory gets zero weight.

    Deployment: SavedModel, XLA and LiteRT (TFLite builtins only, run in ``ai_edge_litert``; the new axes are
    ``tf.expand_dims``, as a new-axis slice ``x[:, :, None]`` with unknown dims is no builtin ``StridedSlice``).

    Example:
    >>> att = LocationSensitiveAttention(units=8, filters=4, kernel_size=5)
    >>> memory = tf.random.normal((2, 7, 6))
    >>> context, alignments, state = att(tf.zeros((2, 10)), tf.zeros((2, 7)), memory, tf.constant([7, 4]))
    >>> context.shape, alignments.shape
    (TensorShape([2, 6]), TensorShape([2, 7]))
    """

    default_tf1_scope = "Location_Sensitive_Attention"

    def __init__(self, units: int = 128, filters: int = 32, kernel_size: int = 31, mask_encoder: bool = True,
                 smoothing: bool = False, cumulate_weights: bool = True, tf1_scope: str | None = None, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("units", units), ("filters", filters), ("kernel_size", kernel_size)):
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"LocationSensitiveAttention: `{name}` must be an integer >= 1; got {value!r}.")
        for name, value in (("mask_encoder", mask_encoder), ("smoothing", smoothing),
                            ("cumulate_weights", cumulate_weights)):
            if not isinstance(value, bool):
                raise ValueError(f"LocationSensitiveAttention: `{name}` must be True or False; got {value!r}.")
        self.units = int(units)
        self.filters = int(filters)
        self.kernel_size = int(kernel_size)
        self.mask_encoder = mask_encoder
        self.smoothing = smoothing
        self.cumulate_weights = cumulate_weights
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.query_size = None
        self.memory_size = None

    def build(self, query_shape, state_shape=None, memory_shape=None, memory_lengths_shape=None):
        if memory_shape is None or memory_shape[-1] is None or query_shape[-1] is None:
            raise ValueError("LocationSensitiveAttention: build needs known channel axes of `query` (batch, "
                             "query_size) and `memory` (batch, max_time, memory_size).")
        self.build_from_sizes(int(query_shape[-1]), int(memory_shape[-1]))

    def build_from_sizes(self, query_size: int, memory_size: int):
        """Creates the variables for a query of ``query_size`` and a memory of ``memory_size`` features."""
        if self.built:
            return
        self.query_size, self.memory_size = int(query_size), int(memory_size)
        u = self.units
        self.memory_kernel = self.add_weight(shape=(self.memory_size, u), initializer="glorot_uniform",
                                             name="memory_layer_kernel")
        self.query_kernel = self.add_weight(shape=(self.query_size, u), initializer="glorot_uniform",
                                            name="query_layer_kernel")
        self.location_conv_kernel = self.add_weight(shape=(self.kernel_size, 1, self.filters),
                                                    initializer="glorot_uniform",
                                                    name="location_features_convolution_kernel")
        self.location_conv_bias = self.add_weight(shape=(self.filters,), initializer="zeros",
                                                  name="location_features_convolution_bias")
        self.location_kernel = self.add_weight(shape=(self.filters, u), initializer="glorot_uniform",
                                               name="location_features_layer_kernel")
        self.v = self.add_weight(shape=(u,), initializer="glorot_uniform", name="attention_variable_projection")
        self.b = self.add_weight(shape=(u,), initializer="zeros", name="attention_bias")
        self.built = True

    # -- the two halves of the mechanism ------------------------------------------------------
    def check_memory(self, memory, memory_lengths=None):
        block = "LocationSensitiveAttention"
        check_float_tensor(memory, "memory", block, rank=3, last_dim=self.memory_size,
                           shape_doc=f"(batch, max_time, {self.memory_size})")
        if memory_lengths is not None:
            memory_lengths = check_lengths(memory_lengths, "memory_lengths", block, batch_dim=memory.shape[0])
        return memory_lengths

    def process_memory(self, memory, memory_lengths=None):
        """``(values, keys)``: the memory zeroed past its lengths (``mask_encoder``) and its projection.

        Args:
            memory: ``(batch, max_time, memory_size)``.
            memory_lengths: ``(batch,)`` int or None.

        Returns:
            ``values`` ``(batch, max_time, memory_size)``, ``keys`` ``(batch, max_time, units)``.
        """
        dtype = self.compute_dtype
        values = tf.cast(memory, dtype)
        if self.mask_encoder and memory_lengths is not None:
            mask = tf.sequence_mask(memory_lengths, tf.shape(values)[1], dtype=dtype)
            values = values * tf.expand_dims(mask, -1)
        keys = tf.einsum("btd,du->btu", values, tf.cast(self.memory_kernel, dtype))
        return values, keys

    def fused_location_weights(self, dtype):
        """``(location_weight (kernel_size, units), key_bias (units,))``: the location convolution and its dense
        folded into one kernel (``conv_kernel[:, 0, :] @ location_kernel``) and every constant bias of the energies
        (``attention_bias + conv_bias @ location_kernel``), which the keys carry (torch's
        ``fused_location_weights``)."""
        dense = tf.cast(self.location_kernel, dtype)
        location = tf.matmul(tf.cast(self.location_conv_kernel, dtype)[:, 0, :], dense)
        return location, tf.cast(self.b, dtype) + tf.linalg.matvec(dense, tf.cast(self.location_conv_bias, dtype),
                                                                   transpose_a=True)

    def weights_in(self, dtype):
        """The variables a step reads, in ``dtype``, for a loop that calls :meth:`step` many times: ``query``,
        ``location`` (the folded location kernel), ``v`` and ``key_bias`` (:meth:`fused_location_weights`)."""
        location, key_bias = self.fused_location_weights(dtype)
        return dict(query=tf.cast(self.query_kernel, dtype), location=location, v=tf.cast(self.v, dtype),
                    key_bias=key_bias)

    def attention_memory(self, memory, memory_lengths=None, weights=None):
        """``(values, keys, score_bias)`` of a loop: :meth:`process_memory`'s values, the keys with every constant
        bias added (``weights``: a :meth:`weights_in` result), ``score_bias`` ``(batch, max_time)`` 0 inside the
        lengths and -inf past them (``mask_encoder``; else None)."""
        values, keys = self.process_memory(memory, memory_lengths)
        w = weights if weights is not None else self.weights_in(values.dtype)
        return values, keys + w["key_bias"], self.score_bias(memory_lengths, tf.shape(values)[1], values.dtype)

    def score_bias(self, memory_lengths, max_time, dtype):
        """``(batch, max_time)`` 0 inside each length, -inf past it (``mask_encoder`` and lengths given; else None)."""
        if not self.mask_encoder or memory_lengths is None:
            return None
        inside = tf.sequence_mask(memory_lengths, max_time)
        return tf.where(inside, tf.zeros(tf.shape(inside), dtype), tf.cast(float("-inf"), dtype))

    def step(self, query, state, values, keys, memory_lengths=None, weights=None, for_gradient: bool = True):
        """One attention step over :meth:`process_memory`'s ``values`` and ``keys`` (adds the key bias and the score
        mask, then :func:`attention_step`).

        Args:
            query: ``(batch, query_size)``.
            state: ``(batch, max_time)`` previous (cumulative) alignments.
            values, keys: from :meth:`process_memory`.
            memory_lengths: ``(batch,)`` or None (ignored unless ``mask_encoder``).
            weights: optional :meth:`weights_in` result (saves the casts inside loops).
            for_gradient: route the alignments' three uses through ``fan_out`` (keeps a while loop's gradient free of
                3-input AddNs); an inference-only loop passes False and saves the copies.

        Returns:
            ``(context (batch, memory_size), alignments (batch, max_time), next_state (batch, max_time))``.
        """
        w = weights if weights is not None else self.weights_in(values.dtype)
        score_bias = self.score_bias(memory_lengths, tf.shape(values)[1], values.dtype)
        return attention_step(query, state, values, keys + w["key_bias"], score_bias, w, self.smoothing,
                              self.cumulate_weights, for_gradient)

    def call(self, query, state, memory, memory_lengths=None):
        block = "LocationSensitiveAttention"
        check_float_tensor(query, "query", block, rank=2, last_dim=self.query_size,
                           shape_doc=f"(batch, {self.query_size})")
        check_float_tensor(state, "state", block, rank=2, shape_doc="(batch, max_time)")
        memory_lengths = self.check_memory(memory, memory_lengths)
        if (state.shape.rank == 2 and memory.shape.rank == 3 and state.shape[1] is not None
                and memory.shape[1] is not None and state.shape[1] != memory.shape[1]):
            raise ValueError(f"{block}: argument `state` must have shape (batch, max_time={memory.shape[1]}) like "
                             f"`memory`; got shape {state.shape}.")
        dtype = self.compute_dtype
        values, keys = self.process_memory(memory, memory_lengths)
        return self.step(tf.cast(query, dtype), tf.cast(state, dtype), values, keys, memory_lengths)

    def compute_output_shape(self, query_shape, state_shape=None, memory_shape=None, memory_lengths_shape=None):
        b = query_shape[0]
        t = None if memory_shape is None else memory_shape[1]
        d = None if memory_shape is None else memory_shape[2]
        return (b, d), (b, t), (b, t)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, filters=self.filters, kernel_size=self.kernel_size,
                      mask_encoder=self.mask_encoder, smoothing=self.smoothing,
                      cumulate_weights=self.cumulate_weights, tf1_scope=self.tf1_scope)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return {
            "memory_layer/kernel": TF1Variable(self.memory_kernel),
            "query_layer/kernel": TF1Variable(self.query_kernel),
            "location_features_convolution/kernel": TF1Variable(self.location_conv_kernel),
            "location_features_convolution/bias": TF1Variable(self.location_conv_bias),
            "location_features_layer/kernel": TF1Variable(self.location_kernel),
            "attention_variable_projection": TF1Variable(self.v),
            "attention_bias": TF1Variable(self.b),
        }

    def _tf1_input_shape(self, weights):
        return (int(weights["query_layer/kernel"].shape[0]), int(weights["memory_layer/kernel"].shape[0]))

    def load_tf1_weights(self, weights, strict: bool = True):
        if not self.built:
            try:
                q, m = self._tf1_input_shape(weights)
            except KeyError as e:
                from .tf1_exchange import TF1WeightsError

                raise TF1WeightsError(self._tf1_describe(), [f"missing key {e.args[0]!r}: needed to infer the "
                                                             "sizes of an unbuilt layer"]) from None
            self.build_from_sizes(q, m)
        return super().load_tf1_weights(weights, strict)
