"""Torch ``EncoderConvolutions``: Tacotron-2's stack of encoder ``conv1d`` blocks."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from speechblocks.arguments import check_bn_position, check_drop_rate
from speechblocks.block_hparams import conv_stack_hparams, hparam
from speechblocks.distributed import check_sync_batch_norm
from speechblocks.tf1_names import conv_layer_scope, scoped_tf1_variables

from ._validation import activation_name, check_float_tensor, check_positive_int
from .conv1d_block import Conv1DBlock
from .tf1_exchange import TF1WeightsMixin


class ConvStack(TF1WeightsMixin, nn.Module):
    """Shared machinery of the ``conv1d`` stacks (``EncoderConvolutions``, ``Postnet``); not public."""

    block_label = "ConvStack"

    # Rayhane hparams names of (kernel_size, channels, num_layers, default in_channels), set by subclasses
    _hparam_names: tuple[str, str, str, str] = ("", "", "", "")

    @classmethod
    def from_hparams(cls, hp, in_channels: Optional[int] = None, **kwargs):
        """Builds the block from Rayhane-style hparams (the block's kernel size, channels and number of
        layers, and ``tacotron_dropout_rate``; ``in_channels`` defaults to the block's input hparam)."""
        kernel_size, channels, num_layers, input_name = cls._hparam_names
        config = conv_stack_hparams(hp, kernel_size, channels, num_layers)
        config.update(kwargs)
        return cls(hparam(hp, input_name) if in_channels is None else in_channels, **config)

    def _init_stack(self, in_channels: int, kernel_size: int, channels: int, num_layers: int, drop_rate: float,
                    bn_position: str, layer_specs: Sequence[tuple[int, Optional[str]]], device, dtype,
                    sync_batch_norm: bool = False) -> None:
        label = self.block_label
        self._label = label  # instance attribute: TorchScript does not see class attributes
        self.in_channels = check_positive_int(in_channels, "in_channels", label)
        self.kernel_size = check_positive_int(kernel_size, "kernel_size", label)
        self.channels = check_positive_int(channels, "channels", label)
        self.num_layers = check_positive_int(num_layers, "num_layers", label)
        check_drop_rate(drop_rate, label)
        check_bn_position(bn_position, label)
        self.drop_rate = float(drop_rate)
        self.bn_position = bn_position
        self.sync_batch_norm = check_sync_batch_norm(sync_batch_norm, label)
        blocks = []
        for i, (index, act) in enumerate(layer_specs):
            blocks.append(Conv1DBlock(in_channels if i == 0 else channels, kernel_size, channels, act, drop_rate,
                                      bn_position, conv_layer_scope(index, self.tf1_scope),
                                      sync_batch_norm=self.sync_batch_norm, device=device, dtype=dtype))
        self.blocks = nn.ModuleList(blocks)
        self._shape_doc = f"(batch, time, {in_channels})"

    def forward(self, inputs: torch.Tensor, dropout_masks: Optional[list[torch.Tensor]] = None) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, time, in_channels)``.
            dropout_masks: optional list of ``num_layers`` 0/1 keep-masks ``(batch, time, channels)``
                replacing the random dropout masks; an injected mask is applied whenever given.

        Returns:
            ``(batch, time, channels)``.
        """
        check_float_tensor(inputs, "inputs", self._label, 3, self.in_channels, self._shape_doc)
        if dropout_masks is not None and len(dropout_masks) != self.num_layers:
            raise ValueError(self._label + ": argument `dropout_masks` must be a list of " + str(self.num_layers)
                             + " keep-masks of shape (batch, time, " + str(self.channels) + "), one per layer; got "
                             + str(len(dropout_masks)) + ".")
        x = inputs
        for i, block in enumerate(self.blocks):
            mask: Optional[torch.Tensor] = None
            if dropout_masks is not None:
                mask = dropout_masks[i]
                if mask.dim() != 3 or mask.shape[0] != x.shape[0] or mask.shape[1] != x.shape[1] \
                        or mask.shape[2] != self.channels:
                    raise ValueError(self._label + ": argument `dropout_masks[" + str(i) + "]` must have shape ("
                                     + str(x.shape[0]) + ", " + str(x.shape[1]) + ", " + str(self.channels)
                                     + "); got " + str(list(mask.shape)) + ".")
            x = block(x, mask)
        return x

    def _tf1_variables(self):
        return scoped_tf1_variables(self.blocks)


class EncoderConvolutions(ConvStack):
    """Tacotron-2 encoder convolutions: ``num_layers`` x (conv -> batch norm -> activation -> dropout).

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    Each layer is a :class:`~torch_layers.Conv1DBlock` with TF1 scope ``conv_layer_{i}_<tf1_scope>``
    (``i`` from 1): TF ``'same'`` padding, TF1 batch norm (epsilon 1e-3, momentum 0.99), dropout only in
    ``train()``.

    Reads padding, as the original: not mask-aware; every ``'same'`` convolution reads the ``kernel_size // 2``
    frames on each side, so frames past a sequence's length (e.g. padded character ids' embeddings) change the
    outputs of the last valid frames (and batch statistics in training).

    Args:
        in_channels: input channels (Rayhane: the 512-dim character embedding).
        kernel_size: convolution width (seed: ``hparams.enc_conv_kernel_size``, 5).
        channels: channels of every layer (seed: 512).
        num_layers: number of layers (seed: 3).
        drop_rate: dropout rate in [0, 1) used in training (seed: ``hparams.tacotron_dropout_rate``).
        activation: ``"relu"`` (default), ``"tanh"``, ``"sigmoid"``, ``"linear"`` or ``None``.
        tf1_scope: TF1 scope; ``None`` -> ``"enc_conv_layers"`` (Rayhane: ``"encoder_convolutions"``).
        bn_position: ``"before"`` (seed) or ``"after"`` (Rayhane's later code).
        sync_batch_norm: batch statistics of the global batch under ``DistributedDataParallel`` (see
            :class:`~torch_layers.tf_batch_norm.TFBatchNorm`); default False: each rank's own batch.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> enc = EncoderConvolutions(512).eval()
        >>> enc(torch.zeros(2, 11, 512)).shape
        torch.Size([2, 11, 512])
    """

    block_label = "EncoderConvolutions"
    default_tf1_scope = "enc_conv_layers"
    _hparam_names = ("enc_conv_kernel_size", "enc_conv_channels", "enc_conv_num_layers", "embedding_dim")

    def __init__(self, in_channels: int, kernel_size: int = 5, channels: int = 512, num_layers: int = 3,
                 drop_rate: float = 0.5, activation: Optional[str] = "relu", tf1_scope: Optional[str] = None,
                 bn_position: str = "before", sync_batch_norm: bool = False, device=None, dtype=None):
        super().__init__()
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.activation = activation_name(activation, self.block_label)
        n = check_positive_int(num_layers, "num_layers", self.block_label)
        self._init_stack(in_channels, kernel_size, channels, n, drop_rate, bn_position,
                         [(i + 1, self.activation) for i in range(n)], device, dtype, sync_batch_norm)
