"""Keras ``EncoderConvolutions``: Tacotron-2's stack of encoder ``conv1d`` blocks."""
from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from speechblocks.arguments import check_bn_position, check_drop_rate
from speechblocks.block_hparams import conv_stack_hparams
from speechblocks.distributed import check_sync_batch_norm
from speechblocks.tf1_names import conv_layer_scope, scoped_tf1_variables

from ._validation import check_float_tensor
from .conv1d_block import Conv1DBlock
from .tf1_exchange import TF1WeightsMixin


class ConvStack(TF1WeightsMixin, keras.layers.Layer):
    """Shared machinery of the ``conv1d`` stacks (``EncoderConvolutions``, ``Postnet``); not public.

    Subclasses call :meth:`_make_blocks` with one ``(tf1 scope index, activation)`` per layer.
    """

    block_label = "ConvStack"

    # Rayhane hparams names of (kernel_size, channels, num_layers), set by subclasses
    _hparam_names: tuple[str, str, str] = ()

    def __init__(self, kernel_size, channels, num_layers, drop_rate, activation, tf1_scope, bn_position, seed,
                 sync_batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        self._validate_common(kernel_size, channels, num_layers, drop_rate, bn_position)
        self.kernel_size = int(kernel_size)
        self.channels = int(channels)
        self.num_layers = int(num_layers)
        self.drop_rate = float(drop_rate)
        self.activation = keras.activations.get(activation)
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.bn_position = bn_position
        self.seed = seed
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, self.block_label)

    def _validate_common(self, kernel_size, channels, num_layers, drop_rate, bn_position):
        label = self.block_label
        check_bn_position(bn_position, label)
        for arg, value in (("kernel_size", kernel_size), ("channels", channels), ("num_layers", num_layers)):
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"{label}: `{arg}` must be an integer >= 1; got {value!r}.")
        check_drop_rate(drop_rate, label)

    @classmethod
    def from_hparams(cls, hp, **kwargs):
        """Builds the block from Rayhane-style hparams (the block's kernel size, channels and number of
        layers, and ``tacotron_dropout_rate``); ``kwargs`` override or add keywords."""
        config = conv_stack_hparams(hp, *cls._hparam_names)
        config.update(kwargs)
        return cls(**config)

    def get_config(self):
        config = super().get_config()
        config.update(
            kernel_size=self.kernel_size,
            channels=self.channels,
            num_layers=self.num_layers,
            drop_rate=self.drop_rate,
            activation=keras.activations.serialize(self.activation),
            tf1_scope=self.tf1_scope,
            bn_position=self.bn_position,
            seed=self.seed,
            sync_batch_norm=self.sync_batch_norm,
        )
        return config

    def _make_blocks(self, layer_specs: Sequence[tuple[int, object]]):
        self.blocks = []
        for i, (index, activation) in enumerate(layer_specs):
            self.blocks.append(Conv1DBlock(
                self.kernel_size, self.channels, activation=activation, drop_rate=self.drop_rate,
                bn_position=self.bn_position, tf1_scope=conv_layer_scope(index, self.tf1_scope),
                seed=None if self.seed is None else int(self.seed) + i, sync_batch_norm=self.sync_batch_norm,
                dtype=self.dtype_policy, name=f"conv_layer_{index}"))
        self.in_channels = None

    @property
    def _shape_doc(self) -> str:
        return f"(batch, time, {self.in_channels if self.in_channels is not None else 'in_channels'})"

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 3:
            raise ValueError(f"{self.block_label}: argument `inputs` must have rank 3, expected shape "
                             f"(batch, time, in_channels); got shape {input_shape}.")
        if input_shape[-1] is None:
            raise ValueError(f"{self.block_label}: argument `inputs` needs a known channel axis, expected shape "
                             f"(batch, time, in_channels); got shape {input_shape}.")
        self.in_channels = int(input_shape[-1])
        shape = input_shape
        for block in self.blocks:
            block.build(shape)
            shape = shape[:-1] + (self.channels,)

    def _check_masks(self, dropout_masks):
        if dropout_masks is None:
            return [None] * len(self.blocks)
        if isinstance(dropout_masks, (tf.Tensor, keras.KerasTensor)) or not isinstance(dropout_masks, (list, tuple)):
            raise ValueError(f"{self.block_label}: argument `dropout_masks` must be a list of {len(self.blocks)} "
                             f"keep-masks of shape (batch, time, {self.channels}), one per layer; got "
                             f"{type(dropout_masks).__name__}.")
        if len(dropout_masks) != len(self.blocks):
            raise ValueError(f"{self.block_label}: argument `dropout_masks` must hold {len(self.blocks)} keep-masks "
                             f"of shape (batch, time, {self.channels}), one per layer; got {len(dropout_masks)}.")
        out = []
        for i, m in enumerate(dropout_masks):
            if m is None:
                out.append(None)
                continue
            m = tf.convert_to_tensor(m)
            if m.shape.rank is not None and (m.shape.rank != 3 or m.shape[-1] not in (None, self.channels)):
                raise ValueError(f"{self.block_label}: argument `dropout_masks[{i}]` must have shape "
                                 f"(batch, time, {self.channels}); got shape {m.shape}.")
            out.append(m)
        return out

    def call(self, inputs, training=None, dropout_masks=None):
        check_float_tensor(inputs, "inputs", self.block_label, rank=3, last_dim=self.in_channels,
                           shape_doc=self._shape_doc)
        masks = self._check_masks(dropout_masks)
        x = inputs
        for block, mask in zip(self.blocks, masks):
            x = block(x, training=training, dropout_mask=mask)
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.channels,)

    # -- TF1 exchange -------------------------------------------------------------------------
    def _tf1_variables(self):
        return scoped_tf1_variables(self.blocks)

    def _tf1_input_shape(self, weights):
        key = f"{self.blocks[0].tf1_scope}/conv1d/kernel"
        return (None, None, int(weights[key].shape[1]))


