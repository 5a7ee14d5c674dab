"""Torch ``Conv1DBlock``: the Tacotron-2 ``conv1d`` helper as a module."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechblocks.arguments import check_bn_position, check_drop_rate
from speechblocks.distributed import check_sync_batch_norm

from . import activations
from ._functional import pad_time_same, tf1_dropout
from ._validation import check_float_tensor
from .tf1_exchange import TF1Variable, TF1WeightsMixin, conv1d_from_tf1, conv1d_to_tf1
from .tf_batch_norm import TFBatchNorm


class Conv1DBlock(TF1WeightsMixin, nn.Module):
    """1-D convolution -> batch norm -> activation -> dropout, as TF1 Tacotron-2's ``conv1d``.

    Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync).

    TF ``'same'`` padding (even kernels pad ``(k-1)//2`` before, the rest after), TF1 batch norm
    (epsilon 1e-3, momentum 0.99, biased moving variance), dropout in training only.
    ``bn_position="after"``: conv -> activation -> batch norm -> dropout.

    Args:
        in_channels: input channels.
        kernel_size: convolution width.
        channels: output channels.
        activation: ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"linear"`` or ``None`` (identity).
        drop_rate: dropout rate in [0, 1), applied in training.
        bn_position: ``"before"`` (seed) or ``"after"``.
        tf1_scope: TF1 scope of the block.
        sync_batch_norm: batch statistics of the global batch under ``DistributedDataParallel`` (see
            :class:`~torch_layers.tf_batch_norm.TFBatchNorm`); default False: each rank's own batch.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> block = Conv1DBlock(80, 5, 512, "relu", 0.5).eval()
        >>> block(torch.zeros(2, 7, 80)).shape
        torch.Size([2, 7, 512])
    """

    default_tf1_scope = "conv1d_block"

    def __init__(self, in_channels: int, kernel_size: int, channels: int, activation: Optional[str] = "relu",
                 drop_rate: float = 0.0, bn_position: str = "before", tf1_scope: Optional[str] = None,
                 sync_batch_norm: bool = False, device=None, dtype=None):
        super().__init__()
        if kernel_size < 1 or channels < 1 or in_channels < 1:
            raise ValueError(f"Conv1DBlock: `in_channels`, `kernel_size` and `channels` must be >= 1; got "
                             f"{in_channels}, {kernel_size}, {channels}.")
        check_drop_rate(drop_rate, "Conv1DBlock")
        check_bn_position(bn_position, "Conv1DBlock")
        self.in_channels = in_channels
        self.kernel_size = kernel_size
        self.channels = channels
        self.activation = activations.name_of(activation)
        self.drop_rate = float(drop_rate)
        self.bn_before = bn_position == "before"
        self.bn_position = bn_position
        self.tf1_scope = tf1_scope or self.default_tf1_scope
        self.conv = nn.Conv1d(in_channels, channels, kernel_size, device=device, dtype=dtype)
        self.batch_norm = TFBatchNorm(channels, sync_batch_norm=check_sync_batch_norm(sync_batch_norm, "Conv1DBlock"),
                                      device=device, dtype=dtype)
        self.sync_batch_norm = self.batch_norm.sync_batch_norm
        self._shape_doc = f"(batch, time, {in_channels})"

    def forward(self, inputs: torch.Tensor, dropout_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            inputs: ``(batch, time, in_channels)``.
            dropout_mask: optional 0/1 keep-mask ``(batch, time, channels)`` used in training instead
                of a random one.

        Returns:
            ``(batch, time, channels)``.
        """
        check_float_tensor(inputs, "inputs", "Conv1DBlock", 3, self.in_channels, self._shape_doc)
        x = pad_time_same(inputs.transpose(1, 2), self.kernel_size)
        x = F.conv1d(x, self.conv.weight, self.conv.bias).transpose(1, 2)
        if self.bn_before:
            x = activations.apply(self.activation, self.batch_norm(x))
        else:
            x = self.batch_norm(activations.apply(self.activation, x))
        if self.training or dropout_mask is not None:
            x = tf1_dropout(x, self.drop_rate, dropout_mask)
        return x

    def _tf1_variables(self):
        bn = self.batch_norm
        return {
            "conv1d/kernel": TF1Variable(self.conv.weight, conv1d_to_tf1, conv1d_from_tf1),
            "conv1d/bias": TF1Variable(self.conv.bias),
            "batch_normalization/gamma": TF1Variable(bn.weight),
            "batch_normalization/beta": TF1Variable(bn.bias),
            "batch_normalization/moving_mean": TF1Variable(bn.running_mean),
            "batch_normalization/moving_variance": TF1Variable(bn.running_var),
        }
