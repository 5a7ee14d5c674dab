"""Keras ``Conv1DBlock``: the Tacotron-2 ``conv1d`` helper as a layer."""
from __future__ import annotations

import keras

from speechblocks.arguments import BN_POSITIONS, check_drop_rate
from speechblocks.distributed import check_sync_batch_norm

from ._distribute import BatchNormalization
from ._dropout import tf1_dropout
from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin


@keras.saving.register_keras_serializable(package="speechblocks")
class Conv1DBlock(TF1WeightsMixin, keras.layers.Layer):
    """1-D convolution -> batch norm -> activation -> dropout, as TF1 Tacotron-2's ``conv1d``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Convolution with bias and TF ``'same'`` padding (even kernels pad ``(k-1)//2`` before and the rest
    after); batch norm with TF1 defaults (epsilon 1e-3, momentum 0.99); dropout only when training.
    ``bn_position="after"`` gives Rayhane's later order: conv -> activation -> batch norm -> dropout.

    Data-parallel training (``tf.distribute``): by default each replica normalizes with the statistics of its
    own slice of the batch (the original's multi-GPU towers); ``sync_batch_norm=True`` uses Keras
    ``BatchNormalization(synchronized=True)``: mean and variance over the global batch (all-reduced), so a
    step on several replicas equals the single-process step on the whole batch. In one process the two are
    bit-identical. The variables and their TF1 names do not change.

    Args:
        kernel_size: int, convolution width.
        channels: int, number of output channels.
        activation: Keras activation name or callable; ``None`` is the identity.
        drop_rate: float in [0, 1), dropout rate applied in training.
        bn_position: ``"before"`` (seed: BN before activation) or ``"after"``.
        tf1_scope: TF1 variable scope of the block (``<tf1_scope>/conv1d/kernel`` ...).
        seed: optional int seed of the dropout noise.
        sync_batch_norm: bool, batch statistics synchronized over ``tf.distribute`` replicas (see above).
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``(batch, time, in_channels)``.
        training: bool, batch statistics and dropout when True.
        dropout_mask: optional 0/1 keep-mask ``(batch, time, channels)`` replacing the random one.

    Returns:
        float tensor ``(batch, time, channels)``.

    Masking: not mask-aware; padded frames influence their neighbours through the kernel, as in TF1.

    Example:
    >>> block = Conv1DBlock(5, 512, activation="relu", drop_rate=0.5)
    >>> block(np.zeros((2, 7, 80), "float32")).shape
    TensorShape([2, 7, 512])
    """

    default_tf1_scope = "conv1d_block"

    def __init__(self, kernel_size: int, channels: int, activation="relu", drop_rate: float = 0.0,
                 bn_position: str = "before", tf1_scope: str | None = None, seed: int | None = None,
                 sync_batch_norm: bool = False, **kwargs):
        super().__init__(**kwargs)
        if int(kernel_size) < 1:
            raise ValueError(f"Conv1DBlock: `kernel_size` must be >= 1; got {kernel_size}.")
        if int(channels) < 1:
            raise ValueError(f"Conv1DBlock: `channels` must be >= 1; got {channels}.")
        check_drop_rate(drop_rate, "Conv1DBlock")
        if bn_position not in BN_POSITIONS:
            raise ValueError(f"Conv1DBlock: `bn_position` must be one of {BN_POSITIONS}; got {bn_position!r}.")
        self.kernel_size = int(kernel_size)
        self.channels = int(channels)
        self.activation = keras.activations.get(activation)
        self.drop_rate = float(drop_rate)
        self.bn_position = bn_position
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.seed = seed
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, "Conv1DBlock")
        self.conv = keras.layers.Conv1D(self.channels, self.kernel_size, padding="same",
                                        dtype=self.dtype_policy, name="conv1d")
        self.batch_norm = BatchNormalization(epsilon=1e-3, momentum=0.99, synchronized=self.sync_batch_norm,
                                             dtype=self.dtype_policy, name="batch_normalization")
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.in_channels = None

    def build(self, input_shape):
        self.in_channels = int(input_shape[-1])
        self.conv.build(input_shape)
        self.batch_norm.build(tuple(input_shape[:-1]) + (self.channels,))

    def call(self, inputs, training=None, dropout_mask=None):
        check_float_tensor(inputs, "inputs", "Conv1DBlock", rank=3, last_dim=self.in_channels,
                           shape_doc=f"(batch, time, {self.in_channels})")
        x = self.conv(inputs)
        if self.bn_position == "before":
            x = self.activation(self.batch_norm(x, training=training))
        else:
            x = self.batch_norm(self.activation(x), training=training)
        if training or dropout_mask is not None:
            x = tf1_dropout(x, self.drop_rate, self.seed_generator, dropout_mask, name="dropout_mask")
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.channels,)

    def get_config(self):
        config = super().get_config()
        config.update(
            kernel_size=self.kernel_size,
            channels=self.channels,
            activation=keras.activations.serialize(self.activation),
            drop_rate=self.drop_rate,
            bn_position=self.bn_position,
            tf1_scope=self.tf1_scope,
            seed=self.seed,
            sync_batch_norm=self.sync_batch_norm,
        )
        return config

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        bn = self.batch_norm
        return {
            "conv1d/kernel": TF1Variable(self.conv.kernel),
            "conv1d/bias": TF1Variable(self.conv.bias),
            "batch_normalization/gamma": TF1Variable(bn.gamma),
            "batch_normalization/beta": TF1Variable(bn.beta),
            "batch_normalization/moving_mean": TF1Variable(bn.moving_mean),
            "batch_normalization/moving_variance": TF1Variable(bn.moving_variance),
        }

    def _tf1_input_shape(self, weights):
        return (None, None, int(weights["conv1d/kernel"].shape[1]))
