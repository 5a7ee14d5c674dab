"""Keras ``CBHG``: convolution bank, highway net and bidirectional GRU (Tacotron-2's post-net CBHG)."""
from __future__ import annotations

import keras
import tensorflow as tf

from speechblocks.cbhg import check_cbhg_arguments
from speechblocks.distributed import check_sync_batch_norm
from speechblocks.tf1_names import (
    cbhg_gru_scope,
    cbhg_highway_scope,
    cbhg_projection_scopes,
    cbhg_tf1_variables,
    check_cbhg_naming,
)

from ._validation import check_float_tensor, check_lengths
from .conv1d_block import Conv1DBlock
from .highway_net import HighwayNet
from .tf1_exchange import TF1Variable, TF1WeightsMixin
from .tf1_gru_cell import TF1GRUCell, bidirectional_tf1_gru


@keras.saving.register_keras_serializable(package="speechblocks")
class CBHG(TF1WeightsMixin, keras.layers.Layer):
    """CBHG as in TF1 Tacotron-2: conv bank -> max-pool -> 2 projections -> residual -> highways -> BiGRU.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    1. Convolution bank: ``K`` :class:`Conv1DBlock` (conv -> batch norm -> relu, no dropout) of widths
       ``1..K`` and ``conv_channels`` channels each, TF ``'same'`` padding (even widths pad ``(k−1)//2``
       before and the rest after), concatenated on channels.
    2. Max-pool of ``pool_size``, stride 1, ``'same'`` padding.
    3. ``proj1`` (relu) and ``proj2`` (identity) :class:`Conv1DBlock` of ``projection_kernel_size``.
    4. Residual ``proj2 + inputs`` (so the input width must be ``projections[1]``).
    5. When ``projections[1] != highway_units``: a dense layer (no activation) to ``highway_units``,
       TF1 ``<scope>/dense``. (The seed's line for it cannot run; checkpoints hold this dense.)
    6. ``n_highwaynet_layers`` :class:`HighwayNet` of ``highway_units``.
    7. Bidirectional TF1 GRU (``reset`` before the candidate matmul) of ``rnn_units`` per direction,
       with ``bidirectional_dynamic_rnn`` length semantics; outputs ``concat(fw, bw)``.

    Batch norm uses batch statistics when ``training`` (there is no dropout in CBHG); with
    ``sync_batch_norm=True`` they are synchronized over ``tf.distribute`` replicas (see :class:`Conv1DBlock`).

    Args:
        K: int, number of bank convolutions (widths 1..K).
        conv_channels: int, channels of each bank convolution.
        pool_size: int, max-pool width.
        projections: two ints, channels of ``proj1`` and ``proj2``; ``projections[1]`` must equal the input width.
        projection_kernel_size: int, width of the projection convolutions.
        n_highwaynet_layers: int, number of highway layers.
        highway_units: int, highway width.
        rnn_units: int, GRU units per direction.
        tf1_scope: TF1 scope (default ``"CBHG"``; Tacotron-2's post-net uses ``"CBHG_postnet"``). Inner names:
            ``conv_bank/conv1d_{k}/...``, ``proj1/...``, ``proj2/...``, ``dense/...``,
            ``<scope>_highwaynet_{n}/{H,T}/...``,
            ``bidirectional_rnn/{fw,bw}/<scope>_{forward,backward}_RNN/{gates,candidate}/{kernel,bias}``.
        bn_position: ``"before"`` (seed: conv -> BN -> activation) or ``"after"`` (Rayhane's CBHG: conv ->
            activation -> BN), for the bank and both projections.
        sync_batch_norm: bool; ``True``: batch statistics over the global batch of all ``tf.distribute``
            replicas (Keras ``BatchNormalization(synchronized=True)``); default ``False``, per replica.
        tf1_naming: ``"tacotron2"`` (the names above) or ``"keithito"`` (keithito/tacotron's and mimic2's
            ``modules.py``: ``proj_1``, ``proj_2``, ``highway_{n}/{H,T}``, ``bidirectional_rnn/{fw,bw}/gru_cell``;
            use it with ``bn_position="after"``, keithito's ReLU-before-BN order).
        **kwargs: base ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: float tensor ``(batch, time, projections[1])``.
        input_lengths: optional int tensor ``(batch,)``; ``None`` means every sequence is full length.
        training: bool, batch-norm batch statistics when True.

    Returns:
        float tensor ``(batch, time, 2 * rnn_units)``.

    Masking: GRU outputs past a sequence's length are zeros and the backward GRU starts at each
    sequence's last valid frame; the convolutions (and batch statistics in training) see padded frames,
    as in TF1: the ``K // 2 + pool_size // 2 + 2 * (projection_kernel_size // 2)`` frames past a length reach
    its last valid outputs, frames further past it change nothing.

    Deployment: SavedModel and XLA. LiteRT conversion needs ``SELECT_TF_OPS`` (the GRU loop's TensorList ops with
    an unknown batch; with ``input_lengths`` also a new-axis ``StridedSlice``): the converted model runs only in an
    interpreter with the flex delegate (TensorFlow kernels), not in ``ai_edge_litert``'s.

    Example:
    >>> cbhg = CBHG(8, 128, 2, [256, 80], 3, 4, 128, 128)
    >>> cbhg(tf.zeros((2, 50, 80)), tf.constant([50, 20])).shape
    TensorShape([2, 50, 256])
    """

    default_tf1_scope = "CBHG"

    def __init__(self, K: int, conv_channels: int, pool_size: int, projections, projection_kernel_size: int,
                 n_highwaynet_layers: int, highway_units: int, rnn_units: int, tf1_scope: str | None = None,
                 bn_position: str = "before", sync_batch_norm: bool = False, tf1_naming: str = "tacotron2",
                 **kwargs):
        super().__init__(**kwargs)
        self.tf1_naming = check_cbhg_naming(tf1_naming)
        proj_scopes = cbhg_projection_scopes(tf1_naming)
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, "CBHG")
        self.projections = check_cbhg_arguments(K, conv_channels, pool_size, projections, projection_kernel_size,
                                                n_highwaynet_layers, highway_units, rnn_units, bn_position)
        self.bn_position = bn_position
        self.K = int(K)
        self.conv_channels = int(conv_channels)
        self.pool_size = int(pool_size)
        self.projection_kernel_size = int(projection_kernel_size)
        self.n_highwaynet_layers = int(n_highwaynet_layers)
        self.highway_units = int(highway_units)
        self.rnn_units = int(rnn_units)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.input_size = self.projections[1]
        policy = self.dtype_policy
        self.conv_bank = [Conv1DBlock(k, self.conv_channels, activation="relu", drop_rate=0.0, tf1_scope=f"conv1d_{k}",
                                      bn_position=bn_position, sync_batch_norm=self.sync_batch_norm, dtype=policy,
                                      name=f"conv1d_{k}") for k in range(1, self.K + 1)]
        self.max_pool = keras.layers.MaxPooling1D(self.pool_size, strides=1, padding="same", dtype=policy,
                                                  name="max_pooling1d")
        self.proj1 = Conv1DBlock(self.projection_kernel_size, self.projections[0], activation="relu",
                                 tf1_scope=proj_scopes[0],
                                 bn_position=bn_position, sync_batch_norm=self.sync_batch_norm, dtype=policy,
                                 name="proj1")
        self.proj2 = Conv1DBlock(self.projection_kernel_size, self.projections[1], activation=None,
                                 tf1_scope=proj_scopes[1],
                                 bn_position=bn_position, sync_batch_norm=self.sync_batch_norm, dtype=policy,
                                 name="proj2")
        self.dense = (keras.layers.Dense(self.highway_units, dtype=policy, name="dense")
                      if self.projections[1] != self.highway_units else None)
        self.highwaynets = [HighwayNet(self.highway_units,
                                       tf1_scope=cbhg_highway_scope(self.tf1_scope, i + 1, tf1_naming),
                                       dtype=policy, name=f"highwaynet_{i + 1}")
                            for i in range(self.n_highwaynet_layers)]
        self.fw_cell = TF1GRUCell(self.rnn_units, tf1_scope=cbhg_gru_scope(self.tf1_scope, "fw", tf1_naming),
                                  dtype=policy, name="forward_RNN")
        self.bw_cell = TF1GRUCell(self.rnn_units, tf1_scope=cbhg_gru_scope(self.tf1_scope, "bw", tf1_naming),
                                  dtype=policy, name="backward_RNN")

    def _shape_doc(self) -> str:
        return f"(batch, time, {self.input_size})"

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 3:
            raise ValueError(f"CBHG: argument `inputs` must have rank 3, expected shape {self._shape_doc()}; "
                             f"got shape {input_shape}.")
        if input_shape[-1] is not None and int(input_shape[-1]) != self.input_size:
            raise ValueError(f"CBHG: argument `inputs` must have projections[1] = {self.input_size} channels (the "
                             f"residual adds it to proj2), expected shape {self._shape_doc()}; got shape "
                             f"{input_shape}.")
        bt = input_shape[:2]
        for conv in self.conv_bank:
            conv.build(bt + (self.input_size,))
        self.proj1.build(bt + (self.K * self.conv_channels,))
        self.proj2.build(bt + (self.projections[0],))
        if self.dense is not None:
            self.dense.build(bt + (self.input_size,))
        for hw in self.highwaynets:
            hw.build(bt + (self.highway_units,))
        self.fw_cell.build((None, self.highway_units))
        self.bw_cell.build((None, self.highway_units))

    def call(self, inputs, input_lengths=None, training=None):
        check_float_tensor(inputs, "inputs", "CBHG", rank=3, last_dim=self.input_size, shape_doc=self._shape_doc())
        if input_lengths is not None:
            input_lengths = check_lengths(input_lengths, "input_lengths", "CBHG", batch_dim=inputs.shape[0])
            if tf.executing_eagerly():
                lens = input_lengths.numpy()
                if lens.size and (lens.min() < 0 or lens.max() > int(inputs.shape[1])):
                    raise ValueError(f"CBHG: argument `input_lengths` must lie in [0, time={int(inputs.shape[1])}]; "
                                     f"got {lens.tolist()}.")
            input_lengths = tf.cast(input_lengths, tf.int32)
        x = tf.concat([conv(inputs, training=training) for conv in self.conv_bank], axis=-1)
        x = self.max_pool(x)
        x = self.proj1(x, training=training)
        x = self.proj2(x, training=training)
        x = x + inputs
        if self.dense is not None:
            x = self.dense(x)
        for hw in self.highwaynets:
            x = hw(x)
        fw, bw = bidirectional_tf1_gru(x, self.fw_cell, self.bw_cell, input_lengths)
        return tf.concat([fw, bw], axis=-1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (2 * self.rnn_units,)

    def get_config(self):
        config = super().get_config()
        config.update(K=self.K, conv_channels=self.conv_channels, pool_size=self.pool_size,
                      projections=list(self.projections), projection_kernel_size=self.projection_kernel_size,
                      n_highwaynet_layers=self.n_highwaynet_layers, highway_units=self.highway_units,
                      rnn_units=self.rnn_units, tf1_scope=self.tf1_scope, bn_position=self.bn_position,
                      sync_batch_norm=self.sync_batch_norm, tf1_naming=self.tf1_naming)
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        dense = None
        if self.dense is not None:
            dense = {"kernel": TF1Variable(self.dense.kernel), "bias": TF1Variable(self.dense.bias)}
        return cbhg_tf1_variables(self.conv_bank, self.proj1, self.proj2, dense, self.highwaynets, self.fw_cell,
                                  self.bw_cell)

    def _tf1_input_shape(self, weights):
        return (None, None, int(weights["conv_bank/conv1d_1/conv1d/kernel"].shape[1]))