@keras.saving.register_keras_serializable(package="speechblocks")
class EncoderConvolutions(ConvStack):
    """Tacotron-2 encoder convolutions: ``num_layers`` x (conv -> batch norm -> activation -> dropout).

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Each layer is a :class:`~tf_layers.Conv1DBlock` under the TF1 scope ``conv_layer_{i}_<tf1_scope>``
    (``i`` from 1), with TF ``'same'`` padding, TF1 batch norm (epsilon 1e-3, momentum 0.99) and TF1
    keep-prob dropout that is active **only in training**.

    Args:
        kernel_size: int, convolution width (seed: ``hparams.enc_conv_kernel_size``, 5).
        channels: int, channels of every layer (seed: ``hparams.enc_conv_channels``, 512).
        num_layers: int, number of layers (seed: ``hparams.enc_conv_num_layers``, 3).
        drop_rate: float in [0, 1), dropout rate in training (seed: ``hparams.tacotron_dropout_rate``).
        activation: Keras activation name or callable of every layer; ``None`` is the identity.
        tf1_scope: TF1 scope of the block; ``None`` -> ``"enc_conv_layers"`` (Rayhane's checkpoints use
            ``"encoder_convolutions"``).
        bn_position: ``"before"`` (seed: BN before the activation) or ``"after"`` (Rayhane's later code).
        seed: optional int seed of the dropout noise (layer ``i`` uses ``seed + i``).
        sync_batch_norm: bool; ``True`` synchronizes the batch statistics over ``tf.distribute`` replicas
            (global-batch statistics, as one process; see :class:`~tf_layers.Conv1DBlock`). Default ``False``:
            per-replica statistics, as the original's multi-GPU towers.
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``(batch, time, in_channels)``.
        training: bool; batch statistics and dropout when True.
        dropout_masks: optional list of ``num_layers`` 0/1 keep-masks ``(batch, time, channels)`` (or
            ``None`` entries) replacing the random masks; an injected mask is applied whenever given.

    Returns:
        float tensor ``(batch, time, channels)``.

    Masking: not mask-aware; it reads padding, as in TF1: padded frames leak into their neighbours through the
    kernels (``kernel_size // 2`` frames on each side per layer) and into batch statistics in training.

    Example:
    >>> enc = EncoderConvolutions(kernel_size=5, channels=512, num_layers=3)
    >>> enc(tf.zeros((2, 11, 512))).shape
    TensorShape([2, 11, 512])
    """

    block_label = "EncoderConvolutions"
    default_tf1_scope = "enc_conv_layers"
    _hparam_names = ("enc_conv_kernel_size", "enc_conv_channels", "enc_conv_num_layers")

    def __init__(self, kernel_size: int = 5, channels: int = 512, num_layers: int = 3, drop_rate: float = 0.5,
                 activation="relu", tf1_scope: str | None = None, bn_position: str = "before",
                 seed: int | None = None, sync_batch_norm: bool = False, **kwargs):
        super().__init__(kernel_size, channels, num_layers, drop_rate, activation, tf1_scope, bn_position, seed,
                         sync_batch_norm, **kwargs)
        self._make_blocks([(i + 1, self.activation) for i in range(self.num_layers)])
